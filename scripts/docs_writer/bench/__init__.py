"""The measured blocks of docs/bench/'s documents: older runs (history.py), beside busy
processes (busy.py), the judges (judges.py), the draft's vocabulary (draft_vocab.py) and the
dispatch model's architectures (gpu.py), one module per document."""
