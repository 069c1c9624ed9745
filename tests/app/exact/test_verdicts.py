"""What Is it exact? says: one marked verdict line with its χ² p-values, then the details, which
never claim more than the check showed; the two-token line names the settings it ran with."""

from dataclasses import replace

import pytest
import torch
from conftest import PROMPT

from specdemo.app.config import encode, parse_run
from specdemo.app.exact import chi_square, exactness, joint, verdicts
from specdemo.decode.engine import make_generator
from specdemo.judge.sampling import RULES

P4 = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.double)
Q4 = torch.tensor([0.2, 0.5, 0.2, 0.1], dtype=torch.double)
PAIRS = joint.JointExactness(labels=[], p=[], speculative=[], direct=[], n=100,
                             tv_speculative=0.0, tv_direct=0.0, p_value_speculative=0.61,
                             p_value_direct=0.5, first_tokens=1, k=2, judge="token")  # fmt: skip


def measured(rule: str, p_value: float, n: int = 100, **changes) -> exactness.Exactness:
    """The first token's figures as ``measure`` would give them, P4 against Q4 under `rule`."""
    other = chi_square.rule_distribution(P4, Q4, RULES[rule])
    ex = exactness.Exactness(
        labels=["a", "(other)"], tokens=[0], p=[0.5, 0.5], speculative=[0.5, 0.5],
        direct=[0.5, 0.5], n=n, tv_speculative=0.01, tv_direct=0.01,
        p_value_speculative=p_value, p_value_direct=0.5, first_accept=0.6, rule=rule,
        detectable_tv=chi_square.detectable_tv(P4, n),
        tv_rule=0.5 * float((other - P4).abs().sum()), power_rule=chi_square.power(P4, other, n),
    )  # fmt: skip
    return replace(ex, **changes)


def verdict_for(rule: str, p_value: float, n: int = 100) -> str:
    return verdicts.markdown(measured(rule, p_value, n))


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
    assert "something in the path is wrong" in impossible and "false alarm" not in impossible
    ex = measured("exact", 0.5, detectable_tv=float("inf"), power_rule=0.0)
    flat = verdicts.markdown(ex)
    assert "inf" not in flat and "could not see any departure: raise N" in flat
    alarm = verdicts.verdict(
        replace(ex, detectable_tv=0.1), True, replace(PAIRS, p_value_speculative=1e-4)
    )
    assert "each of the 2 χ² tests" in alarm.details and "about 2 in 1,000 checks" in alarm.details
    missed = verdict_for("resample-from-p", 0.2, n=5_000)
    assert "power_rule" not in missed and "Too little power" not in missed
    assert "Not caught this time, though this N has the power for it" in missed


# Each case's verdict line: its mark, then the claim in words, then the χ² p-values.
LINES = [
    ("exact", 0.42, PAIRS, "✓ **No departure from p found** (first token χ² p = 0.420; first "
     "two tokens p = 0.610)"),
    ("resample-from-p", 1e-9, PAIRS, "✗ **Not exact: the speculative draws do not follow p** "
     "(first token χ² p < 0.000001; first two tokens p = 0.610)"),
    ("exact", 0.0, PAIRS, "✗ **Not exact: something in the path is wrong** (first token χ² "
     "p < 0.000001; first two tokens p = 0.610)"),
    ("exact", 4.2e-4, PAIRS, "? **A false alarm, most likely: run it again with another seed** "
     "(first token χ² p = 0.000420; first two tokens p = 0.610)"),
    ("exact", 0.42, None, "✓ **No departure from p found** (first token χ² p = 0.420)"),
    ("resample-from-p", 0.2, None, "– **Too little power here to see this mistake: raise N or "
     "the temperature** (first token χ² p = 0.200)"),
    ("block-prefix", 0.42, None, "– **Not checked where it goes wrong** (first token χ² "
     "p = 0.420)"),
    ("block-prefix", 0.42, replace(PAIRS, p_value_speculative=1e-7), "✗ **Not exact: the "
     "speculative draws do not follow p** (first token χ² p = 0.420; first two tokens "
     "p < 0.000001)"),
    ("block-prefix", 0.42, replace(PAIRS, k=1), "– **Not caught at K = 1, and it cannot be: set "
     "K to 2 or more** (first token χ² p = 0.420; first two tokens p = 0.610)"),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "p_value", "pairs", "line"), LINES)
def test_the_verdict_comes_first_in_one_marked_line_with_its_p_values(rule, p_value, pairs, line):
    text = verdicts.markdown(measured(rule, p_value), pairs)
    first, blank, *details = text.split("\n")
    assert first == line and blank == ""
    # The mark opens the first line alone: the details that follow carry none.
    assert not any(row.startswith(tuple(verdicts.MARKS.values())) for row in details)


def test_every_mark_has_words_and_a_check_that_tested_nothing_has_its_own():
    """The marks tell four outcomes apart, and each comes with a claim that says it in words: a
    missed mistake at full power asks for another run (?), and a first token that could not be
    tested, for more draws (–), never the pass mark."""
    missed = verdict_for("resample-from-p", 0.2, n=5_000).split("\n")[0]
    assert missed.startswith("? **Not caught this time")
    flat = verdicts.markdown(measured("exact", 1.0, detectable_tv=float("inf"))).split("\n")[0]
    assert flat == "– **Too few draws to test the first token: raise N** (first token χ² p = 1.000)"
    assert sorted(verdicts.MARKS.values()) == sorted("✓✗?–")


def test_a_p_value_is_never_shown_as_zero_or_in_exponents():
    assert [verdicts.pvalue(v) for v in (0.4213, 1e-3, 4.2e-4, 1e-6, 3e-7, 0.0)] == [
        "0.421", "0.001", "0.000420", "0.000001", "< 0.000001", "< 0.000001"]  # fmt: skip
    assert verdicts.equals(0.5) == "= 0.500" and verdicts.equals(0.0) == "< 0.000001"


def test_the_two_token_line_states_the_settings_it_ran_with():
    """K as set (automatic K: checked at K = 2), the tree width when a tree, temperature, top-p
    and seed sit in the two-token line beside N and the judge, so a screenshot explains itself."""

    def two_tokens(config, **changes) -> str:
        text = verdicts.markdown(measured("exact", 0.42, **changes), PAIRS, config)
        return next(row for row in text.split("\n") if row.startswith("**First two tokens"))

    line = two_tokens(parse_run(PROMPT, k=5, temperature=0.8, top_p=0.9, seed=7))
    assert line.startswith(
        "**First two tokens, 100 draws each** (K = 5, temperature 0.8, top-p 0.9, seed 7), "
        "rounds of K = 2 judged token by token ("
    )
    line = two_tokens(parse_run(PROMPT, k=3, temperature=1.0, tree_width=3), width=3)
    tree = "(K = 3, tree width 3, temperature 1, top-p off, seed 0), rounds of K = 2, chains"
    assert tree in line
    line = two_tokens(parse_run(PROMPT, auto_k=True, temperature=1.0))
    assert "(automatic K, checked at K = 2, temperature 1, top-p off, seed 0)" in line
    alone = verdicts.markdown(measured("exact", 0.42), None, parse_run(PROMPT, temperature=1.0))
    assert "**First token, 100 draws each** (K = " in alone


def test_a_mistaken_rule_at_low_power_is_told_apart_from_a_pass(pair):
    """Through ``measure`` on the tiny pair: "resample from p" with 100 draws at T = 1 moves
    the first token by 0.14, which 100 draws catch 3% of the time (computed); this run did not
    catch it, and the page says it had too little power rather than calling the draws exact.
    At 20,000 draws the same mistake is caught (test_each_mistaken_rule_fails_both_checks)."""
    config = parse_run(PROMPT, temperature=1.0)
    ex = exactness.measure(pair, config, 100, rule=RULES["resample-from-p"])
    assert 0.1 < ex.tv_rule < ex.detectable_tv and ex.power_rule < 0.1
    assert ex.p_value_speculative >= chi_square.SUSPICIOUS
    text = verdicts.markdown(ex)
    assert "Too little power here to see this mistake" in text and "No departure" not in text
    assert text.startswith("– ")


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
    caught = verdicts.markdown(ex, pairs)
    assert caught.startswith("✗ ") and rule.label in caught and "judged as a whole block" in caught
    assert "do not follow p" in caught and "pairs (a, b) do not come out as often" in caught
    assert "proves nothing here" in caught and "first-token check cannot see this mistake" in caught
    assert "No departure" not in caught and "Too little power" not in caught
    at_one = verdicts.markdown(ex, replace(pairs, k=1, p_value_speculative=0.5, tv_rule=0.0))
    assert "Not caught at K = 1, and it cannot be" in at_one and "set K to 2 or more" in at_one
    unseen = replace(pairs, p_value_speculative=0.5, power_rule=0.2)
    weak = verdicts.markdown(ex, unseen)
    assert "Not caught at this N" in weak and "raise N or the temperature" in weak
    assert "catch this rule with 20% probability" in weak
    for text in (at_one, weak):
        assert "do not follow p" not in text and "still wrong" in text and text.startswith("– ")
    # Missed where this N catches it with more than 99%: another run, never a lack of power.
    missed = verdicts.markdown(ex, replace(pairs, p_value_speculative=0.5))
    assert missed.startswith("? **Not caught this time, though this N has the power for it")
    assert "one of the other less than 1%" in missed and "still wrong" in missed
    # Where the rule's first token can be too many tokens to pay rows for, the line says so.
    uncounted = verdicts.markdown(ex, replace(pairs, p_value_speculative=0.5, tv_rule=None))
    assert "distance from p(a)·p(b | a) is not computed here" in uncounted
    assert uncounted.startswith("– **Not caught at this N") and "not computed" in uncounted


def test_the_greedy_note_blames_rounding_only_for_a_near_tie():
    tie = exactness.GreedyCheck(False, 10, 3, "a", "b", verdicts.NEAR_TIE / 10)
    note = verdicts.greedy_markdown(tie, 4, "fp16")
    assert "close enough to a tie" in note and "not explained by rounding" not in note
    wide = exactness.GreedyCheck(False, 10, 3, "a", "b", 3.5)
    note = verdicts.greedy_markdown(wide, 4, "fp16")
    assert "part at new token 4" in note and "**3.5000**" in note
    assert "not explained by rounding" in note and "worth reporting" in note
    assert "close enough to a tie" not in note


def check_lines(text: str) -> tuple[str, str]:
    """The first-token line and the two-token line of a verdict."""
    rows = text.split("\n")
    return (
        next(row for row in rows if row.startswith("**First token")),
        next(row for row in rows if row.startswith("**First two tokens")),
    )


@pytest.mark.parametrize("temperature", [0.1, 1.0])
@pytest.mark.parametrize("n", [100, 200])
@pytest.mark.parametrize("name", list(RULES))
def test_every_check_states_what_its_n_could_catch_and_the_mistakes_own_distance(
    pair, name, n, temperature
):
    """Whatever the rule, N and outcome, the first-token line and the two-token line each say
    the smallest departure their N catches with 95% probability (``chi_square.detectable_tv``
    over that check's bins), or that it could test nothing; under a mistake, each also says
    how far the rule itself moves that check's law from p, computed, and the two-token line
    names the judge the rule really ran (block-prefix judges a block under either setting)."""
    config = parse_run(PROMPT, k=2, temperature=temperature)
    rule = RULES[name]
    ex = exactness.measure(pair, config, n, rule=rule, generator=make_generator(0, "cpu"))
    pairs = joint.measure_pairs(pair, encode(pair, config), config.sampling, n,
                                make_generator(0, "cpu"), rule, k=2)  # fmt: skip
    first, second = check_lines(verdicts.markdown(ex, pairs, config))
    for line, check in ((first, ex), (second, pairs)):
        reach = f"total variation {check.detectable_tv:.3f} or more; smaller ones it cannot see"
        assert reach in line or "could not see any departure: raise N" in line
        assert "95% probability" in line or "could not see any departure" in line
    if name == "exact":
        assert "This rule moves" not in first + second
        return
    assert pairs.tv_rule is not None and 0.0 <= pairs.tv_rule <= 1.0
    moves = verdicts.distance(ex.tv_rule)
    assert f"moves the first token {moves} from p in total variation" in first
    moves = verdicts.distance(pairs.tv_rule)
    assert f"first two tokens {moves} from p(a)·p(b | a) in total variation" in second
    judged = "judged as a whole block" if rule.block_prefix else "judged token by token"
    assert judged in second


def test_the_block_prefix_verdict_at_small_n_states_both_checks_reach_and_its_distance(pair):
    """The block-prefix mistake at N = 100 on the tiny pair at T = 1, judge set to token by
    token: its rounds are judged as a block, and the two-token line says so; it says the
    smallest two-token departure 100 draws catch and the rule's own two-token distance
    (0.14, computed), with the chance of catching it, so a pass reads as too little power."""
    config = parse_run(PROMPT, k=2, temperature=1.0)
    rule = RULES["block-prefix"]
    ex = exactness.measure(pair, config, 100, rule=rule, generator=make_generator(0, "cpu"))
    pairs = joint.measure_pairs(pair, encode(pair, config), config.sampling, 100,
                                make_generator(0, "cpu"), rule, k=2, judge="token")  # fmt: skip
    assert pairs.judge == "block" and 0.1 < pairs.tv_rule < pairs.detectable_tv
    text = verdicts.markdown(ex, replace(pairs, p_value_speculative=0.5), config)
    _, second = check_lines(text)
    assert "judged token by token" not in second and "judged as a whole block" in second
    assert f"departure from p(a)·p(b | a) of total variation {pairs.detectable_tv:.3f}" in second
    assert f"moves the first two tokens {pairs.tv_rule:.3f} from p(a)·p(b | a)" in second
    assert f"catch with {verdicts.chance(pairs.power_rule)} probability" in second
    assert text.startswith("– **Not caught at this N: raise N or the temperature**")
    assert f"catch this rule with {verdicts.chance(pairs.power_rule)} probability" in text
