"""The Gradio app: ``build(pair)`` lays out one tab per lesson (``tabs``) and wires events to
``handlers``.

Nothing here computes: each tab builder returns its components by the names the handlers use
(their parameters, and their ``*_OUTPUTS``), and ``wire`` binds the pair to each handler and
wraps its GPU functions (``work``). On a shared device model work takes one queue slot
("model"), so runs never overlap and each is timed alone; on ZeroGPU each call has its own GPU.
"""

import functools
import inspect

import gradio as gr

from specdemo.app.page import gpu, handlers, jobs, work
from specdemo.app.page.preparing import Preparation
from specdemo.app.page.session import Session, discard
from specdemo.app.page.style import CSS, INTRO, LARGE_TEXT_JS, THEME
from specdemo.app.page.tabs import exact_tab, generate_tab, step_tab
from specdemo.app.settings import EXACT_DEFAULTS, load_examples

__all__ = ["CSS", "QUEUE_SIZE", "SESSIONS_KEPT", "THEME", "build"]  # for launch()
QUEUE_SIZE = 32  # model runs waiting, across all users; beyond that a user sees "queue full"
# Sessions whose state Gradio keeps in memory, for launch(state_session_capacity=...): each holds
# every component's config and last value (about 0.4 MB on the tiny pair), and without a cap
# Gradio keeps 10,000, closed ones included, so memory grows with every visitor. Past the cap the
# least recently used session is dropped, its runs with it; a workshop room fits well inside.
SESSIONS_KEPT = 128


# ---------------------------------------------------------------- components


def build(pair) -> gr.Blocks:
    """The app, its queue configured; launch it with css=CSS, theme=THEME. `pair` is a loaded pair
    or a ``preparing.Preparation``: until that is ready the page shows its preparation panel and
    the handlers answer with its message; then the tabs appear (``show_when_ready``)."""
    if isinstance(pair, Preparation) and pair.ready:
        pair = pair.pair
    preparing = isinstance(pair, Preparation)
    examples = load_examples()
    first = examples[0]["prompt"] if examples else "Write a Python function that adds two numbers."
    with gr.Blocks(title="Speculative decoding, made visible", delete_cache=(3600, 3600)) as app:
        gr.Markdown(INTRO)
        with gr.Row(equal_height=True, elem_id="machine"):
            info = gr.Markdown(
                "" if preparing else handlers.model_markdown(pair.summary), elem_id="model-info"
            )
            large = gr.Checkbox(False, label="Large text", elem_id="large-text", scale=0)
        large.change(None, large, None, js=LARGE_TEXT_JS, api_visibility="private")
        with gr.Accordion("Machine details", open=False, elem_id="machine-details"):
            details = gr.Markdown("" if preparing else handlers.model_details(pair.summary))
        # The tabs in a lesson's order: the race, one round at a time, then the proof.
        with gr.Column(visible=not preparing, elem_id="tabs") as tabs:
            session = gr.State(Session(), delete_callback=discard)
            with gr.Tab("Generate"):
                notes = default_sweep_note(pair, first), default_gpu_note(pair, first)
                tab = generate_tab(first, examples, *notes)
                generate = {**tab, "session": session}
            with gr.Tab("Step through"):
                step = step_tab(first)
            with gr.Tab("Is it exact?"):
                exact = exact_tab(EXACT_DEFAULTS.get("prompt", first))
        wire(pair, generate, exact, step)
        if preparing:
            show_when_ready(app, pair, [info, details], tabs)
    app.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    return app


def default_sweep_note(pair, prompt: str) -> str:
    """What the default sweep on `prompt` costs a ZeroGPU visitor ("" elsewhere, or while the
    pair is not ready: a ZeroGPU Space loads it before the page is built)."""
    if not gpu.limited() or (isinstance(pair, Preparation) and not pair.ready):
        return ""
    return jobs.parse_sweep(pair, prompt).note()


def default_gpu_note(pair, prompt: str) -> str:
    """What the default run on `prompt` asks a ZeroGPU visitor for ("" elsewhere, or while the
    pair is not ready)."""
    if not gpu.limited() or (isinstance(pair, Preparation) and not pair.ready):
        return ""
    return handlers.gpu_note(pair, prompt)


def show_when_ready(app: gr.Blocks, preparation: Preparation, info: list, tabs) -> None:
    """Every page polls `preparation` each second and shows its panel until the pair is ready,
    then the tabs, the model line and its details (`info`); a failure stays on the panel."""
    panel = gr.Markdown(preparation.markdown(), elem_id="preparing")
    timer = gr.Timer(1.0)
    gr.on(
        [app.load, timer.tick],
        functools.partial(poll, preparation),
        None,
        [*info, panel, tabs, timer],
        show_progress="hidden",
        concurrency_limit=None,
        api_visibility="private",
    )


def poll(preparation: Preparation) -> tuple:
    """One poll of the page (model line, its details, panel, tabs, timer): the panel until
    `preparation` is ready, then the tabs and the model line, and the timer stops; a failure
    stays on the panel."""
    if preparation.ready:
        return (
            handlers.model_markdown(preparation.pair.summary),
            handlers.model_details(preparation.pair.summary),
            gr.Markdown(visible=False),
            gr.Column(visible=True),
            gr.Timer(active=False),
        )
    stop = gr.Timer(active=False) if preparation.failed else gr.skip()
    return gr.skip(), gr.skip(), preparation.markdown(), gr.skip(), stop


def wire(pair, generate: dict, exact: dict, step: dict) -> None:
    """Each tab's buttons to their handlers with the pair bound, inputs and outputs picked by
    name; the GPU functions are wrapped first, before launch, as ZeroGPU requires."""
    work.tasks(pair)
    wire_generate(pair, generate)
    model_event(pair, exact["check"], handlers.exactness, exact, handlers.EXACTNESS_OUTPUTS)
    model_event(pair, step["step"], handlers.step, step, handlers.STEP_OUTPUTS)
    step["reset"].click(
        handlers.reset_step,
        None,
        [step[name] for name in handlers.STEP_OUTPUTS],
        api_name="reset_step",
        concurrency_limit=None,
    )


def wire_generate(pair, tab: dict) -> None:
    """The Generate tab: the race, the sweep one cell per event, Stop, and the rejected drafts'
    toggle.

    Timed runs show Gradio's "minimal" progress (runtime and queue): the race streams its own
    tokens and a sweep reports its cells in its own line. The spinner and dimming that "full"
    lays over every output keep a browser on the same machine busy while the runs are timed on
    its cores (docs/BENCHMARKS.md, "Beside busy processes")."""
    runs = [
        model_event(
            pair, tab["run"], handlers.generate, tab, handlers.GENERATE_OUTPUTS, progress="minimal"
        ),
        model_event(
            pair, tab["sweep"], handlers.sweep, tab, handlers.SWEEP_OUTPUTS, progress="minimal"
        ),
        # The tick a cell leaves queues the next cell, so a run asked for meanwhile takes the
        # model between two cells.
        model_event(
            pair,
            tab["sweep_tick"],
            handlers.sweep_next,
            tab,
            handlers.SWEEP_OUTPUTS,
            trigger="change",
            progress="minimal",
        ),
    ]
    tab["stop"].click(None, cancels=runs, api_visibility="private")
    if gpu.limited():  # what a run will ask ZeroGPU for, as the settings change
        names = ("prompt", "system", "k", "auto_k", "max_new_tokens", "drafter")
        gr.on(
            [tab[name].change for name in names],
            functools.partial(handlers.gpu_note, pair),
            [tab[name] for name in names],
            tab["gpu_note"],
            show_progress="hidden",
            concurrency_limit=None,
            api_visibility="private",
        )
    tab["show_rejected"].change(
        handlers.toggle_rejected,
        [tab["show_rejected"], tab["session"]],
        tab["spec_pane"],
        concurrency_limit=None,
        api_visibility="private",
    )


def model_event(pair, button, handler, widgets: dict, outputs, trigger="click", progress="full"):
    """`button`'s `trigger` runs `handler` with the pair bound, as the API endpoint named after
    the handler. On a shared device model work takes one queue slot, so each run is timed alone;
    on ZeroGPU every call gets a GPU of its own, so calls run at once. preprocess=False hands the
    values to ``config`` as sent, so an API call outside the sliders' limits gets a message
    naming the field."""
    return getattr(button, trigger)(
        functools.partial(handler, pair),
        _inputs(handler, widgets),
        [widgets[name] for name in outputs],
        api_name=handler.__name__,
        show_progress=progress,
        concurrency_id="model",
        concurrency_limit=None if gpu.limited() else 1,
        preprocess=False,
    )


def _inputs(handler, widgets: dict) -> list:
    """The widgets named by `handler`'s parameters after the pair, in order (Gradio supplies a
    `progress` parameter itself)."""
    names = list(inspect.signature(handler).parameters)[1:]
    return [widgets[name] for name in names if name != "progress"]
