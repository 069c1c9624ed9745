"""Token trees: several guesses per position, judged exactly, verified in one target pass.

The shape is a fishbone: the draft's chain x_1..x_K as in a chain round, and at each depth d up
to `width` - 1 sibling leaves drawn from the draft's own q_d *without replacement* (after x_d,
which was the first draw), so no extra draft pass is run and no sibling enters the draft's
cache. A node's children are tried in the order they were drawn, by recursive rejection
sampling without replacement (RSD, Jeon et al. 2024, arXiv 2402.14160; Sequoia, arXiv
2402.12374; ``node_rule``): child i is kept with probability min(1, p_i(x_i)/q_i(x_i)), q_i being
q without the earlier siblings, renormalised, and after a rejection p_{i+1} = norm(max(0, p_i -
q_i)). When every child is rejected the next token comes from what is left of p; below a kept
leaf the bonus comes from that leaf's own row of p. With one child this is the chain's rule, so
the output is distributed exactly as the target's (tests/judge/test_tree.py enumerates it with
fractions). The arithmetic, min(1, p/q) and the residual, is the judges' one module
(``residual``).

Judged as a block, a fishbone is walked leaf to root instead (``traversal``).

``Fishbone`` lays the nodes out for one target pass (``lm.tree_forward``: position L + depth,
each node seeing the prefix and its ancestors), ``judge`` walks it, and the runtime's
``kv.keep_rows`` leaves the target's KV cache as if the kept path had been fed token by token.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specdemo.judge.residual import acceptance, excess, residual
from specdemo.judge.sampling import check_tokens, sample


def node_steps(p, q, children, renormalise: bool = True):
    """What each of `children` is judged against, were the ones before it rejected: yields
    (i, child, p_i, q_i) for each, then (len(children), None, p after every one, None). q_i is
    q without the earlier children, renormalised; p_{i+1} = norm(max(0, p_i - q_i)). With q
    None the children were fixed, not drawn (copies from the context): each is its own one-hot
    q_i, so child i is kept with p_i(x_i) and p_{i+1} is p_i without it, renormalised (the
    one-hot rule, exact for any fixed set of children). Arithmetic only (``node_rule``)."""
    for i, c in enumerate(children):
        if q is None:
            q_i = p * 0
            q_i[c] = q_i[c] + 1
        else:
            q_i = q / q.sum() if renormalise else q
        yield i, c, p, q_i
        p = residual(p, q_i)  # p itself only when p <= q_i everywhere: no rejection then
        if renormalise and q is not None:
            q = q * 1
            q[c] = q[c] * 0
    yield len(children), None, p, None


def node_rule(p, q, children, passes: Callable[..., bool], renormalise: bool = True):
    """Try `children` (drawn from q without replacement, in that order) against the target's p.

    `passes(i, a, p_x, q_x)` says whether child i is kept, given its acceptance probability a
    (and p(x), q_i(x) as the rule sees them): the engine compares a fresh uniform, ``u < a``; an
    exact enumeration follows both branches. Arithmetic only, so p and q may be float64 tensors
    or arrays of ``fractions.Fraction``. Returns (the kept child's index, or None; the p the
    next token is drawn from when none was kept).
    `renormalise=False` is the i.i.d. rule (SpecInfer's), wrong for children drawn without
    replacement: kept for the tests that show it fails.
    """
    for i, c, p_i, q_i in node_steps(p, q, children, renormalise):
        if c is None:
            return None, p_i
        if passes(i, acceptance(p_i[c], q_i[c]), p_i[c], q_i[c]):
            return i, p_i


def draw_siblings(q: torch.Tensor, first: int, width: int, generator) -> list[int]:
    """Up to `width` - 1 more children after `first`, drawn from the (vocab,) q without
    replacement: each later draw from q with the earlier ones removed (``sample`` takes rows
    that do not sum to 1). Fewer when q's support runs out."""
    q = q.double().clone()
    q[first] = 0
    out = []
    for _ in range(width - 1):
        if not bool(q.sum() > 0):
            break
        token = int(sample(q[None], generator))
        out.append(token)
        q[token] = 0
    return out


@dataclass(frozen=True)
class Fishbone:
    """One round's guesses: the chain and, at each depth, the siblings drawn after its token.

    Rows of the target's pass: 0 the root (the last emitted token), 1..K the chain, then each
    depth's siblings in order. A sibling at depth d hangs from row d - 1, as chain row d does.
    """

    chain: list[int]
    siblings: list[list[int]]  # siblings[d]: the children at depth d + 1 after chain[d]

    @property
    def width(self) -> int:
        """Guesses at the widest depth: the chain's and its siblings."""
        return 1 + max((len(group) for group in self.siblings), default=0)

    @property
    def tokens(self) -> list[int]:
        """Each row's token after the root, in row order."""
        return self.chain + [s for group in self.siblings for s in group]

    @property
    def parents(self) -> list[int]:
        """Each row's parent row (-1 for the root, whose parent is the cached prefix)."""
        parents = [-1, *range(len(self.chain))]
        for depth, group in enumerate(self.siblings):
            parents += [depth] * len(group)
        return parents

    def sibling_rows(self, depth: int) -> list[int]:
        """The rows of the siblings at chain index `depth` (0-based)."""
        start = 1 + len(self.chain) + sum(len(g) for g in self.siblings[:depth])
        return list(range(start, start + len(self.siblings[depth])))


@dataclass(frozen=True)
class Trial:
    """One child tried at a node: its token, p and q there (q without the earlier siblings),
    min(1, p/q), the uniform, and whether it was kept."""

    token: int
    p_x: float
    q_x: float
    accept_prob: float
    u: float
    kept: bool


@dataclass(frozen=True)
class TreeVerdict:
    """What happened to a fishbone: the chain's verdict fields (as ``verify.Verdict``: the chain
    tokens kept, the next token, and the chain's own trials) and the sibling kept, if any."""

    n_accepted: int  # chain tokens kept
    next_token: int  # the bonus below the last kept node, or the draw from what is left of p
    p_x: list[float]
    q_x: list[float]
    accept_prob: list[float]
    u: list[float]
    next_dist: torch.Tensor
    sibling: int | None  # the sibling kept at depth n_accepted + 1, if one was
    rows: list[int]  # the target's rows of the kept nodes, root first
    trials: list[list[Trial]] = field(default_factory=list)  # per depth tried, every child
    # The chain's rows as a chain round's verdict has them: p (K + 1, vocab) at each chain
    # position (the root and the chain nodes), q (K, vocab).
    p: torch.Tensor | None = None
    q: torch.Tensor | None = None
    judge: str = "token"  # "block": traversal verification (``traversal``)
    # Traversal only: each chain node's running weight w_i and its chance as a leaf visit
    # (`u` holds each chain node's uniform).
    weights: list[float] = field(default_factory=list)
    stop_chance: list[float] = field(default_factory=list)
    token_kept: int | None = None

    @property
    def k(self) -> int:
        return len(self.p_x)

    @property
    def bonus(self) -> bool:
        """Whether the next token came from a kept node's own row (not from a residual)."""
        return self.sibling is not None or self.n_accepted == self.k

    @property
    def path(self) -> list[int]:
        """The drafted tokens kept, in order."""
        return [t.token for depth in self.trials for t in depth if t.kept]


def judge(tree: Fishbone, p: torch.Tensor, q: torch.Tensor | None, generator) -> TreeVerdict:
    """Walk `tree` down from the root with ``node_rule``. p: (rows, vocab) the target's warped
    probabilities at every row of the tree's pass; q: (K, vocab) the draft's q at each depth,
    or None for children fixed rather than drawn (a copied tree: each child its own one-hot q).
    One uniform per child tried, in order; a chain token below the first rejection is reported
    as a chain round reports it (its p, q and a uniform), though never judged."""
    p = p.double()
    q = q.double() if q is not None else None
    trials: list[list[Trial]] = []
    row, sibling, dist = 0, None, p[0]
    for depth, x in enumerate(tree.chain):
        children = [x, *tree.siblings[depth]]
        tried: list[Trial] = []

        def passes(i, a, p_x, q_x, children=children, tried=tried) -> bool:
            u = float(torch.rand((), generator=generator, dtype=torch.float64, device=p.device))
            tried.append(Trial(children[i], float(p_x), float(q_x), float(a), u, u < float(a)))
            return tried[-1].kept

        kept, dist = node_rule(p[row], q[depth] if q is not None else None, children, passes)
        trials.append(tried)
        if kept is None:
            break
        if kept > 0:  # a sibling leaf: the bonus comes from its own row
            sibling, row = children[kept], tree.sibling_rows(depth)[kept - 1]
            dist = p[row]
            break
        row = depth + 1
        dist = p[row]
    n = sum(depth[0].kept for depth in trials)
    chain = [depth[0] for depth in trials]
    for depth in range(len(trials), len(tree.chain)):  # below the first rejection: not judged
        x, p_x, q_x = (
            tree.chain[depth],
            float(p[depth, tree.chain[depth]]),
            float(q[depth, tree.chain[depth]]) if q is not None else 1.0,
        )
        u = float(torch.rand((), generator=generator, dtype=torch.float64, device=p.device))
        chain.append(Trial(x, p_x, q_x, acceptance(p_x, q_x) if q_x > 0 else 1.0, u, False))
    token = check_tokens(sample(dist[None], generator).tolist(), "tree")[0]
    return TreeVerdict(
        n_accepted=n,
        next_token=token,
        p_x=[t.p_x for t in chain],
        q_x=[t.q_x for t in chain],
        accept_prob=[t.accept_prob for t in chain],
        u=[t.u for t in chain],
        next_dist=dist,
        sibling=sibling,
        rows=[0, *range(1, n + 1)] + ([row] if sibling is not None else []),
        trials=trials,
        p=p[: len(tree.chain) + 1],
        q=q,
    )


def tree_first_tokens(
    p: torch.Tensor, q: torch.Tensor, n: int, width: int, generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """n independent first tokens of a tree round whose root has `width` children drawn from the
    (vocab,) q without replacement and tried in order against the (vocab,) p by ``node_rule``'s
    rule: (the (n,) tokens, the (n,) mask of draws that kept one of the draft's children).

    Vectorised over the draws by a closed form of the rule: after children c_1..c_i are
    rejected, what is left of p is max(0, p − t·q) / N(t) for one threshold t per draw
    (t_1 = 0, t_(i+1) = t_i + N(t_i) / S_i, with S_i = 1 − Σ_(j<i) q(c_j) the mass of q_i), and
    a rejected child's own residual is already 0. N(t) and draws from the residual come from p
    and q sorted by p/q; a child is drawn from q by inverse CDF with the earlier children's
    intervals skipped. tests/judge/test_tree.py checks it against ``node_rule`` enumerated
    exactly."""
    dev = p.device
    p, q = p.double() / p.double().sum(), q.double() / q.double().sum()
    ratio = torch.where(p > 0, torch.where(q > 0, p / q.clamp_min(1e-300), torch.inf), 0.0)
    order = torch.argsort(ratio, descending=True)
    descending = -ratio[order]  # ascending, for searchsorted
    big_p, big_q = p[order].cumsum(0), q[order].cumsum(0)
    cdf_q = q.cumsum(0)
    last_q = int((q > 0).nonzero().max())
    support = int((q > 0).sum())

    def cumulative(j: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Σ max(0, p − t·q) over the sorted tokens up to j, all with p/q > t: the residual's
        excess of the cumulated rows."""
        return excess(big_p[j], t * big_q[j])

    def mass(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(how many sorted tokens have p/q > t, N(t) = Σ max(0, p − t·q))."""
        k = torch.searchsorted(descending, -t.contiguous())
        return k, torch.where(k > 0, cumulative((k - 1).clamp_min(0), t), torch.zeros_like(t))

    t = torch.zeros(n, dtype=torch.float64, device=dev)
    left = torch.ones(n, dtype=torch.float64, device=dev)  # N(t): what is left of p
    s = torch.ones(n, dtype=torch.float64, device=dev)  # q's mass without the tried children
    tried = torch.empty((n, 0), dtype=torch.long, device=dev)
    out = torch.full((n,), -1, dtype=torch.long, device=dev)
    alive = torch.ones(n, dtype=torch.bool, device=dev)
    for _ in range(min(width, support)):
        # The next child: inverse CDF of q at u·S, each tried child's interval skipped.
        v = torch.rand(n, generator=generator, dtype=torch.float64, device=dev) * s
        for c in torch.sort(tried, dim=1).values.T:
            v = torch.where(cdf_q[c] - q[c] <= v, v + q[c], v)
        child = torch.searchsorted(cdf_q, v, right=True).clamp_max(last_q)
        p_x = excess(p[child], t * q[child]) / left
        a = acceptance(p_x, q[child] / s)
        u = torch.rand(n, generator=generator, dtype=torch.float64, device=dev)
        keep = alive & (u < a)
        out = torch.where(keep, child, out)
        alive = alive & ~keep
        t = torch.where(alive, t + left / s, t)
        s = torch.where(alive, s - q[child], s)
        left = torch.where(alive, mass(t)[1], left)
        tried = torch.cat([tried, child[:, None]], dim=1)
    # Draws that rejected every child: the residual max(0, p − t·q) / N(t), by inverse CDF
    # over the tokens sorted by p/q (C(j) = P_j − t·Q_j rises while p/q > t).
    k, left = mass(t)
    v = torch.rand(n, generator=generator, dtype=torch.float64, device=dev) * left
    lo, hi = torch.zeros_like(k), (k - 1).clamp_min(0)
    while bool((lo < hi).any()):  # the first j with C(j) > v
        mid = (lo + hi) // 2
        above = cumulative(mid, t) > v
        hi, lo = torch.where(above, mid, hi), torch.where(above, lo, mid + 1)
    out = torch.where(alive, order[lo], out)
    return out, ~alive
