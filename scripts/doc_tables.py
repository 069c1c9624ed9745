"""Every measured table in the docs, written from the raw JSON in docs/bench/.

    python scripts/doc_tables.py --write   # rewrite each table from its JSON
    python scripts/doc_tables.py --check   # list the tables that differ from their JSON

A table (or a sentence with figures) lives between ``<!-- table: NAME -->`` and ``<!-- /table -->``
in README.md, docs/*.md or docs/bench/*.md; the docs_writer package beside this script writes
each NAME, one module per document (docs_writer/__init__.py says which file to open first).
tests/test_doc_tables.py fails when a doc's table differs from what its JSON gives, or when a
measured table sits outside the markers.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # specdemo from the repository, docs_writer beside

from docs_writer import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
