"""How the app writes numbers in its notes and tables.

``prob`` writes a probability in three significant digits, so a small one keeps its size
(0.0421, 2.13e-4) instead of rounding to "0.000"; exactly 0 and exactly 1 read "0" and "1".
"""

SCIENTIFIC_BELOW = 1e-3  # smaller probabilities are written as 2.13e-4
MAX_DIGITS = 9  # the most significant digits spent telling a probability below 1 from 1


def prob(x: float) -> str:
    """A probability in 3 significant digits: 0.912, 0.0421, 2.13e-4, 0 and 1."""
    if x == 0 or x == 1:
        return f"{abs(x):g}"  # -0.0 (a residual's max(0, ·) times a mask) reads "0"
    if 0 < x < SCIENTIFIC_BELOW:
        mantissa, exponent = f"{x:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    # A value just below 1 (u = 0.99996 against min(1, p/q) = 1) must not read as 1 itself.
    digits = 3
    while f"{x:.{digits}g}" == "1" and x < 1 and digits < MAX_DIGITS:
        digits += 1
    return f"{x:.{digits}g}"
