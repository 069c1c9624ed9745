"""What a mistaken rule does to the first two tokens, computed rather than drawn: the law of the
pair (a, b) that the two-token check's rounds emit (``joint.measure_pairs``), and its total
variation from the exact joint p(a)·p(b | a).

Round one drafts x1 from the draft's first row and, at K = 2, x2 from q(· | x1); it keeps both,
x1 alone (then the next token comes from the residual, or the bonus from p(· | x1) at K = 1),
or neither (then the first token comes from the residual after the prompt, and a fresh round of
one guess, whose law is ``chi_square.rule_distribution``, gives the second). Judged token by
token, draft i is kept with ``sampling.acceptance_probs``; judged as a block, the round keeps up
to the last position whose uniform falls below its stopping chance (``verify.block_chances``;
min(1, Π p/q) under the block-prefix mistake). Each first token a costs its rows p(· | a) and
q(· | a), so the law is computed only where the rule's first token can be at most ROWS tokens.
"""

import torch

from specdemo.app.exact.chi_square import rule_distribution
from specdemo.judge.residual import log_running_weights, residual_mass
from specdemo.judge.sampling import AcceptanceRule, acceptance_probs, residual
from specdemo.judge.verify import prefix_products, stopping_chances

ROWS = 1024  # the most first tokens whose second-token rows the law is computed from
BATCH = 64


def first_tokens(p0: torch.Tensor, q0: torch.Tensor, rule: AcceptanceRule) -> torch.Tensor:
    """The tokens the rule's first token can be: a draft (q's argmax under the greedy-draft
    mistake) or a draw from the residual, which gives mass only where p does."""
    drafted = q0.argmax()[None] if rule.greedy_draft else (q0 > 0).nonzero().view(-1)
    return torch.unique(torch.cat([drafted, (p0 > 0).nonzero().view(-1)]))


def draft_rows(q: torch.Tensor, rule: AcceptanceRule) -> torch.Tensor:
    """(rows, vocab) the law of a draft from each row of q, as ``sampling.draft_tokens`` drafts."""
    if rule.greedy_draft:
        return torch.nn.functional.one_hot(q.argmax(-1), q.shape[-1]).double()
    return q


def blocked(rule: AcceptanceRule, k: int, judge: str) -> bool:
    """Whether round one is judged as a block: at K = 1 the two judges are one rule."""
    return k >= 2 and (judge == "block" or rule.block_prefix)


def round_one(a, p0, q0, p1, q1, rule: AcceptanceRule, k: int, judge: str):
    """For first drafts `a` (B,) with second-token rows p1, q1 (B, vocab): the (B, vocab) chance
    that round one emits (a, b) itself, and the (B,) chance that it keeps no draft."""
    d0 = draft_rows(q0[None], rule)[0][a]  # (B,) the chance the round drafts a
    if k < 2:  # a kept draft earns the bonus from p(· | a)
        kept = acceptance_probs(p0[a], q0[a], rule)
        return (d0 * kept)[:, None] * p1, d0 * (1 - kept)
    d1 = draft_rows(q1, rule)  # (B, vocab) the second draft's law after a
    if not blocked(rule, k, judge):
        first = acceptance_probs(p0[a], q0[a], rule)[:, None]  # (B, 1)
        second = acceptance_probs(p1, q1, rule)  # (B, vocab): x2 = b kept after a kept
        both, one, none = first * second, first * (1 - second), (1 - first).expand_as(second)
        w_one = torch.ones_like(first)
    elif rule.accept_all:
        both = torch.ones_like(p1)
        one, none, w_one = torch.zeros_like(p1), torch.zeros_like(p1), p1.new_ones(len(a), 1)
    else:  # P(keep both) = h2, P(keep x1 alone) = (1 - h2) h1, P(neither) = (1 - h1)(1 - h2)
        p_x = torch.stack([p0[a, None].expand_as(p1), p1], -1).view(-1, 2)  # (B·vocab, 2)
        q_x = torch.stack([q0[a, None].expand_as(q1), q1], -1).view(-1, 2)
        log_w = log_running_weights(p_x, q_x).view(*p1.shape, 2)
        w_one = torch.exp(log_w[:, :1, 0])  # (B, 1) the running weight after x1
        h2 = torch.exp(log_w[..., 1])
        if rule.block_prefix:  # min(1, Π p/q) along the prefix (``verify.block_tau``), w = 1
            h = prefix_products(p_x, q_x)
            h1, h2 = h.view(*p1.shape, 2)[:, :1, 0], h.view(*p1.shape, 2)[..., 1]
            w_one = torch.ones_like(w_one)
        else:
            # h1 = r1 / (r1 + 1 - w1), r1 the residual mass max(w1 p - q, 0) after x1: the
            # stopping chance of a one-position prefix, whose last weight is not read.
            masses = residual_mass(p1, q1, w_one)  # (B,)
            h1 = stopping_chances(log_w[:, :1, 0].expand(-1, 2), masses[:, None])[:, :1]
        both, one, none = h2, (1 - h2) * h1, (1 - h1) * (1 - h2)
    after = residual(p1, q1, rule, w_one)  # (B, vocab) the next token after x1 alone is kept
    emitted = d1 * both + (d1 * one).sum(-1, keepdim=True) * after
    return d0[:, None] * emitted, d0 * (d1 * none).sum(-1)


def pair_law(
    rows_for, p0, q0, rule: AcceptanceRule, k: int, judge: str, codes: torch.Tensor, limit=ROWS
):
    """The rule's two-token law against p(a)·p(b | a): (its total variation over every pair,
    its probability at `codes`, pairs as a * vocab + b), or None when the rule's first token
    can be more than `limit` tokens (ROWS, or fewer where a GPU call's budget pays for fewer).
    `rows_for(batch)` gives p and q tables as ``joint.Rows.rows`` does: row 0 after the prompt
    (p0, q0 here), row 1 + j after the batch's j-th token."""
    firsts = first_tokens(p0, q0, rule).tolist()
    if len(firsts) > limit:
        return None
    vocab = len(p0)
    restart = residual(p0, q0, rule)  # the first token when round one keeps no draft

    def batches():
        for start in range(0, len(firsts), BATCH):
            batch = firsts[start : start + BATCH]
            p, q = (table[1:].double() for table in rows_for(batch))
            a = torch.tensor(batch, device=p.device)
            yield a, p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True).clamp_min(1e-300)

    if blocked(rule, k, judge):  # the chance of keeping no draft needs every first draft's rows
        none = sum(
            float(round_one(a, p0, q0, p, q, rule, k, judge)[1].sum()) for a, p, q in batches()
        )
    else:  # token by token, only the first draft decides it
        none = float((draft_rows(q0[None], rule)[0] * (1 - acceptance_probs(p0, q0, rule))).sum())
    codes = codes.to(p0.device)
    tv, at = 0.0, torch.zeros(len(codes), dtype=torch.double, device=p0.device)
    for a, p, q in batches():
        emitted = round_one(a, p0, q0, p, q, rule, k, judge)[0]
        fresh = torch.stack([rule_distribution(pa, qa, rule) for pa, qa in zip(p, q, strict=True)])
        law = emitted + none * restart[a, None] * fresh
        tv += 0.5 * float((law - p0[a, None] * p).abs().sum())
        keys = (a[:, None] * vocab + torch.arange(vocab, device=a.device)).view(-1)
        where = torch.searchsorted(keys, codes).clamp_max(len(keys) - 1)
        hit = keys[where] == codes
        at[hit] = law.view(-1)[where[hit]]
    return tv, at.cpu()
