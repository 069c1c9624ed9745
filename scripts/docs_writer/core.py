"""The machinery every document shares: where the docs and their raw JSON are, the marked blocks
a writer fills (``<!-- table: NAME -->`` … ``<!-- /table -->``), the targets the checks read
from targets.toml, the guard against figures typed by hand, and the command line. It knows no
block's content: each document's module lists the blocks it writes (its ``BLOCKS``)."""

import argparse
import functools
import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "docs" / "bench"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(BENCH.glob("*.md"))]
BLOCK = re.compile(r"(<!-- table: ([\w-]+) -->\n)(.*?)(<!-- /table -->)", re.S)
# What the measured figures are checked against, by area: the bound each verdict compares with,
# and the figure its target column shows (targets.toml says what each is).
TARGETS = tomllib.loads(Path(__file__).with_name("targets.toml").read_text(encoding="utf-8"))

# A measured-looking figure: a number (or a range) in ×, ms, s, tok/s or target steps; in GB,
# MB, GiB or kB (not a bandwidth, GB/s); a percentage; minutes; or a count of what a measurement
# is made of (draws, samples, people).
NUMBER = r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s?[–-]\s?\d[\d,]*(?:\.\d+)?)?"
COUNTED = r"draws?|samples?|people|visitors|a case|per case"
FIGURE = re.compile(
    NUMBER + r"\s?(?:×|ms\b|s\b|tok/s\b|target steps?\b|[kMG]i?B\b(?!/s)|%|min(?:utes?)?\b"
    rf"|(?:{COUNTED})\b)"
)
# Docs outside the figure count, and why.
NOT_COUNTED = {
    "docs/bench/HISTORY.md": "older runs, kept as they were printed",
    "docs/bench/gpu-smoke-h200.md": "a lent GPU's own report, as scripts/gpu_smoke.sh wrote it",
}
# The figures a doc may type by hand, each with its reason: budgets, thresholds and levels, not
# measurements. At most BUDGETS.
TYPED = {
    ("docs/INSTALL.md", "10 s"): "gpu.SETUP_SECONDS, a budget; tests/app/page/test_zerogpu.py "
    "checks the sentence",
    ("docs/INSTALL.md", "90%"): "a test's threshold (SHARE in tests/app/page/test_zerogpu.py)",
    ("docs/BENCHMARKS.md", "95%"): "a confidence level, not a measurement",
}
BUDGETS = 10


def load(name: str):
    return json.loads((BENCH / name).read_text())


@functools.cache
def writers() -> dict[str, Callable[[], str]]:
    """Each block's writer by its name, from the module of every document; a name two modules
    write is an error. (Imported here, not above: those modules import this one.)"""
    from docs_writer import benchmarks, install, readme, workshop  # noqa: PLC0415
    from docs_writer.bench import busy, draft_vocab, gpu, history, judges  # noqa: PLC0415

    out = {}
    for module in (readme, benchmarks, install, workshop, history, busy, judges, draft_vocab, gpu):
        if twice := out.keys() & module.BLOCKS.keys():
            raise ValueError(f"{module.__name__} writes {sorted(twice)} again")
        out |= module.BLOCKS
    return out


def rewrite(text: str) -> str:
    """`text` with every marked table drawn anew from its JSON."""
    return BLOCK.sub(lambda m: m[1] + writers()[m[2]]().strip() + "\n" + m[4], text)


def differing() -> list[str]:
    """'doc: table' for each marked table that differs from what its JSON gives."""
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            if m[3].strip() != writers()[m[2]]().strip():
                out.append(f"{doc.relative_to(ROOT)}: {m[2]}")
    return out


def hand_typed(allowed: dict = TYPED) -> list[str]:
    """'doc:line: figure' for each measured-looking figure typed outside the marked tables and
    code blocks of README and every doc, but those `allowed` lists by (doc, figure)."""

    def blank(match: re.Match) -> str:  # a table or fenced code, its line breaks kept
        return re.sub(r"[^\n]", " ", match[0])

    out = []
    for doc in DOCS:
        name = str(doc.relative_to(ROOT))
        if name in NOT_COUNTED:
            continue
        text = doc.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", blank, BLOCK.sub(blank, text), flags=re.S)
        for number, line in enumerate(text.split("\n"), 1):
            out += [
                f"{name}:{number}: {m[0]}"
                for m in FIGURE.finditer(line)
                if (name, m[0]) not in allowed
            ]
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/doc_tables.py",
        description="Every measured table in the docs, written from the raw JSON in docs/bench/.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite each table from its JSON")
    action.add_argument(
        "--check",
        action="store_true",
        help="list the tables that differ from their JSON, and the measured-looking figures "
        f"typed by hand (none may be, but the {len(TYPED)} that TYPED lists with its reason)",
    )
    args = parser.parse_args(argv)
    if args.check:
        stale, typed = differing(), hand_typed()
        print("\n".join(stale) or "every table agrees with its JSON")
        print(f"{len(typed)} figures typed by hand outside TYPED:", *typed, sep="\n  ")
        return int(bool(stale) or bool(typed) or len(TYPED) > BUDGETS)
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        if (new := rewrite(text)) != text:
            doc.write_text(new, encoding="utf-8")
            print(f"rewrote {doc.relative_to(ROOT)}")
    return 0
