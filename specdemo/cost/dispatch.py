"""The dispatch cost model: at batch 1 on a datacenter GPU a step costs per layer, not parameter.

``dispatch_measure`` times each architecture of ``ARCHS`` at its real depth but a tiny width on
the running machine, where what is left is host-side dispatch, and counts the ops a pass
dispatches (a proxy for kernel launches). ``predict`` turns those and each model's weight bytes
into GPU step costs for every registered pair, eager and with a CUDA-graph-captured draft step,
and into the speedup ``theory.StepCosts`` predicts from them.
"""

import re
from dataclasses import dataclass

from specdemo.cost.profile import COPY_KS, PROFILE_KS
from specdemo.cost.theory import StepCosts
from specdemo.draft import draft_vocab
from specdemo.models.pairs import PAIRS, ModelSpec, PairSpec
from specdemo.runtime.modes import PROFILE_CONTEXT


@dataclass(frozen=True)
class Arch:
    """A Qwen2 architecture, as `transformers.Qwen2Config` keyword arguments."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool


# The published configs (config.json) of Qwen/Qwen2.5-Coder-{size}-Instruct on the Hugging Face Hub.
ARCHS = {
    "0.5B": Arch(896, 24, 14, 2, 4864, 151936, True),
    "1.5B": Arch(1536, 28, 12, 2, 8960, 151936, True),
    "7B": Arch(3584, 28, 28, 4, 18944, 152064, False),
    "14B": Arch(5120, 48, 40, 8, 13824, 152064, False),
    "32B": Arch(5120, 64, 40, 8, 27648, 152064, False),
}
# A launch-bound datacenter GPU, the H200. Assumed, not measured here:
HBM_BYTES_PER_S = 4.8e12  # HBM3e, nominal (NVIDIA H200 datasheet), so device time is a floor
KERNEL_FLOOR_S = 2.5e-6  # a tiny kernel run back to back with the next: 2-3 us (NVIDIA blog
#   "Getting Started with CUDA Graphs", 2019: ~3 us per short kernel inside a graph on a V100)
GRAPH_REPLAY_S = 20e-6  # one cudaGraphLaunch of a captured draft step and its token read-back
# Half an RTX Pro 6000 Blackwell, what ZeroGPU lends by default ("large"): 1,792 GB/s of GDDR7
# for the whole card (512-bit bus at 28 Gbps, NVIDIA's announcement), half of it for a half.
RTX_PRO_HALF_BYTES_PER_S = 1.792e12 / 2
# Bytes a step reads, for a model loaded as specdemo loads it (``models.convert.bnb_config``):
NF4_BYTES_PER_PARAM = 0.5 + 4 / 64  # 4-bit codes + an fp32 absmax per 64-weight block
#   (bitsandbytes' default blocksize; bnb_config asks for no double quantisation)
HALF_BYTES = 2  # bf16: norms, biases, the KV cache and the output head, which transformers
#   leaves unquantised (quantizers/base.py, get_keys_to_not_convert) and which is read whole
CONSTANTS = (
    "HBM_BYTES_PER_S",
    "RTX_PRO_HALF_BYTES_PER_S",
    "KERNEL_FLOOR_S",
    "GRAPH_REPLAY_S",
    "NF4_BYTES_PER_PARAM",
)


@dataclass(frozen=True)
class Gpu:
    """A GPU as the model sees one: memory bandwidth, and the same kernel floor and graph replay
    for every GPU (launch costs are the host's and the driver's, not the card's)."""

    name: str
    bytes_per_s: float


H200 = Gpu("H200", HBM_BYTES_PER_S)
RTX_PRO_HALF = Gpu("RTX Pro 6000 Blackwell, half (ZeroGPU)", RTX_PRO_HALF_BYTES_PER_S)
GPUS = (H200, RTX_PRO_HALF)
# A GPU budget, not a prediction: what ZeroGPU is asked for per eager step (``step_budget``).
HOST_LAYER_S = 1.5e-3  # host-side dispatch per decoder layer: 1.46-1.53 ms measured on a 2-core
#   CPU (docs/bench/dispatch.json); a datacenter host dispatches faster, so this is an upper bound
OPS_PER_LAYER, OPS_FIXED = 39, 17  # non-view ops of a one-token pass (`count_kernels`), exactly
#   affine in depth: 36 a layer + 17 in bf16 and in NF4 dequantised per call (docs/bench/
#   dispatch.json, AVX2), 39 + 17 in NF4 on bitsandbytes' fused AVX512-BF16 kernel

# Per-token acceptance, greedy, measured on the embedded pair only (other pairs: assumed equal):
ALPHA_MEASURED_ON = "qwen-coder"
ALPHA_CODE = 0.82  # the 0.5B draft on code: median alpha/token over k = 1-4,
#   docs/bench/main.json (kept with the older runs, docs/bench/HISTORY.md)
ALPHA_COPY = 0.70  # prompt lookup on the copy set: median alpha over k = 2, 4, 8,
#   docs/bench/lookup.json
ALPHA_EDITS = 0.97  # copies from the suffix index on the edits set, greedy: the median alpha of
#   the "suffix" drafter under automatic K, docs/bench/edits.json
# The same run's tokens and drafts per target pass (medians): a copy's speedup is predicted from
# what its passes yielded, not from alpha as if each token held independently (copies fail where
# the text was edited, in bursts), at the drafts a pass it ran on the CPU, where wide passes cost
# more than on a GPU (a prediction that leaves the longer copies a GPU could afford unpriced).
TOKENS_A_PASS_EDITS = 9.85
DRAFTS_A_PASS_EDITS = 10.4


@dataclass(frozen=True)
class Measured:
    """One depth at tiny width on the running machine, per width: seconds of a pass with a warm
    KV cache, and the non-view ops it dispatches. A draft step is the width-1 pass: the
    drafter's path (base model, then a cut head) differs from it by one Linear call."""

    layers: int
    host: dict[int, float]
    kernels: dict[int, int]


@dataclass(frozen=True)
class PairCost:
    """A pair's predicted GPU costs. host: measured seconds of a (target, draft) step; device:
    predicted seconds on the GPU; c: t_draft / t_step, "eager", "captured" (the draft step only;
    the target eager) or "both captured"; verify_cost[k]: a (k+1)-token eager pass in target
    steps; alpha per prompt set; best[how]: (K, speedup against the target alone run the same
    way), K = 0 for plain steps, for "eager", "captured", "lookup" (eager target) and "both
    captured", "lookup, target captured"."""

    pair: str
    target: str
    draft: str
    gpu: str  # a `GPUS` name
    host: tuple[float, float]
    device: tuple[float, float]
    c: dict[str, float]
    verify_cost: dict[int, float]
    # "code": for the draft model; "copy": for prompt lookup; "edits": for suffix copies
    alpha: dict[str, float]
    alpha_source: str  # "measured" on this pair, else "assumed" (the embedded pair's)
    best: dict[str, tuple[int, float]]
    target_capture: float  # the target's eager step over its captured one: what capture saves


@dataclass(frozen=True)
class DispatchReport:
    machine: dict  # machine.machine(): where the depths were measured
    precision: str  # what the tiny-width models ran in
    measured: dict[str, Measured]  # by arch name
    pairs: list[PairCost]
    constants: dict[str, float]


def arch_of(spec: ModelSpec) -> str | None:
    """The `ARCHS` name of a Qwen2.5-Coder model, read from its hub id or GGUF file name."""
    name = spec.gguf.filename if spec.gguf else spec.source
    found = re.search(r"qwen2\.5-coder-(\d+(?:\.\d+)?)b", name, re.IGNORECASE)
    size = f"{found.group(1)}B" if found else None
    return size if size in ARCHS else None


def arch_of_config(config) -> Arch:
    """The `Arch` of a loaded model, read from its transformers config (any decoder-only model
    with Qwen2's field names; a missing KV head count means one per attention head)."""
    heads = config.num_attention_heads
    return Arch(
        config.hidden_size,
        config.num_hidden_layers,
        heads,
        getattr(config, "num_key_value_heads", None) or heads,
        config.intermediate_size,
        config.vocab_size,
        bool(getattr(config, "tie_word_embeddings", False)),
    )


def step_budget(arch: Arch, head_rows: int | None = None) -> float:
    """Seconds to budget for one eager one-token step on a GPU: the larger of its host-side
    dispatch (HOST_LAYER_S a layer) and its device time (``device_seconds``, OPS_PER_LAYER ops a
    layer), reading `head_rows` rows of the output head (None: all of them)."""
    rows = arch.vocab_size if head_rows is None else head_rows
    kernels = OPS_PER_LAYER * arch.num_hidden_layers + OPS_FIXED
    host = HOST_LAYER_S * arch.num_hidden_layers
    return max(host, device_seconds(arch, kernels, rows, 1))


def draft_head_rows(arch: Arch) -> int:
    """The output rows the drafter's step reads: the ranked head's rows for a vocabulary the
    shipped ranking covers (``draft_vocab.default_rows``), else all."""
    ranked = draft_vocab.ranking()
    return ranked.rows if arch.vocab_size == ranked.vocab_size else arch.vocab_size


def weight_bytes(arch: Arch, head_rows: int) -> float:
    """Bytes of weights a step reads: NF4 linear layers, 16-bit biases and norms, and the 16-bit
    output head's first `head_rows` rows (the input embedding reads one row per token)."""
    h, f = arch.hidden_size, arch.intermediate_size
    kv = arch.num_key_value_heads * h // arch.num_attention_heads
    linear = 2 * h * h + 2 * h * kv + 3 * h * f  # q, o; k, v; gate, up, down
    small = h + 2 * kv + 2 * h  # q, k, v biases; two RMSNorm scales
    per_layer = linear * NF4_BYTES_PER_PARAM + small * HALF_BYTES
    return arch.num_hidden_layers * per_layer + head_rows * h * HALF_BYTES


def device_seconds(arch: Arch, kernels: int, head_rows: int, width: int, gpu: Gpu = H200) -> float:
    """A pass's time on the GPU itself: weights and KV cache (PROFILE_CONTEXT tokens, as
    ``profile`` times) at the GPU's memory bandwidth, plus a floor per kernel."""
    kv = arch.num_key_value_heads * arch.hidden_size // arch.num_attention_heads
    cache = arch.num_hidden_layers * 2 * kv * (PROFILE_CONTEXT + width) * HALF_BYTES
    return (weight_bytes(arch, head_rows) + cache) / gpu.bytes_per_s + kernels * KERNEL_FLOOR_S


def best_k(costs: StepCosts, alpha: float, ks=PROFILE_KS) -> tuple[int, float]:
    """The K in `ks` of highest predicted speedup, or (0, 1.0) when plain steps are faster
    (automatic K can always choose K = 0)."""
    k = max(ks, key=lambda k: costs.speedup(alpha, k))
    return (k, costs.speedup(alpha, k)) if costs.speedup(alpha, k) > 1.0 else (0, 1.0)


def copy_speedup(costs: StepCosts) -> tuple[int, float]:
    """(K, speedup) of copies from the suffix index at these costs: the edits run's tokens a pass
    over a pass of its drafts a pass (``TOKENS_A_PASS_EDITS``, ``DRAFTS_A_PASS_EDITS``)."""
    k = round(DRAFTS_A_PASS_EDITS)
    return k, TOKENS_A_PASS_EDITS * costs.t_step / costs.pass_seconds(1 + DRAFTS_A_PASS_EDITS)


def predict_pair(
    pair: PairSpec, measured: dict[str, Measured], ks=PROFILE_KS, gpu: Gpu = H200
) -> PairCost | None:
    """A pair's costs on `gpu`: an eager pass takes the larger of its host time (measured) and
    its device time; a captured draft step its device time and one replay. None when a model of
    the pair has no measured arch."""
    names = arch_of(pair.target), arch_of(pair.draft)
    if not all(name in measured for name in names):
        return None
    (target, draft), (mt, md) = (ARCHS[n] for n in names), (measured[n] for n in names)
    device = {
        w: device_seconds(target, n, target.vocab_size, w, gpu) for w, n in mt.kernels.items()
    }
    eager = {w: max(mt.host[w], device[w]) for w in mt.host}
    draft_device = device_seconds(draft, md.kernels[1], draft_head_rows(draft), 1, gpu)
    verify = {k: eager[k + 1] for k in ks}
    # The target captured too: each pass at its device time and one replay, and the target
    # alone it races against captured the same way (the honest baseline on a GPU).
    replayed = {w: device[w] + GRAPH_REPLAY_S for w in device}
    verify_replayed = {k: replayed[k + 1] for k in ks}
    # A copy from the suffix index may fill passes wider than any measured: priced at the device
    # time of their rows with the widest measured pass's kernels (dispatch does not grow with
    # rows), and one replay.
    widest = max(mt.kernels)
    copy_ks = (*ks, *COPY_KS)
    verify_copies = {
        k: device_seconds(target, mt.kernels[min(k + 1, widest)], target.vocab_size, k + 1, gpu)
        + GRAPH_REPLAY_S
        for k in copy_ks
    }
    costs = {
        "eager": StepCosts(eager[1], max(md.host[1], draft_device), verify),
        "captured": StepCosts(eager[1], draft_device + GRAPH_REPLAY_S, verify),
        "lookup": StepCosts(eager[1], 0.0, verify),
        "both captured": StepCosts(replayed[1], draft_device + GRAPH_REPLAY_S, verify_replayed),
        "lookup, target captured": StepCosts(replayed[1], 0.0, verify_replayed),
        "suffix, target captured": StepCosts(replayed[1], 0.0, verify_copies),
    }
    alpha = {"code": ALPHA_CODE, "copy": ALPHA_COPY, "edits": ALPHA_EDITS}
    sets = {"lookup": "copy", "suffix": "edits"}
    return PairCost(
        pair.name,
        *names,
        gpu=gpu.name,
        host=(mt.host[1], md.host[1]),
        device=(device[1], draft_device),
        c={how: costs[how].c for how in ("eager", "captured", "both captured")},
        verify_cost={k: costs["eager"].verify_cost(k) for k in ks},
        alpha=alpha,
        alpha_source="measured" if pair.name == ALPHA_MEASURED_ON else "assumed",
        best={
            how: copy_speedup(s)
            if how.startswith("suffix")
            else best_k(s, alpha[sets.get(how.split(",")[0], "code")], ks)
            for how, s in costs.items()
        },
        target_capture=eager[1] / replayed[1],
    )


def predict(measured: dict[str, Measured], pairs=None, ks=PROFILE_KS, gpus=GPUS) -> list[PairCost]:
    """`predict_pair` on each of `gpus` for every pair of `pairs` (default: the registered
    `PAIRS`) it covers, GPU by GPU."""
    pairs = (PAIRS if pairs is None else pairs).values()
    costs = (predict_pair(p, measured, ks, gpu) for gpu in gpus for p in pairs)
    return [step for step in costs if step is not None]


def constants() -> dict[str, float]:
    """The assumed constants a report's predictions rest on, by name."""
    return {name: globals()[name] for name in CONSTANTS}


def report_from_measured(recorded: dict) -> DispatchReport:
    """A report with the measured inputs of `recorded` (``dataclasses.asdict`` of a report, as
    ``bench --dispatch --json`` writes it) and predictions made again from them, for every GPU
    in `GPUS` and pair in `PAIRS`: new GPUs or pairs without measuring again."""
    measured = {
        name: Measured(
            m["layers"],
            {int(w): s for w, s in m["host"].items()},
            {int(w): n for w, n in m["kernels"].items()},
        )
        for name, m in recorded["measured"].items()
    }
    return DispatchReport(
        machine=recorded["machine"],
        precision=recorded["precision"],
        measured=measured,
        pairs=predict(measured),
        constants=constants(),
    )
