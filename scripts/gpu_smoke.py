"""GPU smoke check for a bare CUDA machine with no network; run it through scripts/gpu_smoke.sh,
which installs the wheels in wheels/ first.

Usage: gpu_smoke.py [--dry-run] [OUT] [--only N [N ...]]

Nine checks in order, every one run even after another fails: (0) the default pair on this
device with the Hub in reach: the embedded one, nothing to download; (1) versions, compute
capability and the compute dtype specdemo picks; (2) a bitsandbytes NF4 Linear at 1 and 5 rows
against a matmul with its dequantised weight; (3) the tiny pair in 4-bit on the device and one
short generation; (4) every model handler on the device, each value it yields or returns pickled
and unpickled, with SPECDEMO_ZEROGPU_EMULATION=pickle set before specdemo.app is imported; (5)
step costs of random-weight models of the real target and draft architectures in 4-bit, against
the budgets specdemo.app.page.gpu derives for that pair (gpu.budget_of), the draft step eager
against a captured CUDA graph (logits over 32 steps, and time), and the K automatic K picks at
those costs; (6) a trimmed scripts/gpu_bench.sh, its summary under OUT/bench (default OUT:
bench_out/gpu-smoke); (7) that random pair loaded as a ZeroGPU Space loads its pair: in a fresh
process with SPACES_ZERO_GPU=true that imports `spaces` first, loaded onto "cuda" in 4-bit in
the main process under spaces' CUDA emulation, then packed as spaces packs tensors at launch (no
GPU call: that needs ZeroGPU's scheduler); (8) the app's default race called twice as a ZeroGPU
GPU function (pickled), with the share of each call's seconds spent on model work. Prints one
table (check | result | figure); the exit status is 1 when any row failed.

--dry-run runs on the CPU whatever can run there (the bench in its own --dry-run, step costs of
a 2-layer build of the real widths, timed but not judged) and never touches CUDA; check 7 needs
a CUDA build of torch and says so.
"""

import argparse
import functools
import gc
import importlib.metadata
import os
import pickle
import platform
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Write a Python function that adds two numbers."
PASS, FAIL, RAN = "pass", "FAIL", "ran"  # RAN: measured, not judged
SLACK = 1.5  # a step cost fails above SLACK times its budget
NF4_SHAPE = (1024, 512)  # (in, out) features of the checked layer
NF4_ROWS = (1, 5)  # 1 row takes bitsandbytes' inference kernel on CUDA, more rows its matmul
# Max abs error allowed, in eps(compute dtype) * max|reference|: the output's own rounding is
# half that; 0.3-0.4 on a CPU.
NF4_TOLERANCE = 4.0
REPLAY_STEPS = 32  # draft steps replayed against eager ones
SHARE_TARGET = 0.9  # a ZeroGPU-style call spends at least this share of its seconds on models
BENCH_TRIM = ("--ks", "1", "3", "auto", "--per-set", "1", "--max-new-tokens", "32")
BENCH_TIMEOUT = 360  # seconds, two loads of the random pair included
ZEROGPU_EMULATION = "SPECDEMO_ZEROGPU_EMULATION"


@dataclass(frozen=True)
class Outcome:
    """One row of the table."""

    check: str
    result: str  # PASS, FAIL or RAN
    figure: str


@dataclass
class Run:
    """What the checks share: where they run, and what an earlier check left behind."""

    device: str  # "cuda", or "cpu" in a dry run
    models: Path  # the random pair of the real architectures (check 5 builds, check 6 benches)
    out: Path
    pair_built: bool = False

    @property
    def dry(self) -> bool:
        return self.device == "cpu"


# ---------------------------------------------------------------- the table


def run_checks(checks, run) -> list[Outcome]:
    """Every check in order, each returning its rows; one that raises becomes a FAIL row
    (``failure``) and the next check still runs."""
    outcomes = []
    for name, check in checks:
        print(f"== {name}", flush=True)
        start = time.perf_counter()
        try:
            outcomes += check(run)
        except Exception as e:
            outcomes.append(failure(name, e))
        print(f"== {name}: {time.perf_counter() - start:.0f} s", flush=True)
    return outcomes


def failure(check: str, e: Exception) -> Outcome:
    """A FAIL row with the exception's first line; its traceback goes to stderr."""
    traceback.print_exception(e)
    first_line = (str(e).strip().splitlines() or [""])[0]
    return Outcome(check, FAIL, f"{type(e).__name__}: {first_line}"[:200])


def table(outcomes: list[Outcome]) -> str:
    rows = [("check", "result", "figure"), ("---", "---", "---")]
    rows += [(o.check, o.result, o.figure) for o in outcomes]
    return "\n".join(f"| {' | '.join(row)} |" for row in rows)


def exit_status(outcomes: list[Outcome]) -> int:
    return int(any(o.result == FAIL for o in outcomes))


def verdict(ok: bool, problems: list[str], figure: str) -> tuple[str, str]:
    return (PASS if ok and not problems else FAIL), "; ".join([*problems, figure])


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def span(values: list, form: str) -> str:
    """'lo..hi' of `values`, or the one value."""
    lo, hi = form.format(min(values)), form.format(max(values))
    return lo if lo == hi else f"{lo}..{hi}"


# ---------------------------------------------------------------- 0: the default pair


def check_default_pair(run: Run) -> list[Outcome]:
    """With the Hub in reach (HF_HUB_OFFLINE lifted for the check), "auto" finds this device,
    and the pair loaded when none is named is the embedded one, with nothing to download; the
    larger pair this GPU would be told of, from its free memory."""
    from specdemo import models

    saved = {name: os.environ.pop(name, None) for name in models.pairs.ENV_OFFLINE}
    try:
        device = models.resolve_device("auto")
        spec = models.resolve_pair_spec(device=device)
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    problems = []
    if device != run.device:
        problems.append(f"auto resolved to {device}")
    if spec.name != models.DEFAULT_PAIR or {spec.target.kind, spec.draft.kind} != {"gguf"}:
        problems.append(f"the default is {spec.name} ({spec.target.kind}), not the embedded pair")
    free = torch.cuda.mem_get_info()[0] if not run.dry else 0
    note = models.larger_pair_note(free) if free else "no GPU: nothing to suggest"
    figure = f"{spec.name} on {device}, nothing to download; {free / 1e9:.0f} GB free: {note}"
    return [Outcome("0 default pair", *verdict(True, problems, figure))]


# ---------------------------------------------------------------- 1-4: versions, NF4, tiny pair


def picked_dtype(device: str) -> torch.dtype:
    from specdemo.models import compute_dtype

    capability = torch.cuda.get_device_capability() if device == "cuda" else None
    return compute_dtype(device, capability)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def check_versions(run: Run) -> list[Outcome]:
    import transformers
    from packaging.specifiers import SpecifierSet

    from specdemo.models.convert import import_bitsandbytes

    import_bitsandbytes()
    import bitsandbytes

    figure = (
        f"python {platform.python_version()}, torch {torch.__version__} "
        f"(CUDA {torch.version.cuda}), transformers {transformers.__version__}, "
        f"bitsandbytes {bitsandbytes.__version__}, gradio {importlib.metadata.version('gradio')}"
    )
    problems = []
    requirements = (ROOT / "requirements.txt").read_text()
    pin = re.search(r"^transformers(\S+)", requirements, re.M).group(1)
    if transformers.__version__ not in SpecifierSet(pin):
        problems.append(f"transformers outside {pin}: put its wheel in wheels/")
    if run.dry:
        figure += f"; dry run on the CPU, computing in {dtype_name(picked_dtype('cpu'))}"
    elif not torch.cuda.is_available():
        problems.append("torch sees no CUDA device")
    else:
        capability = torch.cuda.get_device_capability()
        figure += (
            f"; {torch.cuda.get_device_name()}, compute capability {capability[0]}.{capability[1]}"
            f", computing in {dtype_name(picked_dtype('cuda'))}"
        )
    return [Outcome("1 versions", *verdict(True, problems, figure))]


def check_nf4_linear(run: Run) -> list[Outcome]:
    from specdemo.models.convert import import_bitsandbytes

    import_bitsandbytes()
    import bitsandbytes as bnb
    from bitsandbytes.functional import dequantize_4bit

    dtype = picked_dtype(run.device)
    torch.manual_seed(0)
    layer = bnb.nn.Linear4bit(*NF4_SHAPE, bias=False, compute_dtype=dtype, quant_type="nf4")
    layer = layer.to(run.device)  # quantises the weight
    # Dequantised before the first forward, which on some CPUs repacks the weight in place.
    weight = dequantize_4bit(layer.weight.data, layer.weight.quant_state).float()  # (out, in)
    ok, figures = True, []
    for rows in NF4_ROWS:
        x = torch.randn(rows, NF4_SHAPE[0], dtype=dtype, device=run.device)
        with torch.inference_mode():
            y = layer(x)
        reference = x.float() @ weight.T  # (rows, out)
        error = (y.float() - reference).abs().max().item()
        tolerance = NF4_TOLERANCE * torch.finfo(dtype).eps * reference.abs().max().item()
        ok &= y.shape == reference.shape and error <= tolerance  # a NaN error fails
        figures.append(f"{rows} row{'s' * (rows > 1)}: {error:.2g} (tolerance {tolerance:.2g})")
    figure = f"max abs error in {dtype_name(dtype)}, " + ", ".join(figures)
    return [Outcome("2 nf4 linear", *verdict(ok, [], figure))]


@functools.cache
def tiny_pair(device: str):
    """The tiny pair, quantised on the CPU into the conversion cache and loaded on `device`."""
    from specdemo.models import load_pair

    return load_pair("tiny", precision="nf4", device=device)


def check_tiny_pair(run: Run) -> list[Outcome]:
    import specdemo
    from specdemo.models.convert import import_bitsandbytes
    from specdemo.text import encode_prompt

    import_bitsandbytes()
    import bitsandbytes as bnb

    pair = tiny_pair(run.device)
    s, problems = pair.summary, []
    if s.precision != "nf4":
        problems.append(f"ran {s.precision}: {s.note}")
    if not any(isinstance(m, bnb.nn.Linear4bit) for m in pair.target.modules()):
        problems.append("the target has no 4-bit layer")
    for model in (pair.target, pair.draft):
        if model.device.type != run.device:
            problems.append(f"a model is on {model.device}")
    ids = encode_prompt(pair.tokenizer, PROMPT)
    stats = specdemo.generate(pair.target, pair.draft, ids, k=3, max_new_tokens=16, seed=0).stats
    if stats.new_tokens == 0:
        problems.append("no token generated")
    figure = (
        f"{s.precision} ({s.dtype}) on {s.device}, loaded in {s.load_seconds:.1f} s; "
        f"k = 3: {stats.new_tokens} tokens in {stats.rounds} rounds, α {stats.alpha:.2f}"
    )
    return [Outcome("3 tiny pair", *verdict(True, problems, figure))]


def check_handlers(run: Run) -> list[Outcome]:
    """Each handler in its own row, so one that fails hides none of the others."""
    from specdemo.app.page import handlers

    pair = tiny_pair(run.device)
    calls = {
        "generate": lambda: list(handlers.generate(pair, PROMPT, max_new_tokens=16)),
        "sweep": lambda: [
            handlers.sweep(pair, PROMPT, ks=[2], temperatures=[1.0], max_new_tokens=8)
        ],
        "exactness": lambda: [handlers.exactness(pair, PROMPT, n=2000)],
        "step": lambda: [handlers.step(pair, PROMPT)],
    }
    outcomes = []
    for name, call in calls.items():
        try:
            start = time.perf_counter()
            values = call()
            seconds = time.perf_counter() - start
            size = sum(len(pickle.dumps(v)) for value in values for v in value)
            for value in values:
                pickle.loads(pickle.dumps(value))
            events = f"{len(values)} event{'s' * (len(values) > 1)}"
            figure = f"{events} in {seconds:.1f} s, {size / 1024:.0f} KiB pickled and unpickled"
            outcomes.append(Outcome(f"4 {name}", PASS, figure))
        except Exception as e:
            outcomes.append(failure(f"4 {name}", e))
    return outcomes


# ---------------------------------------------------------------- 5-6: real architectures


def check_step_costs(run: Run) -> list[Outcome]:
    from specdemo.app.page import gpu
    from specdemo.bench import grid as bench
    from specdemo.cost.profile import PROFILE_KS
    from specdemo.models import load_pair, warm_up
    from specdemo.runtime.modes import synthetic_context

    layers = ["--layers", "2"] if run.dry else []
    build = [sys.executable, "scripts/make_random_pair.py", str(run.models), *layers]
    subprocess.run(build, cwd=ROOT, check=True)
    run.pair_built = True
    pair = load_pair(
        target=str(run.models / "target"),
        draft=str(run.models / "draft"),
        precision="4bit",
        device=run.device,
    )
    warm_up(pair)
    context = synthetic_context(pair.target, pair.draft)
    ks = [1] if run.dry else list(PROFILE_KS)  # a step of 2 layers takes ~0.5 s on 2 CPU cores
    costs = bench.step_costs(pair, context, ks, "auto")  # the draft with the app's head
    captured = draft_step_outcomes(pair, context, costs, judged=not run.dry)
    captured += target_step_outcomes(pair, context, costs, judged=not run.dry)
    budget = gpu.budget_of(pair)
    del pair
    gc.collect()
    if not run.dry:
        torch.cuda.empty_cache()
    return step_cost_outcomes(costs, judged=not run.dry, budget=budget) + captured


def draft_step_outcomes(pair, context: list[int], costs, judged: bool) -> list[Outcome]:
    """The draft step eager against a static cache and a captured CUDA graph (static on a CPU),
    over REPLAY_STEPS steps after the context: their logits must agree at every step (same
    argmax, max difference within NF4_TOLERANCE eps of the largest logit), and the table shows
    each step's time and c. Then what automatic K does with the eager costs after 100 rounds at
    0.9 per draft: at c >= 0.8 it must stop drafting with the model (K = 0)."""
    from specdemo.cost.policy import Acceptance, AutoK
    from specdemo.draft.drafters import drafter_head
    from specdemo.runtime.modes import timed_draft_step
    from specdemo.runtime.steps import make_draft_step

    head = drafter_head(pair.draft, context)  # a drafter's own: ranked rows and the text's ids
    mode = "graph" if torch.device(pair.draft.device).type == "cuda" else "static"
    outcomes = []
    with torch.inference_mode():
        eager = make_draft_step(pair.draft, head, "eager")
        other = make_draft_step(pair.draft, head, mode)
        other.fits(len(context) + REPLAY_STEPS + 4)
        for step in (eager, other):
            step.run(context)
        eps = torch.finfo(pair.draft.dtype).eps
        worst, same, ties = 0.0, True, 0
        for token in (context * 2)[:REPLAY_STEPS]:
            a, b = eager.run([token]).float().view(-1), other.run([token]).float().view(-1)
            held = torch.isfinite(a)  # spare head rows no text filled score -inf in both
            top = a[held].abs().max()
            worst = max(worst, float((a - b)[held].abs().max() / top))
            # Random weights give near-ties: another argmax counts when eager scores it within
            # the tolerance of its own best.
            tie = bool(a.max() - a[b.argmax()] <= NF4_TOLERANCE * eps * top)
            ties += bool(a.argmax() != b.argmax()) and tie
            same &= (bool(a.argmax() == b.argmax()) or tie) and bool(
                (held == torch.isfinite(b)).all()
            )
        problem = getattr(other, "problem", "")
        ok = same and worst <= NF4_TOLERANCE * eps and not problem
        outcomes.append(Outcome(f"5 {mode} = eager", PASS if ok else FAIL,
                                f"{REPLAY_STEPS} steps, argmax same: {same} ({ties} near-ties); "
                                f"max diff {worst:.2e} of max|logit|"
                                + (f"; capture failed: {problem}" if problem else "")))  # fmt: skip
        t_other = timed_draft_step(pair.draft, context, head, mode)[0]
    capture = f"; capture {ms(other.capture_seconds)}" if mode == "graph" else ""
    outcomes.append(Outcome(f"5 t_draft {mode}", RAN,
                            f"{ms(t_other)} = {t_other / costs.t_step:.2f} target steps "
                            f"(the drafter's step, {ms(costs.t_draft)} = {costs.c:.2f})"
                            f"{capture}"))  # fmt: skip
    policy = AutoK(costs)
    # 100 rounds judged the first position, each position kept at 0.9 given the ones before it.
    policy.acceptance["model"] = Acceptance([100, 90, 81, 73], [90, 81, 73, 66])
    k = policy.choose("model")
    ok = k == 0 or costs.c < 0.8
    verdict_ = (PASS if ok else FAIL) if judged else RAN
    outcomes.append(Outcome("5 auto K", verdict_, f"K = {k} at c = {costs.c:.2f}, 0.9 per draft"))
    return outcomes


def target_step_outcomes(pair, context: list[int], costs, judged: bool) -> list[Outcome]:
    """The target's passes eager against a static cache and captured CUDA graphs (static on a
    CPU): a plain step and verify passes of 2..9 rows after the context must give the same
    logits (within NF4_TOLERANCE eps of the largest); the table shows each mode's step and
    passes, what capture saved, and the race of the plain loop and of fixed K = 3 with the
    target's passes in each mode (the target alone and the speculative run alike)."""
    from specdemo.decode.engine import autoregressive_generate, generate
    from specdemo.runtime.modes import timed_passes
    from specdemo.runtime.steps import make_target_step

    mode = "graph" if torch.device(pair.target.device).type == "cuda" else "static"
    rows = list(range(1, 10))
    worst = 0.0
    with torch.inference_mode():
        eager, other = (make_target_step(pair.target, m) for m in ("eager", mode))
        other.fits(len(context) + 2 * max(rows))
        for step in (eager, other):
            step.run(context)
        for n in rows:
            tokens = (context * 2)[:n]
            a, b = (s.verify(tokens).float() for s in (eager, other))
            worst = max(worst, float((a - b).abs().max() / a.abs().max()))
            for s in (eager, other):
                s.crop(n)
        eps = torch.finfo(pair.target.dtype).eps
        problem = getattr(other, "problem", "")
        ok = worst <= NF4_TOLERANCE * eps and not problem
        t = {m: timed_passes(pair.target, context, (1,), m)[0][1] for m in ("eager", mode)}
        passes = {
            m: sum(timed_passes(pair.target, context, tuple(rows[1:]), m)[0].values())
            for m in ("eager", mode)
        }
    capture = f"; capture {ms(other.capture_seconds)}" if mode == "graph" else ""
    outcomes = [
        Outcome(f"5 target {mode} = eager", (PASS if ok else FAIL) if judged or not ok else RAN,
                f"a step and passes of 2..9 rows: max diff {worst:.2e} of max|logit|"
                + (f"; capture failed: {problem}" if problem else "")),
        Outcome(f"5 t_step {mode}", RAN,
                f"{ms(t[mode])} against eager {ms(t['eager'])}: {t['eager'] / t[mode]:.1f}× "
                f"(passes of 2..9 rows: {ms(passes[mode])} against {ms(passes['eager'])}, "
                f"{passes['eager'] / passes[mode]:.1f}×){capture}"),
    ]  # fmt: skip
    ids, tokens, race = context[:32], 8 if not judged else 64, {}

    def alone(m: str):
        return list(autoregressive_generate(pair.target, ids, max_new_tokens=tokens, target_step=m))

    def speculative(m: str):
        return generate(pair.target, pair.draft, ids, k=3, temperature=0.0,
                        max_new_tokens=tokens, seed=0, target_step=m)  # fmt: skip

    for m in ("eager", mode):
        for name, run_ in (("target alone", alone), ("K = 3", speculative)):
            run_(m)  # warm: captures and caches outside the clock
            start = time.perf_counter()
            run_(m)
            race[m, name] = time.perf_counter() - start
    figure = "; ".join(
        f"target {m}: K = 3 {race[m, 'target alone'] / race[m, 'K = 3']:.2f}× its target alone"
        for m in ("eager", mode)
    )
    saved = race["eager", "target alone"] / race[mode, "target alone"]
    figure += f"; target alone {mode} / eager: {saved:.2f}×"
    outcomes.append(Outcome("5 race, target modes", RAN, f"{tokens} tokens, greedy: {figure}"))
    return outcomes


def step_cost_outcomes(costs, judged: bool, budget=None) -> list[Outcome]:
    """`costs` (a StepCosts) beside the budgets specdemo.app.page.gpu asks ZeroGPU for, for the pair
    measured (`budget`, a ``gpu.Budget``; None: the embedded pair's); each fails above SLACK
    times its budget. A verify pass has two budgets, VERIFY_STEPS target steps and
    VERIFY_STEPS * t_step seconds, and fails above either."""
    from specdemo.app.page.gpu import EMBEDDED, VERIFY_STEPS

    T_STEP, T_DRAFT = (budget or EMBEDDED).t_step, (budget or EMBEDDED).t_draft

    def result(ok: bool) -> str:
        return (PASS if ok else FAIL) if judged else RAN

    ks = sorted(costs.t_verify)
    steps = [costs.verify_cost(k) for k in ks]
    seconds = [costs.t_verify[k] for k in ks]
    verify_ok = max(steps) <= SLACK * VERIFY_STEPS and max(seconds) <= SLACK * VERIFY_STEPS * T_STEP
    verify = (
        f"{span([k + 1 for k in ks], '{}')} tokens: {' '.join(f'{t * 1e3:.1f}' for t in seconds)}"
        f" ms = {span(steps, '{:.2f}')} target steps "
        f"(budget {VERIFY_STEPS:g} steps = {ms(VERIFY_STEPS * T_STEP)})"
    )
    note = "" if judged else "; a 2-layer build on the CPU: not judged"
    return [
        Outcome("5 t_step", result(costs.t_step <= SLACK * T_STEP),
                f"{ms(costs.t_step)} (budget {ms(T_STEP)}){note}"),
        Outcome("5 t_draft", result(costs.t_draft <= SLACK * T_DRAFT),
                f"{ms(costs.t_draft)} (budget {ms(T_DRAFT)}){note}"),
        Outcome("5 t_verify", result(verify_ok), verify + note),
        Outcome("5 c", RAN, f"t_draft / t_step = {costs.c:.2f} (budgets: {T_DRAFT / T_STEP:.2f})"),
    ]  # fmt: skip


def check_bench(run: Run) -> list[Outcome]:
    out = run.out / "bench"
    flags = ["--dry-run"] * run.dry + ["--reuse-pair"] * run.pair_built
    command = ["bash", "scripts/gpu_bench.sh", *flags, str(out), "--", *BENCH_TRIM]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, timeout=BENCH_TIMEOUT)
    seconds = time.perf_counter() - start
    figure = f"{' '.join(command[1:])}: exit {done.returncode} in {seconds:.0f} s"
    if run.dry or done.returncode:
        return [Outcome("6 gpu bench", PASS if done.returncode == 0 else FAIL, figure)]
    summary = out / "summary.md"
    rows = sum(line.startswith("| ") for line in summary.read_text().splitlines()) - 1  # header
    figure += f"; {rows} rows in {summary}"
    return [Outcome("6 gpu bench", PASS if rows > 0 else FAIL, figure)]


ZEROGPU_LOAD = """
import os, sys, time
import spaces  # first, as app.py imports it
from spaces.zero import torch as zero_torch
from specdemo.app.page import gpu
from specdemo.models import load_pair
start = time.perf_counter()
pair = load_pair(target=sys.argv[1], draft=sys.argv[2], precision="4bit", device="auto")
loaded = time.perf_counter() - start
devices = sorted({str(p.device) for m in (pair.target, pair.draft) for p in m.parameters()})
packed = zero_torch.pack()
budget = gpu.budget_of(pair)
print(f"ZEROGPU {pair.summary.precision} on {','.join(devices)} in {loaded:.0f} s; packed "
      f"{packed / 1e9:.2f} GB; budget {budget.t_step * 1e3:.1f} / {budget.t_draft * 1e3:.1f} ms")
"""


def check_zerogpu_load(run: Run) -> list[Outcome]:
    """The random pair of the real architectures loaded as a ZeroGPU Space loads its pair."""
    if run.dry or not torch.version.cuda:
        why = "not checked: spaces' ZeroGPU emulation needs a CUDA build of torch"
        return [Outcome("7 zerogpu load", RAN, why)]
    if not run.pair_built:
        return [Outcome("7 zerogpu load", FAIL, "check 5 did not build the random pair")]
    env = dict(os.environ, SPACES_ZERO_GPU="true", SPACES_ZERO_DEVICE_API_URL="http://127.0.0.1:9")
    env.pop(ZEROGPU_EMULATION, None)
    models = [str(run.models / "target"), str(run.models / "draft")]
    done = subprocess.run(
        [sys.executable, "-c", ZEROGPU_LOAD, *models], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=BENCH_TIMEOUT,
    )  # fmt: skip
    found = re.search(r"^ZEROGPU (.*)$", done.stdout, re.MULTILINE)
    if done.returncode or not found:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [Outcome("7 zerogpu load", FAIL, f"exit {done.returncode}: {last}"[:200])]
    return [Outcome("7 zerogpu load", PASS, found.group(1))]


def check_call_share(run: Run) -> list[Outcome]:
    """The app's race (its defaults, K automatic) on the random pair of the real architectures,
    after the app's preparation in this process (``race.rehearse``: the warm-up, the step-cost
    profile, the draft step's mode), called as a ZeroGPU GPU function (arguments and results
    pickled) twice: the share of each call's seconds spent inside the engine (both runs' model
    work) against SHARE_TARGET."""
    from specdemo.app.config import parse_run
    from specdemo.app.generate import race as race_runs
    from specdemo.app.page import jobs, work
    from specdemo.models import load_pair
    from specdemo.text import encode_prompt

    if not run.pair_built:
        return [Outcome("8 call share", FAIL, "check 5 did not build the random pair")]
    pair = load_pair(
        target=str(run.models / "target"),
        draft=str(run.models / "draft"),
        precision="4bit",
        device=run.device,
    )
    race_runs.rehearse(pair)
    config = parse_run(PROMPT, auto_k=True, max_new_tokens=32 if run.dry else 128)
    request = jobs.Race(config, tuple(encode_prompt(pair.tokenizer, PROMPT)))
    race = work.tasks(pair).race
    outcomes = []
    for call in ("first", "second"):
        start = time.perf_counter()
        runs = {kind: value for kind, value, _ in race(request)}
        wall = time.perf_counter() - start
        model = sum(r.seconds for r in runs.values())
        share = model / wall
        judged = not run.dry
        result = (PASS if share >= SHARE_TARGET else FAIL) if judged else RAN
        spec = runs["spec"]
        figure = (
            f"{share:.0%} of {wall:.2f} s on model work ({model:.2f} s: speculative "
            f"{spec.seconds:.2f} s, {len(spec.tokens)} tokens, mean K {spec.mean_k:.1f}, "
            f"draft step {spec.draft_step}; target {runs['target'].seconds:.2f} s)"
        )
        outcomes.append(Outcome(f"8 call share, {call} call", result, figure))
    del pair, race
    gc.collect()
    return outcomes


CHECKS = (
    ("0 default pair", check_default_pair),
    ("1 versions", check_versions),
    ("2 nf4 linear", check_nf4_linear),
    ("3 tiny pair", check_tiny_pair),
    ("4 handlers", check_handlers),
    ("5 step costs", check_step_costs),
    ("6 gpu bench", check_bench),
    ("7 zerogpu load", check_zerogpu_load),
    ("8 call share", check_call_share),
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="the CPU only; no CUDA call")
    parser.add_argument("out", nargs="?", type=Path, default=Path("bench_out/gpu-smoke"))
    parser.add_argument(
        "--only", nargs="+", metavar="N", help="run only the checks numbered N (8 needs 5)"
    )
    args = parser.parse_args(argv)
    os.environ[ZEROGPU_EMULATION] = "pickle"  # read when specdemo.app is imported
    models = Path(os.environ.get("SPECDEMO_RANDOM_PAIR") or "/tmp/specdemo-random-pair")
    run = Run("cpu" if args.dry_run else "cuda", models, ROOT / args.out)
    start = time.perf_counter()
    checks = [c for c in CHECKS if not args.only or c[0].split()[0] in args.only]
    outcomes = run_checks(checks, run)
    failed = sum(o.result == FAIL for o in outcomes)
    print(f"\n{table(outcomes)}\n\n{len(outcomes)} rows, {failed} failed, "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    if run.dry:
        initialised = torch.cuda.is_initialized()
        print(f"dry run: stopped before CUDA (torch.cuda initialised: {initialised})")
    return exit_status(outcomes)


if __name__ == "__main__":
    sys.exit(main())
