"""The three tabs' layouts: each builder returns its components by the names the handlers use
(their parameters, and their ``*_OUTPUTS``); ``ui`` builds the page around them and wires them.
"""

import gradio as gr

from specdemo.app import charts
from specdemo.app.generate import comparison, costs, session_charts
from specdemo.app.page import handlers
from specdemo.app.page.session import RESULT_COLUMNS
from specdemo.app.page.style import EXACT_INTRO, SPEC_KINDS, STEP_INTRO
from specdemo.app.page.token_pane import token_key, token_pane
from specdemo.app.settings import (
    DEFAULTS,
    DRAFTERS,
    EXACT_DEFAULTS,
    LIMITS,
    STEP_DEFAULTS,
    SWEEP_DEFAULTS,
)
from specdemo.app.step import microscope
from specdemo.app.step.stepping import STEP_COLUMNS
from specdemo.defaults import default_drafter
from specdemo.judge.sampling import RULES
from specdemo.judge.verify import JUDGES
from specdemo.models.pairs import resolve_device


def slider(name: str, label: str, info: str | None = None, defaults=DEFAULTS, **kwargs):
    """A slider over LIMITS[name], starting at defaults[name]."""
    lo, hi = LIMITS[name]
    kwargs = {"value": defaults[name], "step": 1, **kwargs}
    return gr.Slider(lo, hi, label=label, info=info, **kwargs)


def top_p_slider(defaults=DEFAULTS) -> gr.Slider:
    return gr.Slider(0.05, 1.0, value=defaults["top_p"], step=0.05, label="Top-p", info="1 = off")


def tree_width_slider(defaults=DEFAULTS, auto: str = "") -> gr.Slider:
    info = (
        "Guesses tried per position: 1 is the chain; more adds siblings drawn from the "
        "draft's q, judged exactly in the same target pass" + auto
    )
    return slider("tree_width", "Tree width", info, defaults=defaults)


def seed_box() -> gr.Number:
    return gr.Number(DEFAULTS["seed"], label="Seed", precision=0, minimum=0)


def drafter_radio(render: bool = True) -> gr.Radio:
    choices = [(label, value) for value, label in DRAFTERS.items()]
    value = default_drafter(resolve_device())
    return gr.Radio(choices, value=value, label="Drafter", render=render)


JUDGE_INFO = (
    "Token by token stops at the first guess it rejects; the whole block can keep more of the "
    "same guesses. Both are exact"
)


def judge_radio(defaults=DEFAULTS, elem_id: str | None = None, info: str = JUDGE_INFO):
    """Who judges a round's guesses: token by token, or the whole block (``verify.JUDGES``)."""
    choices = [(label, value) for value, label in JUDGES.items()]
    return gr.Radio(choices, value=defaults["verify"], label="Judge", info=info, elem_id=elem_id)


PANEL_WIDTH = 320  # px: two plots in a row sit side by side down to twice this, then stack


def plot(figure, label: str, elem_id: str | None = None) -> gr.Plot:
    """A chart without a label of its own (its figure has a title), one panel of a row."""
    return gr.Plot(figure, label=label, show_label=False, min_width=PANEL_WIDTH, elem_id=elem_id)


# ---------------------------------------------------------------- tabs


# The answer's panes: what each is, where the eye lands, so two texts that differ at a
# temperature above 0 read as the two samples they are.
SPEC_HEAD = "**Speculative: draft + target** · sample 1 of the target's distribution"
TARGET_HEAD = "**Target alone** · sample 2 of the same distribution"


def more_settings(w: dict) -> None:
    """The race's settings beyond K and temperature, under "More settings", into `w`."""
    with gr.Row():
        w["top_p"] = top_p_slider()
        w["top_k"] = slider("top_k", "Top-k", "0 = off")
    with gr.Row():
        w["max_new_tokens"] = slider("max_new_tokens", "Max new tokens", elem_id="max-new-tokens")
        w["seed"] = seed_box()
    w["system"] = gr.Textbox(label="System prompt", lines=2, placeholder="optional, e.g. Be brief.")
    w["drafter"].render()  # made before the example prompts that set it
    w["judge"] = judge_radio(elem_id="judge")
    with gr.Row():
        w["adaptive"] = gr.Checkbox(
            DEFAULTS["adaptive"], label="Stop drafting when the draft is unsure"
        )
        w["show_rejected"] = gr.Checkbox(True, label="Show rejected drafts")
    w["tree_width"] = tree_width_slider(
        auto=". With Auto K, the widest tree it may choose, round by round (the chain where a "
        "tree does not pay)"
    )
    w["fresh"] = gr.Checkbox(
        False,
        label="Fresh run",
        info="Measure again: otherwise a run already measured here with the same prompt, "
        "settings and seed is replayed, with its measured timings",
        elem_id="fresh-run",
    )


def generate_tab(
    first: str, examples: list[dict], sweep_note: str = "", gpu_note: str = ""
) -> dict:
    """The race, its charts and the sweep; components named as the handlers' parameters and
    outputs (GENERATE_OUTPUTS, SWEEP_OUTPUTS), plus the buttons. `gpu_note`: what a run asks a
    ZeroGPU visitor for (shown only there)."""
    w = {"drafter": drafter_radio(render=False)}
    with gr.Row(elem_id="race-settings"):
        with gr.Column(scale=3):
            w["prompt"] = gr.Textbox(first, label="Prompt", lines=4, max_lines=14)
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
        with gr.Column(scale=2):
            with gr.Row():
                w["k"] = slider("k", "K", "draft tokens per round, when not auto", elem_id="k")
                w["temperature"] = slider(
                    "temperature", "Temperature", "0 = greedy", step=0.05, elem_id="temperature"
                )
            w["auto_k"] = gr.Checkbox(
                DEFAULTS["auto_k"],
                label="Auto K",
                info="Choose K before each round from this machine's measured costs",
                elem_id="auto-k",
            )
            with gr.Accordion("More settings", open=False, elem_id="more-settings"):
                more_settings(w)
    w["gpu_note"] = gr.Markdown(gpu_note, visible=bool(gpu_note), elem_id="gpu-note")
    token_key(SPEC_KINDS, "race-key")
    with gr.Row():
        with gr.Column():
            gr.Markdown(SPEC_HEAD, elem_classes="pane-head")
            w["spec_pane"] = token_pane("Speculative: draft + target", "spec-pane")
        with gr.Column():
            gr.Markdown(TARGET_HEAD, elem_classes="pane-head")
            w["target_pane"] = token_pane("Target alone", "target-pane")
    with gr.Row():
        w["comparison"] = gr.Markdown(
            comparison.comparison_markdown(None, None), label="The race", elem_id="comparison"
        )
        gr.Markdown(comparison.SAME_DISTRIBUTION_NOTE)
    w["rounds_plot"] = gr.Plot(
        charts.rounds_chart([], []),
        label="This run, round by round",
        show_label=False,
        elem_id="rounds-plot",
    )
    with gr.Row():
        w["speedup_plot"] = plot(
            session_charts.speedup_chart([]), "Speedup: measured and by formula", "speedup-plot"
        )
        w["time_plot"] = plot(session_charts.time_chart([]), "Where the time goes", "time-plot")
    w["cost_note"] = gr.Markdown(costs.cost_note([]), label="Measured costs", elem_id="cost-note")
    with gr.Accordion("More charts", open=False, elem_id="more-charts"), gr.Row():
        w["kept_plot"] = plot(session_charts.kept_chart([]), "Drafts kept / drafted", "kept-plot")
        w["positions_plot"] = plot(
            session_charts.positions_chart([]), "Drafts kept, by position", "positions-plot"
        )
    with gr.Accordion("Sweep K × temperature", open=True, elem_id="sweep-panel"):
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
        w["sweep_progress"] = gr.Markdown(
            sweep_note, label="Sweep progress", elem_id="sweep-progress"
        )
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
                w["k"] = slider(
                    "k", "K", "drafts a round: two-token and greedy checks", defaults=EXACT_DEFAULTS
                )
                w["n"] = slider(
                    "n", "N samples", defaults=EXACT_DEFAULTS, step=100, elem_id="exact-n"
                )
            with gr.Row():
                w["tree_width"] = tree_width_slider(EXACT_DEFAULTS)
                w["seed"] = seed_box()
    w["rule"] = gr.Radio(
        [(rule.label, name) for name, rule in RULES.items()],
        value=EXACT_DEFAULTS["rule"],
        label="Acceptance rule",
        info="The exact rule, or a classic mistake: each runs through the same engine code "
        "with one switch flipped",
        elem_id="rule",
    )
    w["judge"] = judge_radio(
        EXACT_DEFAULTS,
        "exact-judge",
        "Who judges the two-token check's rounds. The first token is one guess judged alone, "
        "where the two judges are one rule",
    )
    w["check"] = gr.Button("Check", variant="primary", elem_id="check")
    w["summary"] = gr.Markdown(label="Verdict", elem_id="exact-summary")
    with gr.Row():
        w["plot"] = plot(
            charts.placeholder("Histograms appear here"),
            "The next token: three ways",
            "exact-first",
        )
        w["joint_plot"] = plot(
            charts.placeholder("The first two tokens appear here"),
            "The first two tokens",
            "exact-two",
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
            w["tree_width"] = tree_width_slider(STEP_DEFAULTS)
            w["judge"] = judge_radio(STEP_DEFAULTS, "step-judge")
    with gr.Row():
        w["step"] = gr.Button("Step: one round", variant="primary", elem_id="step")
        w["reset"] = gr.Button("Reset", elem_id="reset-step")
    token_key(SPEC_KINDS, "step-key")
    gr.Markdown("**The answer so far**", elem_classes="pane-head")
    w["text"] = token_pane("The answer so far", "step-pane")
    with gr.Row(equal_height=True):
        for phase in ("draft", "verify", "accept"):
            w[phase] = gr.Markdown(label=phase.capitalize(), elem_classes="phase")
    w["table"] = gr.Dataframe(headers=STEP_COLUMNS, label="This round", elem_id="step-table")
    w["plot"] = gr.Plot(
        charts.placeholder(handlers.STEP_PLACEHOLDER),
        label="This round's guesses",
        show_label=False,
    )
    scope, residual = microscope.placeholders()
    with gr.Row(elem_id="microscope"):
        w["microscope"] = plot(scope, "Microscope: p and q", "microscope-p-q")
        w["residual"] = plot(residual, "Microscope: the residual", "microscope-residual")
    w["microscope_note"] = gr.Markdown(
        label="Microscope note", elem_id="microscope-note", elem_classes="phase"
    )
    w["state"] = gr.State(None)
    return w


# ---------------------------------------------------------------- the app
