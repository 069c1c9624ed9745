"""How a figure is written in a block: a Markdown table, a ratio ("1.23×"), a range of them
("1.09–1.78×"), a temperature, a share, a verdict. Every document's module writes its cells with
these, so one figure reads the same wherever it stands."""

import re


def row(*cells) -> str:
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def table(header: list[str], rows: list[list]) -> str:
    return "\n".join([row(*header), "|" + "---|" * len(header), *(row(*r) for r in rows)])


def x(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}×"


def temp(t: float) -> str:
    return f"{t:g}"


def span(values, fmt=lambda v: f"{v:.2f}", sep="–") -> str:
    """min–max of `values`, as `fmt` writes each."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}{sep}{hi}"


def xs(values) -> str:
    """A range of ratios: "1.09–1.78×"."""
    return span(list(values)) + "×"


def one(v: float) -> str:
    return f"{v:.1f}"


def yes(met: bool) -> str:
    return "yes" if met else "**no**"


def pct(v: float) -> str:
    return f"{v:.1%}"


def nth_table(text: str, n: int) -> str:
    """The `n`th Markdown table in `text`."""
    return re.findall(r"(?:^\|.*\n?)+", text, re.M)[n].strip()
