"""Closed forms from Leviathan et al. (2023), section 3, for i.i.d. acceptance with rate alpha.

With k drafts per round, the accepted length is a truncated geometric variable, so a target
pass yields (1 - alpha^(k+1)) / (1 - alpha) tokens on average; with a draft step costing c
target steps, a round costs (c*k + 1) target steps.
"""


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """E[tokens per target pass] = (1 - alpha^(k+1)) / (1 - alpha); k + 1 when alpha = 1."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if alpha == 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """Expected wall-time speedup over target-only decoding: E[tokens per pass] / (c*k + 1)."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    return expected_tokens_per_pass(alpha, k) / (c * k + 1.0)


def predicted_speedup(
    alpha: float, k: int, t_step: float, t_draft: float, t_verify: float
) -> float:
    """Speedup from measured times: E[tokens per pass] * t_step / (k * t_draft + t_verify).

    Unlike the paper's form, this charges the (k+1)-token verify pass at its measured cost
    rather than assuming it costs one target step.
    """
    return expected_tokens_per_pass(alpha, k) * t_step / (k * t_draft + t_verify)


def optimal_k(alpha: float, c: float, k_max: int = 16) -> int:
    """The k in 1..k_max that maximises the expected speedup."""
    return max(range(1, k_max + 1), key=lambda k: expected_speedup(alpha, k, c))
