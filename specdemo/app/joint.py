"""Exactness beyond the first token: the joint distribution of the first two new tokens.

Each draw's first token goes through one round's accept/resample step, exactly as in
``exactness.measure``; its second token comes from the next draft position judged against the
target's p given that first token, with the same rule. That holds whether the first draft was
kept (the round's second draft is judged next) or replaced (the next round drafts afresh after
it): either way a draft from q(· | first) meets p(· | first). Draws are grouped by their first
token, so each distinct first token costs one batched position of each model, not one pass per
draw; the exact joint is p(a) · p(b | a), from the same passes.
"""

import copy
from dataclasses import dataclass

import torch

from specdemo.app.exactness import MIN_EXPECTED, chi2_pvalue
from specdemo.lm import forward
from specdemo.sampling import (
    EXACT,
    AcceptanceRule,
    SamplingConfig,
    first_token_samples,
    logits_to_probs,
    pad_vocab,
)
from specdemo.text import token_text

BATCH = 64  # first tokens per batched forward pass
EXACT_FIRSTS = 8  # the most likely first tokens always get their second-token p, drawn or not


@dataclass(frozen=True)
class JointExactness:
    """n speculative and n direct (first, second) token pairs against the exact joint."""

    labels: list[str]  # "first·second" for the most likely pairs, then "other"
    p: list[float]
    speculative: list[float]
    direct: list[float]
    n: int
    tv_speculative: float  # over the shown bins
    tv_direct: float
    p_value_speculative: float  # χ² over every pair expected ≥ 5 times, the rest pooled
    p_value_direct: float
    first_tokens: int  # distinct first tokens: batched positions each model ran


@torch.inference_mode()
def probs_after(model, cache, firsts: list[int], sampling: SamplingConfig) -> torch.Tensor:
    """(len(firsts), vocab) warped distributions of the token after the prompt in `cache` and
    then a, for each first token a: one batched step, the prompt's cache copied per row."""
    grown = copy.deepcopy(cache)
    grown.batch_repeat_interleave(len(firsts))
    tokens = torch.tensor(firsts, dtype=torch.long, device=model.device)[:, None]
    out = model(input_ids=tokens, cache=grown, use_cache=True, logits_to_keep=1)
    return logits_to_probs(out.logits[:, -1], sampling)


@torch.inference_mode()
def measure_pairs(
    pair,
    ids: list[int],
    sampling: SamplingConfig,
    n: int,
    generator,
    rule: AcceptanceRule = EXACT,
    max_first_tokens: int | None = None,
) -> JointExactness:
    """n speculative and n direct draws of the first two new tokens, against the exact joint.
    Memory stays at one batch of rows whatever the number of distinct first tokens; their
    count, which sets the time, is refused above `max_first_tokens` (a ZeroGPU call's budget)
    right after the first draws, before any second-token pass."""
    (p1, target_cache), (q1, draft_cache) = (
        prompt_step(model, ids, sampling) for model in (pair.target, pair.draft)
    )
    vocab = max(p1.shape[-1], q1.shape[-1])
    first = {
        "speculative": first_token_samples(p1, q1, n, generator, rule),
        "direct": torch.multinomial(p1, n, replacement=True, generator=generator),
    }
    second = {name: torch.empty_like(draws) for name, draws in first.items()}
    p1 = pad_vocab(p1, vocab).double()
    p1 = p1 / p1.sum()
    # A pair expected MIN_EXPECTED times has a first token expected at least as often: each such
    # first token gets its second-token pass, drawn or not, so the χ² bins depend on p and n alone.
    often = (p1 * n >= MIN_EXPECTED).nonzero().view(-1)
    likely = torch.topk(p1, min(EXACT_FIRSTS, vocab)).indices
    firsts = torch.unique(torch.cat([*first.values(), likely, often])).tolist()
    if max_first_tokens is not None and len(firsts) > max_first_tokens:
        raise ValueError(
            f"The draws began with {len(firsts):,} different first tokens, more than the "
            f"{max_first_tokens:,} this Space's GPU budget pays a second-token pass for: lower "
            "the temperature or top-p, or N."
        )
    tested, candidates = [], []  # (codes a * vocab + b, exact probabilities) per first token
    for start in range(0, len(firsts), BATCH):
        batch = firsts[start : start + BATCH]
        p2 = pad_vocab(probs_after(pair.target, target_cache, batch, sampling), vocab)
        q2 = pad_vocab(probs_after(pair.draft, draft_cache, batch, sampling), vocab)
        for j, a in enumerate(batch):
            for name, draws in first.items():
                mask = draws == a
                count = int(mask.sum())
                if not count:
                    continue
                if name == "speculative":
                    second[name][mask] = first_token_samples(p2[j], q2[j], count, generator, rule)
                else:
                    second[name][mask] = torch.multinomial(p2[j], count, True, generator=generator)
            joint = p1[a] * p2[j].double() / p2[j].double().sum()  # p(a) p(b | a)
            kept = (joint * n >= MIN_EXPECTED).nonzero().view(-1)  # pairs with their own bin
            tested.append((a * vocab + kept, joint[kept]))
            top = torch.topk(joint, 12).indices
            candidates.append((a * vocab + top, joint[top]))
    codes = {name: first[name] * vocab + second[name] for name in first}
    return summarise(pair.tokenizer, vocab, n, codes, tested, candidates, len(firsts))


def prompt_step(model, ids: list[int], sampling: SamplingConfig):
    """The warped next-token distribution after the prompt, and the prompt's KV cache."""
    logits, cache = forward(model, ids, None)
    return logits_to_probs(logits, sampling)[0], cache


def summarise(tokenizer, vocab, n, codes, tested, candidates, first_tokens) -> JointExactness:
    """Bins, distances and χ² of the pair draws (codes a * vocab + b) against the exact joint."""
    tested_codes = torch.cat([c for c, _ in tested])
    order = torch.argsort(tested_codes)
    tested_codes, tested_p = tested_codes[order], torch.cat([p for _, p in tested])[order]
    cand_codes, cand_p = (torch.cat(parts) for parts in zip(*candidates, strict=True))
    top = torch.topk(cand_p, min(12, len(cand_p))).indices
    top = top[cand_p[top] > 0]
    shown_codes, exact = cand_codes[top], cand_p[top].tolist()
    exact += [max(0.0, 1.0 - sum(exact))]
    result = {}
    for name, drawn in codes.items():
        shown = [(drawn == c).sum().item() / n for c in shown_codes]
        shown += [1.0 - sum(shown)]
        index = torch.searchsorted(tested_codes, drawn).clamp_max(len(tested_codes) - 1)
        hit = tested_codes[index] == drawn
        counts = torch.bincount(index[hit], minlength=len(tested_codes)).double()
        other = float(n) - counts.sum().item()  # draws outside every tested pair
        rest = max(0.0, 1.0 - tested_p.sum().item())
        # Outcomes: each pair expected MIN_EXPECTED times or more, and every other pair as one;
        # chi2_pvalue merges that one into the smallest pairs' bins while it is expected less.
        observed = torch.cat([counts, counts.new_tensor([other])])
        probability = torch.cat([tested_p, tested_p.new_tensor([rest])])
        result[name] = (shown, chi2_pvalue(observed, probability), tv(shown, exact))
    labels = [
        f"{token_text(tokenizer, c // vocab)}·{token_text(tokenizer, c % vocab)}"
        for c in shown_codes.tolist()
    ]
    return JointExactness(
        labels=labels + ["(other)"],
        p=exact,
        speculative=result["speculative"][0],
        direct=result["direct"][0],
        n=n,
        tv_speculative=result["speculative"][2],
        tv_direct=result["direct"][2],
        p_value_speculative=result["speculative"][1],
        p_value_direct=result["direct"][1],
        first_tokens=first_tokens,
    )


def tv(a: list[float], b: list[float]) -> float:
    """Total-variation distance over the shown bins."""
    return 0.5 * sum(abs(x - y) for x, y in zip(a, b, strict=True))
