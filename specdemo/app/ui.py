"""The Gradio app: ``build(pair)`` lays out one tab per lesson and wires events to ``handlers``.

Nothing here computes: each tab builder returns its components by the names the handlers use
(their parameters, and their ``*_OUTPUTS``), and ``wire`` binds the pair to each handler. Model
work shares one queue slot ("model"), so runs never overlap on the device and each is timed alone.
"""

import functools
import inspect

import gradio as gr
import torch

from specdemo import models
from specdemo.app import charts, costs, gpu, handlers, microscope, race, session_charts
from specdemo.app.config import (
    DEFAULTS,
    DRAFTERS,
    EXACT_DEFAULTS,
    LIMITS,
    STEP_DEFAULTS,
    SWEEP_DEFAULTS,
    load_examples,
)
from specdemo.app.preparing import Preparation
from specdemo.app.session import RESULT_COLUMNS, Session, discard
from specdemo.app.stepping import STEP_COLUMNS
from specdemo.app.style import (  # noqa: F401 (launch(theme=ui.THEME, css=ui.CSS))
    CSS,
    EXACT_INTRO,
    INTRO,
    LARGE_TEXT_JS,
    SPEC_COLORS,
    STEP_INTRO,
    THEME,
)
from specdemo.render import COLORS
from specdemo.sampling import RULES

try:  # On Hugging Face Spaces with a GPU (ZeroGPU), GPU work runs inside spaces.GPU.
    import spaces
except ImportError:
    spaces = None

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


def slider(name: str, label: str, info: str | None = None, defaults=DEFAULTS, **kwargs):
    """A slider over LIMITS[name], starting at defaults[name]."""
    lo, hi = LIMITS[name]
    kwargs = {"value": defaults[name], "step": 1, **kwargs}
    return gr.Slider(lo, hi, label=label, info=info, **kwargs)


def top_p_slider(defaults=DEFAULTS) -> gr.Slider:
    return gr.Slider(0.05, 1.0, value=defaults["top_p"], step=0.05, label="Top-p", info="1 = off")


def seed_box() -> gr.Number:
    return gr.Number(DEFAULTS["seed"], label="Seed", precision=0, minimum=0)


def drafter_radio() -> gr.Radio:
    choices = [(label, value) for value, label in DRAFTERS.items()]
    return gr.Radio(choices, value=DEFAULTS["drafter"], label="Drafter")


def token_pane(label: str, color_map: dict, elem_id: str) -> gr.HighlightedText:
    return gr.HighlightedText(
        label=label,
        color_map=color_map,
        combine_adjacent=False,
        show_legend=True,
        elem_id=elem_id,
        elem_classes="token-pane",
    )


# ---------------------------------------------------------------- tabs


def generate_tab(first: str, examples: list[dict]) -> dict:
    """The race, its charts and the sweep; components named as the handlers' parameters and
    outputs (GENERATE_OUTPUTS, SWEEP_OUTPUTS), plus the buttons."""
    w = {}
    with gr.Row():
        with gr.Column():
            w["prompt"] = gr.Textbox(first, label="Prompt", lines=5, max_lines=14)
            with gr.Accordion("System prompt (optional)", open=False):
                w["system"] = gr.Textbox(
                    label="System prompt", show_label=False, lines=2, placeholder="e.g. Be brief."
                )
        with gr.Column():
            with gr.Row():
                w["k"] = slider("k", "K", "draft tokens per round, when not auto", elem_id="k")
                w["temperature"] = slider(
                    "temperature", "Temperature", "0 = greedy", step=0.05, elem_id="temperature"
                )
            w["auto_k"] = gr.Checkbox(
                DEFAULTS["auto_k"],
                label="Auto K: choose K before each round from this machine's measured costs",
                elem_id="auto-k",
            )
            with gr.Row():
                w["top_p"] = top_p_slider()
                w["top_k"] = slider("top_k", "Top-k", "0 = off")
            with gr.Row():
                w["max_new_tokens"] = slider(
                    "max_new_tokens", "Max new tokens", elem_id="max-new-tokens"
                )
                w["seed"] = seed_box()
            w["drafter"] = drafter_radio()
            with gr.Row():
                w["adaptive"] = gr.Checkbox(
                    DEFAULTS["adaptive"], label="Stop drafting when the draft is unsure"
                )
                w["show_rejected"] = gr.Checkbox(True, label="Show rejected drafts")
    if examples:
        gr.Examples(
            [[e["prompt"], e.get("drafter", "model")] for e in examples],
            inputs=[w["prompt"], w["drafter"]],
            example_labels=[e.get("label", e["prompt"][:40]) for e in examples],
            label="Example prompts",
        )
    with gr.Row():
        w["run"] = gr.Button("Generate", variant="primary", elem_id="generate")
        w["stop"] = gr.Button("Stop", variant="stop", elem_id="stop")
        w["fresh"] = gr.Checkbox(
            False,
            label="Fresh run",
            info="Measure again: otherwise a run already measured here with the same prompt, "
            "settings and seed is replayed, with its recorded timings",
            elem_id="fresh-run",
        )
    with gr.Row(equal_height=True):
        w["spec_pane"] = token_pane("Speculative: draft + target", SPEC_COLORS, "spec-pane")
        w["target_pane"] = token_pane("Target alone", {"target": COLORS["target"]}, "target-pane")
    with gr.Row():
        w["comparison"] = gr.Markdown(
            race.comparison_markdown(None, None), label="The race", elem_id="comparison"
        )
        gr.Markdown(race.SAME_DISTRIBUTION_NOTE)
    w["rounds_plot"] = gr.Plot(
        charts.rounds_chart([], []), label="Rounds", show_label=False, elem_id="rounds-plot"
    )
    w["session_plot"] = gr.Plot(
        session_charts.session_chart([]),
        label="The session against K",
        show_label=False,
        elem_id="session-plot",
    )
    w["cost_note"] = gr.Markdown(costs.cost_note([]), label="Measured costs", elem_id="cost-note")
    w["breakdown_plot"] = gr.Plot(
        session_charts.breakdown_chart([]),
        label="Where the time goes",
        show_label=False,
        elem_id="breakdown-plot",
    )
    with gr.Accordion("Sweep K × temperature, and this session's results", open=True):
        with gr.Row():
            w["ks"] = gr.CheckboxGroup(
                [1, 2, 3, 4, 6, 8, 12, 16, "auto"],
                value=list(SWEEP_DEFAULTS["ks"]),
                label="K values",
            )
            w["temperatures"] = gr.CheckboxGroup(
                [("0 (greedy)", 0.0), ("0.5", 0.5), ("1.0", 1.0), ("1.5", 1.5)],
                value=list(SWEEP_DEFAULTS["temperatures"]),
                label="Temperatures",
            )
        with gr.Row():
            w["sweep"] = gr.Button("Sweep", variant="primary", elem_id="sweep")
            w["csv_file"] = gr.DownloadButton("Download CSV", elem_id="download-csv")
            w["json_file"] = gr.DownloadButton("Download JSON", elem_id="download-json")
        w["sweep_progress"] = gr.Markdown(label="Sweep progress", elem_id="sweep-progress")
        w["sweep_tick"] = gr.State(None)  # changes after each cell while cells remain
        w["results"] = gr.Dataframe(
            headers=RESULT_COLUMNS, label="This session's runs", elem_id="results"
        )
    return w


def exact_tab(first: str) -> dict:
    """Histograms against the exact p, and the greedy check (EXACTNESS_OUTPUTS)."""
    w = {}
    gr.Markdown(EXACT_INTRO)
    with gr.Row():
        w["prompt"] = gr.Textbox(first, label="Prompt", lines=4)
        with gr.Column():
            with gr.Row():
                w["temperature"] = slider(
                    "temperature", "Temperature", defaults=EXACT_DEFAULTS, step=0.05
                )
                w["top_p"] = top_p_slider(EXACT_DEFAULTS)
            with gr.Row():
                w["k"] = slider("k", "K", "for the greedy check", defaults=EXACT_DEFAULTS)
                w["n"] = slider("n", "N samples", defaults=EXACT_DEFAULTS, step=100)
            w["seed"] = seed_box()
    w["rule"] = gr.Radio(
        [(rule.label, name) for name, rule in RULES.items()],
        value=EXACT_DEFAULTS["rule"],
        label="Acceptance rule",
        info="The exact rule, or a classic mistake: each runs through the same engine code "
        "with one switch flipped",
        elem_id="rule",
    )
    w["check"] = gr.Button("Check", variant="primary", elem_id="check")
    w["summary"] = gr.Markdown(label="Verdict", elem_id="exact-summary")
    with gr.Row():
        w["plot"] = gr.Plot(
            charts.placeholder("Histograms appear here"), label="First token", show_label=False
        )
        w["joint_plot"] = gr.Plot(
            charts.placeholder("The first two tokens appear here"),
            label="First two tokens",
            show_label=False,
        )
    w["greedy"] = gr.Markdown(label="Greedy check")
    with gr.Accordion("Raw numbers", open=False):
        w["details"] = gr.JSON(label="Raw numbers", show_label=False)
    return w


def step_tab(first: str) -> dict:
    """One round at a time: the answer so far, three phase notes, the table, the chart, and the
    microscope on the position where the round ended (STEP_OUTPUTS)."""
    w = {}
    gr.Markdown(STEP_INTRO)
    with gr.Row():
        w["prompt"] = gr.Textbox(first, label="Prompt", lines=4)
        with gr.Column():
            with gr.Row():
                w["k"] = slider("k", "K", "draft tokens per round", defaults=STEP_DEFAULTS)
                w["temperature"] = slider(
                    "temperature", "Temperature", defaults=STEP_DEFAULTS, step=0.05
                )
            with gr.Row():
                w["seed"] = seed_box()
                w["drafter"] = drafter_radio()
    with gr.Row():
        w["step"] = gr.Button("Step: one round", variant="primary", elem_id="step")
        w["reset"] = gr.Button("Reset", elem_id="reset-step")
    w["text"] = token_pane("The answer so far", SPEC_COLORS, "step-pane")
    with gr.Row(equal_height=True):
        for phase in ("draft", "verify", "accept"):
            w[phase] = gr.Markdown(label=phase.capitalize(), elem_classes="phase")
    w["table"] = gr.Dataframe(headers=STEP_COLUMNS, label="This round")
    w["plot"] = gr.Plot(
        charts.placeholder(handlers.STEP_PLACEHOLDER),
        label="This round's guesses",
        show_label=False,
    )
    w["microscope"] = gr.Plot(
        charts.placeholder(microscope.PLACEHOLDER),
        label="Microscope",
        show_label=False,
        elem_id="microscope",
    )
    w["microscope_note"] = gr.Markdown(
        label="Microscope note", elem_id="microscope-note", elem_classes="phase"
    )
    w["state"] = gr.State(None)
    return w


# ---------------------------------------------------------------- the app


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

    def event(button, handler, widgets, outputs, api_name, trigger="click"):
        fn = functools.partial(handler, pair)
        # ZeroGPU asks for the seconds this request needs, computed from its own arguments.
        duration = gpu.per_request(fn, gpu.SECONDS[handler.__name__])
        return getattr(button, trigger)(
            on_gpu(fn, duration),
            _inputs(handler, widgets),
            [widgets[name] for name in outputs],
            api_name=api_name,
            **model,
        )

    runs = [
        event(generate["run"], handlers.generate, generate, handlers.GENERATE_OUTPUTS, "generate"),
        event(generate["sweep"], handlers.sweep, generate, handlers.SWEEP_OUTPUTS, "sweep"),
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
