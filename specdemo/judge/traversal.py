"""Traversal verification: a token tree judged as a block, leaf to root.

A fishbone (``tree.Fishbone``) judged as a block (``verify="block"``) is walked by traversal
verification (Weng et al., *Traversal Verification for Speculative Tree Decoding*, NeurIPS 2025):
leaf to root instead of root to leaf. Each node carries a running weight (the chain's w_i of
block verification) and the leaves are tried in post-order, siblings in the order drawn: the
deepest chain node first, then each depth's siblings and the chain node above them, up to the
root. A node tried and not kept is removed, and its parent's weight, target row and draft row
are updated as a block residual is (``remove``), so the deeper guesses' rejection is carried up
instead of stopping the walk. On a chain this is block verification; on every fishbone
tests/judge/test_block.py enumerates it is exact and keeps at least what the root-to-leaf rule
(``tree.judge``) keeps, and visiting siblings against the order drawn is not exact.

``traversal`` is the walk's arithmetic (exact fractions or float64 tensors, through
``residual``, the judges' one module), ``traverse`` the engine's round: one uniform per visit
and one host transfer.
"""

from dataclasses import dataclass

import torch

from specdemo.judge.residual import (
    acceptance,
    choose,
    residual_and_mass,
    running_weights,
    stop_chance,
)
from specdemo.judge.sampling import check_tokens, sample
from specdemo.judge.tree import Fishbone, TreeVerdict, Trial


def remove(p, q, weight, child):
    """A node's (target row, draft row, weight) once its tried `child` was not kept: the target
    row becomes the residual max(weight p - q, 0) normalised, the draft row loses `child` (its
    children were drawn without replacement), and the weight becomes S / (S + 1 - weight), S
    the residual's mass. Arithmetic only (tensors or Fractions)."""
    p, mass = residual_and_mass(p, q, weight)
    q = q * 1
    q[child] = q[child] * 0
    left = q.sum()
    q = choose(left > 0, q / choose(left > 0, left, left * 0 + 1), q)
    return p, q, stop_chance(mass, 1 - weight)


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


def gather(rows, tokens: list[int]):
    """Row d's probability of tokens[d], for each d: a (k,) tensor from a tensor's rows, else a
    list (of Fractions)."""
    if isinstance(rows, torch.Tensor):
        depths = torch.arange(len(tokens), device=rows.device)
        return rows[depths, torch.tensor(tokens, dtype=torch.long, device=rows.device)]
    return [rows[d][x] for d, x in enumerate(tokens)]


def traversal(tree: "Fishbone", p, q) -> list[Visit]:
    """Every node traversal verification tries, in the order it tries them (post-order, siblings
    in the order drawn), each with its chance given that the ones before were not kept. p: the
    target's rows of the tree's pass (rows, vocab), q: the draft's rows at each depth (K, vocab).
    Arithmetic only: float64 tensors (no host sync) or object arrays of Fractions."""
    k = len(tree.chain)
    one = p[0][0] * 0 + 1
    chain_p, chain_q = gather(p, tree.chain), gather(q, tree.chain)
    weights = [one, *running_weights(chain_p, chain_q)]

    def chain_visit(d, chance, then):
        x = tree.chain[d - 1] if d else None
        return Visit(d, 0, d, chance, then, p[d - 1][x] if d else one, q[d - 1][x] if d else one)

    visits = [chain_visit(k, weights[k], p[k])] if k else []
    for d in reversed(range(k)):
        p_d, q_d, weight = remove(p[d], q[d], weights[d], tree.chain[d])
        rows = tree.sibling_rows(d)
        for j, s in enumerate(tree.siblings[d]):
            chance = acceptance(weight * p_d[s], q_d[s])
            visits.append(Visit(d + 1, j + 1, rows[j], chance, p[rows[j]], p_d[s], q_d[s]))
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
    weights = running_weights(gather(p, tree.chain), gather(q, tree.chain))
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
            acceptance(a, b) if b > 0 else 1.0 for a, b in zip(chain_p, chain_q, strict=True)
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
