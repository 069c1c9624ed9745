"""The app's event handlers as plain functions: a loaded pair and widget values in, outputs out.

Each model handler takes the pair first (``ui`` binds it with functools.partial) and returns or
yields a list of plain values in the order its ``*_OUTPUTS`` names them, ``gr.skip()`` for an
output that does not change; no components and no tensors. A handler runs in the main process:
it parses its request (``jobs``), refuses one too big for a ZeroGPU call (``gpu.check``),
answers from replay where it can, and hands the rest to a GPU function (``work``). Bad input
becomes a ``gr.Error`` with the message ``config`` wrote for the user.
"""

import contextlib
import dataclasses
import time

import gradio as gr

from specdemo.app import charts
from specdemo.app.config import parse_flag
from specdemo.app.errors import user_errors
from specdemo.app.generate import comparison, costs, session_charts
from specdemo.app.generate.run_record import RunRecord
from specdemo.app.page import gpu, gpu_notes, jobs, replay, work
from specdemo.app.page.session import Session, export, results_table
from specdemo.app.settings import DEFAULTS, EXACT_DEFAULTS, STEP_DEFAULTS, SWEEP_DEFAULTS
from specdemo.app.spans import Span
from specdemo.app.step import microscope
from specdemo.models.pairs import FOUR_BIT, KERNEL_LABELS
from specdemo.runtime import threads

STEP_PLACEHOLDER = "Press Step to run one round"

SESSION_OUTPUTS = (
    "kept_plot",
    "speedup_plot",
    "cost_note",
    "time_plot",
    "positions_plot",
    "results",
    "csv_file",
    "json_file",
    "session",
)
GENERATE_OUTPUTS = ("spec_pane", "target_pane", "comparison", "rounds_plot", *SESSION_OUTPUTS)
SWEEP_OUTPUTS = (*SESSION_OUTPUTS, "sweep_progress", "sweep_tick")
EXACTNESS_OUTPUTS = ("plot", "joint_plot", "summary", "greedy", "details")
STEP_OUTPUTS = (
    "text",
    "draft",
    "verify",
    "accept",
    "table",
    "plot",
    "microscope",
    "residual",
    "microscope_note",
    "state",
)


def generate(
    pair,
    prompt,
    system="",
    k=DEFAULTS["k"],
    auto_k=DEFAULTS["auto_k"],
    temperature=DEFAULTS["temperature"],
    top_p=DEFAULTS["top_p"],
    top_k=DEFAULTS["top_k"],
    max_new_tokens=DEFAULTS["max_new_tokens"],
    seed=DEFAULTS["seed"],
    drafter=DEFAULTS["drafter"],
    adaptive=DEFAULTS["adaptive"],
    tree_width=DEFAULTS["tree_width"],
    show_rejected=True,
    fresh=False,
    session=None,
    judge=DEFAULTS["verify"],
):
    """Stream the speculative run, then the target alone; record the race (GENERATE_OUTPUTS).
    A race already measured with the same pair, prompt, settings and seed is replayed from its
    record at once, and a target-alone run is reused across K, drafters and judges (``replay``);
    a `fresh` run measures both again. Only the runs themselves go to the GPU (``work``).
    `judge` judges the speculative run's guesses: "token" (token by token) or "block"."""
    with user_errors():
        since = time.time() if parse_flag("Fresh run", fresh) else 0.0
        request = jobs.parse_race(
            pair,
            prompt,
            system,
            k,
            auto_k,
            temperature,
            top_p,
            top_k,
            max_new_tokens,
            seed,
            drafter,
            adaptive,
            tree_width,
            since,
            judge,
        )
    session = Session() if session is None else session
    stored = replay.stored_race(pair, request)
    if stored is not None:
        yield race_outputs(session, request.config, *stored, show_rejected)
        return
    target = replay.stored_target(pair, request)
    request = dataclasses.replace(request, with_target=target is None)
    with user_errors():
        gpu.check(request)
    unchanged = [gr.skip()] * len(SESSION_OUTPUTS)
    spec = None
    runs = work.tasks(pair).race(request)
    with contextlib.closing(runs):  # Stop closes this generator, and so the GPU call
        for kind, run, done in runs:
            if kind == "target":
                target = run
                table = comparison.comparison_markdown(spec, target)
                yield [gr.skip(), list(target.spans), table, gr.skip(), *unchanged]
                continue
            spec = run
            session.spans = list(spec.spans)
            # The chart once the run is done: the target alone draws none, so a chart redrawn
            # while the speculative run computes would load that half alone (``cadence``).
            chart = (
                charts.rounds_chart(spec.accepted, spec.drafted, spec.asked, spec.copied)
                if done
                else gr.skip()
            )
            spans = comparison.visible_spans(session.spans, show_rejected)
            yield [spans, [], comparison.comparison_markdown(spec, None), chart, *unchanged]
    if spec is None or target is None:
        return  # the GPU call ended early
    replay.keep(pair, request, spec, target)
    yield race_outputs(session, request.config, spec, target, show_rejected)


def gpu_note(
    pair,
    prompt,
    system="",
    k=DEFAULTS["k"],
    auto_k=DEFAULTS["auto_k"],
    max_new_tokens=DEFAULTS["max_new_tokens"],
    drafter=DEFAULTS["drafter"],
):
    """What a race at these settings will ask a ZeroGPU visitor for (``gpu_notes.ask_note``; "" off
    ZeroGPU); settings that do not parse change nothing."""
    try:
        request = jobs.parse_race(
            pair, prompt, system, k, auto_k, max_new_tokens=max_new_tokens, drafter=drafter
        )
    except ValueError:
        return gr.skip()
    return gpu_notes.ask_note(request.seconds)


def race_outputs(session: Session, config, spec, target, show_rejected: bool) -> list:
    """A finished race (measured now or replayed), recorded in the session (GENERATE_OUTPUTS)."""
    session.spans = list(spec.spans)
    session.runs.append(RunRecord.of(config, spec, target))
    return [
        comparison.visible_spans(session.spans, show_rejected),
        list(target.spans),
        comparison.comparison_markdown(spec, target, config),
        charts.rounds_chart(spec.accepted, spec.drafted, spec.asked, spec.copied),
        *session_outputs(session),
    ]


def sweep(
    pair,
    prompt,
    system="",
    ks=SWEEP_DEFAULTS["ks"],
    temperatures=SWEEP_DEFAULTS["temperatures"],
    top_p=DEFAULTS["top_p"],
    top_k=DEFAULTS["top_k"],
    max_new_tokens=DEFAULTS["max_new_tokens"],
    seed=DEFAULTS["seed"],
    drafter=DEFAULTS["drafter"],
    adaptive=DEFAULTS["adaptive"],
    tree_width=DEFAULTS["tree_width"],
    fresh=False,
    session=None,
    judge=DEFAULTS["verify"],
    progress=gr.Progress(),  # noqa: B008 (Gradio's idiom)
):
    """Plan the (K, temperature) grid in the session and run its first cell (SWEEP_OUTPUTS).
    Each further cell is a call of ``sweep_next`` of its own, so other people's runs take the
    model between cells. Cells already measured are replayed from the store unless `fresh`.
    On ZeroGPU a grid with a cell that does not fit one GPU call is refused before it starts."""
    with user_errors():
        since = time.time() if parse_flag("Fresh run", fresh) else 0.0
        request = jobs.parse_sweep(
            pair,
            prompt,
            system,
            ks,
            temperatures,
            top_p,
            top_k,
            max_new_tokens,
            seed,
            drafter,
            adaptive,
            tree_width,
            since,
            judge,
        )
        request.check()
    session = Session() if session is None else session
    session.sweep = replay.SweepPlan(request)
    return sweep_next(pair, session, progress)


def sweep_next(pair, session=None, progress=gr.Progress()):  # noqa: B008
    """The next cell of the session's sweep, recorded (SWEEP_OUTPUTS). The last output, the
    sweep's tick, changes while cells remain: the UI queues the next call on that change, and an
    API caller calls again until the progress says the sweep is done. Nothing changes when no
    sweep is under way. A cell is one GPU call, run to its end: Stop ends a sweep between cells."""
    plan = session.sweep if session is not None else None
    if plan is None or plan.finished:
        return [gr.skip()] * len(SWEEP_OUTPUTS)
    cell, n = plan.next_config(), len(plan.cells)
    progress(
        plan.done / n,
        desc=f"Sweep cell {plan.done + 1} of {n}: K = {cell.k}, T = {cell.temperature:g}",
    )
    with user_errors():
        plan, record = replay.sweep_cell(pair, plan, work.tasks(pair).race)
    session.sweep = plan
    session.runs.append(record)
    tick = gr.skip() if plan.finished else (plan.id, plan.done)
    return [*session_outputs(session), sweep_markdown(plan), tick]


def sweep_markdown(plan) -> str:
    """How far a sweep (``replay.SweepPlan``) has come."""
    n = len(plan.cells)
    if plan.finished:
        return f"**Sweep done:** {n} of {n} cells."
    cell = plan.next_config()
    return (
        f"**Sweep:** {plan.done} of {n} cells done; next K = {cell.k}, T = {cell.temperature:g}. "
        "Each cell takes its turn at the model, so other people's runs go in between."
    )


def session_outputs(session: Session) -> list:
    """The session's charts and the sentence on its curves, its table, exports and the session
    itself (SESSION_OUTPUTS)."""
    csv_path, json_path = export(session)
    runs = session.runs
    return [
        session_charts.kept_chart(runs),
        session_charts.speedup_chart(runs),
        costs.cost_note(runs),
        session_charts.time_chart(runs),
        session_charts.positions_chart(runs),
        results_table(runs),
        csv_path,
        json_path,
        session,
    ]


def toggle_rejected(show_rejected, session: Session) -> list[Span]:
    return comparison.visible_spans(session.spans, show_rejected)


def exactness(
    pair,
    prompt,
    temperature=EXACT_DEFAULTS["temperature"],
    top_p=EXACT_DEFAULTS["top_p"],
    k=EXACT_DEFAULTS["k"],
    n=EXACT_DEFAULTS["n"],
    seed=EXACT_DEFAULTS["seed"],
    rule=EXACT_DEFAULTS["rule"],
    tree_width=EXACT_DEFAULTS["tree_width"],
    judge=EXACT_DEFAULTS["verify"],
):
    """Draws of the first token and of the first two through the chosen acceptance rule (the
    first two judged by `judge`) and straight from p, against the exact p; then the greedy
    check (EXACTNESS_OUTPUTS)."""
    with user_errors():
        request = jobs.parse_exactness(
            pair, prompt, temperature, top_p, k, n, seed, rule, tree_width, judge
        )
        gpu.check(request)
    return work.tasks(pair).exactness(request)


def step(
    pair,
    prompt,
    k=STEP_DEFAULTS["k"],
    temperature=STEP_DEFAULTS["temperature"],
    seed=STEP_DEFAULTS["seed"],
    drafter=STEP_DEFAULTS["drafter"],
    state=None,
    tree_width=STEP_DEFAULTS["tree_width"],
    judge=STEP_DEFAULTS["verify"],
):
    """One round after the context in `state`, judged by `judge`, explained (STEP_OUTPUTS)."""
    with user_errors():
        request = jobs.parse_step(
            pair, prompt, k, temperature, seed, drafter, state, tree_width, judge
        )
        gpu.check(request)
    return work.tasks(pair).step(request, state)


def reset_step() -> list:
    """An empty step-through (STEP_OUTPUTS)."""
    empty = charts.placeholder(STEP_PLACEHOLDER)
    return [[], "", "", "", [], empty, *microscope.placeholders(), "", None]


def model_markdown(summary) -> str:
    """The loaded pair in the line a learner needs: the two models, their sizes, 4-bit or not,
    and the device; and a warning when the pair or precision is not the one asked for.
    ``model_details`` has the rest."""
    s = summary
    bits = KERNEL_LABELS[s.precision].split(" (")[0] if s.precision in FOUR_BIT else s.label
    return (
        f"**Target** {_model(s.target_name, s.target_params)} · "
        f"**Draft** {_model(s.draft_name, s.draft_params)} · {bits} on "
        f"{'the CPU' if s.device == 'cpu' else s.device.upper()}"
        + (f" · ⚠ {s.note}" if s.note else "")
    )


def _model(name: str, params: int) -> str:
    """A model's name and size; the file a packaged model ships as ("Q4_K_M GGUF") said as its
    source, not as the precision it runs at (the line ends with that)."""
    base, _, shipped = name.partition(" (")
    if shipped.endswith("GGUF)"):
        return f"{base} ({_params(params)}, shipped as a {shipped.removesuffix(')')})"
    return f"{name} ({_params(params)})"


def model_details(summary) -> str:
    """The machine's details, one click away: the precision as it runs and why its 4-bit kernel
    runs, the device (on a CPU, the CPUs and quota this process may use, ``threads.limit``), the
    pair's name, how long it took to load, and a larger pair this GPU has
    room for."""
    s = summary
    return (
        f"**Precision** {s.label}"
        + (f": {s.kernel_note}" if s.kernel_note else "")
        + f" · **Device** {s.device}"
        + (
            f" ({threads.limit().sentence}, at most {threads.ceiling()} torch threads)"
            if s.device == "cpu"
            else ""
        )
        + f" · pair `{s.pair}`, loaded in {s.load_seconds:.1f} s"
        + (f" · {s.suggestion[0].upper()}{s.suggestion[1:]}" if s.suggestion else "")
    )


def _params(n: int) -> str:
    return f"{n / 1e9:.2f} B params" if n >= 1e9 else f"{n / 1e6:.1f} M params"
