"""The conversion cache: each packaged or tiny model converted once and saved under `cache_root()`.

`cached_model` returns the folder of a model converted for a precision (NF4 via bitsandbytes,
int4 packed for this CPU's vector width, or float), building it when absent: the GGUF is
dequantised, the duplicate embedding re-tied, the EOS ids fixed, and the folder renamed into
place under a cross-process lock, marker written last.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import hashlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from specdemo.models import int4
from specdemo.models.gguf import assemble_gguf, read_json, write_json
from specdemo.models.pairs import END_TOKENS, PAD_TOKEN, ModelSpec, cache_root
from specdemo.models.progress import Progress, report
from specdemo.models.tiny import TINY_TEXT, build_tiny_model, build_tiny_tokenizer

try:
    import fcntl
except ImportError:  # Windows: builds are not guarded against a second process
    fcntl = None

CACHE_FORMAT = 2  # bump to rebuild every converted model in the cache
_COMPLETE = "specdemo-complete.json"


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
    """Cached checkpoints are NF4 ("4bit"), int4 packed for one vector width ("int4-avx2"), or
    float; bf16 and fp32 both load from the float one."""
    if precision == "int4":
        return f"int4-{int4.isa()}"  # the packed layout depends on it (`int4`)
    return "4bit" if precision == "nf4" else "float"


def is_cached(spec: ModelSpec, precision: str, cache: str | os.PathLike | None = None) -> bool:
    """Whether `spec` converted for `precision` is in the cache, finished."""
    kind = stored_kind(precision)
    folder = cache_root(cache) / "models" / f"{model_key(spec)}-{kind}"
    return read_json(folder / _COMPLETE) == {
        "format": CACHE_FORMAT,
        "model": repr(spec),
        "kind": kind,
    }


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
    if read_json(folder / _COMPLETE) == marker:
        return folder, False
    with _exclusive(folder.with_name(folder.name + ".lock")):
        if read_json(folder / _COMPLETE) == marker:  # another process built it while we waited
            return folder, False
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        stage = f"convert {spec.name} ({kind})"
        report(progress, stage, 0, 1)
        with quiet_transformers():
            model, tokenizer = _float_model(spec, cache, progress)
            if kind == "4bit":
                model = quantize(model)
            elif kind.startswith("int4"):
                model = int4.quantize(model)
            fix_generation_config(model, tokenizer)
            model.save_pretrained(partial)
            tokenizer.save_pretrained(partial)
        del model
        release_freed_memory()  # before the next conversion or load, not at exit
        write_json(partial / _COMPLETE, marker)
        os.replace(partial, folder)
        report(progress, stage, 1, 1)
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
    # For qwen2, transformers parses the GGUF metadata (151k tokens and merges) in Python, slowly
    # (docs/MODELS.md). Reading the config once and passing it on saves the parse that AutoModel and
    # AutoTokenizer would each repeat; PreTrainedTokenizerFast reads the file with the fast reader.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder, gguf_file=name)
    # dequantize=True: a plain dense model, never GGUF kernels fetched from the Hub.
    with patched(gguf_utils, "tqdm", functools.partial(gguf_utils.tqdm, disable=True)):
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


def quantize(model):
    """NF4 copy of a float model, built from its state dict (no float checkpoint on disk)."""
    quantized = type(model).from_pretrained(
        None,
        config=model.config,
        state_dict=model.state_dict(),
        quantization_config=bnb_config(),
        device_map="cpu",
    )
    return quantized.eval()


def bnb_config(dtype: torch.dtype = torch.bfloat16):
    """NF4 weights computing in `dtype` (see `pairs.compute_dtype`)."""
    from transformers import BitsAndBytesConfig

    import_bitsandbytes()
    return BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype
    )


def import_bitsandbytes():
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
        with patched(torch, "compile", lambda fn=None, **kwargs: fn):
            import bitsandbytes  # noqa: F401
    finally:
        log.setLevel(level)
        if hidden:
            del sys.modules["kernels"]


def fix_generation_config(model, tokenizer) -> None:
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


def release_freed_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (after a conversion or repack)."""
    gc.collect()
    try:  # glibc keeps freed heap pages unless asked; elsewhere this is a no-op
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
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
def patched(owner: object, name: str, value: object) -> Iterator[None]:
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
