"""Getting a pair into memory: `load_pair` returns target, draft and tokenizer ready for the engine.

Packaged and tiny models load from the conversion cache (built on first use, or ahead of time by
`prepare`); hub ids and folders load directly. `check_tokenizers` refuses a pair whose draft would
propose token ids that mean something else, or nothing, to the target. "4bit" runs NF4 on a GPU
and, on a CPU, the 4-bit kernel the probe measures fastest (`kernels.choose_kernel`). Where a
4-bit kernel cannot run (`four_bit_problem`) or a 4-bit model fails to load, the pair loads
16-bit (bf16; fp16 on a GPU without bf16); where a device's default hub pair fails to load, the
embedded pair loads instead; either way the summary says why.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import torch

from specdemo.draft import draft_vocab
from specdemo.models import int4
from specdemo.models.convert import (
    bnb_config,
    cached_model,
    fix_generation_config,
    import_bitsandbytes,
    is_cached,
    quiet_transformers,
    release_freed_memory,
)
from specdemo.models.kernels import fallback_precision, problem_line, running_precision
from specdemo.models.pairs import (
    DEFAULT_PAIR,
    FOUR_BIT,
    LoadedPair,
    LoadSummary,
    ModelSpec,
    PairSpec,
    compute_dtype,
    larger_pair_note,
    resolve_device,
    resolve_pair_spec,
    resolve_precision,
    zero_gpu,
)
from specdemo.models.progress import Progress, report
from specdemo.runtime.lm import vocab_size

# English, code, indentation and non-ASCII: where tokenizers of different families part ways.
PROBE_TEXT = "def add(a, b):\n    return a + b  # café ✓"


def prepare(
    name: str | None = None,
    precision: str | None = None,
    progress: Progress | None = None,
    *,
    cache: str | os.PathLike | None = None,
) -> list[Path]:
    """Build every cache the pair needs at `precision` for this machine's device (on a CPU,
    "4bit" takes the probe's kernel; on a GPU, NF4), so the next load is warm; returns them."""
    spec = resolve_pair_spec(name)
    precision, *_ = running_precision(precision, resolve_device(None), progress=progress)
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
    """Target, draft and tokenizer of a pair on `device` at `precision`; None: env or default.

    The default is the embedded pair on every device. On a CUDA GPU with room for a larger Hub
    pair, the summary's `suggestion` names it (`pairs.larger_pair_note`); nothing downloads it
    unless it is named. Raises ValueError when the draft cannot draft for the target (see
    `check_tokenizers`).
    """
    start = time.perf_counter()
    requested, device = resolve_precision(precision), resolve_device(device)
    spec = resolve_pair_spec(name, target, draft, device)
    half = compute_dtype(device, _capability(device))
    loaded = _load_checked(spec, requested, device, half, cache, progress)
    target_model, draft_model, tokenizer, precision, note, kernel_note, cold = loaded
    dtype = torch.float32 if precision == "fp32" else half
    for model in (target_model, draft_model):
        fix_generation_config(model, tokenizer)
    draft_vocab.rank_rows(draft_model)  # its default head becomes a view: no copy of its rows
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
        cold=cold,
        dtype=str(dtype).removeprefix("torch."),
        requested="" if requested == precision else requested,
        note=note,
        kernel_note=kernel_note,
        suggestion=_suggestion(spec, device),
    )
    return LoadedPair(target_model, draft_model, tokenizer, summary)


class FourBitLoadError(RuntimeError):
    """A model failed to load or quantise in 4-bit; the message says which and why in a line."""


def check_tokenizers(
    target_model,
    draft_model,
    target_tokenizer,
    draft_tokenizer,
    *,
    names: tuple[str, str] | None = None,
) -> None:
    """Raise ValueError unless every token id the draft proposes means the same to the target.

    The engine feeds the target's token ids to the draft and checks the draft's ids with the
    target, so (a) both tokenizers must encode `PROBE_TEXT` to the same ids and (b) the draft may
    score no more ids than the target has output rows for (fewer is fine: a prefix, e.g. Qwen's
    151,936 rows against 152,064). `names` (target, draft) default to the models' name_or_path.
    """
    target, draft = names or (
        getattr(target_model, "name_or_path", "") or "target",
        getattr(draft_model, "name_or_path", "") or "draft",
    )
    problem = f"the draft {draft!r} cannot draft for the target {target!r}"
    t = target_tokenizer.encode(PROBE_TEXT, add_special_tokens=False)
    d = draft_tokenizer.encode(PROBE_TEXT, add_special_tokens=False)
    if t != d:
        i = next(i for i in range(max(len(t), len(d))) if t[i : i + 1] != d[i : i + 1])
        raise ValueError(
            f"{problem}: the draft's tokenizer encodes the probe text {PROBE_TEXT!r} differently "
            f"from the target's: target {_token_at(target_tokenizer, t, i)}, "
            f"draft {_token_at(draft_tokenizer, d, i)} (first difference at position {i})"
        )
    t_rows, d_rows = vocab_size(target_model), vocab_size(draft_model)
    if d_rows > t_rows:
        raise ValueError(
            f"{problem}: the draft's vocabulary has {d_rows:,} rows, more than the target's "
            f"{t_rows:,}, so it could propose token ids the target has no logits for"
        )


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
        release_freed_memory()
    return time.perf_counter() - start


def count_params(model: torch.nn.Module) -> int:
    """Parameters before quantisation: a bnb 4-bit weight stores two values per byte element, and
    an int4 layer holds its weight and bias as buffers."""
    total = 0
    for p in model.parameters():
        state = getattr(p, "quant_state", None)
        total += math.prod(state.shape) if state is not None else p.numel()
    for m in model.modules():
        if isinstance(m, int4.Int4Linear):
            total += m.in_features * m.out_features + (m.out_features if m.bias is not None else 0)
    return total


def _load_checked(
    spec: PairSpec, requested: str, device: str, half: torch.dtype, cache, progress
) -> tuple[torch.nn.Module, torch.nn.Module, object, str, str, bool]:
    """(target, draft, tokenizer, precision, note, kernel note, cold) of `spec`, its tokenizers
    checked; a 4-bit load that fails runs 16-bit, and `note` says why (see `running_precision`)."""
    local = [m for m in (spec.target, spec.draft) if m.kind != "hub"]

    def converted(kernel: str) -> bool:
        return bool(local) and all(is_cached(m, kernel, cache) for m in local)

    precision, note, kernel_note = running_precision(requested, device, half, progress, converted)
    loaded = None
    try:
        loaded = _load_models(spec, precision, device, half, cache, progress)
    except FourBitLoadError as e:
        precision, note = fallback_precision(precision, str(e), half)
        kernel_note = ""
    if loaded is None:  # outside the except block, so the failed load is freed first
        loaded = _load_models(spec, precision, device, half, cache, progress)
    target_model, draft_model, cold = loaded
    tokenizer = _load_tokenizer(spec.target, precision, cache)
    check_tokenizers(
        target_model,
        draft_model,
        tokenizer,
        _load_tokenizer(spec.draft, precision, cache),
        names=(spec.target.name, spec.draft.name),
    )
    return target_model, draft_model, tokenizer, precision, note, kernel_note, cold


def _load_models(
    spec: PairSpec, precision: str, device: str, half: torch.dtype, cache, progress
) -> tuple[torch.nn.Module, torch.nn.Module, bool]:
    """(target, draft, whether a cache was built); raises FourBitLoadError from a 4-bit load."""
    dtype = torch.float32 if precision == "fp32" else half
    target, target_cold = _load_model(spec.target, precision, device, dtype, cache, progress)
    draft, draft_cold = _load_model(spec.draft, precision, device, dtype, cache, progress)
    return target, draft, target_cold or draft_cold


def _load_model(
    spec: ModelSpec, precision: str, device: str, dtype: torch.dtype, cache, progress
) -> tuple[torch.nn.Module, bool]:
    cold = False
    source = spec.source
    if spec.kind != "hub":
        folder, cold = cached_model(spec, precision, cache, progress)
        source = str(folder)
    stage = f"load {spec.name}"
    report(progress, stage, 0, 1)
    try:
        model = _from_pretrained(spec, source, precision, device, dtype)
    except Exception as e:
        if precision not in FOUR_BIT:
            raise
        # e.g. bitsandbytes without kernels for this GPU, raising as it quantises or moves weights
        raise FourBitLoadError(f"{spec.name} failed to load in 4-bit: {problem_line(e)}") from e
    report(progress, stage, 1, 1)
    return model.eval(), cold


def _from_pretrained(
    spec: ModelSpec, source: str, precision: str, device: str, dtype: torch.dtype
) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    if precision == "nf4" and spec.kind == "hub":
        kwargs = {"quantization_config": bnb_config(dtype), "dtype": dtype}
    elif precision == "nf4":  # a cached bnb checkpoint, its quantization_config in config.json
        import_bitsandbytes()
        # On CPU, bnb repacks every 4-bit weight at its first forward. A memory-mapped checkpoint
        # would stay mapped behind the repacked copy; reading it into memory instead costs a
        # little load time (docs/MODELS.md, "Trade-off: disable_mmap=True").
        kwargs = {"disable_mmap": device == "cpu"}
    elif precision == "int4" and spec.kind != "hub":  # packed for this CPU (`convert.stored_kind`)
        return int4.load(Path(source), device)
    else:  # 16-bit, or a hub model packed to int4 as it loads
        kwargs = {"dtype": int4.KERNEL_DTYPE if precision == "int4" else dtype}
    with quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(
            source, device_map=device, trust_remote_code=False, **kwargs
        )
    if precision == "nf4":
        use_compute_dtype(model, dtype)
    elif precision == "int4":
        model = int4.quantize(model)
    return model


def use_compute_dtype(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Make a 4-bit model compute in `dtype`: its NF4 layers (the dtype they compute in and the
    one their weights dequantise to, `quant_state.dtype`, which a multi-token pass multiplies
    in), and its unquantised 16-bit weights (embeddings, norms, biases). A cached checkpoint
    records bfloat16 and transformers keeps what a pre-quantised checkpoint records, so a float16
    GPU needs this after loading; float32 weights (the tiny pair's) stay as they are."""
    for module in model.modules():
        if hasattr(module, "compute_dtype"):  # bitsandbytes' Linear4bit
            module.compute_dtype = dtype
            state = getattr(module.weight, "quant_state", None)
            if state is not None:
                state.dtype = dtype
    for param in model.parameters():
        if param.dtype in (torch.bfloat16, torch.float16) and param.dtype != dtype:
            param.data = param.data.to(dtype)
    quantization = getattr(model.config, "quantization_config", None)
    if quantization is not None and hasattr(quantization, "bnb_4bit_compute_dtype"):
        quantization.bnb_4bit_compute_dtype = dtype


def _suggestion(spec: PairSpec, device: str) -> str:
    """A larger pair this CUDA GPU has room for, when the embedded default was loaded: not on
    ZeroGPU, whose pair is fixed, nor before torch can see the GPU."""
    if spec.name != DEFAULT_PAIR or zero_gpu() or _capability(device) is None:
        return ""
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return larger_pair_note(free)


def _capability(device: str) -> tuple[int, int] | None:
    """The CUDA GPU's compute capability; None off CUDA or when torch cannot tell yet."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability(device)


def _load_tokenizer(spec: ModelSpec, precision: str, cache):
    from transformers import AutoTokenizer

    source = spec.source if spec.kind == "hub" else cached_model(spec, precision, cache)[0]
    return AutoTokenizer.from_pretrained(source, trust_remote_code=False)


def _token_at(tokenizer, ids: list[int], i: int) -> str:
    if i >= len(ids):
        return f"ends after {len(ids)} tokens"
    return f"has id {ids[i]} ({tokenizer.convert_ids_to_tokens(ids[i])!r})"
