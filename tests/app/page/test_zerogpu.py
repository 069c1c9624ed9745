"""ZeroGPU, checked without it: each request's GPU budget grows with its work and the loaded
pair's depth, and one that does not fit a call is refused, naming what fits; ZeroGPU's own
refusals, waits and aborts reach the visitor as sentences; the GPU functions run in a fresh
fork per call (as ZeroGPU may run them) while replay, sweep ids and sessions work from the main
process; Stop ends a forked GPU call within a round; a forked call spends its seconds on the
models, what the process measured once reaching every call."""

import inspect
import os
import re
import time

import gradio as gr
import pytest
from conftest import PROMPT, ROOT

from specdemo.app.config import RunConfig, parse_run
from specdemo.app.page import gpu, gpu_calls, gpu_notes, handlers, jobs, replay, work
from specdemo.app.settings import LIMITS


def race(prompt_tokens: int = 20, **settings) -> jobs.Race:
    return jobs.Race(parse_run(PROMPT, **settings), tuple(range(prompt_tokens)))


@pytest.fixture
def zero_gpu(monkeypatch):
    """A ZeroGPU Space on RTX Pro 6000 Blackwell halves: requests are priced and checked."""
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setattr(gpu, "duration_factor", lambda: gpu.DURATION_FACTOR)


@pytest.fixture
def embedded_budget(monkeypatch):
    """The tiny pair priced as the embedded pair, so its requests cost what the Space's do."""
    monkeypatch.setattr(gpu, "budget_of", lambda pair: gpu.EMBEDDED)


@pytest.fixture
def forked(monkeypatch):
    """Every GPU function call in a fresh fork of this process, which keeps nothing it writes."""
    monkeypatch.setattr(gpu_calls, "EMULATION", "fork")
    monkeypatch.setattr(work, "_bound", {})
    replay.clear()
    yield
    replay.clear()


# ---------------------------------------------------------------- budgets


def test_one_call_may_ask_for_a_visitors_daily_quota_at_the_gpus_charge():
    assert gpu.duration_factor() == gpu.DURATION_FACTOR == 1.5
    assert gpu.max_seconds() == 80 == gpu.QUOTA_SECONDS / gpu.DURATION_FACTOR


def test_a_race_asks_for_more_with_more_tokens_a_larger_k_and_a_longer_prompt():
    short = race(k=2, max_new_tokens=32).seconds
    assert short < race(k=2, max_new_tokens=256).seconds
    assert short < race(k=8, max_new_tokens=32).seconds
    assert short < race(prompt_tokens=3000, k=2, max_new_tokens=32).seconds
    assert race(k="auto").seconds == race(k=max(jobs.gpu.PROFILE_KS)).seconds


def test_prompt_lookup_drafts_free_and_a_stored_target_is_not_charged():
    model = race(k=8, max_new_tokens=512)
    lookup = jobs.Race(parse_run(PROMPT, k=8, max_new_tokens=512, drafter="lookup"), model.ids)
    assert lookup.seconds < model.seconds
    suffix = jobs.Race(parse_run(PROMPT, k=8, max_new_tokens=512, drafter="suffix"), model.ids)
    assert suffix.seconds == lookup.seconds  # a copy runs no draft model either
    assert jobs.Race(model.config, model.ids, with_target=False).seconds < model.seconds


def test_the_exactness_check_asks_for_more_with_more_draws_sampling_and_a_longer_prompt():
    def seconds(n=1_000, temperature=1.0, tokens=20):
        config = parse_run(PROMPT, k=4, temperature=temperature)
        return gpu.exactness_seconds(config, n, tokens)

    assert seconds(n=100) < seconds(n=400) < seconds(n=100_000)
    assert seconds(temperature=0.0) < seconds(temperature=1.0)
    assert seconds(tokens=20) < seconds(tokens=3000)
    assert gpu.first_tokens(100_000, 1.0) == gpu.MAX_FIRST_TOKENS + 8


def test_every_default_request_fits_one_call():
    for request in (
        race(),
        jobs.ExactnessCheck(parse_run(PROMPT, temperature=1.0), tuple(range(20)), 20_000, None),
        jobs.StepThrough(parse_run(PROMPT, k=4), 40),
    ):
        assert 1 <= request.seconds <= gpu.max_seconds()


def test_off_zero_gpu_nothing_is_refused(monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    gpu.check(race(k="auto", max_new_tokens=1024))


def test_on_zero_gpu_a_run_too_long_is_refused_naming_the_most_tokens_that_fit(zero_gpu):
    long = race(k="auto", max_new_tokens=1024)
    assert long.seconds > gpu.max_seconds()  # it would have been clamped and aborted
    with pytest.raises(ValueError, match=r"at most (\d+) new tokens fit") as refused:
        gpu.check(long)
    fits = int(refused.value.args[0].split("at most ")[1].split()[0])
    assert race(k="auto", max_new_tokens=fits).seconds <= gpu.max_seconds()
    assert race(k="auto", max_new_tokens=fits + 1).seconds > gpu.max_seconds()
    assert "K = auto with copy when the text repeats, else the draft model" in str(refused.value)


def test_on_zero_gpu_too_many_draws_are_refused_naming_the_most_that_fit(zero_gpu, monkeypatch):
    monkeypatch.setattr(gpu, "DRAW_SECONDS", 1e-3)  # draws dear enough for N to matter
    config = parse_run(PROMPT, temperature=1.0)
    request = jobs.ExactnessCheck(config, tuple(range(20)), LIMITS["n"][1], None)
    with pytest.raises(ValueError, match=r"At most ([\d,]+) draws fit") as refused:
        gpu.check(request)
    n = int(refused.value.args[0].split("At most ")[1].split()[0].replace(",", ""))
    assert jobs.ExactnessCheck(config, request.ids, n, None).seconds <= gpu.max_seconds()
    assert jobs.ExactnessCheck(config, request.ids, n + 1, None).seconds > gpu.max_seconds()


def test_a_handler_refuses_before_any_gpu_time_is_asked(
    pair, zero_gpu, embedded_budget, monkeypatch
):
    asked = []
    monkeypatch.setattr(work, "tasks", lambda pair: asked.append(pair))
    with pytest.raises(gr.Error, match="new tokens fit"):
        next(handlers.generate(pair, PROMPT, auto_k=True, max_new_tokens=1024))
    with pytest.raises(gr.Error, match="Sweep cell K = 16, T = 0: .*new tokens fit"):
        handlers.sweep(pair, PROMPT, ks=[1, 16], temperatures=[0.0, 1.0], max_new_tokens=512)
    assert not asked


def test_the_exactness_check_refuses_first_tokens_beyond_its_budget(pair):
    from specdemo.app.exact.joint import measure_pairs
    from specdemo.decode.engine import make_generator

    config = parse_run(PROMPT, temperature=2.0)
    ids = pair.tokenizer(PROMPT)["input_ids"]
    with pytest.raises(ValueError, match="different first tokens, more than the 8"):
        measure_pairs(
            pair, ids, config.sampling, 2_000, make_generator(0, "cpu"), max_first_tokens=8
        )


def test_on_zero_gpu_the_page_says_what_the_default_sweep_costs(pair, zero_gpu, embedded_budget):
    sweep = jobs.parse_sweep(pair, PROMPT)
    calls, seconds = gpu.sweep_calls(sweep.cells())
    assert calls == 8 and seconds == sum(cell.seconds for cell in sweep.cells())
    note = sweep.note()
    assert f"{calls} GPU calls asking for about {seconds} s in all, more than the 2 GPU" in note
    assert "quota has 1.5 times its ask left, and is charged the seconds it uses" in note
    assert "Sign in" in note


def test_on_zero_gpu_the_page_says_what_a_run_asks_for_before_it_runs(pair, zero_gpu):
    seconds = jobs.parse_race(pair, PROMPT).seconds
    note = handlers.gpu_note(pair, PROMPT)
    assert f"this run asks for {seconds} s of GPU time" in note
    assert f"has {-(-seconds * 3 // 2)} s left" in note and "per IP address" in note
    longer = handlers.gpu_note(pair, PROMPT, max_new_tokens=1024)
    assert longer != note and "asks for" in longer
    assert handlers.gpu_note(pair, "") == gr.skip()  # bad input changes nothing


# ---------------------------------------------------------------- budgets per pair


def test_each_request_is_priced_with_the_loaded_pairs_own_step_budgets(pair):
    from specdemo.cost import dispatch

    tiny = gpu.budget_of(pair)
    assert tiny.t_step < gpu.EMBEDDED.t_step and tiny.t_draft < gpu.EMBEDDED.t_draft
    for request in (
        jobs.parse_race(pair, PROMPT),
        jobs.parse_exactness(pair, PROMPT),
        jobs.parse_step(pair, PROMPT),
        *jobs.parse_sweep(pair, PROMPT).cells(),
    ):
        assert request.budget == tiny
    # A 48-layer 14B target costs its depth's share more a step than the 28-layer 1.5B.
    deep = gpu.Budget.of_archs(dispatch.ARCHS["14B"], dispatch.ARCHS["0.5B"])
    assert deep.t_step / gpu.EMBEDDED.t_step == pytest.approx(48 / 28, rel=0.02)
    assert deep.t_draft == gpu.EMBEDDED.t_draft
    config = parse_run(PROMPT, k=4)
    assert gpu.race_seconds(config, 40, budget=deep) > 1.3 * gpu.race_seconds(config, 40)
    assert gpu.budget_of(object()) == gpu.EMBEDDED  # a page still preparing: the embedded pair


def test_the_budgets_op_count_is_the_one_a_pass_dispatches():
    from specdemo.bench import dispatch_measure
    from specdemo.cost import dispatch
    from specdemo.models.kernels import four_bit_problem
    from specdemo.runtime.modes import synthetic_context

    counts = {}
    for layers in (2, 4):
        model = dispatch_measure.tiny_width_model(layers, four_bit_problem("cpu") is None)
        counts[layers] = dispatch_measure.count_kernels(model, synthetic_context(model), (1,))[1]
    per_layer = (counts[4] - counts[2]) / 2
    assert per_layer in (36, dispatch.OPS_PER_LAYER)  # bf16 or dequantised NF4; fused NF4
    assert counts[2] - 2 * per_layer == dispatch.OPS_FIXED


def test_off_zero_gpu_the_sweep_says_nothing_of_quotas(pair, monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert jobs.parse_sweep(pair, PROMPT).note() == ""


# ---------------------------------------------------------------- spaces.GPU


class FakeSpaces:
    """spaces.GPU as ZeroGPU runs it: the duration callable is asked first, then the task."""

    def __init__(self):
        self.asked = []

    def GPU(self, duration):  # noqa: N802 (the spaces API)
        def decorate(fn):
            def run(*args, **kwargs):
                self.asked.append(duration(*args, **kwargs))
                return fn(*args, **kwargs)

            return run

        return decorate


def test_off_zero_gpu_a_gpu_function_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(gpu_calls, "spaces", FakeSpaces())
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert gpu_calls.on_gpu(len) is len
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setattr(gpu_calls, "spaces", None)  # without the package: nothing to wrap with
    assert gpu_calls.on_gpu(len) is len


def test_on_zero_gpu_each_call_asks_for_its_requests_own_seconds(zero_gpu, monkeypatch):
    fake = FakeSpaces()
    monkeypatch.setattr(gpu_calls, "spaces", fake)
    wrapped = gpu_calls.on_gpu(lambda request, state=None: "ran")
    short, long = race(max_new_tokens=16), race(max_new_tokens=256)
    assert wrapped(short) == "ran" and wrapped(long, None) == "ran"
    assert fake.asked == [short.seconds, long.seconds]


class FailingSpaces:
    """spaces.GPU whose calls ZeroGPU refuses, times out in its queue or aborts: the call raises
    `error` (built by spaces' own ``zero.gradio.error``) after asking for its duration."""

    def __init__(self, error):
        self.error, self.asked = error, []

    def GPU(self, duration):  # noqa: N802 (the spaces API)
        def decorate(fn):
            if inspect.isgeneratorfunction(fn):

                def stream(*args, **kwargs):
                    self.asked.append(duration(*args, **kwargs))
                    raise self.error
                    yield

                return stream

            def call(*args, **kwargs):
                self.asked.append(duration(*args, **kwargs))
                raise self.error

            return call

        return decorate


def zero_gpu_error(kind: str):
    """The gr.Error spaces 0.51.3 raises for a refused admission, a slot wait that timed out, and
    an aborted task, with its own titles and messages (zero/client.py, zero/wrappers.py)."""
    from spaces.zero import client
    from spaces.zero.gradio import error

    quota = "You have exceeded your free ZeroGPU quota (53s requested vs. 20s left). "
    quota += "Try again in 2:59:00. "
    titles_and_messages = {
        "refused": ("ZeroGPU quota exceeded", quota),
        "slot": ("ZeroGPU queue timeout", f"{client.NO_GPU_MESSAGE_INQUEUE} Sign in for priority"),
        "aborted": ("ZeroGPU worker error", "GPU task aborted"),
    }
    return error(*titles_and_messages[kind], html=kind == "slot")


@pytest.mark.parametrize(
    "kind, said",
    [
        ("refused", r"Not enough GPU quota left for this run: it asks for (\d+) s, so it needs"),
        (
            "slot",
            r"No GPU came free for this run within 60 s: every GPU this Space may use is busy",
        ),
        ("aborted", r"ZeroGPU stopped this run before it finished \(it had asked for (\d+) s"),
    ],
)
def test_zero_gpus_refusal_slot_wait_and_abort_reach_the_visitor_as_sentences(
    pair, zero_gpu, monkeypatch, kind, said
):
    fake = FailingSpaces(zero_gpu_error(kind))
    monkeypatch.setattr(gpu_calls, "spaces", fake)
    monkeypatch.setattr(work, "_bound", {})
    replay.clear()
    with pytest.raises(gr.Error) as race_error:
        list(handlers.generate(pair, PROMPT, max_new_tokens=16, fresh=True))
    with pytest.raises(gr.Error) as check_error:
        handlers.exactness(pair, PROMPT, n=200)
    for caught, asked in zip((race_error, check_error), fake.asked, strict=True):
        message = caught.value.message
        assert re.search(said, message), message
        assert "worker error" not in message and caught.value.title == "GPU time on ZeroGPU"
        if kind != "slot":
            assert int(re.search(said, message).group(1)) == asked
    if kind == "refused":  # the numbers ZeroGPU gave stay, for the visitor to act on
        assert "53s requested vs. 20s left" in race_error.value.message


def test_specdemos_own_messages_from_a_gpu_call_pass_unchanged(pair):
    own = gr.Error("Prompt is empty: type one or pick an example.")
    assert gpu_notes.plain(own, jobs.parse_race(pair, PROMPT)) is own


def test_every_request_pickles_as_zero_gpu_sends_it(pair):
    import pickle

    for request in (
        jobs.parse_race(pair, PROMPT),
        jobs.parse_sweep(pair, PROMPT),
        jobs.parse_exactness(pair, PROMPT),
        jobs.parse_step(pair, PROMPT),
    ):
        assert pickle.loads(pickle.dumps(request)) == request


# ---------------------------------------------------------------- a fresh fork per call


def test_the_fork_emulation_keeps_nothing_a_call_writes(forked):
    def write(request):
        os.environ["SPECDEMO_WRITTEN"] = "yes"
        return os.getpid()

    pid = gpu_calls.on_gpu(write)(race())
    assert pid != os.getpid() and "SPECDEMO_WRITTEN" not in os.environ


def test_a_race_replays_when_every_call_runs_in_a_fresh_fork(pair, forked):
    settings = {"max_new_tokens": 8, "auto_k": False, "k": 2, "temperature": 1.0, "seed": 3}
    first = list(handlers.generate(pair, PROMPT, **settings))
    again = list(handlers.generate(pair, PROMPT, **settings))
    assert len(again) == 1  # answered at once, from the store kept in the main process
    names = handlers.GENERATE_OUTPUTS
    result = dict(zip(names, first[-1], strict=True))
    replayed = dict(zip(names, again[0], strict=True))
    assert replayed["spec_pane"] == result["spec_pane"]
    assert "Replayed from a run measured" in replayed["comparison"]
    # Another K reuses the target-alone run: its GPU call runs the speculative run only.
    other = list(handlers.generate(pair, PROMPT, **{**settings, "k": 3}))
    assert (
        "Target alone: the run measured" in dict(zip(names, other[-1], strict=True))["comparison"]
    )
    assert all(values[1] == [] for values in other[:-1]) and other[-1][1]


def test_sweeps_in_fresh_forks_get_their_own_ids_and_finish(pair, forked):
    session, ticks = None, []
    for _ in range(2):
        grid = {"ks": [1, 2], "temperatures": [1.0], "max_new_tokens": 4}
        outputs = handlers.sweep(pair, PROMPT, **grid, session=session)
        session = outputs[handlers.SWEEP_OUTPUTS.index("session")]
        while not session.sweep.finished:
            ticks.append(outputs[-1])
            outputs = handlers.sweep_next(pair, session)
        assert outputs[-2].startswith("**Sweep done:** 2 of 2")
    assert len(set(ticks)) == len(ticks) == 2  # one tick per unfinished cell, never repeated
    assert len(session.runs) == 4 and session.runs[-1].replayed  # the second sweep replays


def test_the_exactness_check_and_a_step_run_in_a_fresh_fork(pair, forked):
    outputs = handlers.exactness(pair, PROMPT, n=500)
    assert "draws each" in outputs[handlers.EXACTNESS_OUTPUTS.index("summary")]
    state = handlers.step(pair, PROMPT)[-1]
    assert handlers.step(pair, PROMPT, state=state)[-1].rounds == 2


def test_a_bad_request_in_a_fork_reaches_the_user_as_its_message(pair, forked):
    from specdemo.app.step.stepping import STEP_LIMIT, StepState

    full = StepState(PROMPT, "", tuple(range(STEP_LIMIT + 10)), 10)
    with pytest.raises(gr.Error, match="Step-through stops after"):
        handlers.step(pair, PROMPT, state=full)


def test_stop_ends_a_forked_race_within_a_round(pair, forked):
    """Closing the stream (Stop) stops the GPU call at its next round."""
    config = RunConfig(PROMPT, k=2, temperature=1.0, max_new_tokens=1024)
    request = jobs.Race(config, tuple(pair.tokenizer(PROMPT)["input_ids"]))
    runs = work.tasks(pair).race(request)
    kind, run, _ = next(runs)
    started = time.perf_counter()
    runs.close()
    assert time.perf_counter() - started < 5
    assert kind == "spec" and len(run.tokens) < config.max_new_tokens


def test_the_install_docs_zero_gpu_figures_are_the_budgets(zero_gpu):
    """Every figure in docs/INSTALL.md's ZeroGPU pair table and quota paragraphs: from gpu.py on
    the defaults (40-token prompt) and from the dispatch model's recorded predictions."""
    import json

    from specdemo.app.settings import EXACT_DEFAULTS, SWEEP_DEFAULTS
    from specdemo.cost import dispatch

    root = ROOT
    install = root.joinpath("docs/INSTALL.md").read_text()
    zero = install[install.index("**The pair on ZeroGPU") : install.index("**Versions ZeroGPU")]
    zero = re.sub(r"\s+", " ", zero)
    ids = tuple(range(40))
    sweep = jobs.Sweep(parse_run(PROMPT), SWEEP_DEFAULTS["ks"], SWEEP_DEFAULTS["temperatures"], ids)
    calls, seconds = gpu.sweep_calls(sweep.cells())
    exactness = jobs.ExactnessCheck(
        parse_run(PROMPT, k=EXACT_DEFAULTS["k"], temperature=1.0), ids, EXACT_DEFAULTS["n"], None
    )
    long = jobs.Race(parse_run(PROMPT, k="auto", max_new_tokens=1024), ids)
    deep = gpu.Budget.of_archs(dispatch.ARCHS["14B"], dispatch.ARCHS["0.5B"])
    run = jobs.Race(parse_run(PROMPT, k="auto"), ids)
    run_14b = jobs.Race(parse_run(PROMPT, k="auto"), ids, budget=deep)
    phrases = [
        f"at most {gpu.max_seconds()} s",
        long.fits().split(":")[0],
        f"{run.seconds} s to generate",
        f"{exactness.seconds} s for the exactness check",
        f"{jobs.StepThrough(parse_run(PROMPT, k=4, temperature=1.0), 40).seconds} s for a step",
        f"is {calls} calls asking for {seconds} s in all",
        f'"Free account: {gpu.SIGNED_IN_QUOTA_SECONDS // 60} minutes"',
        f'"PRO account: {gpu.PRO_QUOTA_SECONDS // 60} minutes',
        f"plus {gpu.SETUP_SECONDS:g} s per call",
        f"at most {gpu.MAX_FIRST_TOKENS:,} of them",
        f"quota has {gpu.DURATION_FACTOR:g} times its ask left",
        f"{dispatch.HOST_LAYER_S * 1e3:g} ms of host-side dispatch per decoder layer",
        f"{gpu.EMBEDDED.t_step * 1e3:.0f} ms a target step",
        f"{deep.t_step * 1e3:.0f} ms for the 48-layer 14B",
        f"{gpu.EMBEDDED.t_draft * 1e3:.0f} ms a draft step",
        f"| {run.seconds} s | {run_14b.seconds} s |",
    ]
    recorded = json.loads(root.joinpath("docs/bench/dispatch.json").read_text())["pairs"]
    best = {p["pair"]: p["best"] for p in recorded if p["gpu"] == "H200"}
    for how in ("eager", "captured", "lookup"):
        cells = []
        for pair_name in ("qwen-coder", "qwen-coder-14b"):
            k, speedup = best[pair_name][how]
            cells.append(f"{speedup:.2f}× " + ("(K = 0" if k == 0 else f"(K = {k})"))
        phrases += cells
    for phrase in phrases:
        assert phrase in zero, phrase


def test_the_workshop_room_arithmetic_is_the_budgets(zero_gpu):
    """docs/WORKSHOP.md's room of 30: the default run's ask and the runs each quota starts."""

    workshop = ROOT.joinpath("docs/WORKSHOP.md").read_text()
    room = workshop[workshop.index("**A room of 30 on ZeroGPU.**") : workshop.index("What to do")]
    room = re.sub(r"\s+", " ", room)
    run = jobs.Race(parse_run(PROMPT, k="auto"), tuple(range(40))).seconds
    needed = -(-run * 3 // 2)
    assert gpu.runs_within(needed - 1, run) == 0 and gpu.runs_within(needed, run) == 1
    free, pro = (gpu.runs_within(q, run) for q in (300, gpu.PRO_QUOTA_SECONDS))
    for phrase in (
        f"asks for {run} s",
        f"1.5 × {run} = {needed} s left",
        f"{gpu.runs_within(gpu.QUOTA_SECONDS, run)} runs at least: the second starts with "
        f"120 − {run} = {120 - run} s left",
        f"{free} at least: a run starts while {needed} s are left, and 300 − {free - 1} × {run}",
        f"{30 * free} runs or more",
        f"{pro} at least",
    ):
        assert phrase in room, phrase


MODEL_STEP = 0.004  # seconds added to each forward of the tiny models, as a real pair's cost
SHARE = 0.9  # of a GPU call's seconds, spent inside the engine on the default race


def slowed(monkeypatch, model, seconds: float = MODEL_STEP) -> None:
    forward = model.forward

    def slow(*args, **kwargs):
        time.sleep(seconds)
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", slow)


@pytest.mark.parametrize("carried", [True, False], ids=["carried", "measured-again"])
def test_a_forked_race_call_spends_its_seconds_on_the_models(pair, forked, monkeypatch, carried):
    """The default race (greedy, so that every call runs all its tokens whatever K automatic K
    picks) in a fresh fork, as ZeroGPU runs each call, spends at least SHARE of the
    call's seconds inside the engine: the warm-up, the step-cost profile and the draft step's
    mode were measured once in the main process (the app's preparation) and reach the fork.
    The tiny models stand in for real ones with MODEL_STEP added to each forward. Forgetting
    them, so that the fork measures the profile again, falls below SHARE (the test's power)."""
    from specdemo.app.generate import race as race_runs
    from specdemo.cost import profile
    from specdemo.runtime import modes

    for model in (pair.target, pair.draft):
        slowed(monkeypatch, model)
    race_runs.rehearse(pair)  # the app's preparation, in the main process
    if not carried:
        monkeypatch.setattr(profile, "_profiles", profile.weakref.WeakKeyDictionary())
        monkeypatch.setattr(modes, "_fastest", profile.weakref.WeakKeyDictionary())
    request = race(prompt_tokens=40, auto_k=True, temperature=0.0)  # greedy: all 128 tokens
    start = time.perf_counter()
    runs = {kind: run for kind, run, _ in work.tasks(pair).race(request)}
    wall = time.perf_counter() - start
    model = sum(run.seconds for run in runs.values())
    assert len(runs["spec"].tokens) == len(runs["target"].tokens) == request.config.max_new_tokens
    assert (model / wall >= SHARE) == carried, f"{model:.2f} s of {wall:.2f} s"


def test_a_captured_target_s_graphs_are_in_the_budget(monkeypatch):
    """With the target's passes captured (SPECDEMO_TARGET_STEP graph or auto), a race asks for
    its captures too: the plain step and one per row count it may use, more for automatic K and
    wider trees than for one fixed K; an eager target asks for none."""
    config = parse_run(PROMPT, k="auto")
    eager = gpu.race_seconds(config, 40)
    assert gpu.capture_seconds("auto") == 0.0
    monkeypatch.setenv("SPECDEMO_TARGET_STEP", "graph")
    fixed, auto = gpu.capture_seconds(3), gpu.capture_seconds("auto")
    assert fixed == 2 * gpu.CAPTURE_SECONDS and auto > fixed
    assert gpu.capture_seconds("auto", 2) > auto
    assert gpu.race_seconds(config, 40) == pytest.approx(eager + auto)
    monkeypatch.setenv("SPECDEMO_TARGET_STEP", "auto")
    assert gpu.capture_seconds(3) == fixed
