"""Which precision and 4-bit kernel a pair runs at here (`running_precision`): on a CPU, the 4-bit
kernel chosen by measurement (`choose_kernel`); on a GPU, NF4; each checked to run at all.

The candidates are bitsandbytes NF4 when its fused CPU kernel is registered (bitsandbytes
registers it only on CPUs with AVX512-BF16; elsewhere each layer dequantises its whole weight on
every call) and torch's int4 kernel (`int4.py`, vectorised for AVX2 and AVX512). Each runs one
layer of the embedded target's MLP width, a step's row and a verify's rows, the candidates taking
turns; the fastest wins, with ties going to NF4, the format a GPU runs. NF4 without its fused
kernel is timed too, so the page can say what it would have cost.
"""

from __future__ import annotations

import functools
import statistics
import time
from dataclasses import dataclass

import torch

from specdemo.models import int4
from specdemo.models.convert import import_bitsandbytes
from specdemo.models.pairs import FOUR_BIT, resolve_precision, short_dtype, zero_gpu
from specdemo.models.progress import Progress, report

PROBE_SHAPE = (1536, 8960)  # (in, out): the embedded target's MLP up projection
PROBE_ROWS = (1, 4)  # a plain step and the verify of K = 3
PROBE_REPEATS = 7
# A challenger must beat NF4 by this factor: on AVX512-BF16 the two are within noise of each
# other (docs/BENCHMARKS.md, "Which 4-bit kernel"), and the choice should not flip run to run.
MARGIN = 1.25
NAMES = {"nf4": "bitsandbytes NF4", "int4": "torch int4", "nf4-unfused": "bitsandbytes NF4"}
NO_FUSED_NF4 = "bitsandbytes' fused NF4 kernel needs AVX512-BF16, which this CPU lacks"


@dataclass(frozen=True)
class KernelChoice:
    """What the probe found: `kernel` ("nf4", "int4", or "" when no 4-bit kernel runs here),
    `seconds` per candidate for one probe layer (the mean of its PROBE_ROWS passes; "nf4-unfused"
    is NF4 without its fused kernel), `problems` per candidate that could not run, and `why`, the
    sentence the page shows."""

    kernel: str
    seconds: dict[str, float]
    problems: dict[str, str]
    isa: str
    fused_nf4: bool

    @property
    def problem(self) -> str:
        """Why each candidate that could not run did not, in a line."""
        return "; ".join(f"{NAMES[k]}: {p}" for k, p in self.problems.items())

    @property
    def why(self) -> str:
        shape = f"{PROBE_SHAPE[0]}×{PROBE_SHAPE[1]}"
        if not self.kernel:
            return f"no 4-bit kernel runs on this CPU ({self.problem})"
        ms = {k: f"{s * 1e3:.2f} ms" for k, s in self.seconds.items()}
        if self.kernel == "int4" and not self.fused_nf4:
            slower = self.seconds.get("nf4-unfused", 0) / self.seconds["int4"]
            nf4 = f", NF4 {ms['nf4-unfused']} ({slower:.1f}× slower)" if "nf4-unfused" in ms else ""
            return (
                f"{NO_FUSED_NF4} (measured here on a {shape} layer: torch int4 {ms['int4']}{nf4})"
            )
        other = "int4" if self.kernel == "nf4" else "nf4"
        if other not in ms:
            return f"the only 4-bit kernel that runs here ({NAMES[self.kernel]}: {ms[self.kernel]})"
        figures = (
            f"measured here on a {shape} layer: {NAMES[self.kernel]} {ms[self.kernel]}, "
            f"{NAMES[other]} {ms[other]}"
        )
        ratio = self.seconds[other] / self.seconds[self.kernel]
        if ratio >= MARGIN:  # words follow the figures: "faster" only where it is
            return f"{NAMES[self.kernel]} is {ratio:.1f}× faster than {NAMES[other]} ({figures})"
        return (
            f"{NAMES[self.kernel]} runs: {NAMES[other]} is not {MARGIN:.2f}× faster here, "
            f"and NF4 is the format a GPU runs ({figures})"
        )


def fused_nf4() -> bool:
    """bitsandbytes registered its fused CPU 4-bit kernel (`backends/cpu/ops.py`)."""
    try:
        import_bitsandbytes()
    except Exception:
        return False
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    return has_kernel("bitsandbytes::gemv_4bit", "CPU")


def kept_converted(choice: KernelChoice, converted) -> tuple[str, str] | None:
    """(kernel, the page's sentence) when `choice`'s pick has no converted models yet but the
    other candidate's are cached (`converted(kernel)`): the probe's two kernels are close on
    some CPUs, and converting the pair again takes minutes, so a start keeps the kernel whose
    models it has rather than follow a probe that flipped; None otherwise."""
    other = "nf4" if choice.kernel == "int4" else "int4"
    if not choice.kernel or other not in choice.seconds or converted(choice.kernel):
        return None
    if not converted(other):
        return None
    ms = {k: f"{s * 1e3:.2f} ms" for k, s in choice.seconds.items()}
    return other, (
        f"{NAMES[other]} runs: its converted models are cached here, and converting them for "
        f"{NAMES[choice.kernel]} would take minutes (measured here on a "
        f"{PROBE_SHAPE[0]}×{PROBE_SHAPE[1]} layer: {NAMES[choice.kernel]} {ms[choice.kernel]}, "
        f"{NAMES[other]} {ms[other]}; SPECDEMO_PRECISION={choice.kernel} converts them)"
    )


@functools.cache
def choose_kernel() -> KernelChoice:
    """Time the candidates once per process on this CPU and pick one (see the module doc)."""
    fused = fused_nf4()
    layers, problems = {}, {}
    for name in ("nf4" if fused else "nf4-unfused", "int4"):
        try:
            layers[name] = _probe_layer(name)
        except Exception as e:
            problems[name.removesuffix("-unfused")] = problem_line(e)
    seconds = time_layers(layers)
    return KernelChoice(pick(seconds, fused), seconds, problems, int4.isa(), fused)


def pick(seconds: dict[str, float], fused: bool) -> str:
    """The kernel to run, from probe `seconds` per candidate (see `choose_kernel`)."""
    candidates = {k: s for k, s in seconds.items() if k == "int4" or (k == "nf4" and fused)}
    if not candidates:
        return ""
    best = min(candidates, key=candidates.get)
    if "nf4" in candidates and candidates["nf4"] < MARGIN * candidates[best]:
        return "nf4"
    return best


@torch.inference_mode()
def time_layers(layers: dict[str, torch.nn.Module], clock=time.perf_counter) -> dict[str, float]:
    """Median seconds per layer of one pass, averaged over PROBE_ROWS; the layers take turns, so
    a machine that slows part-way slows them alike. The first round is a warm-up (bitsandbytes
    repacks its weight at the first call)."""
    inputs = {
        n: torch.randn(1, n, PROBE_SHAPE[0], dtype=torch.bfloat16, device="cpu") for n in PROBE_ROWS
    }
    times = {name: [] for name in layers}
    for _ in range(PROBE_REPEATS + 1):
        for name, layer in layers.items():
            start = clock()
            for x in inputs.values():
                layer(x)
            times[name].append((clock() - start) / len(inputs))
    return {name: statistics.median(t[1:]) for name, t in times.items()}


def _probe_layer(name: str) -> torch.nn.Module:
    weight = torch.randn(PROBE_SHAPE[1], PROBE_SHAPE[0], device="cpu") * 0.02  # (out, in)
    if name == "int4":
        linear = torch.nn.Linear(*PROBE_SHAPE, bias=False)
        linear.weight.data = weight
        return int4.Int4Linear.from_linear(linear, int4.group_size(PROBE_SHAPE[0]))
    import bitsandbytes as bnb

    layer = bnb.nn.Linear4bit(
        *PROBE_SHAPE, bias=False, compute_dtype=torch.bfloat16, quant_type="nf4"
    )
    layer.weight = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4")
    return layer.to("cpu").eval()  # quantises; eval() lets the fused kernel run


# ---------------------------------------------------------------- the precision that runs


def running_precision(
    precision: str | None = None,
    device: str = "cpu",
    dtype: torch.dtype = torch.bfloat16,
    progress: Progress | None = None,
    converted=lambda kernel: False,
) -> tuple[str, str, str]:
    """(the precision a load on `device` computing in `dtype` runs at, the note that says why when
    it is not the one asked for (see `pairs.fallback_precision`), the note that says why its
    4-bit kernel runs); None: env or default.

    "4bit" on a CPU runs the kernel `kernels.choose_kernel` measures fastest, a stage of its
    own, unless only the other's models are converted (`converted(kernel)`, `kept_converted`);
    on CUDA, NF4. A 4-bit load on CUDA also needs the GPU's own probe to pass; on ZeroGPU no GPU
    is lent at load time, so only the CPU is probed. Apple's GPU runs 16-bit: neither
    4-bit kernel has an MPS path here.
    """
    precision = resolve_precision(precision)
    if device.startswith("mps") and precision in ("4bit", *FOUR_BIT):
        why = "no 4-bit kernel runs on Apple's GPU (MPS) here"
        if precision == "4bit":
            return "bf16", "", f"{why}: 16-bit on the GPU instead (not measured)"
        return fallback_precision(precision, why, dtype) + ("",)
    kernel_note = ""
    if precision == "4bit" and device == "cpu":
        report(progress, PROBE_STAGE, 0, 1)
        choice = choose_kernel()
        report(progress, PROBE_STAGE, 1, 1)
        if not choice.kernel:
            return fallback_precision("4bit", choice.problem, dtype) + ("",)
        precision, kernel_note = kept_converted(choice, converted) or (choice.kernel, choice.why)
    elif precision == "4bit":
        precision = "nf4"
    problem = None
    if precision == "nf4":
        problem = four_bit_problem()
        if problem is None and device.startswith("cuda") and not zero_gpu():
            problem = four_bit_problem(device, dtype)
        if problem is None and device == "cpu" and not kernel_note and not fused_nf4():
            kernel_note = (
                f"{NO_FUSED_NF4}: every 4-bit layer dequantises its weight on each call "
                "(SPECDEMO_PRECISION=4bit picks the fastest kernel here)"
            )
    elif precision == "int4":
        problem = int4_problem(device)
    return fallback_precision(precision, problem, dtype) + (kernel_note,)


PROBE_STAGE = "probe 4-bit kernels"


def fallback_precision(
    precision: str, four_bit_problem: str | None, dtype: torch.dtype = torch.bfloat16
) -> tuple[str, str]:
    """The precision that runs, and a note when it is not `precision`: a 4-bit precision needs
    its kernel working on this machine, and without it (`four_bit_problem` says why) the pair
    runs 16-bit in `dtype` (see `compute_dtype`), the dtype the 4-bit layers would compute in
    anyway. "4bit" is the automatic choice, its problem naming every kernel that was tried."""
    if precision not in ("4bit", *FOUR_BIT) or four_bit_problem is None:
        return precision, ""
    running = short_dtype(str(dtype).removeprefix("torch."))
    library = {"nf4": "bitsandbytes: ", "int4": "torch int4: "}.get(precision, "")
    return "bf16", f"4-bit unavailable here ({library}{four_bit_problem}): running {running}"


@functools.cache
def int4_problem(device: str = "cpu") -> str | None:
    """None when torch's int4 kernel runs a small layer on `device`, else why not, in a line."""
    if device != "cpu":
        return f"torch's int4 kernel runs on the CPU, not on {device}"

    def layer():
        return int4.Int4Linear.from_linear(torch.nn.Linear(64, 64, bias=False), 64)

    return layer_problem(layer, "an int4", device, int4.KERNEL_DTYPE)


@functools.cache
def four_bit_problem(device: str = "cpu", dtype: torch.dtype = torch.bfloat16) -> str | None:
    """None when bitsandbytes runs an NF4 layer computing in `dtype` on `device`, else why not,
    in a line.

    The CPU is where packaged models are quantised (`convert`), on any device. Any exception
    counts: a missing package (ImportError), a wheel without kernels for this platform or GPU
    (RuntimeError, NotImplementedError) or a native library that fails to load (OSError).
    """

    def layer():
        import_bitsandbytes()
        import bitsandbytes as bnb

        layer = bnb.nn.Linear4bit(64, 64, bias=False, compute_dtype=dtype, quant_type="nf4")
        return layer.to(device)  # quantises the weight

    return layer_problem(layer, "an NF4", device, dtype)


def layer_problem(make_layer, name: str, device: str, dtype: torch.dtype) -> str | None:
    """None when the layer `make_layer` builds gives finite output for a row of ones, else why
    not, in a line; any exception counts."""
    try:
        with torch.no_grad():
            out = make_layer()(torch.ones(1, 64, dtype=dtype, device=device))
        if not torch.isfinite(out).all():
            return f"{name} layer returned non-finite values"
    except Exception as e:
        return problem_line(e)
    return None


def problem_line(e: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    first_line = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first_line}"[:160].rstrip(": ")
