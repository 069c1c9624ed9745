"""The arithmetic that makes every judge exact, written once: the acceptance chance
min(1, p/q), the residual max(w·p − q, 0) normalised (p itself when its mass is exactly zero),
the block's stopping chance r / (r + 1 − w), and the running weight w_i = min(1, w_(i-1) p/q).

Every judge calls it: token by token and as a block (``verify``, ``sampling``), over a tree
(``tree``) and leaf to root (``traversal``); the tests' exact enumerations run the same
functions on ``fractions.Fraction`` through ``tree.node_rule`` and ``traversal.traversal``.
Each function takes float64 torch tensors (no host sync) or numpy object arrays of Fractions
alike; the running weight is summed in log space on tensors and multiplied out on Fractions,
whose logarithms are not exact.
"""

import torch

TINY = torch.finfo(torch.float64).tiny


def choose(condition, a, b):
    """a where `condition` holds, else b: torch.where on a tensor (no host sync), a Python
    choice on exact numbers."""
    if isinstance(condition, torch.Tensor):
        return torch.where(condition, a, b)
    return a if condition else b


def acceptance(p_x, q_x):
    """min(1, p(x)/q(x)) for q(x) > 0, as a drafted token's always is; a tensor's q(x) = 0 reads
    as the smallest positive float64."""
    if isinstance(q_x, torch.Tensor):
        return torch.clamp(p_x / q_x.clamp_min(TINY), max=1.0)
    ratio = p_x / q_x
    return ratio if ratio < 1 else ratio * 0 + 1


def excess(p, q, w=1):
    """max(w·p − q, 0) at every token: the residual before it is normalised. A tensor's
    difference is taken in p's own precision (a weight tensor is cast to it)."""
    if isinstance(p, torch.Tensor):
        w = w.to(p.dtype) if isinstance(w, torch.Tensor) else w
        return (w * p - q).clamp_(min=0)
    r = w * p - q
    return r * (r > 0)


def _total(r, keepdim: bool = False):
    """The sum over the last (vocabulary) dimension, in float64 for a tensor."""
    if isinstance(r, torch.Tensor):
        return r.sum(-1, keepdim=keepdim, dtype=torch.float64)
    return r.sum()


def residual_mass(p, q, w=1):
    """Σ max(w·p − q, 0) over the vocabulary: the mass a (block) residual keeps. Rows of
    tensors give one mass each, summed in float64; the differences stay in the rows' own
    precision (float32 from a model: the rounding p and q already carry), which keeps a
    152k-token row to one pass."""
    return _total(excess(p, q, w))


def residual_and_mass(p, q, w=1):
    """(max(w·p − q, 0) normalised, its mass before normalising). Where the mass is exactly
    zero (p·w <= q at every token, so no rejection could have led here) the residual is p."""
    r = excess(p, q, w)
    mass = _total(r, keepdim=True)
    if isinstance(r, torch.Tensor):
        return torch.where(mass > 0, r / mass.clamp_min(TINY), p), mass.squeeze(-1)
    return (r / mass if mass > 0 else p), mass


def residual(p, q, w=1):
    """max(w·p − q, 0) normalised, else p (``residual_and_mass``). w = 1 is token-wise
    verification's residual; a block's running weight w <= 1 gives the block's."""
    return residual_and_mass(p, q, w)[0]


def stop_chance(mass, short):
    """r / (r + 1 − w) from a residual's mass r and 1 − w (`short`), 1 where that is 0 / 0: the
    chance a block stops at a position whose prefix carries weight w, and the weight a tree
    node keeps once a child of it was removed."""
    denominator = mass + short
    safe = choose(denominator > 0, denominator, denominator * 0 + 1)
    return choose(denominator > 0, mass / safe, mass * 0 + 1)


def log_ratios(p_x, q_x) -> torch.Tensor:
    """log p(x) − log q(x) in float64 (q(x) = 0 read as the smallest positive float64)."""
    return torch.log(p_x.double()) - torch.log(q_x.double().clamp_min(TINY))


def log_running_weights(p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
    """(..., k) float64 log w_i of w_i = min(1, w_(i-1) p(x_i)/q(x_i)), w_0 = 1, along the last
    dimension: with S the running sum of log ratios, log w_i = S_i − max(0, S_1..S_i). -inf where
    w = 0."""
    s = log_ratios(p_x, q_x).cumsum(-1)
    peak = torch.cummax(torch.cat([torch.zeros_like(s[..., :1]), s], -1), -1).values[..., 1:]
    return torch.nan_to_num(s - peak, nan=-torch.inf).clamp(max=0.0)


def running_weights(p_x, q_x):
    """w_1..w_k of a drafted prefix: on (..., k) tensors exp(``log_running_weights``), on
    sequences of Fractions the product min(1, w_(i-1) p(x_i)/q(x_i)) itself."""
    if isinstance(p_x, torch.Tensor):
        return torch.exp(log_running_weights(p_x, q_x))
    weights, w = [], 1
    for a, b in zip(p_x, q_x, strict=True):
        w = acceptance(w * a, b)
        weights.append(w)
    return weights
