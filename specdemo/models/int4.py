"""torch's int4 weight-only CPU kernel (`aten._weight_int4pack_mm_for_cpu`) as a Linear layer.

Each weight row is cut into groups of up to 128 inputs; a group stores 4-bit codes q and a bf16
scale and zero, w = (q - 8) * scale + zero. The kernel is vectorised for AVX2 and AVX512 with
bf16 activations, so a layer computes in bf16 whatever it is given. Its packed layout depends on
the CPU's vector width (`isa`): a model is packed on the machine that runs it, and a cached one
is keyed by that width.
"""

from __future__ import annotations

from pathlib import Path

import torch

GROUP_SIZES = (128, 64, 32)  # the largest that divides a layer's inputs is used
KERNEL_DTYPE = torch.bfloat16  # the activations the kernel is vectorised for


def isa() -> str:
    """The CPU's vector width as torch dispatches to it: "avx512", "avx2", "default" (no AVX);
    ATEN_CPU_CAPABILITY lowers it, as on a CPU that lacks the wider one."""
    name = torch.backends.cpu.get_cpu_capability().lower()
    return "".join(ch for ch in name if ch.isalnum()) or "default"


def group_size(in_features: int) -> int | None:
    return next((g for g in GROUP_SIZES if in_features % g == 0), None)


class Int4Linear(torch.nn.Module):
    """y = x W^T + b with W in int4 groups; the bias, when there is one, stays bf16."""

    def __init__(self, in_features: int, out_features: int, bias: bool, group: int, device="cpu"):
        super().__init__()
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.register_buffer(
            "weight_int4pack",
            torch.empty(out_features, in_features // 2, dtype=torch.uint8, device=device),
        )
        self.register_buffer(
            "scales_and_zeros",
            torch.empty(in_features // group, out_features, 2, dtype=KERNEL_DTYPE, device=device),
        )
        self.register_buffer(
            "bias", torch.empty(out_features, dtype=KERNEL_DTYPE, device=device) if bias else None
        )

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, group: int) -> Int4Linear:
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group, "meta")
        q, scales_and_zeros = quantize_weight(linear.weight.detach(), group)
        layer.weight_int4pack = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
        layer.scales_and_zeros = scales_and_zeros
        if linear.bias is not None:
            layer.bias = linear.bias.detach().to(KERNEL_DTYPE)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(KERNEL_DTYPE)  # (tokens, in)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(
            rows, self.weight_int4pack, self.group, self.scales_and_zeros
        )
        if self.bias is not None:
            y = y + self.bias
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, group={self.group}"
        )


def quantize_weight(weight: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes (out, in) int32 in 0..15, scales_and_zeros (in / group, out, 2) bf16): each group's
    range split into 15 steps, the zero its middle (code 8), as the kernel dequantises."""
    out, inputs = weight.shape
    w = weight.float().reshape(out, inputs // group, group)
    low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    scale = (high - low).clamp(min=1e-6) / 15
    codes = ((w - low) / scale).round().clamp(0, 15).to(torch.int32).reshape(out, inputs)
    zero = low + 8 * scale
    scales_and_zeros = torch.cat([scale, zero], -1).transpose(0, 1).contiguous()
    return codes, scales_and_zeros.to(KERNEL_DTYPE)


def dequantize(layer: Int4Linear) -> torch.Tensor:
    """The (out, in) float32 weight a layer multiplies by, read back through the kernel."""
    eye = torch.eye(layer.in_features, dtype=KERNEL_DTYPE, device=layer.weight_int4pack.device)
    return (
        torch.ops.aten._weight_int4pack_mm_for_cpu(
            eye, layer.weight_int4pack, layer.group, layer.scales_and_zeros
        )
        .float()
        .T
    )


def int4_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Linear, int]]:
    """(name, layer, group) of every Linear that takes int4: all but the output layer (tied to the
    input embedding in the Qwen pairs) and any whose inputs no group size divides."""
    head = model.get_output_embeddings()
    return [
        (name, module, group)
        for name, module in model.named_modules()
        if type(module) is torch.nn.Linear
        and module is not head
        and (group := group_size(module.in_features)) is not None
    ]


def quantize(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with its linear layers swapped for Int4Linear in place, one at a time, so the float
    weights are freed as they go; the rest (embeddings, norms, output layer) in bf16."""
    for name, linear, group in int4_layers(model):
        _set_module(model, name, Int4Linear.from_linear(linear, group))
    for param in model.parameters():  # not the buffers: rotary frequencies stay float32
        param.data = param.data.to(KERNEL_DTYPE)
    return model.eval()


def load(folder: Path, device: str = "cpu") -> torch.nn.Module:
    """A model `quantize` made and `save_pretrained` wrote (config, generation config, state
    dict), its Int4Linear layers rebuilt where `int4_layers` puts them."""
    from accelerate import init_empty_weights
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    if device != "cpu":
        raise ValueError(f"torch's int4 kernel runs on the CPU, not on {device!r}")
    config = AutoConfig.from_pretrained(folder)
    with init_empty_weights(include_buffers=False):  # parameters on "meta", buffers real
        model = AutoModelForCausalLM.from_config(config, dtype=KERNEL_DTYPE)
    for name, linear, group in int4_layers(model):
        layer = Int4Linear(linear.in_features, linear.out_features, linear.bias is not None, group)
        _set_module(model, name, layer)
    state = {}
    for file in sorted(Path(folder).glob("*.safetensors")):
        state.update(load_file(file, device=device))
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if unexpected or set(missing) - tied:
        raise ValueError(f"{folder} does not match its config: {missing[:3]} {unexpected[:3]}")
    model.tie_weights()
    model.generation_config = GenerationConfig.from_pretrained(folder)
    return model.eval()


def _set_module(model: torch.nn.Module, name: str, module: torch.nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent), child, module)
