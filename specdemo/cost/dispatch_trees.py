"""Token trees on a GPU, predicted from the dispatch model's measured inputs (``dispatch``).

At batch 1 an eager pass costs its host-side dispatch, and the ops a pass dispatches barely grow
with its rows (1,025 ops for one token, 1,032 for 2 to 9, ``dispatch_measure.count_kernels``), so a
pass over a tree of 16-64 nodes is predicted to cost what the widest pass measured costs on the
host, unless the GPU itself takes longer: its weights and KV cache at the memory bandwidth, the
kernel floor, and, above one row, bitsandbytes' NF4 weights dequantised to bf16 (written, then read
by the matmul) and the matmuls' arithmetic at the GPU's dense bf16 peak. Every figure here is
predicted, none measured.

``tree_rows`` prices a pass per pair and tree size; ``best_shapes`` the fastest chain and the
fastest fishbone (``tree``) for a captured draft step, at the embedded pair's measured α and the
policy's prior chance that a sibling is kept (``policy.SIBLING_PRIOR``, assumed).
"""

from dataclasses import dataclass

from specdemo.cost import dispatch
from specdemo.cost.dispatch import ARCHS, H200, HALF_BYTES, Gpu, Measured
from specdemo.cost.policy import SIBLING_PRIOR, expected_tree_tokens
from specdemo.models.pairs import PAIRS

TREE_ROWS = (16, 32, 64)
PEAK_BF16_FLOPS = {H200.name: 989e12}  # dense bf16 tensor cores (NVIDIA H200 datasheet: 1,979
#   TFLOPS with sparsity); assumed reachable, so the arithmetic term is a floor
DEQUANT_BYTES_PER_PARAM = 2 * HALF_BYTES  # each NF4 weight as bf16, written and read again
WIDTHS, DEPTHS = range(1, 9), range(1, 9)  # the fishbones priced: K x w, at most 65 rows


def linear_params(arch: dispatch.Arch) -> int:
    """Weights of the decoder layers' linear maps (what NF4 holds and a pass multiplies by)."""
    h, f = arch.hidden_size, arch.intermediate_size
    kv = arch.num_key_value_heads * h // arch.num_attention_heads
    return arch.num_hidden_layers * (2 * h * h + 2 * h * kv + 3 * h * f)


def pass_seconds(arch, measured: Measured, rows: int, gpu: Gpu = H200) -> tuple[float, float]:
    """(seconds, device seconds) of an eager pass over `rows` tokens: the host time measured
    at that width where one was, else at the widest measured (dispatch does not grow with
    rows), or the device time if that is larger."""
    widest = max(measured.host)
    host = measured.host.get(rows, measured.host[widest])
    kernels = measured.kernels.get(rows, measured.kernels[max(measured.kernels)])
    device = dispatch.device_seconds(arch, kernels, arch.vocab_size, rows, gpu)
    if rows > 1:
        params = linear_params(arch)
        device += params * DEQUANT_BYTES_PER_PARAM / gpu.bytes_per_s
        device += (
            2 * (params + arch.vocab_size * arch.hidden_size) * rows / PEAK_BF16_FLOPS[gpu.name]
        )
    return max(host, device), device


@dataclass(frozen=True)
class TreePrediction:
    """One pair on one GPU: a pass over each of TREE_ROWS in target steps and its device ms;
    the fastest chain and fishbone with the draft step captured, as (K, width, rows, speedup)."""

    pair: str
    gpu: str
    steps: dict[int, float]
    device_ms: dict[int, float]
    chain: tuple[int, int, int, float]
    tree: tuple[int, int, int, float]


def best_shapes(pair, measured: dict[str, Measured], gpu: Gpu = H200) -> TreePrediction | None:
    """The pair's tree passes and its fastest chain and fishbone (``expected_tree_tokens`` at
    ALPHA_CODE and SIBLING_PRIOR for every rank) with a captured draft step; None when an arch
    of the pair was not measured."""
    names = dispatch.arch_of(pair.target), dispatch.arch_of(pair.draft)
    if not all(name in measured for name in names):
        return None
    target, draft = (ARCHS[n] for n in names)
    mt, md = (measured[n] for n in names)
    t_step = pass_seconds(target, mt, 1, gpu)[0]
    t_draft = (
        dispatch.device_seconds(draft, md.kernels[1], dispatch.draft_head_rows(draft), 1, gpu)
        + dispatch.GRAPH_REPLAY_S
    )
    alpha = dispatch.ALPHA_CODE

    def speedup(k: int, w: int) -> float:
        sibling = 1 - (1 - SIBLING_PRIOR) ** (w - 1)
        seconds = k * t_draft + pass_seconds(target, mt, 1 + k * w, gpu)[0]
        return expected_tree_tokens([alpha] * k, k, sibling) * t_step / seconds

    shapes = [(k, w, 1 + k * w, speedup(k, w)) for k in DEPTHS for w in WIDTHS]
    passes = {n: pass_seconds(target, mt, n, gpu) for n in TREE_ROWS}
    return TreePrediction(
        pair=pair.name,
        gpu=gpu.name,
        steps={n: s / t_step for n, (s, _) in passes.items()},
        device_ms={n: 1000 * d for n, (_, d) in passes.items()},
        chain=max((s for s in shapes if s[1] == 1), key=lambda s: s[3]),
        tree=max((s for s in shapes if s[1] > 1), key=lambda s: s[3]),
    )


def predict(measured: dict[str, Measured], pairs=None, gpu: Gpu = H200) -> list[TreePrediction]:
    """``best_shapes`` for every pair of `pairs` (default: the registered PAIRS) it covers."""
    found = (best_shapes(p, measured, gpu) for p in (PAIRS if pairs is None else pairs).values())
    return [p for p in found if p is not None]
