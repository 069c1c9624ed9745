"""Host-side dispatch measured on the running CPU, the dispatch model's input: each architecture
of ``dispatch.ARCHS`` at its real depth but a tiny width, where what is left of a step is
dispatch, timed and op-counted; ``dispatch_report`` measures and predicts every registered pair,
and ``markdown`` sets both out as tables.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from specdemo.bench.machine import machine
from specdemo.bench.report import table
from specdemo.cost.dispatch import (
    ARCHS,
    GPUS,
    DispatchReport,
    Measured,
    constants,
    device_seconds,
    predict,
    weight_bytes,
)
from specdemo.cost.profile import PROFILE_KS, pass_seconds
from specdemo.runtime.lm import forward
from specdemo.runtime.modes import synthetic_context

# The width every arch is measured at; only its depth is real.
TINY_WIDTH = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2)
TINY_WIDTH.update(intermediate_size=128, vocab_size=1024)


def tiny_width_model(layers: int, four_bit: bool):
    """A random Qwen2ForCausalLM of `layers` decoder layers at `TINY_WIDTH` on the CPU, NF4 if
    `four_bit`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from specdemo.models.convert import quantize, quiet_transformers

    config = Qwen2Config(num_hidden_layers=layers, max_position_embeddings=2048, **TINY_WIDTH)
    with torch.device("cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16).eval()
    if four_bit:
        with quiet_transformers():
            model = quantize(model)  # specdemo's own NF4 conversion
    return model


class _OpCounter(TorchDispatchMode):
    """Counts the ops dispatched inside it, except views, which launch no kernel."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += not func.is_view
        return func(*args, **(kwargs or {}))


@torch.inference_mode()
def count_kernels(model, context: list[int], widths) -> dict[int, int]:
    """Non-view ops of a pass over the last n tokens of `context` with the rest of it in a warm
    KV cache, for each n in `widths`."""
    _, cache = forward(model, context, None)
    counts = {}
    for n in widths:
        with _OpCounter() as counter:
            forward(model, context[-n:], cache, n_logits=n)
        counts[n] = counter.ops
        cache.crop(-n)
    return counts


def measure_depths(depths, widths, four_bit: bool, repeats: int = 3) -> dict[int, Measured]:
    """{layers: Measured} for a tiny-width model of each depth. Each repeat times every depth in
    turn (``profile.pass_seconds``, widths interleaved), so a busy moment of a shared machine
    falls on all alike, and each width keeps its fastest repeat: dispatch has a floor that
    contention only adds to. One intra-op thread, as dispatch runs on one host thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        models = {n: tiny_width_model(n, four_bit) for n in depths}
        contexts = {n: synthetic_context(model) for n, model in models.items()}
        samples = {n: [] for n in depths}
        for _ in range(repeats):
            for n, model in models.items():
                samples[n].append(pass_seconds(model, contexts[n], widths, repeats=1))
        host = {n: {w: min(s[w] for s in samples[n]) for w in widths} for n in depths}
        kernels = {n: count_kernels(model, contexts[n], widths) for n, model in models.items()}
    finally:
        torch.set_num_threads(threads)
    return {n: Measured(n, host[n], kernels[n]) for n in depths}


def dispatch_report(repeats: int = 3) -> DispatchReport:
    """Measure every depth of `ARCHS` on this machine's CPU, in 4-bit NF4 where bitsandbytes runs
    (``models.kernels.four_bit_problem``) so that its wrappers' cost counts, else in bf16; then
    predict the GPU costs of every registered pair."""
    from specdemo.models.kernels import four_bit_problem

    problem = four_bit_problem("cpu")
    depths = sorted({arch.num_hidden_layers for arch in ARCHS.values()})
    by_depth = measure_depths(depths, (1, *(k + 1 for k in PROFILE_KS)), not problem, repeats)
    measured = {name: by_depth[arch.num_hidden_layers] for name, arch in ARCHS.items()}
    return DispatchReport(
        machine=machine("cpu"),
        precision="4-bit NF4" if problem is None else f"bf16 (no 4-bit here: {problem})",
        measured=measured,
        pairs=predict(measured),
        constants=constants(),
    )


ARCH_HEAD = ("arch", "layers", "host ms, width 1 / 9", "kernels, width 1 / 9", "GB read")
ARCH_HEAD += tuple(f"device ms, width 1, {gpu.name}" for gpu in GPUS)
PAIR_HEAD = ("GPU", "pair", "target / draft", "host ms target / draft", "device ms target / draft")
PAIR_HEAD += ("c eager", "c captured", "verify K=1/2/3/4 (target steps)")
PAIR_HEAD += ("alpha code / copy / edits",)
PAIR_HEAD += ("best K eager", "best K, captured draft", "best K, lookup (copy)")
PAIR_HEAD += ("captured target: step eager / captured", "c, both captured")
PAIR_HEAD += ("captured target: best K, captured draft", "captured target: best K, lookup (copy)")
PAIR_HEAD += ("captured target: suffix copy, the edits run's K and tokens a pass",)


def markdown(report: DispatchReport) -> str:
    """The measured inputs per arch, then the predicted costs per pair, as Markdown tables."""

    def ms(*seconds: float) -> str:
        return " / ".join(f"{1000 * s:.2f}" for s in seconds)

    archs, pairs = [], []
    for name, m in report.measured.items():
        arch, last = ARCHS[name], max(m.host)
        cells = (name, m.layers, ms(m.host[1], m.host[last]), f"{m.kernels[1]} / {m.kernels[last]}")
        cells += (f"{weight_bytes(arch, arch.vocab_size) / 1e9:.2f}",)
        cells += tuple(ms(device_seconds(arch, m.kernels[1], arch.vocab_size, 1, g)) for g in GPUS)
        archs.append(dict(zip(ARCH_HEAD, cells, strict=True)))
    for p in report.pairs:
        verify = " / ".join(f"{p.verify_cost[k]:.2f}" for k in sorted(p.verify_cost)[:4])
        cells = (p.gpu, p.pair, f"{p.target} / {p.draft}", ms(*p.host), ms(*p.device))
        cells += (f"{p.c['eager']:.2f}", f"{p.c['captured']:.3f}", verify)
        alphas = " / ".join(f"{p.alpha[name]:.2f}" for name in ("code", "copy", "edits"))
        cells += (f"{alphas} ({p.alpha_source})",)
        cells += tuple(
            "K={}: {:.2f}×".format(*p.best[how]) for how in ("eager", "captured", "lookup")
        )
        cells += (f"{p.target_capture:.1f}×", f"{p.c['both captured']:.2f}")
        cells += tuple(
            "K={}: {:.2f}×".format(*p.best[how])
            for how in ("both captured", "lookup, target captured", "suffix, target captured")
        )
        pairs.append(dict(zip(PAIR_HEAD, cells, strict=True)))
    m = report.machine
    where = f"{m['cpu']} ({m['cpu_capability']}), {m['cores']} cores, torch {m['torch']}"
    where += f", {m['date']}"
    title = f"Measured on {where}, one thread, tiny-width models in {report.precision}"
    lines = [title + ".", "", *table(archs, list(ARCH_HEAD)), "", *table(pairs, list(PAIR_HEAD))]
    return "\n".join(lines)
