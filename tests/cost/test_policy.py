"""policy.py: automatic K from measured step costs and per-position acceptance."""

import collections
import dataclasses
import json
import random

import pytest
from conftest import ROOT, BigramLM, toy_tables

import specdemo
from specdemo.cost.policy import (
    EXTRA_PRIOR,
    LIVE_DECAY,
    MIN_EVIDENCE,
    PROBE_EVERY,
    SIBLING_PRIOR,
    Acceptance,
    AutoK,
    expected_tokens,
    expected_tree_tokens,
)
from specdemo.cost.theory import StepCosts, expected_tokens_per_pass
from specdemo.decode.rounds import Round

# A GPU-like machine (verify nearly free, cheap draft) and a CPU-like one (verify grows with k).
GPU = StepCosts(t_step=1.0, t_draft=0.05, t_verify={k: 1.0 + 0.01 * k for k in range(1, 9)})
CPU = StepCosts(t_step=1.0, t_draft=0.4, t_verify={k: 1.0 + 0.15 * k for k in range(1, 9)})


def fake_round(k: int, n_accepted: int, source: str = "model") -> Round:
    return Round(
        draft=[1] * k, n_accepted=n_accepted, next_token=2, p_x=[], q_x=[], accept_prob=[],
        u=[], residual_top=[], tokens=[1] * n_accepted + [2], draft_time=0.0, verify_time=0.0,
        draft_steps=k, finished=False, k_asked=k, source=source,
    )  # fmt: skip


def test_expected_tokens_reduces_to_the_iid_formula():
    for alpha in (0.0, 0.5, 0.9):
        for k in (0, 1, 4):
            assert expected_tokens([alpha] * 8, k) == pytest.approx(
                expected_tokens_per_pass(alpha, k)
            )


def test_acceptance_counts_only_positions_that_were_judged():
    acc = Acceptance()
    acc.add(k=4, n_accepted=1)  # position 1 kept, 2 rejected, 3 and 4 never judged
    acc.add(k=2, n_accepted=2)  # both kept (a bonus round)
    assert acc.judged == [2, 2] and acc.kept == [2, 1]


def test_a_draft_that_is_always_right_on_a_gpu_drafts_long_blocks():
    policy = AutoK(GPU)
    for _ in range(30):
        k = policy.choose("model")
        policy.update(fake_round(k, k))
    assert policy.choose("model") == 8


def test_a_draft_that_is_always_wrong_falls_back_to_plain_steps_and_still_probes():
    policy = AutoK(CPU)
    chosen = []
    for _ in range(40):
        k = policy.choose("model")
        chosen.append(k)
        if k:
            policy.update(fake_round(k, 0))
    assert chosen[-PROBE_EVERY - 1 :].count(0) == PROBE_EVERY  # one probe in each PROBE_EVERY + 1
    assert 1 in chosen[-PROBE_EVERY - 1 :] and chosen.count(0) > 25


def test_costly_verify_keeps_k_short_and_free_lookup_drafts_go_longer():
    policy = AutoK(CPU)
    for _ in range(30):
        policy.update(fake_round(3, 2))  # a_1 = a_2 = 1, a_3 = 0
        policy.update(fake_round(3, 3, "lookup"))
    assert 1 <= policy.choose("model") <= 3
    assert policy.choose("lookup") >= policy.choose("model")


def test_auto_is_the_default_and_records_the_k_of_every_round():
    table, close = toy_tables(6, closeness=0.1)
    result = specdemo.generate(BigramLM(table), BigramLM(close), [0], max_new_tokens=40)
    assert result.stats.k == "auto"
    assert all(0 <= r.k_asked <= 8 and r.k <= r.k_asked for r in result.rounds)
    with pytest.raises(ValueError, match='"auto"'):
        specdemo.generate(BigramLM(table), BigramLM(close), [0], k="fast")


def test_the_profile_is_measured_once_and_lookup_shares_the_target_steps():
    from specdemo.cost.profile import COPY_KS, PROFILE_KS, costs_for

    table, close = toy_tables(6)
    target, draft = BigramLM(table), BigramLM(close)
    calls = {"target": 0, "draft": 0}
    target.register_forward_pre_hook(lambda *a: calls.__setitem__("target", calls["target"] + 1))
    draft.register_forward_pre_hook(lambda *a: calls.__setitem__("draft", calls["draft"] + 1))
    model = costs_for(target, draft)
    assert set(model.t_verify) == set(PROFILE_KS + COPY_KS) and model.t_draft > 0
    measured = dict(calls)
    assert costs_for(target, draft) == model and calls == measured  # cached: no forward pass
    lookup = costs_for(target)
    assert calls == measured  # the target's steps are shared
    assert (lookup.t_step, lookup.t_verify, lookup.t_draft) == (model.t_step, model.t_verify, 0.0)


def test_the_profile_prefills_each_model_once_and_times_every_width_on_that_cache():
    from specdemo.cost import profile

    table, close = toy_tables(6)
    target = BigramLM(table)
    fed = []
    target.register_forward_pre_hook(
        lambda _, args, kwargs: fed.append(kwargs["input_ids"].shape[-1]), with_kwargs=True
    )
    seconds = profile.pass_seconds(target, [i % 6 for i in range(20)], (1, 3, 9), repeats=2)
    assert set(seconds) == {1, 3, 9} and all(t > 0 for t in seconds.values())
    # One prefill of the whole context, then the widths in turn, warm-up round included.
    assert fed == [20] + [1, 3, 9] * 3


def test_a_hybrid_drafts_with_its_model_when_copies_are_not_worth_verifying():
    policy = AutoK(CPU)
    for _ in range(20):
        policy.update(fake_round(2, 0, "lookup"))  # copies always rejected
        policy.update(fake_round(2, 2, "model"))  # the model always right
    assert policy.choose_source(("lookup", "model"))[0] == "model"
    assert policy.choose_source(("lookup",)) == ("lookup", 0)


# A launch-bound GPU with eager steps (docs/bench/gpu.md, the dispatch model): the 24-layer draft
# costs 0.86 of the 28-layer target's step, and a verify pass over k + 1 tokens about 8% more
# per token than a plain step.
LAUNCH_BOUND = StepCosts(
    t_step=1.0, t_draft=0.86, t_verify={k: 1.0 + 0.08 * k for k in range(1, 9)}
)


def simulated_speedup(policy: AutoK, alpha: dict[str, float], tokens: int, seed: int = 0):
    """Tokens per second of a request driven by `policy` against the target alone (1 token per
    t_step), each judged draft kept with its source's per-token probability alpha[source];
    with the hybrid's sources when lookup has a match (copies), else the model's alone."""
    rng = random.Random(seed)
    sources = tuple(alpha) if "lookup" in alpha else ("model",)
    made, seconds, chosen = 0, 0.0, collections.Counter()
    while made < tokens:
        source, k = policy.choose_source(sources)
        n = 0
        while n < k and rng.random() < alpha[source]:
            n += 1
        policy.update(fake_round(k, n, source))
        chosen[source if k else "plain"] += 1
        made += n + 1
        seconds += policy.seconds(k, source)
    return made / seconds * policy.costs.t_step, chosen


@pytest.mark.parametrize("seed", range(5))
def test_on_a_launch_bound_gpu_automatic_k_is_never_slower_than_the_target(seed):
    """A 0.9-per-token draft model cannot pay when its step costs 0.86 of the target's (0.99x
    at best): automatic K turns to plain steps and loses at most 2% on its early evidence and its
    probes; with copies available it takes them and gains."""
    speed, chosen = simulated_speedup(AutoK(LAUNCH_BOUND), {"model": 0.9}, 256, seed)
    assert speed >= 0.98 and chosen["plain"] > 2 * chosen["model"], (speed, chosen)
    speed, chosen = simulated_speedup(AutoK(LAUNCH_BOUND), {"lookup": 0.8, "model": 0.9}, 256, seed)
    assert speed >= 1.5 and chosen["lookup"] > 4 * chosen["model"], (speed, chosen)


def test_a_draft_dearer_in_use_than_in_its_profile_makes_plain_steps_win():
    """Rounds whose proposals took a whole step beyond their profiled draft steps: drafting at
    α = 0.8, which pays at the profile's price (1.36x at K = 2), pays at no K once the policy has
    measured that extra."""
    costs = StepCosts(t_step=1.0, t_draft=0.2, t_verify={k: 1.1 + 0.15 * k for k in range(1, 9)})
    cheap, dear = AutoK(costs), AutoK(costs)
    for policy, extra in ((cheap, 0.0), (dear, 1.0)):
        rng = random.Random(0)
        for _ in range(40):
            k = max(policy.choose("model"), 1)
            kept = next((i for i in range(k) if rng.random() >= 0.8), k)
            r = fake_round(k, kept)
            policy.update(dataclasses.replace(r, draft_time=k * costs.t_draft + extra))
    # The first round is the draft's prefill; the 39 after it weigh LIVE_DECAY per round since.
    weight = sum(LIVE_DECAY**i for i in range(39))
    assert cheap.draft_extra == pytest.approx(0.0) and cheap.choose("model") > 0
    assert dear.draft_extra == pytest.approx(weight / (weight + EXTRA_PRIOR))
    dear.update(fake_round(0, 0))  # a plain step: the next round's catch-up is not measured
    dear.update(dataclasses.replace(fake_round(1, 1), draft_time=5.0))
    assert dear.draft_extra == pytest.approx(weight / (weight + EXTRA_PRIOR))
    assert dear.seconds(1, "model") == pytest.approx(0.2 + dear.draft_extra + 1.25)
    assert max(dear.tokens_per_second("model")[1:]) < dear.tokens_per_second("model")[0]
    assert dear.choose("model") == 0
    quick = AutoK(costs)  # rounds that measured faster than their profiled steps: noise
    for _ in range(5):
        quick.update(dataclasses.replace(fake_round(2, 2), draft_time=0.01))
    assert quick.extra_seconds < quick.extra_steps * costs.t_draft and quick.draft_extra == 0.0
    assert quick.seconds(2, "model") == pytest.approx(2 * 0.2 + costs.t_verify[2])


# The embedded pair's profile on a 2-core AVX512-BF16 Xeon (seconds): a draft step 0.37 of a
# target step, verify passes of 2-4 rows 1.1-1.4 steps, of 5 rows 2 steps.
VERIFY = [0.112, 0.123, 0.138, 0.198, 0.200, 0.201, 0.206, 0.277]
XEON = StepCosts(t_step=0.098, t_draft=0.036, t_verify=dict(enumerate(VERIFY, 1)))


def timed_request(costs, alpha, rounds=60, load=1.0, draft_load=1.0, extra=0.005, seed=0):
    """A request driven by automatic K on `costs`, each judged draft kept with chance `alpha`,
    timed by a fake clock: every target pass takes `load` times its profiled price, each
    proposal `load` times (its steps at `draft_load` times their profiled price, plus `extra`
    for the draft's catch-up). Returns the k of every round and tokens per second."""
    policy, rng = AutoK(costs), random.Random(seed)
    ks, made, seconds = [], 0, 0.0
    for _ in range(rounds):
        k = policy.choose("model")
        n = next((i for i in range(k) if rng.random() >= alpha), k)
        draft = load * (draft_load * k * costs.t_draft + extra) if k else 0.0
        verify = load * costs.pass_seconds(1 + k)
        r = fake_round(k, n)
        policy.update(dataclasses.replace(r, draft_time=draft, verify_time=verify))
        ks.append(k)
        made, seconds = made + n + 1, seconds + draft + verify
    return ks, made / seconds


@pytest.mark.parametrize("alpha", [0.4, 0.6, 0.8, 0.95])
def test_a_load_that_slows_every_pass_alike_changes_no_choice_of_k(alpha):
    """The profile was timed on a quiet machine; this request's passes all take 1, 2.4 or 4
    times as long (a browser, a room on one CPU). Priced at the load measured on its own target
    passes, every round chooses the same k, so the speedup over the target alone is the same."""
    quiet, quiet_speed = timed_request(XEON, alpha)
    for load in (2.4, 4.0):
        ks, speed = timed_request(XEON, alpha, load=load)
        assert ks == quiet, (load, ks, quiet)
        assert speed * load == pytest.approx(quiet_speed)
    # The control: k does depend on α (at 0.4 and 0.6 plain steps but for the probes).
    assert (quiet[MIN_EVIDENCE:].count(0) > len(quiet) // 2) == (alpha < 0.7), quiet


def test_a_draft_slowed_alone_drafts_less_and_then_not_at_all():
    """A load that slows the draft's steps and not the target's (many short kernels waiting on
    a busy core) makes drafting dearer: K falls as the draft slows, and at 4 times its profiled
    step (1.5 target steps) plain steps win but for the probes."""
    chosen = {slow: timed_request(XEON, 0.8, rounds=80, draft_load=slow)[0][40:]
              for slow in (1.0, 2.0, 4.0)}  # fmt: skip
    mean = {slow: sum(ks) / len(ks) for slow, ks in chosen.items()}
    assert mean[1.0] > mean[2.0] > mean[4.0], mean
    assert chosen[1.0].count(0) == 0 and chosen[4.0].count(0) >= 30, chosen


def test_the_draft_catching_up_after_plain_steps_is_priced_on_the_round_that_pays_it():
    """After plain steps the draft must first feed every token they added: the round that
    resumes drafting is priced with that pass beyond a steady round's two-token feed (at the
    profile's rise per row, under the request's load); right after a drafting round it costs
    nothing more."""
    policy = AutoK(XEON)
    r = fake_round(2, 2)
    policy.update(dataclasses.replace(r, verify_time=2 * XEON.t_verify[2]))  # a load of 2
    assert policy.load == pytest.approx(2.0) and policy.catch_up() == 0.0
    steady = policy.seconds(2, "model")
    for _ in range(4):
        policy.update(fake_round(0, 0))
    assert policy.behind == 2 + 4  # the last guess and the bonus, then four plain tokens
    wider = (XEON.pass_seconds(6) - XEON.pass_seconds(2)) / XEON.t_step
    assert policy.catch_up() == pytest.approx(2.0 * XEON.t_draft * wider)
    assert policy.seconds(2, "model") == pytest.approx(steady + policy.catch_up())
    assert policy.seconds(0, "model") == pytest.approx(2.0 * XEON.t_step)


def recorded_runs() -> tuple[StepCosts, list[dict]]:
    """docs/bench/busy-rounds.json: the profile and each run's rounds as Round objects."""
    recorded = json.loads((ROOT / "docs" / "bench" / "busy-rounds.json").read_text())
    p = recorded["profile"]
    costs = StepCosts(p["t_step"], p["t_draft"], {int(k): v for k, v in p["t_verify"].items()})
    for run in recorded["runs"]:
        run["rounds"] = [
            dataclasses.replace(fake_round(k, n), draft_steps=steps, draft_time=d, verify_time=v)
            for k, n, steps, d, v in run["rounds"]
        ]
    return costs, recorded["runs"]


def replayed_choices(costs: StepCosts, rounds: list[Round]) -> list[int]:
    """The k automatic K prices best (by expected tokens per second) before each recorded round,
    having seen the ones before it."""
    policy, best = AutoK(costs), []
    for r in rounds:
        speed = policy.tokens_per_second("model")
        best.append(max(range(len(speed)), key=speed.__getitem__))
        policy.update(r)
    return best


def test_recorded_rounds_beside_busy_processes_draft_where_drafting_paid_and_not_where_it_did_not(
    monkeypatch,
):
    """Rounds recorded on a 2-core Xeon (docs/bench/busy-rounds.json) by a policy that priced
    target passes at the quiet profile. Beside two busy loops every pass ran about 2.8 times
    its profile, the draft alike (c 0.4, where drafting pays); that policy chose plain steps for
    41 of 56 rounds, and replayed, automatic K drafts at every one of them. Beside one busy loop
    on two threads the draft's steps ran 20 times their profile and the target's 5 to 10:
    drafting did not pay there, and automatic K, replayed, keeps mostly to plain steps."""
    costs, runs = recorded_runs()
    run = {(r["busy"], r["seed"]): r["rounds"] for r in runs}
    two = run[2, 0]
    plain = [i for i, r in enumerate(two) if r.k == 0]
    assert len(plain) == 41
    best = replayed_choices(costs, two)
    assert all(best[i] > 0 for i in plain), best
    for seed in (0, 1):  # the draft slowed far more than the target: plain steps
        best = replayed_choices(costs, run[1, seed])
        assert best[MIN_EVIDENCE:].count(0) >= 0.75 * len(best[MIN_EVIDENCE:]), best
    # The control: with the target's passes priced at the quiet profile whatever they measure
    # (load pinned to 1), the same replay chooses plain steps at most of those rounds.
    monkeypatch.setattr(AutoK, "load", property(lambda self: 1.0))
    pinned = replayed_choices(costs, two)
    assert sum(pinned[i] == 0 for i in plain) > len(plain) / 2, pinned
    monkeypatch.undo()
    quiet = replayed_choices(costs, run[0, 0])
    assert quiet.count(0) == 0 and quiet[-10:] == [3] * 10  # quiet: K = 3, as chosen then


def test_a_fishbone_is_worth_its_spine_and_the_siblings_kept_where_the_spine_fails():
    """1 + Σ over depths reached of a_d + (1 - a_d) s: at a_1 = a_2 = 0.5 and s = 0.4, depth 1
    gives 0.5 + 0.5 × 0.4 = 0.7, depth 2 (reached half the time) 0.35."""
    assert expected_tree_tokens([0.5, 0.5], 2, 0.4) == pytest.approx(2.05)
    for rates in ([0.9, 0.6, 0.3], [0.2] * 3):
        for k in range(4):
            assert expected_tree_tokens(rates, k, 0.0) == pytest.approx(expected_tokens(rates, k))


def test_a_pass_wider_than_the_profile_is_priced_along_its_last_measured_rise():
    costs = StepCosts(t_step=1.0, t_draft=0.1, t_verify={1: 1.2, 2: 1.5, 3: 1.9})
    assert [costs.pass_seconds(n) for n in (1, 2, 3, 4)] == [1.0, 1.2, 1.5, 1.9]
    assert costs.pass_seconds(7) == pytest.approx(1.9 + 3 * 0.4)


def sibling_round(k: int, n: int, tried: list[bool]) -> Round:
    """A round whose draft n + 1 was rejected and whose siblings there went as `tried`."""
    from specdemo.judge.tree import Trial

    trials = tuple(Trial(5 + i, 0.1, 0.2, 0.5, 0.5, kept) for i, kept in enumerate(tried))
    return dataclasses.replace(fake_round(k, n), siblings_tried=(trials,) if tried else (),
                               sibling=5 if any(tried) else None, width=len(tried) + 1)  # fmt: skip


def test_trees_are_chosen_where_rows_are_cheap_and_never_where_they_cost_a_third_of_a_step():
    """On GPU-like costs (a row 0.01 of a step) the policy tries the widest fishbone it may; on
    this CPU's (each row after the first about 0.3 of a step, BENCHMARKS "Token trees") it keeps
    the chain at the acceptance of prose and code (α 0.5 to 0.8), even after a sibling was kept;
    with trees not allowed (max_width 1) it never leaves the chain."""
    cheap = AutoK(GPU, max_width=3)
    cheap.choose("model")
    assert cheap.width == 3
    cpu = StepCosts(t_step=1.0, t_draft=0.3, t_verify={k: 1.0 + 0.3 * k for k in range(1, 9)})
    for rate in (0.5, 0.65, 0.8):
        policy = AutoK(cpu, max_width=3)
        rng = random.Random(0)
        for _ in range(40):
            k = policy.choose("model")
            assert policy.width == 1, rate
            n = next((i for i in range(k) if rng.random() > rate), k)
            policy.update(fake_round(k, n))
        policy.update(sibling_round(2, 0, [True]))
        assert policy.choose("model") is not None and policy.width == 1
    plain = AutoK(GPU)
    plain.choose("model")
    assert plain.width == 1


def test_siblings_measured_as_never_kept_turn_the_tree_back_into_a_chain():
    """Cheap rows and a draft kept half the time: the prior makes a tree worth trying; where this
    request's siblings are rejected every time, the rate measured by rank (shrunk towards the
    prior) soon prices the tree below the chain, and where they are kept it stays a tree."""
    cheap = StepCosts(t_step=1.0, t_draft=0.1, t_verify={k: 1.0 + 0.02 * k for k in range(1, 9)})
    for kept, wide in ((False, False), (True, True)):
        policy, rng, widths = AutoK(cheap, max_width=3), random.Random(1), []
        for _ in range(40):
            k = policy.choose("model")
            widths.append(policy.width)
            n = next((i for i in range(k) if rng.random() > 0.5), k)
            tried = [kept] if kept else [False] * (policy.width - 1)
            policy.update(sibling_round(k, n, tried if n < k and policy.width > 1 else []))
        assert widths[0] > 1  # the prior: worth a try
        assert (min(widths[-10:]) > 1) == wide and (max(widths[-10:]) > 1) == wide, widths
        judged, kept_n = policy.siblings.judged[0], policy.siblings.kept[0]
        assert judged >= 5 and kept_n == (judged if kept else 0)
        assert policy.siblings.rates(1, SIBLING_PRIOR)[0] == pytest.approx(
            (kept_n + 2 * SIBLING_PRIOR) / (judged + 2)
        )


def test_the_load_compares_the_targets_passes_alone_with_the_profiles():
    """A round's verify time also holds the judge and any re-prefill; the profile timed passes
    alone. A pass that ran at its profiled time is a load of 1 whatever the rest took, and a
    pass that captured a CUDA graph (its pass time 0) is not priced at all."""
    policy = AutoK(XEON)
    r = fake_round(3, 1)
    rows = XEON.pass_seconds(r.rows)
    policy.update(dataclasses.replace(r, verify_time=3 * rows, pass_time=rows))
    assert policy.load == pytest.approx(1.0)
    policy.update(dataclasses.replace(r, verify_time=50 * rows, pass_time=0.0))  # a capture
    assert policy.load == pytest.approx(1.0)
    control = AutoK(XEON)  # the verify time as the load's measure: three times too busy
    control.update(dataclasses.replace(r, verify_time=3 * rows))
    assert control.load == pytest.approx(3.0)
