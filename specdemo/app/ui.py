"""The Gradio app: ``build(pair)`` lays out one tab per lesson (``tabs``) and wires events to
``handlers``.

Nothing here computes: each tab builder returns its components by the names the handlers use
(their parameters, and their ``*_OUTPUTS``), and ``wire`` binds the pair to each handler. Model
work shares one queue slot ("model"), so runs never overlap on the device and each is timed alone.
"""

import functools
import inspect

import gradio as gr
import torch

from specdemo import models
from specdemo.app import gpu, handlers
from specdemo.app.config import load_examples
from specdemo.app.preparing import Preparation
from specdemo.app.session import Session, discard
from specdemo.app.style import CSS, INTRO, LARGE_TEXT_JS, THEME
from specdemo.app.tabs import exact_tab, generate_tab, step_tab

try:  # On Hugging Face Spaces with a GPU (ZeroGPU), GPU work runs inside spaces.GPU.
    import spaces
except ImportError:
    spaces = None

__all__ = ["CSS", "QUEUE_SIZE", "THEME", "build", "on_gpu"]  # launch(theme=THEME, css=CSS)
QUEUE_SIZE = 32  # model runs waiting, across all users; beyond that a user sees "queue full"


def on_gpu(fn, duration=60):
    """`fn` under spaces.GPU on a Space with a GPU; unchanged everywhere else. `duration` is
    seconds, or a function of `fn`'s arguments giving them (``gpu.per_request``): ZeroGPU calls it
    before each request, and its ValueError (bad input, a sweep too big) reaches the user
    without any GPU time asked for."""
    if spaces is None or not (models.zero_gpu() or torch.cuda.is_available()):
        return fn
    if callable(duration):
        estimate = duration

        def seconds(*args, **kwargs) -> int:
            with handlers.user_errors():
                return estimate(*args, **kwargs)

        return spaces.GPU(duration=seconds)(fn)
    return spaces.GPU(duration=duration)(fn)


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
        large = gr.Checkbox(False, label="Large text", elem_id="large-text")
        large.change(None, large, None, js=LARGE_TEXT_JS, api_visibility="private")
        info = gr.Markdown(
            "" if preparing else handlers.model_markdown(pair.summary), elem_id="model-info"
        )
        with gr.Column(visible=not preparing) as tabs:
            session = gr.State(Session(), delete_callback=discard)
            with gr.Tab("Generate"):
                generate = {**generate_tab(first, examples), "session": session}
            with gr.Tab("Is it exact?"):
                exact = exact_tab(first)
            with gr.Tab("Step through"):
                step = step_tab(first)
        wire(pair, generate, exact, step)
        if preparing:
            show_when_ready(app, pair, info, tabs)
    app.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    return app


def show_when_ready(app: gr.Blocks, preparation: Preparation, info, tabs) -> None:
    """Every page polls `preparation` each second and shows its panel until the pair is ready,
    then the tabs and the model line; a failure stays on the panel."""
    panel = gr.Markdown(preparation.markdown(), elem_id="preparing")
    timer = gr.Timer(1.0)

    def refresh():
        if preparation.ready:
            return (
                handlers.model_markdown(preparation.pair.summary),
                gr.Markdown(visible=False),
                gr.Column(visible=True),
                gr.Timer(active=False),
            )
        stop = gr.Timer(active=False) if preparation.failed else gr.skip()
        return gr.skip(), preparation.markdown(), gr.skip(), stop

    gr.on(
        [app.load, timer.tick],
        refresh,
        None,
        [info, panel, tabs, timer],
        show_progress="hidden",
        concurrency_limit=None,
        api_visibility="private",
    )


def wire(pair, generate: dict, exact: dict, step: dict) -> None:
    """Each button to its handler with the pair bound, inputs and outputs picked by name."""
    # Model work shares one queue slot. preprocess=False hands the values to config.parse_run as
    # sent, so an API call outside the sliders' limits gets a message naming the field.
    model = {"concurrency_id": "model", "concurrency_limit": 1, "preprocess": False}

    def event(button, handler, widgets, outputs, api_name, trigger="click", progress="full"):
        fn = functools.partial(handler, pair)
        # ZeroGPU asks for the seconds this request needs, computed from its own arguments.
        duration = gpu.per_request(fn, gpu.SECONDS[handler.__name__])
        return getattr(button, trigger)(
            on_gpu(fn, duration),
            _inputs(handler, widgets),
            [widgets[name] for name in outputs],
            api_name=api_name,
            show_progress=progress,
            **model,
        )

    # Timed runs show Gradio's "minimal" progress (runtime and queue): the race streams its own
    # tokens and a sweep reports its cells in its own line. The spinner and dimming that "full"
    # lays over every output keep a browser on the same machine busy while the runs are timed on
    # its cores: headless Chromium's renderer worked 14.9 s of a 41 s race with "full", 7.7 s of
    # a 30 s race with "minimal" (2 cores).
    runs = [
        event(
            generate["run"],
            handlers.generate,
            generate,
            handlers.GENERATE_OUTPUTS,
            "generate",
            progress="minimal",
        ),
        event(
            generate["sweep"],
            handlers.sweep,
            generate,
            handlers.SWEEP_OUTPUTS,
            "sweep",
            progress="minimal",
        ),
    ]

    # A sweep runs one cell per queued event: the tick a cell leaves queues the next cell, so a
    # run asked for meanwhile takes the model between two cells.
    runs.append(
        event(
            generate["sweep_tick"],
            handlers.sweep_next,
            generate,
            handlers.SWEEP_OUTPUTS,
            "sweep_next",
            trigger="change",
            progress="minimal",
        )
    )
    generate["stop"].click(None, cancels=runs, api_visibility="private")
    generate["show_rejected"].change(
        handlers.toggle_rejected,
        [generate["show_rejected"], generate["session"]],
        generate["spec_pane"],
        concurrency_limit=None,
        api_visibility="private",
    )
    event(exact["check"], handlers.exactness, exact, handlers.EXACTNESS_OUTPUTS, "exactness")
    event(step["step"], handlers.step, step, handlers.STEP_OUTPUTS, "step")
    step["reset"].click(
        handlers.reset_step,
        None,
        [step[name] for name in handlers.STEP_OUTPUTS],
        api_name="reset_step",
        concurrency_limit=None,
    )


def _inputs(handler, widgets: dict) -> list:
    """The widgets named by `handler`'s parameters after the pair, in order (Gradio supplies a
    `progress` parameter itself)."""
    names = list(inspect.signature(handler).parameters)[1:]
    return [widgets[name] for name in names if name != "progress"]
