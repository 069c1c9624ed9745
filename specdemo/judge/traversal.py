"""Traversal verification: a token tree judged as a block, leaf to root.

A fishbone (``tree.Fishbone``) judged as a block (``verify="block"``) is walked by traversal
verification (Weng et al., *Traversal Verification for Speculative Tree Decoding*, NeurIPS 2025):
leaf to root instead of root to leaf. Each node carries a running weight (the chain's w_i of
block verification) and the leaves are tried in post-order, siblings in the order drawn: the
deepest chain node first, then each depth's siblings and the chain node above them, up to the
root. A node tried and not kept is removed, and its parent's weight, target row and draft row
are updated as a block residual is (``remove``), so the deeper guesses' rejection is carried up
instead of stopping the walk. On a chain this is block verification; on every fishbone
tests/test_block.py enumerates it is exact and keeps at least what the root-to-leaf rule
(``tree.judge``) keeps, and visiting siblings against the order drawn is not exact.

``traversal`` is the arithmetic (exact fractions or float64 tensors), ``traverse`` the engine's
round: one uniform per visit and one host transfer.
"""

from dataclasses import dataclass

import torch

from specdemo.judge.sampling import check_tokens, sample
from specdemo.judge.tree import Fishbone, TreeVerdict, Trial
from specdemo.judge.verify import running_weights


def _where(condition, a, b):
    """a where `condition` holds, else b: a tensor's torch.where (no host sync), a Python
    choice for exact arithmetic (``fractions.Fraction``)."""
    if isinstance(condition, torch.Tensor):
        return torch.where(condition, a, b)
    return a if condition else b


def _cap(a):
    """min(1, a) without a host sync."""
    return a.clamp(max=1.0) if isinstance(a, torch.Tensor) else min(a, a * 0 + 1)


def remove(p, q, weight, child):
    """A node's (target row, draft row, weight) once its tried `child` was not kept: the target
    row becomes the residual max(weight p - q, 0) normalised, the draft row loses `child` (its
    children were drawn without replacement), and the weight becomes S / (S + 1 - weight), S
    the residual's mass. Arithmetic only (tensors or Fractions)."""
    r = weight * p - q
    r = r * (r > 0)
    mass = r.sum()
    p = _where(mass > 0, r / _where(mass > 0, mass, mass * 0 + 1), p)
    q = q * 1
    q[child] = q[child] * 0
    left = q.sum()
    q = _where(left > 0, q / _where(left > 0, left, left * 0 + 1), q)
    denominator = mass + 1 - weight
    weight = _where(
        denominator > 0, mass / _where(denominator > 0, denominator, mass * 0 + 1), mass * 0 + 1
    )
    return p, q, weight


@dataclass(frozen=True)
class Visit:
    """One node a traversal tries as a leaf: the chain node at `depth` (`child` 0; the root is
    depth 0) or that depth's `child`-th sibling, the target row it sits on, the chance it is kept
    given that every visit before it was not, and the distribution the next token is drawn from
    if it is (its own row of p for a drafted leaf, its updated row once its children are gone)."""

    depth: int
    child: int
    row: int
    chance: object
    then: object
    p_x: object  # the target's and the draft's probability of the node's token as its chance
    q_x: object  # used them (the root: 1 and 1)


def traversal(tree: "Fishbone", p, q) -> list[Visit]:
    """Every node traversal verification tries, in the order it tries them (post-order, siblings
    in the order drawn), each with its chance given that the ones before were not kept. p: the
    target's rows of the tree's pass (rows, vocab), q: the draft's rows at each depth (K, vocab).
    Arithmetic only: float64 tensors (no host sync) or object arrays of Fractions."""
    k = len(tree.chain)
    weights = [p[0][0] * 0 + 1]
    for d, x in enumerate(tree.chain):
        weights.append(_cap(weights[d] * p[d][x] / q[d][x]))
    one = weights[0]

    def chain_visit(d, chance, then):
        x = tree.chain[d - 1] if d else None
        return Visit(d, 0, d, chance, then, p[d - 1][x] if d else one, q[d - 1][x] if d else one)

    visits = [chain_visit(k, weights[k], p[k])] if k else []
    for d in reversed(range(k)):
        p_d, q_d, weight = remove(p[d], q[d], weights[d], tree.chain[d])
        rows = tree.sibling_rows(d)
        for j, s in enumerate(tree.siblings[d]):
            ratio = weight * p_d[s] / _where(q_d[s] > 0, q_d[s], q_d[s] * 0 + 1)
            visits.append(Visit(d + 1, j + 1, rows[j], _cap(ratio), p[rows[j]], p_d[s], q_d[s]))
            p_d, q_d, weight = remove(p_d, q_d, weight, s)
        visits.append(chain_visit(d, weight if d else one, p_d))
    return visits


def traverse(tree: Fishbone, p: torch.Tensor, q: torch.Tensor, generator) -> TreeVerdict:
    """Traversal verification of `tree` (``traversal``): one uniform per visit, all drawn at once,
    and the first visit whose uniform falls below its chance is kept, with the path above it;
    the next token comes from that visit's distribution. p: (rows, vocab), q: (K, vocab). One
    host transfer."""
    p, q = p.double(), q.double()
    visits = traversal(tree, p, q)
    chances = torch.stack([v.chance for v in visits])
    u = torch.rand(len(visits), generator=generator, dtype=torch.float64, device=p.device)
    first = (u < chances).int().argmax()  # the root's chance is 1: some visit is kept
    then = torch.stack([v.then for v in visits])[first]
    token = sample(then[None], generator)
    k, n = len(tree.chain), len(visits)
    depths, chain = torch.arange(k, device=p.device), torch.tensor(tree.chain, device=p.device)
    weights = torch.exp(running_weights(p[depths, chain][None], q[depths, chain][None]))[0]
    seen = torch.stack(
        [
            torch.as_tensor(v, dtype=torch.float64, device=p.device)
            for visit in visits
            for v in (visit.p_x, visit.q_x)
        ]
    )
    parts = [first[None].double(), token.double(), chances, u, seen, weights]
    host = torch.cat([t.view(-1) for t in parts]).tolist()
    at, token = int(host[0]), check_tokens([int(host[1])], "tree")[0]
    chances, u = host[2 : 2 + n], host[2 + n : 2 + 2 * n]
    seen, weights = host[2 + 2 * n : 2 + 4 * n], host[2 + 4 * n :]
    p_x, q_x = seen[0::2], seen[1::2]
    kept = visits[at]
    n_accepted = kept.depth if kept.child == 0 else kept.depth - 1
    chain_visit = {v.depth: i for i, v in enumerate(visits) if v.child == 0}
    trials = []
    for depth in range(1, k + 1):
        i = chain_visit[depth]
        tried = [
            Trial(tree.chain[depth - 1], p_x[i], q_x[i], chances[i], u[i], depth <= n_accepted)
        ]
        for j, v in enumerate(visits[: at + 1]):
            if v.depth == depth and v.child > 0:
                s = tree.siblings[depth - 1][v.child - 1]
                tried.append(Trial(s, p_x[j], q_x[j], chances[j], u[j], j == at))
        trials.append(tried)
    chain_p = [p_x[chain_visit[d]] for d in range(1, k + 1)]
    chain_q = [q_x[chain_visit[d]] for d in range(1, k + 1)]
    return TreeVerdict(
        n_accepted=n_accepted,
        next_token=token,
        p_x=chain_p,
        q_x=chain_q,
        accept_prob=[
            min(1.0, a / b) if b > 0 else 1.0 for a, b in zip(chain_p, chain_q, strict=True)
        ],
        u=[u[chain_visit[d]] for d in range(1, k + 1)],
        next_dist=then,
        sibling=tree.siblings[kept.depth - 1][kept.child - 1] if kept.child else None,
        rows=[*range(n_accepted + 1)] + ([kept.row] if kept.child else []),
        trials=trials,
        p=p[: k + 1],
        q=q,
        judge="block",
        weights=weights,
        stop_chance=[chances[chain_visit[d]] for d in range(1, k + 1)],
    )
