"""Host-side dispatch measured on the running CPU, the dispatch model's input: each architecture
of ``dispatch.ARCHS`` at its real depth but a tiny width, where what is left of a step is
dispatch, timed and op-counted; ``dispatch_report`` measures and predicts every registered pair.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from specdemo.dispatch import ARCHS, DispatchReport, Measured, constants, predict
from specdemo.lm import forward
from specdemo.machine import machine
from specdemo.profile import PROFILE_KS, pass_seconds, synthetic_context

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
