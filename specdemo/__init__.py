"""specdemo: speculative decoding with exact acceptance sampling, made visible."""

from specdemo.cost.policy import AutoK
from specdemo.cost.theory import StepCosts
from specdemo.decode.engine import (
    autoregressive_generate,
    generate,
    make_generator,
    speculative_generate,
)
from specdemo.decode.rounds import Result, Round, Stats, Step
from specdemo.defaults import DEFAULTS
from specdemo.draft.drafters import (
    Drafter,
    HybridDrafter,
    LookupDrafter,
    ModelDrafter,
    Proposal,
    make_drafter,
)
from specdemo.judge.sampling import RULES, AcceptanceRule, SamplingConfig

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
