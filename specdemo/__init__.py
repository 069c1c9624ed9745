"""specdemo: speculative decoding with exact acceptance sampling, made visible."""

from specdemo.engine import (
    Result,
    Round,
    Stats,
    autoregressive_generate,
    generate,
    speculative_generate,
)
from specdemo.sampling import SamplingConfig

__all__ = [
    "Result",
    "Round",
    "SamplingConfig",
    "Stats",
    "autoregressive_generate",
    "generate",
    "speculative_generate",
]
