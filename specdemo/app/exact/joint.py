"""Exactness beyond the first token: the joint distribution of the first two new tokens.

Each draw runs the engine's rounds through ``verify.verify_many``: round one drafts from the
prompt as a drafter does (a second draft from q(· | first draft) when K ≥ 2) and is judged
against p, token by token or as a block (the judge); at K = 1 a kept draft earns the bonus from
p(· | first). A draw whose round kept no draft has its second token from a fresh round drafting
after its resampled first token. Draws are grouped by first token, so each distinct first token
costs one batched position of each model, not one pass per draw; the exact joint is
p(a) · p(b | a), from the same passes. The draft's q comes from the head the drafter ships
(``drafters.drafter_head``).
"""

import copy
from dataclasses import dataclass, replace

import torch

from specdemo.app.exact.chi_square import MIN_EXPECTED, chi2_pvalue, detectable_tv, power
from specdemo.app.exact.pair_law import ROWS, pair_law
from specdemo.draft.drafters import drafter_head
from specdemo.judge.sampling import (
    EXACT,
    AcceptanceRule,
    SamplingConfig,
    draft_tokens,
    logits_to_probs,
    pad_vocab,
)
from specdemo.judge.verify import verify_many
from specdemo.runtime.lm import forward
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
    k: int = 2  # drafts a round: 1 (a kept draft earns the bonus) or 2 (two judged)
    judge: str = "token"  # who judged them: "token" or "block" (``verify.JUDGES``)
    shown: list[tuple[int, int]] | None = None  # the token ids of the labelled pairs
    # What this N could see, as ``exactness.Exactness`` has it for the first token, over this
    # check's χ² bins: any departure of `detectable_tv` or more is caught with probability
    # POWER; a mistaken rule's own law of the pair lies `tv_rule` from p(a)·p(b | a)
    # (``pair_law``; None where its first token can be more than ``pair_law.ROWS`` tokens),
    # caught with probability `power_rule`.
    detectable_tv: float = 0.0
    tv_rule: float | None = 0.0
    power_rule: float = 0.0


@torch.inference_mode()
def probs_after(model, cache, firsts: list[int], sampling: SamplingConfig, head=None):
    """(len(firsts), vocab) warped distributions of the token after the prompt in `cache` and
    then a, for each first token a: one batched step, the prompt's cache copied per row."""
    grown = copy.deepcopy(cache)
    grown.batch_repeat_interleave(len(firsts))
    tokens = torch.tensor(firsts, dtype=torch.long, device=model.device)[:, None]
    if head is None:
        out = model(input_ids=tokens, cache=grown, use_cache=True, logits_to_keep=1)
        return logits_to_probs(out.logits[:, -1], sampling)
    hidden = model.base_model(input_ids=tokens, cache=grown, use_cache=True).last_hidden_state
    return head.spread(logits_to_probs(head(hidden[:, -1]), sampling))


def too_many(count: int, limit: int | None) -> None:
    if limit is not None and count > limit:
        raise ValueError(
            f"The draws began with {count:,} different first tokens, more than the "
            f"{limit:,} this Space's GPU budget pays a second-token pass for: lower "
            "the temperature or top-p, or N."
        )


class Rows:
    """Second-token rows of both models after the prompt and one first token, a batch at a time:
    ``rows(batch)`` gives (p1 and the batch's p(· | a)) and (q1 and q(· | a)) as the tables
    ``verify_many`` reads, row 1 + j for the batch's j-th token."""

    def __init__(self, pair, ids: list[int], sampling: SamplingConfig):
        self.pair, self.sampling, self.head = pair, sampling, drafter_head(pair.draft, ids)
        (self.p1, self.target_cache), (self.q1, self.draft_cache) = (
            prompt_step(pair.target, ids, sampling),
            prompt_step(pair.draft, ids, sampling, self.head),
        )
        self.vocab = max(self.p1.shape[-1], self.q1.shape[-1])

    def rows(self, batch: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        p2 = probs_after(self.pair.target, self.target_cache, batch, self.sampling)
        q2 = probs_after(self.pair.draft, self.draft_cache, batch, self.sampling, self.head)
        return tuple(
            torch.cat([pad_vocab(first[None], self.vocab), pad_vocab(second, self.vocab)])
            for first, second in ((self.p1, p2), (self.q1, q2))
        )


def index_in(values: torch.Tensor, batch: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Which of `values` lie in the sorted `batch`, and each one's position there."""
    keys = torch.tensor(batch, dtype=torch.long, device=values.device)
    where = torch.searchsorted(keys, values.contiguous()).clamp_max(len(batch) - 1)
    members = keys[where] == values
    return members, where[members]


def drafts(q: torch.Tensor, row: torch.Tensor, generator, rule) -> torch.Tensor:
    """One draft token per draw from its row of q, as a drafter draws (``draft_tokens``)."""
    x = torch.empty_like(row)
    for j in torch.unique(row).tolist():
        at = row == j
        x[at] = draft_tokens(q[j][None], generator, rule, int(at.sum())).view(-1)
    return x


def round_one(x1, tables, row, k: int, generator, rule, judge: str = "token"):
    """Round one of draws whose first draft x1 has its p(· | x1), q(· | x1) in row `row` of
    `tables`, judged by `judge`: the (first, second) tokens it emits, second -1 where it kept no
    draft (the next round decides it)."""
    p, q = tables
    prompt = torch.zeros_like(row)  # row 0: p and q after the prompt
    if k >= 2:  # a second draft from q(· | x1), judged against p(· | x1); a third token unused
        draft = torch.stack([x1, drafts(q, row, generator, rule)], 1)
        p_rows, q_rows = torch.stack([prompt, row, row], 1), torch.stack([prompt, row], 1)
    else:  # K = 1: a kept draft earns the bonus from p(· | x1)
        draft, p_rows, q_rows = x1[:, None], torch.stack([prompt, row], 1), prompt[:, None]
    judged = verify_many(draft, p, p_rows, q, q_rows, generator, rule, judge)
    kept, following = judged.n_accepted, judged.next_token
    first = torch.where(kept >= 1, x1, following)
    second = torch.where(kept == 1, following, torch.full_like(following, -1))
    if k >= 2:
        second = torch.where(kept == 2, draft[:, 1], second)
    return first, second


def round_two(tables, row, generator, rule, judge: str = "token"):
    """A fresh round after each resampled first token, whose rows are `row`: its first token."""
    p, q = tables
    x = drafts(q, row, generator, rule)
    judged = verify_many(
        x[:, None], p, torch.stack([row, row], 1), q, row[:, None], generator, rule, judge
    )
    return torch.where(judged.n_accepted == 1, x, judged.next_token)


@torch.inference_mode()
def measure_pairs(
    pair,
    ids: list[int],
    sampling: SamplingConfig,
    n: int,
    generator,
    rule: AcceptanceRule = EXACT,
    max_first_tokens: int | None = None,
    k: int = 2,
    judge: str = "token",
) -> JointExactness:
    """n speculative draws of the first two new tokens with K = `k` drafts a round, judged by
    `judge` ("token" or "block"; the block-prefix mistake always judges a block), and n direct
    ones, against the exact joint, with what n draws could see (``reach``). K > 2 judges as
    K = 2: token by token only the first two positions can decide the first two tokens, and
    under an exact judge their law does not depend on K (a block's later drafts can change which
    two come out in one round, not how often each pair does). Memory stays at one batch of rows
    whatever the number of distinct first tokens; their count, which sets the time, is refused
    above `max_first_tokens` (a ZeroGPU call's budget) before any second-token pass, and again
    before the second rounds."""
    if k < 1:
        raise ValueError("the two-token check needs K >= 1 drafts a round")
    rows = Rows(pair, ids, sampling)
    vocab = rows.vocab
    x1 = draft_tokens(rows.q1[None], generator, rule, n).view(-1)  # (n,) round one's drafts
    direct1 = torch.multinomial(rows.p1, n, replacement=True, generator=generator)
    p1 = pad_vocab(rows.p1, vocab).double()
    p1 = p1 / p1.sum()
    # A pair expected MIN_EXPECTED times has a first token expected at least as often: each such
    # first token gets its second-token pass, drawn or not, so the χ² bins depend on p and n alone.
    often = (p1 * n >= MIN_EXPECTED).nonzero().view(-1)
    likely = torch.topk(p1, min(EXACT_FIRSTS, vocab)).indices
    firsts = torch.unique(torch.cat([x1, direct1, likely, often])).tolist()
    too_many(len(firsts), max_first_tokens)
    first = {"speculative": torch.empty_like(x1), "direct": direct1}
    second = {name: torch.empty_like(x1) for name in first}
    tested, candidates = [], []  # (codes a * vocab + b, exact probabilities) per first token
    for start in range(0, len(firsts), BATCH):
        batch = firsts[start : start + BATCH]
        tables = rows.rows(batch)
        drawn, position = index_in(x1, batch)
        if len(position):
            first["speculative"][drawn], second["speculative"][drawn] = round_one(
                x1[drawn], tables, 1 + position, k, generator, rule, judge
            )
        # torch's own sampler, independent of specdemo's, is the reference for "directly from p".
        drawn, position = index_in(direct1, batch)
        drawn = drawn.nonzero().view(-1)
        for j in torch.unique(position).tolist():
            at = drawn[position == j]
            row = tables[0][1 + j]
            second["direct"][at] = torch.multinomial(row, len(at), True, generator=generator)
        for j, a in enumerate(batch):
            p2 = tables[0][1 + j].double()
            joint = p1[a] * p2 / p2.sum()  # p(a) p(b | a)
            kept = (joint * n >= MIN_EXPECTED).nonzero().view(-1)  # pairs with own bins
            tested.append((a * vocab + kept, joint[kept]))
            top = torch.topk(joint, 12).indices
            candidates.append((a * vocab + top, joint[top]))
    # Draws whose first round kept no draft: their first token was resampled; a next round drafts.
    pending = (second["speculative"] < 0).nonzero().view(-1)
    resampled = torch.unique(first["speculative"][pending]).tolist()
    too_many(len(firsts) + len(resampled), max_first_tokens)
    for start in range(0, len(resampled), BATCH):
        batch = resampled[start : start + BATCH]
        drawn, position = index_in(first["speculative"][pending], batch)
        at = pending[drawn]
        second["speculative"][at] = round_two(
            rows.rows(batch), 1 + position, generator, rule, judge
        )
    codes = {name: first[name] * vocab + second[name] for name in first}
    tested_codes = torch.cat([codes for codes, _ in tested])
    order = torch.argsort(tested_codes)
    tested = tested_codes[order], torch.cat([p for _, p in tested])[order]
    result = summarise(pair.tokenizer, vocab, n, codes, tested, candidates, len(firsts))
    judge = "block" if rule.block_prefix else judge  # the mistake judges a block whatever is set
    return replace(
        result, k=min(k, 2), judge=judge, **reach(rows, rule, k, judge, n, tested, max_first_tokens)
    )


def bins(tested_p: torch.Tensor) -> torch.Tensor:
    """The check's outcomes: each pair expected MIN_EXPECTED times or more, then every other
    pair as one (``chi2_pvalue`` merges that one into the smallest pairs' bins while it is
    expected less)."""
    return torch.cat([tested_p, tested_p.new_tensor([max(0.0, 1.0 - tested_p.sum().item())])])


def reach(rows: Rows, rule: AcceptanceRule, k: int, judge: str, n: int, tested, limit=None) -> dict:
    """What n draws of this check could see, over its own bins: the smallest departure caught
    with probability POWER (``detectable_tv``), and a mistaken rule's own distance from the
    exact joint and the chance of catching it (``pair_law``, ``power``), computed where its
    first token can be at most `limit` tokens (``pair_law.ROWS`` when None)."""
    codes, tested_p = tested
    exact = bins(tested_p.double().cpu())
    found = {"detectable_tv": detectable_tv(exact, n), "tv_rule": 0.0, "power_rule": 0.0}
    if rule == EXACT:
        return found
    p0, q0 = (pad_vocab(row, rows.vocab).double() for row in (rows.p1, rows.q1))
    limit = ROWS if limit is None else min(limit, ROWS)
    law = pair_law(rows.rows, p0 / p0.sum(), q0 / q0.sum(), rule, min(k, 2), judge, codes, limit)
    if law is None:
        return {**found, "tv_rule": None}
    return {**found, "tv_rule": law[0], "power_rule": power(exact, bins(law[1]), n)}


def prompt_step(model, ids: list[int], sampling: SamplingConfig, head=None):
    """The warped next-token distribution after the prompt, and the prompt's KV cache."""
    logits, cache = forward(model, ids, None, head=head)
    probs = logits_to_probs(logits, sampling)
    return (probs if head is None else head.spread(probs))[0], cache


def summarise(tokenizer, vocab, n, codes, tested, candidates, first_tokens) -> JointExactness:
    """Bins, distances and χ² of the pair draws (codes a * vocab + b) against the exact joint;
    `tested`: the sorted codes of the pairs with bins of their own, and their probabilities."""
    tested_codes, tested_p = tested
    cand_codes, cand_p = (torch.cat(parts) for parts in zip(*candidates, strict=True))
    top = torch.topk(cand_p, min(12, len(cand_p))).indices
    top = top[cand_p[top] > 0]
    shown_codes, exact = cand_codes[top], cand_p[top].tolist()
    exact += [max(0.0, 1.0 - sum(exact))]
    result = {}
    for name, drawn in codes.items():
        shown = [(drawn == code).sum().item() / n for code in shown_codes]
        shown += [1.0 - sum(shown)]
        counts = torch.zeros(len(tested_codes), dtype=torch.double, device=drawn.device)
        if len(tested_codes):  # none when no pair is expected MIN_EXPECTED times at this n
            index = torch.searchsorted(tested_codes, drawn).clamp_max(len(tested_codes) - 1)
            hit = tested_codes[index] == drawn
            counts = torch.bincount(index[hit], minlength=len(tested_codes)).double()
        other = float(n) - counts.sum().item()  # draws outside every tested pair
        observed = torch.cat([counts, counts.new_tensor([other])])
        result[name] = (shown, chi2_pvalue(observed, bins(tested_p)), tv(shown, exact))
    labels = [
        f"{token_text(tokenizer, code // vocab)}·{token_text(tokenizer, code % vocab)}"
        for code in shown_codes.tolist()
    ]
    return JointExactness(
        labels=labels + ["(other)"],
        shown=[divmod(code, vocab) for code in shown_codes.tolist()],
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
