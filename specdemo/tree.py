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
the output is distributed exactly as the target's (tests/test_tree.py enumerates it with
fractions).

Judged as a block (``judge="block"``), a fishbone is walked by traversal verification (Weng et
al., *Traversal Verification for Speculative Tree Decoding*, NeurIPS 2025; ``traversal``): leaf
to root instead of root to leaf. Each node carries a running weight (the chain's w_i of block
verification) and the leaves are tried in post-order, siblings in the order drawn: the deepest
chain node first, then each depth's siblings and the chain node above them, up to the root. A
node tried and not kept is removed, and its parent's weight, target row and draft row are updated
as a block residual is (``remove``), so the deeper guesses' rejection is carried up instead of
stopping the walk. On a chain this is block verification; on a fishbone it keeps a sibling or a
longer path more often than the root-to-leaf rule (tests/test_tree.py enumerates both).

``Fishbone`` lays the nodes out for one target pass (``lm.tree_forward``: position L + depth,
each node seeing the prefix and its ancestors), and ``judge`` walks it.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specdemo.sampling import check_tokens, sample


def node_steps(p, q, children, renormalise: bool = True):
    """What each of `children` is judged against, were the ones before it rejected: yields
    (i, child, p_i, q_i) for each, then (len(children), None, p after every one, None). q_i is
    q without the earlier children, renormalised; p_{i+1} = norm(max(0, p_i - q_i)).
    Arithmetic only (``node_rule``)."""
    for i, c in enumerate(children):
        q_i = q / q.sum() if renormalise else q
        yield i, c, p, q_i
        r = p - q_i
        r = r * (r > 0)
        mass = r.sum()
        if mass > 0:  # zero only when p <= q_i everywhere: then no rejection can happen
            p = r / mass
        if renormalise:
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
        a = p_i[c] / q_i[c]
        if passes(i, a if a < 1 else a * 0 + 1, p_i[c], q_i[c]):
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
    weight = _where(denominator > 0, mass / _where(denominator > 0, denominator, mass * 0 + 1),
                    mass * 0 + 1)  # fmt: skip
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


def judge(
    tree: Fishbone, p: torch.Tensor, q: torch.Tensor, generator, verify: str = "token"
) -> TreeVerdict:
    """Walk `tree` down from the root with ``node_rule``, or, `verify` "block", up from its
    leaves (``traverse``). p: (rows, vocab) the target's warped
    probabilities at every row of the tree's pass; q: (K, vocab) the draft's q at each depth.
    One uniform per child tried, in order; a chain token below the first rejection is reported
    as a chain round reports it (its p, q and a uniform), though never judged."""
    if verify == "block":
        return traverse(tree, p, q, generator)
    p, q = p.double(), q.double()
    trials: list[list[Trial]] = []
    row, sibling, dist = 0, None, p[0]
    for depth, x in enumerate(tree.chain):
        children = [x, *tree.siblings[depth]]
        tried: list[Trial] = []

        def passes(i, a, p_x, q_x, children=children, tried=tried) -> bool:
            u = float(torch.rand((), generator=generator, dtype=torch.float64, device=p.device))
            tried.append(Trial(children[i], float(p_x), float(q_x), float(a), u, u < float(a)))
            return tried[-1].kept

        kept, dist = node_rule(p[row], q[depth], children, passes)
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
            float(q[depth, tree.chain[depth]]),
        )
        u = float(torch.rand((), generator=generator, dtype=torch.float64, device=p.device))
        chain.append(Trial(x, p_x, q_x, min(1.0, p_x / q_x) if q_x > 0 else 1.0, u, False))
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
    weights, w = [], p.new_ones(())
    for d, x in enumerate(tree.chain):
        w = torch.clamp(w * p[d, x] / q[d, x].clamp_min(1e-300), max=1.0)
        weights.append(w)
    seen = torch.stack([torch.as_tensor(v, dtype=torch.float64, device=p.device)
                        for visit in visits for v in (visit.p_x, visit.q_x)])  # fmt: skip
    parts = [first[None].double(), token.double(), chances, u, seen, *[w[None] for w in weights]]
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
        tried = [Trial(tree.chain[depth - 1], p_x[i], q_x[i], chances[i], u[i],
                       depth <= n_accepted)]  # fmt: skip
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


def first_token_samples(
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
    intervals skipped. tests/test_tree.py checks it against ``node_rule`` enumerated exactly."""
    dev = p.device
    p, q = p.double() / p.double().sum(), q.double() / q.double().sum()
    ratio = torch.where(p > 0, torch.where(q > 0, p / q.clamp_min(1e-300), torch.inf), 0.0)
    order = torch.argsort(ratio, descending=True)
    descending = -ratio[order]  # ascending, for searchsorted
    big_p, big_q = p[order].cumsum(0), q[order].cumsum(0)
    cdf_q = q.cumsum(0)
    last_q = int((q > 0).nonzero().max())
    support = int((q > 0).sum())

    def mass(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(how many sorted tokens have p/q > t, N(t) = Σ max(0, p − t·q))."""
        k = torch.searchsorted(descending, -t.contiguous())
        j = (k - 1).clamp_min(0)
        return k, torch.where(k > 0, big_p[j] - t * big_q[j], torch.zeros_like(t))

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
        p_x = (p[child] - t * q[child]).clamp_min(0) / left
        a = torch.clamp(p_x / (q[child] / s), max=1.0)
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
        above = big_p[mid] - t * big_q[mid] > v
        hi, lo = torch.where(above, mid, hi), torch.where(above, lo, mid + 1)
    out = torch.where(alive, order[lo], out)
    return out, ~alive
