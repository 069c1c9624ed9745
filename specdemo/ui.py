"""The Gradio app: ``build(pair)`` lays out the components and wires their events.

Handlers are a few lines each: widget values -> ``demo`` (validation, engine runs) -> rendered
values, with ``charts`` for the figures. Model work shares one queue slot ("model"), so runs never
overlap on the device and each is timed alone; a user's results live in ``gr.State``.
"""

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator

import gradio as gr
import torch

from specdemo import charts, demo
from specdemo.render import COLORS

try:  # On Hugging Face Spaces with a GPU (ZeroGPU), GPU work runs inside spaces.GPU.
    import spaces
except ImportError:
    spaces = None

QUEUE_SIZE = 32  # model runs waiting, across all users; beyond that a user sees "queue full"
SPEC_COLORS = {label: COLORS[label] for label in ("accepted", "resampled", "bonus", "rejected")}
STREAM_EVERY = 0.1  # seconds between streamed updates (a slow round streams every round)
CHART_EVERY = 0.5

# HighlightedText has no per-label class; the frontend paints each token with its label's colour
# as "rgba(r, g, b, 0.5)", so the rejected colour picks out rejected drafts.
REJECTED_RGB = ", ".join(str(int(COLORS["rejected"][i : i + 2], 16)) for i in (1, 3, 5))
CSS = """
.token-pane .textfield { font-size: 1.2rem; line-height: 2.1; }
.token-pane .token { margin: 0 1px; }
.token-pane .text { white-space: pre-wrap; }
.token-pane .token[style*="$rejected"] .text {
  text-decoration: line-through; text-decoration-thickness: 2px; opacity: 0.75;
}
.token-pane .legend-item[style*="$rejected"] { text-decoration: line-through; }
.phase { font-size: 1.05rem; }
""".replace("$rejected", REJECTED_RGB)
THEME = gr.themes.Soft(text_size=gr.themes.sizes.text_lg)

INTRO = (
    "# Speculative decoding, made visible\n"
    "A small **draft** model guesses K tokens; the big **target** model checks all of them in "
    "one pass and keeps each guess with probability min(1, p/q). The answer follows the target "
    "model exactly — it just arrives in fewer target passes."
)
EXACT_INTRO = (
    "Draw the next token N times through the speculative accept/resample path and N times "
    "straight from the target, and compare both with the target's exact probabilities. Below, "
    "the greedy check runs both ways at temperature 0 and compares the token ids."
)
STEP_INTRO = (
    "Run speculative decoding one round at a time: what the draft guessed, what the target "
    "thought of each guess, and the coin flips that decided. Change the prompt to start over."
)
STEP_PLACEHOLDER = "Press Step to run one round"


def zero_gpu() -> bool:
    """On a ZeroGPU Space, which lends a GPU only inside spaces.GPU calls."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")


def on_gpu(fn, duration: int = 60):
    """`fn` under spaces.GPU on a Space with a GPU; unchanged everywhere else."""
    if spaces is None or not (zero_gpu() or torch.cuda.is_available()):
        return fn
    return spaces.GPU(duration=duration)(fn)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Bad input (a ValueError from demo) becomes a message in the browser or the API client."""
    try:
        yield
    except ValueError as e:
        raise gr.Error(str(e)) from None


def throttled(iterator, seconds: float = STREAM_EVERY):
    """(item, is_last) pairs, at most one every `seconds`; the last item always comes."""
    item, shown = None, 0.0
    for item in iterator:
        if time.perf_counter() - shown >= seconds:
            shown = time.perf_counter()
            yield item, False
    if item is not None:
        yield item, True


# ---------------------------------------------------------------- components


def slider(name: str, label: str, info: str | None = None, **kwargs) -> gr.Slider:
    """A slider over demo.LIMITS[name], starting at demo.DEFAULTS[name] unless told."""
    lo, hi = demo.LIMITS[name]
    kwargs = {"value": demo.DEFAULTS[name], "step": 1, **kwargs}
    return gr.Slider(lo, hi, label=label, info=info, **kwargs)


def top_p_slider() -> gr.Slider:
    return gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Top-p", info="1 = off")


def seed_box() -> gr.Number:
    return gr.Number(demo.DEFAULTS["seed"], label="Seed", precision=0, minimum=0)


def drafter_radio() -> gr.Radio:
    choices = [(label, value) for value, label in demo.DRAFTERS.items()]
    return gr.Radio(choices, value=demo.DEFAULTS["drafter"], label="Drafter")


def token_pane(label: str, color_map: dict, elem_id: str) -> gr.HighlightedText:
    return gr.HighlightedText(
        label=label,
        color_map=color_map,
        combine_adjacent=False,
        show_legend=True,
        elem_id=elem_id,
        elem_classes="token-pane",
    )


# ---------------------------------------------------------------- the app


def build(pair) -> gr.Blocks:
    """The app for a loaded pair, its queue configured; launch it with css=CSS, theme=THEME."""
    tokenizer = pair.tokenizer
    examples = demo.load_examples()
    first = examples[0]["prompt"] if examples else "Write a Python function that adds two numbers."

    with gr.Blocks(title="Speculative decoding, made visible", delete_cache=(3600, 3600)) as app:
        gr.Markdown(INTRO)
        gr.Markdown(demo.model_markdown(pair.summary), elem_id="model-info")
        session_state = gr.State(demo.Session(), delete_callback=demo.discard)

        with gr.Tab("Generate"):
            with gr.Row():
                with gr.Column():
                    prompt = gr.Textbox(first, label="Prompt", lines=5, max_lines=14)
                    with gr.Accordion("System prompt (optional)", open=False):
                        system = gr.Textbox(show_label=False, lines=2, placeholder="e.g. Be brief.")
                with gr.Column():
                    with gr.Row():
                        k = slider("k", "K", "draft tokens per round", elem_id="k")
                        temperature = slider(
                            "temperature",
                            "Temperature",
                            "0 = greedy",
                            step=0.05,
                            elem_id="temperature",
                        )
                    with gr.Row():
                        top_p = top_p_slider()
                        top_k = slider("top_k", "Top-k", "0 = off")
                    with gr.Row():
                        max_new_tokens = slider(
                            "max_new_tokens", "Max new tokens", elem_id="max-new-tokens"
                        )
                        seed = seed_box()
                    drafter = drafter_radio()
                    with gr.Row():
                        adaptive = gr.Checkbox(demo.DEFAULTS["adaptive"], label="Adaptive K")
                        show_rejected = gr.Checkbox(True, label="Show rejected drafts")
            if examples:
                gr.Examples(
                    [[e["prompt"], e.get("drafter", "model")] for e in examples],
                    inputs=[prompt, drafter],
                    example_labels=[e.get("label", e["prompt"][:40]) for e in examples],
                    label="Example prompts",
                )
            with gr.Row():
                run = gr.Button("Generate", variant="primary", elem_id="generate")
                stop = gr.Button("Stop", variant="stop", elem_id="stop")
            with gr.Row(equal_height=True):
                spec_pane = token_pane("Speculative: draft + target", SPEC_COLORS, "spec-pane")
                target_pane = token_pane(
                    "Target alone", {"target": COLORS["target"]}, "target-pane"
                )
            with gr.Row():
                comparison = gr.Markdown(demo.comparison_markdown(None, None), elem_id="comparison")
                gr.Markdown(demo.SAME_DISTRIBUTION_NOTE)
            rounds_plot = gr.Plot(
                charts.rounds_chart([], [], 1), show_label=False, elem_id="rounds-plot"
            )
            session_plot = gr.Plot(
                charts.session_chart([]), show_label=False, elem_id="session-plot"
            )
            with gr.Accordion("Sweep K × temperature, and this session's results", open=True):
                with gr.Row():
                    sweep_ks = gr.CheckboxGroup(
                        [1, 2, 3, 4, 6, 8, 12, 16], value=[1, 2, 4, 8], label="K values"
                    )
                    sweep_ts = gr.CheckboxGroup(
                        [("0 (greedy)", 0.0), ("0.5", 0.5), ("1.0", 1.0), ("1.5", 1.5)],
                        value=[0.0, 1.0],
                        label="Temperatures",
                    )
                with gr.Row():
                    sweep = gr.Button("Sweep", variant="primary", elem_id="sweep")
                    csv_file = gr.DownloadButton("Download CSV", elem_id="download-csv")
                    json_file = gr.DownloadButton("Download JSON", elem_id="download-json")
                results = gr.Dataframe(
                    headers=demo.RESULT_COLUMNS, label="This session's runs", elem_id="results"
                )

        with gr.Tab("Is it exact?"):
            gr.Markdown(EXACT_INTRO)
            with gr.Row():
                ex_prompt = gr.Textbox(first, label="Prompt", lines=4)
                with gr.Column():
                    with gr.Row():
                        ex_temperature = slider("temperature", "Temperature", value=1.0, step=0.05)
                        ex_top_p = top_p_slider()
                    with gr.Row():
                        ex_k = slider("k", "K", "for the greedy check")
                        ex_n = slider("n", "N samples", step=100)
                    ex_seed = seed_box()
            check = gr.Button("Check", variant="primary", elem_id="check")
            ex_plot = gr.Plot(charts.placeholder("Histograms appear here"), show_label=False)
            ex_summary = gr.Markdown()
            greedy = gr.Markdown()
            with gr.Accordion("Raw numbers", open=False):
                ex_details = gr.JSON(show_label=False)

        with gr.Tab("Step through"):
            gr.Markdown(STEP_INTRO)
            with gr.Row():
                st_prompt = gr.Textbox(first, label="Prompt", lines=4)
                with gr.Column():
                    with gr.Row():
                        st_k = slider("k", "K", "draft tokens per round", value=4)
                        st_temperature = slider("temperature", "Temperature", value=1.0, step=0.05)
                    with gr.Row():
                        st_seed = seed_box()
                        st_drafter = drafter_radio()
            with gr.Row():
                step = gr.Button("Step: one round", variant="primary", elem_id="step")
                reset = gr.Button("Reset", elem_id="reset-step")
            st_text = token_pane("The answer so far", SPEC_COLORS, "step-pane")
            with gr.Row(equal_height=True):
                st_phases = [gr.Markdown(elem_classes="phase") for _ in range(3)]
            st_table = gr.Dataframe(headers=demo.STEP_COLUMNS, label="This round")
            st_plot = gr.Plot(charts.placeholder(STEP_PLACEHOLDER), show_label=False)
            st_state = gr.State(None)

        # ------------------------------------------------------------ handlers

        def generate(
            prompt, system, k, temperature, top_p, top_k, max_new_tokens, seed, drafter,
            adaptive, show_rejected, session,
        ):  # fmt: skip
            with user_errors():
                config = demo.parse_run(
                    prompt, system, k, temperature, top_p, top_k, max_new_tokens, seed,
                    drafter, adaptive,
                )  # fmt: skip
                ids = demo.encode(pair, config)
            charted = 0.0
            for spec, last in throttled(demo.run_speculative(pair, config, ids)):
                session.spans = spec.spans
                update = {
                    spec_pane: demo.visible_spans(spec.spans, show_rejected),
                    target_pane: [],
                    comparison: demo.comparison_markdown(spec, None),
                }
                if last or time.perf_counter() - charted > CHART_EVERY:
                    update[rounds_plot] = charts.rounds_chart(spec.accepted, spec.drafted, config.k)
                    charted = time.perf_counter()
                yield update
            for target, _ in throttled(demo.run_target(pair, config, ids)):
                yield {
                    target_pane: target.spans,
                    comparison: demo.comparison_markdown(spec, target),
                }
            session.runs.append(demo.record(config, spec, target))
            yield {
                spec_pane: demo.visible_spans(spec.spans, show_rejected),
                target_pane: target.spans,
                comparison: demo.comparison_markdown(spec, target, config),
                rounds_plot: charts.rounds_chart(spec.accepted, spec.drafted, config.k),
                **session_outputs(session),
            }

        def run_sweep(
            prompt, system, ks, temperatures, top_p, top_k, max_new_tokens, seed, drafter,
            adaptive, session, progress=gr.Progress(),  # noqa: B008 (Gradio's idiom)
        ):  # fmt: skip
            with user_errors():
                config = demo.parse_run(
                    prompt, system, top_p=top_p, top_k=top_k, max_new_tokens=max_new_tokens,
                    seed=seed, drafter=drafter, adaptive=adaptive,
                )  # fmt: skip
                grid = demo.parse_grid(ks, temperatures)
                demo.encode(pair, config)
            progress(0.0, desc="Running the target-only baseline")
            for done, total, row in demo.sweep(pair, config, *grid):
                session.runs.append(row)
                progress(done / total, desc=f"K = {row['k']}, T = {row['temperature']:g}")
                yield session_outputs(session)

        def session_outputs(session: demo.Session) -> dict:
            csv_path, json_path = demo.export(session)
            return {
                session_plot: charts.session_chart(session.runs),
                results: demo.results_table(session.runs),
                csv_file: csv_path,
                json_file: json_path,
                session_state: session,
            }

        def toggle_rejected(show_rejected, session):
            return demo.visible_spans(session.spans, show_rejected)

        def exactness(prompt, temperature, top_p, k, n, seed):
            with user_errors():
                config = demo.parse_run(
                    prompt, k=k, temperature=temperature, top_p=top_p, seed=seed
                )
                ex = demo.exactness(pair, config, demo.parse_samples(n))
                check = demo.greedy_check(pair, config)
            return (
                charts.exactness_chart(ex.labels, ex.p, ex.speculative, ex.direct, ex.n),
                demo.exactness_markdown(ex),
                demo.greedy_markdown(check, config.k, pair.summary.precision),
                {"sampling": dataclasses.asdict(ex), "greedy": dataclasses.asdict(check)},
            )

        def step_once(prompt, k, temperature, seed, drafter, state):
            with user_errors():
                config = demo.parse_run(
                    prompt, k=k, temperature=temperature, seed=seed, drafter=drafter
                )
                state, r = demo.step(pair, config, state)
            return (
                list(state.spans),
                *demo.step_markdown(r, tokenizer, config),
                demo.step_rows(r, tokenizer),
                charts.step_chart(r, lambda ids: demo.token_labels(tokenizer, ids)),
                state,
            )

        def reset_step():
            return [], "", "", "", [], charts.placeholder(STEP_PLACEHOLDER), None

        # ------------------------------------------------------------ events

        # Model work shares one queue slot. preprocess=False hands the values to demo.parse_run as
        # sent, so an API call outside the sliders' limits gets a message naming the field.
        model = {"concurrency_id": "model", "concurrency_limit": 1, "preprocess": False}
        session_out = [session_plot, results, csv_file, json_file, session_state]
        gen_event = run.click(
            on_gpu(generate),
            [prompt, system, k, temperature, top_p, top_k, max_new_tokens, seed, drafter, adaptive,
             show_rejected, session_state],
            [spec_pane, target_pane, comparison, rounds_plot, *session_out],
            api_name="generate",
            **model,
        )  # fmt: skip
        sweep_event = sweep.click(
            on_gpu(run_sweep, duration=300),
            [prompt, system, sweep_ks, sweep_ts, top_p, top_k, max_new_tokens, seed, drafter,
             adaptive, session_state],
            session_out,
            api_name="sweep",
            **model,
        )  # fmt: skip
        stop.click(None, cancels=[gen_event, sweep_event], api_visibility="private")
        show_rejected.change(
            toggle_rejected,
            [show_rejected, session_state],
            spec_pane,
            concurrency_limit=None,
            api_visibility="private",
        )
        check.click(
            on_gpu(exactness),
            [ex_prompt, ex_temperature, ex_top_p, ex_k, ex_n, ex_seed],
            [ex_plot, ex_summary, greedy, ex_details],
            api_name="exactness",
            **model,
        )
        step_outputs = [st_text, *st_phases, st_table, st_plot, st_state]
        step.click(
            on_gpu(step_once),
            [st_prompt, st_k, st_temperature, st_seed, st_drafter, st_state],
            step_outputs,
            api_name="step",
            **model,
        )
        reset.click(reset_step, None, step_outputs, api_name="reset_step", concurrency_limit=None)

    app.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    return app
