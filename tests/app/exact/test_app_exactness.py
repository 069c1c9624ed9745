"""The live exactness check on the tiny pair: its bars are the target's p, its χ² has power."""

import collections
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from conftest import PROMPT

from specdemo.app.config import encode, parse_run
from specdemo.app.exact import chi_square, exactness, joint
from specdemo.engine import make_generator
from specdemo.sampling import RULES


def test_the_bars_show_the_targets_own_probabilities(pair):
    config = parse_run(PROMPT, temperature=0.8)
    ex = exactness.measure(pair, config, 20_000)
    # p computed here straight from the model's logits, without specdemo's sampling code.
    with torch.no_grad():
        logits = pair.target(torch.tensor([encode(pair, config)])).logits[0, -1].double()
    p = torch.softmax(logits / 0.8, dim=-1)
    top = torch.topk(p, len(ex.tokens))
    assert ex.tokens == top.indices.tolist()
    assert ex.p[:-1] == pytest.approx(top.values.tolist(), abs=1e-5)
    assert ex.p[-1] == pytest.approx(1.0 - top.values.sum().item(), abs=1e-5)
    assert len(ex.labels) == len(ex.tokens) + 1 and ex.labels[-1] == "(other)"


def test_speculative_draws_follow_p(pair):
    config = parse_run(PROMPT, k=4, temperature=1.0)
    ex = exactness.measure(pair, config, 20_000)
    assert ex.tv_speculative < 0.05 and ex.p_value_speculative > 0.001
    assert ex.tv_direct < 0.05 and ex.p_value_direct > 0.001
    # The standard error of a frequency from 20,000 draws is at most 0.0035.
    assert max(abs(a - b) for a, b in zip(ex.speculative, ex.p, strict=True)) < 0.02
    assert 0.0 < ex.first_accept < 1.0


def test_exactness_check_catches_a_wrong_sampler(pair):
    config = parse_run(PROMPT, temperature=1.0)
    ids = encode(pair, config)
    p = exactness.next_token_probs(pair.target, ids, config.sampling).double()
    q = exactness.next_token_probs(pair.draft, ids, config.sampling).double()
    drafts = torch.multinomial(
        q, 20_000, replacement=True, generator=torch.Generator().manual_seed(0)
    )
    counts = torch.bincount(drafts, minlength=len(p)).double()
    assert chi_square.chi2_pvalue(counts, p / p.sum()) < 1e-6


def test_chi2_pools_rare_tokens_and_rejects_impossible_ones():
    p = torch.tensor([0.5, 0.5, 0.0], dtype=torch.double)
    assert chi_square.chi2_pvalue(torch.tensor([50.0, 50.0, 0.0]), p) == pytest.approx(1.0)
    assert chi_square.chi2_pvalue(torch.tensor([50.0, 49.0, 1.0]), p) == 0.0
    assert chi_square.chi2_pvalue(torch.tensor([7.0]), torch.tensor([1.0])) == 1.0


def test_greedy_check_finds_the_tiny_pair_identical(pair):
    check = exactness.greedy_check(pair, parse_run(PROMPT, k=4))
    assert check.identical and check.n_tokens > 0
    assert "identical" in exactness.greedy_markdown(check, 4, "fp32")
    parted = exactness.GreedyCheck(False, 10, 3, "a", "b", 0.001)
    assert "part at new token 4" in exactness.greedy_markdown(parted, 4, "4-bit int4 (torch)")


def test_the_first_two_tokens_follow_the_exact_joint(pair):
    config = parse_run(PROMPT, temperature=1.0)
    ids = encode(pair, config)
    pairs = joint.measure_pairs(pair, ids, config.sampling, 20_000, make_generator(0, "cpu"))
    assert pairs.p_value_speculative > 0.001 and pairs.p_value_direct > 0.001
    assert pairs.tv_speculative < 0.05 and pairs.first_tokens > 1
    # The shown bins are the most likely pairs, p(a) p(b | a) computed here without the cache.
    p1 = exactness.next_token_probs(pair.target, ids, config.sampling).double()
    a = int(p1.argmax())
    p2 = exactness.next_token_probs(pair.target, ids + [a], config.sampling).double()
    b = int(p2.argmax())
    best_with_a = p1[a].item() * p2[b].item()
    assert max(pairs.p[:-1]) >= best_with_a - 1e-6
    assert sum(pairs.p) == pytest.approx(1.0) and sum(pairs.speculative) == pytest.approx(1.0)


# Mistakes the first-token check can see: block-prefix judged one guess at a time is the exact
# rule, and only two guesses judged together show it (test_the_two_token_check_judged_as_a_...).
SEEN_FIRST = [name for name in RULES if name not in ("exact", "block-prefix")]


@pytest.mark.parametrize("name", SEEN_FIRST)
def test_each_mistaken_rule_fails_both_checks(pair, name):
    config = parse_run(PROMPT, temperature=1.0)
    ex = exactness.measure(pair, config, 20_000, rule=RULES[name])
    pairs = joint.measure_pairs(
        pair, encode(pair, config), config.sampling, 20_000, make_generator(0, "cpu"), RULES[name]
    )
    assert ex.p_value_speculative < 1e-6 and pairs.p_value_speculative < 1e-6
    assert ex.p_value_direct > 1e-3  # the reference draws are unaffected by the rule
    text = exactness.markdown(ex, pairs)
    assert RULES[name].label in text and "do not follow p" in text


def test_the_greedy_note_blames_rounding_only_for_a_near_tie():
    tie = exactness.GreedyCheck(False, 10, 3, "a", "b", exactness.NEAR_TIE / 10)
    note = exactness.greedy_markdown(tie, 4, "fp16")
    assert "close enough to a tie" in note and "not explained by rounding" not in note
    wide = exactness.GreedyCheck(False, 10, 3, "a", "b", 3.5)
    note = exactness.greedy_markdown(wide, 4, "fp16")
    assert "part at new token 4" in note and "**3.5000**" in note
    assert "not explained by rounding" in note and "worth reporting" in note
    assert "close enough to a tie" not in note


def test_greedy_check_measures_the_targets_top_two_gap_where_the_runs_part(pair, monkeypatch):
    """A speculative run made to differ at new token 6: the check reports the target's top-two
    logit gap after the common prefix, as computed here straight from the model."""
    seen = {}
    real_speculative, real_target = exactness.run_speculative, exactness.run_target

    def speculative(pair, config, ids):
        seen["ids"] = list(ids)
        tokens = list(exactness.last(real_speculative(pair, config, ids)).tokens)
        tokens[5] = (tokens[5] + 1) % len(pair.tokenizer)
        yield SimpleNamespace(tokens=tokens)

    def target(pair, config, ids):
        seen["target"] = list(exactness.last(real_target(pair, config, ids)).tokens)
        yield SimpleNamespace(tokens=seen["target"])

    monkeypatch.setattr(exactness, "run_speculative", speculative)
    monkeypatch.setattr(exactness, "run_target", target)
    check = exactness.greedy_check(pair, parse_run(PROMPT, k=4))
    assert not check.identical and check.first_difference == 5
    with torch.no_grad():
        ids = torch.tensor([seen["ids"] + seen["target"][:5]])
        logits = pair.target(input_ids=ids).logits[0, -1].double()
    top = torch.topk(logits, 2).values
    assert check.margin == pytest.approx(float(top[0] - top[1]), abs=1e-4)


def engine_pairs(pair, ids, config, k: int, n: int, rule) -> collections.Counter:
    """The first two tokens of n generations by the engine itself (room for a third token, so
    a round after a rejection still drafts, as in a longer answer)."""
    from specdemo.drafters import make_drafter
    from specdemo.engine import speculative_generate

    generator, counts = make_generator(1, "cpu"), collections.Counter()
    for _ in range(n):
        drafter = make_drafter("model", pair.draft, config.sampling, generator, "cpu", rule=rule)
        rounds = speculative_generate(pair.target, drafter, ids, k=k, sampling=config.sampling,
                                      max_new_tokens=3, generator=generator, rule=rule)  # fmt: skip
        tokens = [t for r in rounds for t in r.tokens]
        counts[tuple(tokens[:2])] += 1
    return counts


@pytest.mark.parametrize("k", [1, 2])
def test_the_two_token_lab_draws_what_the_engine_emits(pair, k):
    """Under always-accept the second token depends on K: the bonus from p at K = 1, a second
    kept draft from q at K = 2. The lab's pairs match the engine's own first two tokens at each
    K (two-sample χ² over the shown pairs), and differ between the two Ks (its power)."""
    from scipy.stats import chi2_contingency

    config = parse_run(PROMPT, temperature=1.0)
    ids, rule, n = encode(pair, config), RULES["always-accept"], 3000
    lab = {
        kk: joint.measure_pairs(pair, ids, config.sampling, n, make_generator(0, "cpu"), rule, k=kk)
        for kk in (1, 2)
    }
    engine = engine_pairs(pair, ids, config, k, n, rule)

    def engine_counts(shown):
        found = [engine[a, b] for a, b in shown]
        return found + [n - sum(found)]

    def p_value(lab_run):
        lab_counts = [round(f * n) for f in lab_run.speculative]
        columns = [c for c in zip(lab_counts, engine_counts(lab_run.shown), strict=True) if any(c)]
        return chi2_contingency(columns).pvalue

    assert p_value(lab[k]) > 1e-3
    assert p_value(lab[3 - k]) < 1e-3


# ---------------------------------------------------------------- what a verdict may claim

P4 = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.double)
Q4 = torch.tensor([0.2, 0.5, 0.2, 0.1], dtype=torch.double)


@pytest.mark.parametrize("name", list(RULES))
def test_each_rules_first_token_distribution_is_what_the_engine_draws(name):
    """``rule_distribution``'s closed form against 40,000 first tokens drawn through the engine's
    own drafting and judging (``verify.first_token_samples``): the χ² check does not reject it,
    and it is p only for the exact rule."""
    from specdemo.verify import first_token_samples

    expected = chi_square.rule_distribution(P4, Q4, RULES[name])
    draws = first_token_samples(P4, Q4, 40_000, make_generator(5, "cpu"), RULES[name])
    counts = torch.bincount(draws, minlength=4).double()
    assert chi_square.chi2_pvalue(counts, expected) > 1e-3
    tv = 0.5 * float((expected - P4).abs().sum())
    assert (tv < 1e-12) == (name not in SEEN_FIRST), tv  # block-prefix: exact with one guess


def test_the_computed_power_is_the_rate_at_which_checks_catch_a_mistake():
    """At N = 100 "resample from p" moves these p by 0.15 and is caught with a computed 23%;
    400 simulated checks of 100 draws catch it at that rate (binomial sd 0.021), and the exact
    rule's checks at the false-alarm rate."""
    generator = make_generator(11, "cpu")
    for name, lo, hi in (("resample-from-p", 0.16, 0.30), ("exact", 0.0, 0.01)):
        other = chi_square.rule_distribution(P4, Q4, RULES[name])
        computed = chi_square.power(P4, other, 100)
        caught = (
            sum(
                chi_square.chi2_pvalue(
                    torch.bincount(
                        torch.multinomial(other, 100, True, generator=generator), None, 4
                    ).double(),
                    P4,
                )
                < chi_square.SUSPICIOUS
                for _ in range(400)
            )
            / 400
        )
        assert lo < computed < hi and lo < caught < hi, (name, computed, caught)


def test_any_departure_of_the_detectable_size_is_caught_with_95_percent():
    """``detectable_tv`` holds whatever the departure's shape: random departures of exactly that
    total variation all have computed power of at least POWER; a third of it, mostly less."""
    generator = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(40, generator=generator, dtype=torch.double) * 2, 0)
    n = 2_000
    delta = chi_square.detectable_tv(p, n)
    assert 0 < delta < 0.2
    bins, _ = chi_square.chi2_bins(p, n)
    weak = 0
    for _ in range(50):
        direction = torch.randn(40, generator=generator, dtype=torch.double)
        direction = direction - direction.mean()
        for scale, at_least in ((1.0, True), (1 / 3, False)):
            step = direction * p  # stays within p's support
            step = step - p * step.sum() / p.sum()
            binned = torch.zeros(int(bins.max()) + 1, dtype=torch.double)
            binned.index_add_(0, bins, step)
            tv = 0.5 * float(binned.abs().sum())
            other = p + step * (scale * delta / tv)
            if other.min() < 0:
                continue
            if at_least:
                assert chi_square.power(p, other, n) >= chi_square.POWER - 1e-6
            else:
                weak += chi_square.power(p, other, n) < chi_square.POWER
    assert weak > 25


def verdict_for(rule: str, p_value: float, n: int = 100) -> str:
    other = chi_square.rule_distribution(P4, Q4, RULES[rule])
    ex = exactness.Exactness(
        labels=["a", "(other)"], tokens=[0], p=[0.5, 0.5], speculative=[0.5, 0.5],
        direct=[0.5, 0.5], n=n, tv_speculative=0.01, tv_direct=0.01,
        p_value_speculative=p_value, p_value_direct=0.5, first_accept=0.6, rule=rule,
        detectable_tv=chi_square.detectable_tv(P4, n),
        tv_rule=0.5 * float((other - P4).abs().sum()), power_rule=chi_square.power(P4, other, n),
    )  # fmt: skip
    return exactness.markdown(ex)


def test_a_verdict_claims_only_what_its_check_showed():
    """Four cases: a mistake caught; the exact rule's false alarm, named as one; the exact rule
    not rejected, with the smallest departure this N sees and no claim of exactness; a
    mistake not caught for lack of power, with what to change."""
    caught = verdict_for("resample-from-p", 1e-9)
    assert "do not follow p" in caught and "changes what the model says" in caught
    alarm = verdict_for("exact", 1e-4)
    assert "A false alarm, most likely" in alarm and "1 check in 1,000" in alarm
    assert "do not follow p" not in alarm
    passed = verdict_for("exact", 0.4)
    delta = chi_square.detectable_tv(P4, 100)
    assert "No departure from p found" in passed and f"{delta:.3f} or more" in passed
    assert "follows p exactly" not in passed and "95% probability" in passed
    unseen = verdict_for("resample-from-p", 0.2)
    assert "Too little power here to see this mistake: raise N or the temperature" in unseen
    assert "moves the first token 0.150 from p" in unseen and "23% probability" in unseen
    assert "No departure" not in unseen


def test_a_verdict_is_right_at_its_edges():
    """A p-value of exactly 0 (a draw the target gives probability 0) is never a false alarm;
    with the two-token check beside the first-token one the false-alarm rate counts both tests;
    a check that could test nothing (one χ² bin) says so instead of a distance of inf; a mistake
    missed where N had the power for it is not called a lack of power."""
    impossible = verdict_for("exact", 0.0)
    assert "Something in the path is wrong" in impossible and "false alarm" not in impossible
    other = chi_square.rule_distribution(P4, Q4, RULES["exact"])
    ex = exactness.Exactness(
        labels=["a", "(other)"], tokens=[0], p=[0.5, 0.5], speculative=[0.5, 0.5],
        direct=[0.5, 0.5], n=100, tv_speculative=0.01, tv_direct=0.01, p_value_speculative=0.5,
        p_value_direct=0.5, first_accept=0.6, rule="exact", detectable_tv=float("inf"),
        tv_rule=0.5 * float((other - P4).abs().sum()), power_rule=0.0,
    )  # fmt: skip
    flat = exactness.markdown(ex)
    assert "inf" not in flat and "could not see any departure: raise N" in flat
    pairs = SimpleNamespace(p_value_speculative=1e-4, p_value_direct=0.5, k=2, judge="token",
                            labels=[], p=[], speculative=[], direct=[], n=100,
                            tv_speculative=0.0, tv_direct=0.0, first_tokens=1)  # fmt: skip
    alarm = exactness.verdict(replace(ex, detectable_tv=0.1), True, pairs)
    assert "each of the 2 χ² tests" in alarm and "about 2 in 1,000 checks" in alarm
    missed = verdict_for("resample-from-p", 0.2, n=5_000)
    assert "power_rule" not in missed and "Too little power" not in missed
    assert "Not caught this time, though this N has the power for it" in missed


def test_a_mistaken_rule_at_low_power_is_told_apart_from_a_pass(pair):
    """Through ``measure`` on the tiny pair: "resample from p" with 100 draws at T = 1 moves
    the first token by 0.14, which 100 draws catch 3% of the time (computed); this run did not
    catch it, and the page says it had too little power rather than calling the draws exact.
    At 20,000 draws the same mistake is caught (test_each_mistaken_rule_fails_both_checks)."""
    config = parse_run(PROMPT, temperature=1.0)
    ex = exactness.measure(pair, config, 100, rule=RULES["resample-from-p"])
    assert 0.1 < ex.tv_rule < ex.detectable_tv and ex.power_rule < 0.1
    assert ex.p_value_speculative >= chi_square.SUSPICIOUS
    text = exactness.markdown(ex)
    assert "Too little power here to see this mistake" in text and "No departure" not in text


# ---------------------------------------------------------------- two guesses judged as a block


@torch.inference_mode()
def block_prefix_law(pair, ids, sampling) -> tuple[torch.Tensor, torch.Tensor]:
    """(vocab, vocab) tables of the first two tokens: the exact joint p(a)·p(b | a), and their
    law as the lab draws them under the block-prefix mistake at K = 2. A round drafts x1 ~ q and
    x2 ~ q(· | x1); guess i passes when u_i < h_i = min(1, Π p/q up to i), and the round keeps
    up to the last that passed: both (h2), x1 then a token from max(0, p − q)(· | x1) ((1 − h2)
    h1), or neither, when the first token comes from max(0, p − q) and a fresh round, exact with
    one guess, gives the second from p(· | a). Every row of both models after the prompt and one
    token, from the lab's own ``joint.Rows``."""
    rows = joint.Rows(pair, ids, sampling)
    vocab = rows.vocab
    parts = [rows.rows(list(range(s, min(s + 100, vocab)))) for s in range(0, vocab, 100)]
    p, q = (torch.cat([parts[0][m][:1]] + [part[m][1:] for part in parts]).double() for m in (0, 1))
    p0, q0, p1, q1 = p[0], q[0], p[1:], q[1:]  # p1[a] = p(· | a): (vocab, vocab)

    def residual(p, q):
        r = (p - q).clamp_min(0)
        return r / r.sum(-1, keepdim=True)

    ratio = p0 / q0.clamp_min(1e-300)
    h1, h2 = ratio.clamp(max=1), (ratio[:, None] * p1 / q1.clamp_min(1e-300)).clamp(max=1)
    both = q0[:, None] * q1 * h2
    first = q0 * (q1 * (1 - h2)).sum(1) * h1
    neither = (q0[:, None] * q1 * (1 - h1[:, None]) * (1 - h2)).sum()
    law = both + first[:, None] * residual(p1, q1) + neither * residual(p0, q0)[:, None] * p1
    return p0[:, None] * p1, law


def test_the_two_token_check_judged_as_a_block_passes_the_exact_rule_and_fails_block_prefix(pair):
    """The lab's two-token check with the block judge at K ≥ 2 on the tiny pair at T = 1: the
    exact rule passes, the block-prefix mistake fails. Its power is computed, not hoped for: the
    mistake's law of the first two tokens (``block_prefix_law``, which the lab's draws follow)
    lies 0.14 from p(a)·p(b | a) in total variation, and N = 2,000 draws catch that with
    probability above 0.9999 (``chi_square.power`` over the check's own bins); yet its first
    token, drawn one guess at a time, is exactly p (``rule_distribution``), so the first-token
    check cannot see it at any N."""
    config = parse_run(PROMPT, temperature=1.0)
    ids, n, rule = encode(pair, config), 2_000, RULES["block-prefix"]
    exact, law = block_prefix_law(pair, ids, config.sampling)
    assert 0.5 * float((law - exact).abs().sum()) > 0.1
    assert chi_square.power(exact.view(-1), law.view(-1), n) > 0.9999

    def check(rule, k):
        return joint.measure_pairs(
            pair, ids, config.sampling, n, make_generator(0, "cpu"), rule, k=k, judge="block"
        )

    passed, caught = check(RULES["exact"], 4), check(rule, 2)
    assert (passed.judge, passed.k, caught.k) == ("block", 2, 2)  # K > 2 judges as K = 2
    assert passed.p_value_speculative > 1e-3 and caught.p_value_speculative < 1e-6
    # What the lab drew under the mistake is the law whose distance was computed above.
    shown = [float(law[a, b]) for a, b in caught.shown]
    counts = torch.tensor([round(f * n) for f in caught.speculative], dtype=torch.double)
    assert chi_square.chi2_pvalue(counts, torch.tensor([*shown, 1 - sum(shown)])) > 1e-3
    first = chi_square.rule_distribution(P4, Q4, rule)
    assert float((first - P4).abs().max()) < 1e-12


def test_the_block_prefix_verdict_says_what_the_two_token_check_found(pair):
    """With block-prefix chosen the page never lets the first-token check vouch for it: caught
    at K = 2, it says the pairs do not follow p and that the first token proves nothing; at
    K = 1, that it cannot be caught there; missed at K = 2, that N or the temperature must rise."""
    config = parse_run(PROMPT, temperature=1.0)
    rule = RULES["block-prefix"]
    ex = exactness.measure(pair, config, 2_000, rule=rule, generator=make_generator(0, "cpu"))
    assert ex.tv_rule < 1e-12 and ex.p_value_speculative > 1e-3  # the first token looks right
    pairs = joint.measure_pairs(pair, encode(pair, config), config.sampling, 2_000,
                                make_generator(0, "cpu"), rule, k=2, judge="block")  # fmt: skip
    caught = exactness.markdown(ex, pairs)
    assert rule.label in caught and "judged as a whole block" in caught
    assert "do not follow p" in caught and "pairs (a, b) do not come out as often" in caught
    assert "proves nothing here" in caught and "first-token check cannot see this mistake" in caught
    assert "No departure" not in caught and "Too little power" not in caught
    at_one = exactness.markdown(ex, replace(pairs, k=1, p_value_speculative=0.5))
    assert "Not caught at K = 1, and it cannot be" in at_one and "Set K to 2 or more" in at_one
    missed = exactness.markdown(ex, replace(pairs, p_value_speculative=0.5))
    assert "Not caught at this N" in missed and "raise N or the temperature" in missed
    for text in (at_one, missed):
        assert "do not follow p" not in text and "still wrong" in text
