"""The live exactness check: does the speculative path sample the target's distribution?

``measure`` draws the next token N times through the accept/resample rule (the exact one, or one
of the classic mistakes in ``sampling.RULES``) and N times straight from p, and compares both with
p computed in one forward pass (histograms, total variation, χ²); ``joint.measure_pairs`` does
the same for the first two tokens; ``greedy_check`` runs both ways at temperature 0 and compares
the token ids. ``verdicts`` puts what they found into words.
"""

from dataclasses import dataclass, replace

import torch

from specdemo.app.config import RunConfig, encode
from specdemo.app.exact.chi_square import chi2_pvalue, detectable_tv, power, rule_distribution
from specdemo.app.generate.comparison import common_prefix
from specdemo.app.generate.race import last, run_speculative, run_target
from specdemo.decode.engine import make_generator
from specdemo.draft.drafters import drafter_head
from specdemo.judge.sampling import (
    EXACT,
    AcceptanceRule,
    SamplingConfig,
    logits_to_probs,
    pad_vocab,
)
from specdemo.judge.tree import tree_first_tokens
from specdemo.judge.verify import chain_first_tokens
from specdemo.runtime.lm import forward
from specdemo.text import token_labels, token_text

GREEDY_CHECK_TOKENS = 64


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
    # replacement (``tree.tree_first_tokens``); `kept` is the fraction of draws that kept one.
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
        speculative = chain_first_tokens(p, q, n, generator, rule).cpu()
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
