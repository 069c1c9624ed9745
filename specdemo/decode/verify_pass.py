"""One round's verify pass: the target scores the round's rows, the rule judges them, and the
target's cache is rolled back to what was kept.

A round is a chain (the last emitted token and the k drafts) or a fishbone (``tree``: the chain
and siblings drawn from the draft's own q). Both run through the target's step object
(``steps``: eager, static or captured, the same logits up to rounding), which owns the
target's KV cache; the engine's loop (``engine.speculative_generate``) calls these once per
round.
"""

import torch

from specdemo.draft.drafters import Proposal
from specdemo.judge.sampling import EXACT, AcceptanceRule, logits_to_probs, pad_vocab
from specdemo.judge.traversal import traverse
from specdemo.judge.tree import Fishbone, draw_siblings
from specdemo.judge.tree import judge as judge_tree
from specdemo.judge.verify import Verdict, verify, verify_greedy
from specdemo.runtime.lm import Stopwatch


def check_draft(draft: list[int], vocab: int) -> list[int]:
    """Draft ids must be ids the target can score; raise before the target sees them."""
    bad = [t for t in draft if not 0 <= t < vocab]
    if bad and min(bad) < 0:
        raise ValueError("the draft sampled from an invalid distribution (all zero or not finite)")
    if bad:
        raise ValueError(
            f"the draft proposed token id {bad[0]}, outside the target's vocabulary of {vocab:,}: "
            "target and draft must share a tokenizer"
        )
    return draft


def verify_round(
    runner,
    last: int,
    proposal: Proposal,
    sampling,
    generator,
    rule: AcceptanceRule = EXACT,
    judge: str = "token",
) -> Verdict:
    """The target (its step object `runner`) scores the last emitted token and the k drafts in
    one pass, the acceptance rule judges the drafts (token by token, or as a block: `judge`),
    and the cache drops the rejected ones."""
    device = runner.model.device
    draft = proposal.tokens.to(device)
    feed = torch.cat([torch.tensor([last], device=device), draft])
    logits = timed_verify(runner, feed)  # (k+1, vocab)
    if sampling.greedy:
        verdict = verify_greedy(draft, logits)
    else:
        q = proposal.q.to(device) if proposal.q is not None else None
        verdict = verify(draft, q, logits_to_probs(logits, sampling), generator, rule, judge)
    runner.crop(len(draft) - verdict.n_accepted)
    return verdict


def sprout(proposal: Proposal, width: int, generator) -> Fishbone | None:
    """The round's fishbone with up to `width` - 1 siblings at each depth: a copy's own, where it
    has them (``Proposal.siblings``: other tokens that followed its match, fixed, judged with
    one-hot q, at any temperature); else drawn from the draft's own q there without replacement
    (no extra draft pass); None when no depth gets one (a chain round: width 1, or a greedy or
    copied draft without siblings, whose q is one-hot)."""
    if width < 2:
        return None
    if proposal.q is None:
        siblings = [list(group[: width - 1]) for group in proposal.siblings]
        return Fishbone(proposal.tokens.tolist(), siblings) if any(siblings) else None
    chain = proposal.tokens.tolist()
    siblings = [
        draw_siblings(q, x, width, generator) for q, x in zip(proposal.q, chain, strict=True)
    ]
    return Fishbone(chain, siblings) if any(siblings) else None


def verify_tree_round(runner, last: int, tree: Fishbone, q, sampling, generator, judge="token"):
    """The target (its step object `runner`) scores the root and every node of `tree` in one
    pass (a tree mask: ``lm.tree_forward``), ``tree.judge`` walks it (root to leaf, or leaf to
    root as a block: `judge`), and the cache keeps the prefix and the kept path. Returns the
    ``tree.TreeVerdict``."""
    logits = timed_verify(runner, [last, *tree.tokens], tree.parents)  # (rows, vocab)
    if q is None:  # a copied tree: its children fixed, each judged with a one-hot q
        verdict = judge_tree(tree, logits_to_probs(logits, sampling), None, generator)
        runner.keep(verdict.rows)
        return verdict
    vocab = max(logits.shape[-1], q.shape[-1])
    p = pad_vocab(logits_to_probs(logits, sampling), vocab)
    walk = traverse if judge == "block" else judge_tree
    verdict = walk(tree, p, pad_vocab(q.to(runner.model.device), vocab), generator)
    runner.keep(verdict.rows)
    return verdict


def timed_verify(runner, tokens, parents=None):
    """``runner.verify(tokens, parents)``, its seconds alone kept as ``runner.pass_time`` for the
    round's record and automatic K's load (the same passes its profile timed, without the judge);
    0 where the pass captured a CUDA graph (``steps.StaticStep.capture``): a capture,
    not a pass."""
    captured = getattr(runner, "capture_seconds", 0.0)
    clock = Stopwatch(runner.model.device)
    logits = runner.verify(tokens, parents)
    seconds = clock.lap()
    runner.pass_time = 0.0 if getattr(runner, "capture_seconds", 0.0) != captured else seconds
    return logits
