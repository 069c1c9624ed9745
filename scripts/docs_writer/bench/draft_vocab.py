"""docs/bench/draft-vocab.md's blocks: how much of the target's text each cut of the draft's
head covers (draft-vocab.json), as scripts/draft_vocab_check.py renders it."""

from docs_writer.core import load
from docs_writer.runs import leads


def draft_vocab() -> str:
    import draft_vocab_check  # noqa: PLC0415 (a script beside this package: loaded only when drawn)

    return draft_vocab_check.markdown(load("draft-vocab.json"))


BLOCKS = {"draft-vocab": draft_vocab, **leads("draft-vocab")}
