"""The docs' measured blocks, written from the raw JSON in docs/bench/ and checked against it:
one module per document (readme, benchmarks, install, workshop; bench/ for docs/bench/'s), each
listing the blocks it writes in its ``BLOCKS``; a block several documents show (BENCHMARKS'
kernels table stands in HISTORY too) is listed once, by the first of them in DOCS' order.
Open core.py first: the markers, the check, the guard against figures typed by hand and the
command line; targets.toml holds the bounds the target rows compare figures with. cells.py,
runs.py and zerogpu.py are what the documents share: how a figure is written, what a run's JSON
says, what gpu.py asks for a default prompt.

    python scripts/doc_tables.py --write   # rewrite each block from its JSON
    python scripts/doc_tables.py --check   # list the blocks that differ from their JSON
"""

from docs_writer.core import (
    BLOCK,
    BUDGETS,
    DOCS,
    FIGURE,
    ROOT,
    TARGETS,
    TYPED,
    differing,
    hand_typed,
    main,
    rewrite,
)

__all__ = [
    "BLOCK",
    "BUDGETS",
    "DOCS",
    "FIGURE",
    "ROOT",
    "TARGETS",
    "TYPED",
    "differing",
    "hand_typed",
    "main",
    "rewrite",
]
