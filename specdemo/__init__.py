"""specdemo: speculative decoding with exact acceptance sampling, made visible."""

from specdemo.defaults import DEFAULTS
from specdemo.drafters import (
    Drafter,
    HybridDrafter,
    LookupDrafter,
    ModelDrafter,
    Proposal,
    make_drafter,
)
from specdemo.engine import (
    autoregressive_generate,
    generate,
    make_generator,
    speculative_generate,
)
from specdemo.policy import AutoK
from specdemo.rounds import Result, Round, Stats, Step
from specdemo.sampling import RULES, AcceptanceRule, SamplingConfig
from specdemo.theory import StepCosts

__all__ = [
    "DEFAULTS",
    "RULES",
    "AcceptanceRule",
    "AutoK",
    "Drafter",
    "HybridDrafter",
    "LookupDrafter",
    "ModelDrafter",
    "Proposal",
    "Result",
    "Round",
    "SamplingConfig",
    "Stats",
    "Step",
    "StepCosts",
    "autoregressive_generate",
    "generate",
    "make_drafter",
    "make_generator",
    "speculative_generate",
]
