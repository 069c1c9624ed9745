"""The live exactness check: does the speculative path sample the target's distribution?

``measure`` draws the next token N times through the accept/resample rule (the exact one, or one
of the classic mistakes in ``sampling.RULES``) and N times straight from p, and compares both with
p computed in one forward pass (histograms, total variation, χ²); ``joint.measure_pairs`` does
the same for the first two tokens; ``greedy_check`` runs both ways at temperature 0 and compares
the token ids.
"""

import math
from dataclasses import dataclass, replace

import torch

from specdemo.app.config import RunConfig, encode
from specdemo.app.exact.chi_square import (
    POWER,
    SUSPICIOUS,
    chi2_pvalue,
    detectable_tv,
    power,
    rule_distribution,
)
from specdemo.app.generate.comparison import common_prefix
from specdemo.app.generate.race import last, run_speculative, run_target
from specdemo.drafters import drafter_head
from specdemo.engine import make_generator
from specdemo.lm import forward
from specdemo.sampling import (
    EXACT,
    RULES,
    AcceptanceRule,
    SamplingConfig,
    logits_to_probs,
    pad_vocab,
)
from specdemo.text import token_labels, token_text
from specdemo.tree import first_token_samples as tree_first_tokens
from specdemo.verify import first_token_samples

GREEDY_CHECK_TOKENS = 64
# A top-two logit margin below this is a near-tie: batched and one-token arithmetic can round it
# either way, so a greedy divergence there is rounding, not a bug.
NEAR_TIE = 0.25


@dataclass(frozen=True)
class Exactness:
    """N first tokens drawn through the accept/resample path and N drawn from p, against p."""

    labels: list[str]  # the most likely tokens, then "other"
    tokens: list[int]  # their ids (the "other" bar has none)
    p: list[float]  # exact target probability of each label
    speculative: list[float]  # frequency among the speculative draws
    direct: list[float]  # frequency among the direct draws
    n: int
    tv_speculative: float  # total-variation distance to p over the whole vocabulary
    tv_direct: float
    p_value_speculative: float  # χ² goodness of fit to p
    p_value_direct: float
    first_accept: float  # sum_x min(p, q): the chance the first draft token is kept
    rule: str = EXACT.name
    # What this N could see (``power``): any departure from p of at least `detectable_tv` (total
    # variation between the χ² bins) is caught with probability POWER; the rule's own first-token
    # distribution lies `tv_rule` from p (0 for the exact rule), caught with probability
    # `power_rule` at this N.
    detectable_tv: float = 0.0
    tv_rule: float = 0.0
    power_rule: float = 0.0
    # A tree round tries up to `width` guesses for the first token, drawn from q without
    # replacement (``tree.first_token_samples``); `kept` is the fraction of draws that kept one.
    width: int = 1
    kept: float | None = None


@torch.inference_mode()
def next_token_probs(model, ids: list[int], sampling: SamplingConfig, head=None) -> torch.Tensor:
    """(vocab,) warped distribution of the token after `ids`: one forward pass (through `head`,
    a ``lm.DraftHead``, instead of the model's output layer if given: 0 outside its rows)."""
    logits, _ = forward(model, ids, None, head=head)  # (1, vocab or the head's rows)
    probs = logits_to_probs(logits, sampling)
    return (probs if head is None else head.spread(probs))[0]


def measure(
    pair, config: RunConfig, n: int, top: int = 12, rule: AcceptanceRule = EXACT, generator=None
) -> Exactness:
    """n draws of the first new token through `rule` and n direct ones, against the exact p."""
    ids = encode(pair, config)
    p = next_token_probs(pair.target, ids, config.sampling)
    q = next_token_probs(pair.draft, ids, config.sampling, drafter_head(pair.draft, ids))
    generator = generator or make_generator(config.seed, p.device)
    vocab = max(p.shape[-1], q.shape[-1])
    width = config.tree_width
    kept = None
    if width > 1:  # the root of a tree round: its children judged by recursive rejection
        speculative, from_draft = tree_first_tokens(
            pad_vocab(p, vocab), pad_vocab(q, vocab), n, width, generator
        )
        speculative, kept = speculative.cpu(), from_draft.double().mean().item()
    else:
        speculative = first_token_samples(p, q, n, generator, rule).cpu()
    # torch's own sampler, independent of specdemo's, is the reference for "directly from p".
    direct = torch.multinomial(p, n, replacement=True, generator=generator).cpu()
    p, q = pad_vocab(p, vocab).double().cpu(), pad_vocab(q, vocab).double().cpu()
    p, q = p / p.sum(), q / q.sum()
    counts_s = torch.bincount(speculative, minlength=vocab).double()
    counts_d = torch.bincount(direct, minlength=vocab).double()
    order = torch.argsort(p, descending=True)[:top]
    order = order[p[order] > 0]
    ruled = rule_distribution(p, q, rule)

    def bars(dist: torch.Tensor) -> list[float]:
        shown = dist[order].tolist()
        return shown + [max(0.0, 1.0 - sum(shown))]  # the last bar: every other token

    return Exactness(
        labels=token_labels(pair.tokenizer, order.tolist()) + ["(other)"],
        tokens=order.tolist(),
        p=bars(p),
        speculative=bars(counts_s / n),
        direct=bars(counts_d / n),
        n=n,
        tv_speculative=0.5 * (counts_s / n - p).abs().sum().item(),
        tv_direct=0.5 * (counts_d / n - p).abs().sum().item(),
        p_value_speculative=chi2_pvalue(counts_s, p),
        p_value_direct=chi2_pvalue(counts_d, p),
        first_accept=torch.minimum(p, q).sum().item(),
        rule=rule.name,
        detectable_tv=detectable_tv(p, n),
        tv_rule=0.5 * (ruled - p).abs().sum().item(),
        power_rule=power(p, ruled, n),
        width=width,
        kept=kept,
    )


ROUNDS = {  # how the first two tokens of a draw come out, by K and judge (``joint.measure_pairs``)
    (1, "token"): "a kept draft earns the bonus from p",
    (1, "block"): "a kept draft earns the bonus from p; with one guess the two judges are one rule",
    (2, "token"): "both drafts judged; from K = 2 on, later drafts cannot change the first two "
    "tokens",
    (2, "block"): "both drafts judged as one block; from K = 2 on, later drafts can change which "
    "two tokens a round keeps, but under an exact judge not how often each pair comes out",
}


def markdown(ex: Exactness, joint=None) -> str:
    """The verdict on the first token (and the first two, given ``joint.JointExactness``) under
    the rule used, with the one sentence that says what that rule does. The first token is
    drawn one guess at a time, where the two judges are one rule; the first two are judged by
    ``joint.judge``."""
    rule = RULES[ex.rule]
    lines = [
        TREE_RULE if ex.width > 1 else f"**{rule.label}.** {rule.why}",
        "",
        f"**First token, {ex.n:,} draws each{tree_words(ex.width)}.** Total-variation "
        "distance to the exact p: "
        f"speculative **{ex.tv_speculative:.4f}**, direct **{ex.tv_direct:.4f}**. χ² goodness "
        f"of fit to p: speculative p-value **{pvalue(ex.p_value_speculative)}**, direct "
        f"**{pvalue(ex.p_value_direct)}**.",
    ]
    if joint is not None:
        chain = ", chains of one guess a position," if ex.width > 1 else ""
        lines += [
            "",
            f"**First two tokens, {joint.n:,} draws each**, rounds of K = {joint.k}{chain} "
            f"judged {JUDGED[joint.judge]} ({ROUNDS[joint.k, joint.judge]}; the joint "
            f"p(a)·p(b | a), {joint.first_tokens} distinct first tokens): speculative p-value "
            f"**{pvalue(joint.p_value_speculative)}**, direct **{pvalue(joint.p_value_direct)}**.",
        ]
    failed = min(ex.p_value_speculative, joint.p_value_speculative if joint else 1.0)
    lines += ["", verdict(ex, failed < SUSPICIOUS, joint, impossible=failed == 0.0)]
    return "\n".join(lines)


JUDGED = {"token": "token by token", "block": "as a whole block"}  # ``verify.JUDGES``, as adverbs


TREE_RULE = (
    "**Exact, over a tree: try the guesses in the order drawn, each kept with min(1, p/q), where "
    "q leaves out the guesses already tried and p is what the earlier rejections left, "
    "max(0, p − q) normalised; if none is kept, draw from what is left of p.** This is "
    "recursive rejection sampling without replacement; with one guess it is the chain's rule. "
    "The draws here use the rule's closed form, vectorised over all N at once "
    "(`tree.first_token_samples`), not the engine's walk of each tree; the tests check that "
    "form against the engine's own node rule, enumerated exactly, and run χ² on the engine's "
    "tree rounds."
)


def tree_words(width: int) -> str:
    return f", trees {width} guesses wide" if width > 1 else ""


def verdict(ex: Exactness, failed: bool, joint=None, impossible: bool = False) -> str:
    """What the check showed, for the rule used: a departure found; a false alarm of the exact
    rule (never when a draw was impossible under p, `impossible`: a p-value of 0); no departure
    of the size this N can see; a mistake this N has too little power to see, or one it had the
    power for and missed this time. A mistake whose first token follows p exactly (``tv_rule``
    0: the block-prefix rule, which is the exact rule with one guess) is for the two-token check
    at K ≥ 2 alone to catch (``blind_verdict``). Never more than a test that failed to reject
    can show."""
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
    reach = (
        f"With {ex.n:,} draws this check catches, with {POWER:.0%} probability, any departure "
        f"from p of total variation {ex.detectable_tv:.3f} or more; smaller ones it cannot see."
    )
    if not math.isfinite(ex.detectable_tv) or ex.detectable_tv > 1:
        reach = (
            f"With {ex.n:,} draws too few tokens are expected often enough to test (every one "
            "falls in one χ² bin), so this check could not see any departure: raise N."
        )
    exact = ex.rule == EXACT.name
    if not exact and ex.tv_rule < 1e-12:
        return blind_verdict(ex, joint)
    if failed and not exact:
        return (
            "**The speculative draws do not follow p** (a p-value this small is far beyond "
            "chance): this rule changes what the model says, not only how fast."
        )
    if failed and impossible:
        return (
            "**Something in the path is wrong.** A draw came out that the target gives "
            "probability 0 (a p-value of exactly 0): no chance explains that, with any N."
        )
    if failed:
        rate = f"below {SUSPICIOUS:g} by chance in 1 check in {round(1 / SUSPICIOUS):,}"
        chance = (
            f"each of the 2 χ² tests here falls {rate}, so about 2 in "
            f"{round(1 / SUSPICIOUS):,} checks end like this one"
            if joint is not None
            else f"a p-value falls {rate}, and this is one"
        )
        return (
            f"**A false alarm, most likely.** With the exact rule {chance}: run it again with "
            "another seed. A real departure fails again; chance does not. " + kept
        )
    if exact:
        return (
            f"**No departure from p found.** {kept} {reach} The exact rule's output follows p "
            "by proof; this check looked for a departure and found none that large."
        )
    if ex.power_rule >= POWER:
        return (
            "**Not caught this time, though this N has the power for it: run it again with "
            f"another seed.** This rule moves the first token {ex.tv_rule:.3f} from p in total "
            f"variation, and {ex.n:,} draws catch that with {ex.power_rule:.0%} probability; "
            f"this check was one of the other {1 - ex.power_rule:.0%}. This rule is still wrong."
        )
    return (
        "**Too little power here to see this mistake: raise N or the temperature.** This rule "
        f"moves the first token {ex.tv_rule:.3f} from p in total variation, and {ex.n:,} draws "
        f"catch that with only {ex.power_rule:.0%} probability. {reach} This rule is still wrong."
    )


def blind_verdict(ex: Exactness, joint=None) -> str:
    """The verdict on a mistake the first-token check cannot see: judged one guess at a time it
    is the exact rule, so only two guesses judged together (the two-token check at K ≥ 2) can
    show it."""
    first = (
        f"The first token alone looks right (p-value {pvalue(ex.p_value_speculative)}), and "
        "proves nothing here: drawn one guess at a time, this rule is the exact rule, so the "
        "first-token check cannot see this mistake whatever N."
    )
    if joint is None:
        return f"**Not checked where it goes wrong.** {first} Run the two-token check at K ≥ 2."
    found = pvalue(joint.p_value_speculative)
    if joint.p_value_speculative < SUSPICIOUS:
        return (
            "**The speculative draws do not follow p.** The two-token check finds that the "
            f"pairs (a, b) do not come out as often as p(a)·p(b | a) (p-value {found}, far "
            f"beyond chance). {first} This rule changes what the model says, not only how fast."
        )
    if joint.k < 2:
        return (
            f"**Not caught at K = 1, and it cannot be.** {first} With one guess a round the "
            "two-token check runs the exact rule too. Set K to 2 or more: two guesses judged "
            "together are where this rule goes wrong. This rule is still wrong."
        )
    return (
        f"**Not caught at this N.** {first} The two-token check, which can see it, found no "
        f"departure this time (p-value {found}): raise N or the temperature. This rule is still "
        "wrong."
    )


def pvalue(value: float) -> str:
    return f"{value:.3f}" if value >= SUSPICIOUS else f"{value:.1e}"


@dataclass(frozen=True)
class GreedyCheck:
    """Greedy speculative vs greedy target-only token ids, and where they part if they do."""

    identical: bool
    n_tokens: int
    first_difference: int | None = None
    speculative_token: str = ""
    target_token: str = ""
    margin: float | None = None  # the target's top-two logit gap where they part


def greedy_check(pair, config: RunConfig) -> GreedyCheck:
    """Greedy speculative decoding and the greedy target alone on the same prompt; where they
    part, the target's top-two logit margin there, from one target pass on the common prefix."""
    greedy = replace(
        config,
        temperature=0.0,
        top_p=None,
        top_k=None,
        max_new_tokens=GREEDY_CHECK_TOKENS,
        drafter="model",
        adaptive=False,
    )
    ids = encode(pair, greedy)
    spec = last(run_speculative(pair, greedy, ids)).tokens
    target = last(run_target(pair, greedy, ids)).tokens
    if spec == target:
        return GreedyCheck(identical=True, n_tokens=len(spec))
    i = common_prefix(spec, target)
    with torch.inference_mode():
        logits, _ = forward(pair.target, ids + target[:i], None)  # (1, vocab)
    top2 = torch.topk(logits[-1].float(), 2).values.tolist()
    return GreedyCheck(
        identical=False,
        n_tokens=min(len(spec), len(target)),
        first_difference=i,
        speculative_token=token_text(pair.tokenizer, spec[i]) if i < len(spec) else "(end)",
        target_token=token_text(pair.tokenizer, target[i]) if i < len(target) else "(end)",
        margin=top2[0] - top2[1],
    )


def greedy_markdown(check: GreedyCheck, k: int | str, precision: str) -> str:
    """The verdict; a divergence is blamed on rounding only when the measured margin is a
    near-tie (below NEAR_TIE logits). `k` is an int or "auto"."""
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
