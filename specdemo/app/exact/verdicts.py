"""The words of Is it exact?: what each check found, in one line first, then the details.

``markdown`` opens with the verdict line (``headline``: a mark, the claim in words, the χ²
p-values it rests on), then says which rule ran and, for each check, what was compared at which
settings, the smallest departure its N catches (``reach``) and how far a mistake itself moves
its law (``first_moves``, ``pair_moves``), then why the verdict says what it says (``verdict``,
``blind_verdict``); ``greedy_markdown`` is the greedy check's verdict. A mark is never the
only cue: the words after it make the same claim (MARKS).
"""

import math
from dataclasses import dataclass

from specdemo.app.config import RunConfig
from specdemo.app.exact.chi_square import POWER, SUSPICIOUS
from specdemo.app.exact.exactness import Exactness, GreedyCheck
from specdemo.app.exact.joint import JointExactness
from specdemo.app.exact.pair_law import ROWS
from specdemo.judge.sampling import EXACT, RULES

MARKS = {  # the mark that opens a verdict line, by what the check showed
    "found": "✗",  # the draws do not follow p: a p-value far beyond chance, or a draw p gives 0
    "none": "✓",  # the exact rule, and no departure of the size this N sees (no proof of more)
    "again": "?",  # a result chance explains: a false alarm, or a mistake missed at full power
    "blind": "–",  # nothing decided: nothing tested, too little power, or not where it goes wrong
}
FLOOR = 1e-6  # smaller χ² p-values show as "< 0.000001": that far out, χ² sets no digits
# A top-two logit margin below this is a near-tie: batched and one-token arithmetic can round it
# either way, so a greedy divergence there is rounding, not a bug.
NEAR_TIE = 0.25


@dataclass(frozen=True)
class Verdict:
    """What a check showed: its mark (a key of MARKS), the claim in words, and why."""

    mark: str
    claim: str
    details: str


ROUNDS = {  # how the first two tokens of a draw come out, by K and judge (``joint.measure_pairs``)
    (1, "token"): "a kept draft earns the bonus from p",
    (1, "block"): "a kept draft earns the bonus from p; with one guess the two judges are one rule",
    (2, "token"): "both drafts judged; from K = 2 on, later drafts cannot change the first two "
    "tokens",
    (2, "block"): "both drafts judged as one block; from K = 2 on, later drafts can change which "
    "two tokens a round keeps, but under an exact judge not how often each pair comes out",
}
JUDGED = {"token": "token by token", "block": "as a whole block"}  # ``verify.JUDGES``, as adverbs
TREE_RULE = (
    "**Exact, over a tree: try the guesses in the order drawn, each kept with min(1, p/q), where "
    "q leaves out the guesses already tried and p is what the earlier rejections left, "
    "max(0, p − q) normalised; if none is kept, draw from what is left of p.** This is "
    "recursive rejection sampling without replacement; with one guess it is the chain's rule. "
    "The draws here use the rule's closed form, vectorised over all N at once "
    "(`tree.tree_first_tokens`), not the engine's walk of each tree; the tests check that "
    "form against the engine's own node rule, enumerated exactly, and run χ² on the engine's "
    "tree rounds."
)


def markdown(
    ex: Exactness, joint: JointExactness | None = None, config: RunConfig | None = None
) -> str:
    """The verdict line, then the rule used and the one sentence that says what it does, the
    first token's figures, the first two tokens' (given ``joint.JointExactness``) with the
    settings both ran with (`config`), and why the verdict says what it says. The first token
    is drawn one guess at a time, where the two judges are one rule; the first two are judged
    by ``joint.judge``."""
    rule = RULES[ex.rule]
    failed = min(ex.p_value_speculative, joint.p_value_speculative if joint else 1.0)
    found = verdict(ex, failed < SUSPICIOUS, joint, impossible=failed == 0.0)
    ran = f" ({settings(config)})" if config is not None else ""
    lines = [
        headline(found, ex, joint),
        "",
        TREE_RULE if ex.width > 1 else f"**{rule.label}.** {rule.why}",
        "",
        f"**First token, {ex.n:,} draws each{tree_words(ex.width)}**"
        f"{'' if joint is not None else ran}. Total-variation distance to the exact p: "
        f"speculative **{ex.tv_speculative:.4f}**, direct **{ex.tv_direct:.4f}**. χ² goodness "
        f"of fit to p: speculative p-value **{pvalue(ex.p_value_speculative)}**, direct "
        f"**{pvalue(ex.p_value_direct)}**. {reach(ex.n, ex.detectable_tv, 'p')}"
        + ("" if ex.rule == EXACT.name else f" {first_moves(ex)}"),
    ]
    if joint is not None:
        chain = ", chains of one guess a position," if ex.width > 1 else ""
        own = ", this rule's own judge whatever the Judge setting" if rule.block_prefix else ""
        lines += [
            "",
            f"**First two tokens, {joint.n:,} draws each**{ran}, rounds of K = {joint.k}{chain} "
            f"judged {JUDGED[joint.judge]}{own} ({ROUNDS[joint.k, joint.judge]}; the joint "
            f"p(a)·p(b | a), {joint.first_tokens} distinct first tokens): speculative p-value "
            f"**{pvalue(joint.p_value_speculative)}**, direct **{pvalue(joint.p_value_direct)}**. "
            f"{reach(joint.n, joint.detectable_tv, 'p(a)·p(b | a)', 'pairs')}"
            + ("" if ex.rule == EXACT.name else f" {pair_moves(joint)}"),
        ]
    return "\n".join([*lines, "", found.details])


def headline(found: Verdict, ex: Exactness, joint: JointExactness | None = None) -> str:
    """The verdict in one line: its mark, its claim, and the speculative draws' χ² p-values."""
    tested = f"first token χ² p {equals(ex.p_value_speculative)}"
    if joint is not None:
        tested += f"; first two tokens p {equals(joint.p_value_speculative)}"
    return f"{MARKS[found.mark]} **{found.claim}** ({tested})"


def settings(config: RunConfig) -> str:
    """The settings a check ran with, as a screenshot needs them: K (automatic K is checked at
    its first rounds, K = 2), the tree width when a tree, the sampling, and the seed."""
    parts = ["automatic K, checked at K = 2" if config.k == "auto" else f"K = {config.k}"]
    if config.tree_width > 1:
        parts.append(f"tree width {config.tree_width}")
    parts.append(f"temperature {config.temperature:g}")
    parts.append("top-p off" if config.top_p is None else f"top-p {config.top_p:g}")
    if config.top_k is not None:
        parts.append(f"top-k {config.top_k}")
    return ", ".join([*parts, f"seed {config.seed}"])


def reach(n: int, detectable: float, exact: str, outcomes: str = "tokens") -> str:
    """What a check of n draws could see: the smallest departure from `exact` it catches with
    probability POWER (``chi_square.detectable_tv``), or that it could test nothing."""
    if not math.isfinite(detectable) or detectable > 1:
        return (
            f"With {n:,} draws too few {outcomes} are expected often enough to test (every one "
            "falls in one χ² bin), so this check could not see any departure: raise N."
        )
    return (
        f"With {n:,} draws this check catches, with {POWER:.0%} probability, any departure from "
        f"{exact} of total variation {detectable:.3f} or more; smaller ones it cannot see."
    )


def chance(power: float) -> str:
    """A computed power in words, never rounded to certainty or to nothing."""
    if power > 0.99:
        return "more than 99%"
    return "less than 1%" if power < 0.01 else f"{power:.0%}"


def distance(tv: float) -> str:
    """A rule's computed total variation from p: three decimals, a bound below them."""
    return "less than 0.001" if 1e-12 < tv < 0.0005 else f"{tv:.3f}"


def missed(power: float) -> str:
    """The chance a check misses what it catches with probability `power`, in words."""
    return "less than 1%" if power > 0.99 else f"{1 - power:.0%}"  # never "0%"


def first_moves(ex: Exactness) -> str:
    """A mistaken rule's own first-token distance from p (``chi_square.rule_distribution``)."""
    if ex.tv_rule < 1e-12:
        return (
            "This rule moves the first token 0.000 from p in total variation (computed from p "
            "and q): drawn one guess at a time it is the exact rule."
        )
    return (
        f"This rule moves the first token {distance(ex.tv_rule)} from p in total variation "
        f"(computed from p and q), which {ex.n:,} draws catch with {chance(ex.power_rule)} "
        "probability."
    )


def pair_moves(joint: JointExactness) -> str:
    """A mistaken rule's own distance from the exact joint over two tokens (``pair_law``)."""
    if joint.tv_rule is None:
        return (
            "This rule's distance from p(a)·p(b | a) is not computed here: its first token can "
            "be more different tokens than this machine pays a pass of both models for (at most "
            f"{ROWS:,}); lower the temperature or top-p to have it computed."
        )
    if joint.tv_rule < 1e-12:
        return (
            f"At K = {joint.k} this rule moves the first two tokens 0.000 from p(a)·p(b | a) in "
            "total variation (computed from both models' rows): with one guess a round it is "
            "the exact rule."
        )
    return (
        f"This rule moves the first two tokens {distance(joint.tv_rule)} from p(a)·p(b | a) in "
        "total variation (computed from both models' rows after each first token it can give), "
        "which "
        f"{joint.n:,} draws catch with {chance(joint.power_rule)} probability."
    )


def tree_words(width: int) -> str:
    return f", trees {width} guesses wide" if width > 1 else ""


def verdict(
    ex: Exactness, failed: bool, joint: JointExactness | None = None, impossible: bool = False
) -> Verdict:
    """What the check showed, for the rule used: a departure found; a false alarm of the exact
    rule (never when a draw was impossible under p, `impossible`: a p-value of 0); no departure
    of the size this N can see; nothing tested; a mistake this N has too little power to see,
    or one it had the power for and missed this time. A mistake whose first token follows p
    exactly (``tv_rule`` 0: the block-prefix rule, which is the exact rule with one guess) is
    for the two-token check at K ≥ 2 alone to catch (``blind_verdict``). Never more than a test
    that failed to reject can show."""
    kept = (
        f"The draft's first token is kept with probability Σ min(p, q) = {ex.first_accept:.2f}; "
        "the rest of the time the target resamples from the residual max(0, p − q)."
    )
    if ex.kept is not None:
        kept = (
            f"Each draw tried up to {ex.width} of the draft's guesses for the first token, drawn "
            f"from q without replacement: one was kept in {ex.kept:.0%} of the draws, where the "
            f"first guess alone is kept with probability Σ min(p, q) = {ex.first_accept:.2f}; "
            "the rest of the time the target draws from what is left of p."
        )
    untested = not math.isfinite(ex.detectable_tv) or ex.detectable_tv > 1
    exact = ex.rule == EXACT.name
    if not exact and ex.tv_rule < 1e-12:
        return blind_verdict(ex, joint)
    if failed and not exact:
        return Verdict(
            "found",
            "Not exact: the speculative draws do not follow p",
            "A p-value this small is far beyond chance: this rule changes what the model says, "
            "not only how fast.",
        )
    if failed and impossible:
        return Verdict(
            "found",
            "Not exact: something in the path is wrong",
            "A draw came out that the target gives probability 0 (a p-value of exactly 0): no "
            "chance explains that, with any N.",
        )
    if failed:
        rate = f"below {SUSPICIOUS:g} by chance in 1 check in {round(1 / SUSPICIOUS):,}"
        alarms = (
            f"each of the 2 χ² tests here falls {rate}, so about 2 in "
            f"{round(1 / SUSPICIOUS):,} checks end like this one"
            if joint is not None
            else f"a p-value falls {rate}, and this is one"
        )
        return Verdict(
            "again",
            "A false alarm, most likely: run it again with another seed",
            f"With the exact rule {alarms}. A real departure fails again; chance does not. {kept}",
        )
    if exact and untested:
        return Verdict(
            "blind",
            "Too few draws to test the first token: raise N",
            f"{kept} The exact rule's output follows p by proof; at this N the check could not "
            "look for a departure.",
        )
    if exact:
        return Verdict(
            "none",
            "No departure from p found",
            f"{kept} The exact rule's output follows p by proof; this check looked for a "
            "departure of the size above and found none, which shows no more than that.",
        )
    power = ex.power_rule
    if joint is not None and joint.tv_rule:
        power = max(power, joint.power_rule)
    if power >= POWER:
        return Verdict(
            "again",
            "Not caught this time, though this N has the power for it: run it again with "
            "another seed",
            f"At this N the checks catch this rule with {chance(power)} probability (the "
            f"distances above); this run was one of the other {missed(power)}. This rule is "
            "still wrong.",
        )
    return Verdict(
        "blind",
        "Too little power here to see this mistake: raise N or the temperature",
        f"At this N the checks catch this rule with {chance(power)} probability (the "
        "distances above), so passing them shows nothing about it. This rule is still wrong.",
    )


def blind_verdict(ex: Exactness, joint: JointExactness | None = None) -> Verdict:
    """The verdict on a mistake the first-token check cannot see: judged one guess at a time it
    is the exact rule, so only two guesses judged together (the two-token check at K ≥ 2) can
    show it."""
    first = (
        f"The first token alone looks right (p-value {pvalue(ex.p_value_speculative)}), and "
        "proves nothing here: drawn one guess at a time, this rule is the exact rule, so the "
        "first-token check cannot see this mistake whatever N."
    )
    if joint is None:
        return Verdict(
            "blind", "Not checked where it goes wrong", f"{first} Run the two-token check at K ≥ 2."
        )
    found = pvalue(joint.p_value_speculative)
    if joint.p_value_speculative < SUSPICIOUS:
        return Verdict(
            "found",
            "Not exact: the speculative draws do not follow p",
            "The two-token check finds that the pairs (a, b) do not come out as often as "
            f"p(a)·p(b | a) (p-value {found}, far beyond chance). {first} This rule changes what "
            "the model says, not only how fast.",
        )
    if joint.k < 2:
        return Verdict(
            "blind",
            "Not caught at K = 1, and it cannot be: set K to 2 or more",
            f"{first} With one guess a round the two-token check runs the exact rule too; two "
            "guesses judged together are where this rule goes wrong. This rule is still wrong.",
        )
    if joint.tv_rule is not None and joint.power_rule >= POWER:
        return Verdict(
            "again",
            "Not caught this time, though this N has the power for it: run it again with "
            "another seed",
            f"{first} The two-token check, which can see it, found no departure this time "
            f"(p-value {found}), though {joint.n:,} draws catch this rule with "
            f"{chance(joint.power_rule)} probability; this run was one of the other "
            f"{missed(joint.power_rule)}. This rule is still wrong.",
        )
    odds = (
        "its chance at this N is not computed (see above)"
        if joint.tv_rule is None
        else f"{joint.n:,} draws catch this rule with {chance(joint.power_rule)} probability"
    )
    return Verdict(
        "blind",
        "Not caught at this N: raise N or the temperature",
        f"{first} The two-token check, which can see it, found no departure this time (p-value "
        f"{found}), and {odds}, so passing it shows nothing about this rule. This rule is still "
        "wrong.",
    )


def pvalue(value: float) -> str:
    """A χ² p-value as shown: three decimals, six below SUSPICIOUS, and a bound below FLOOR."""
    if value >= SUSPICIOUS:
        return f"{value:.3f}"
    return f"{value:.6f}" if value >= FLOOR else f"< {FLOOR:f}"


def equals(value: float) -> str:
    """A p-value as it follows "p": "= 0.420", or "< 0.000001" below FLOOR."""
    shown = pvalue(value)
    return shown if shown.startswith("<") else f"= {shown}"


def greedy_markdown(check: GreedyCheck, k: int | str, precision: str) -> str:
    """The greedy check's verdict; a divergence is blamed on rounding only when the measured
    margin is a near-tie (below NEAR_TIE logits). `k` is an int or "auto"."""
    positions = f"K + 1 = {k + 1} positions" if isinstance(k, int) else "K + 1 positions"
    if check.identical:
        return (
            f"**Greedy check: identical.** With temperature 0, speculative decoding (K = {k}) "
            f"and the target alone produced the same {check.n_tokens} token ids."
        )
    parted = (
        f"**Greedy check: they part at new token {check.first_difference + 1}** — speculative "
        f"chose `{check.speculative_token}`, the target alone `{check.target_token}`."
    )
    if check.margin < NEAR_TIE:
        return (
            f"{parted} This is arithmetic, not the acceptance rule: the verify pass computes "
            f"{positions} in one batched forward pass, and {precision} kernels can "
            "round differently from one-token steps. There the target's top two logits differ "
            f"by only {check.margin:.4f} (below {NEAR_TIE}), close enough to a tie for rounding "
            "to flip the argmax. After the first difference the contexts differ, so the rest "
            "follows."
        )
    return (
        f"{parted} There the target's top two logits differ by **{check.margin:.4f}**, far from "
        f"a tie (rounding in batched {precision} arithmetic flips only gaps below {NEAR_TIE}), "
        "so this divergence is **not explained by rounding**. It is worth reporting: either a "
        "real bug in the speculative path or a non-deterministic kernel."
    )
