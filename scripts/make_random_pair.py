"""Random-weight models of the real Qwen2.5-Coder 1.5B and 0.5B architectures, for GPU speed
checks on a machine that cannot receive the real weights.

Usage: make_random_pair.py OUT_DIR [--layers N]

Writes OUT_DIR/target and OUT_DIR/draft (bf16 safetensors, with specdemo's tiny tokenizer, whose
ids all lie inside the 151,936-row vocabulary). `--layers N` keeps every width and the vocabulary
but only N decoder layers in each model: `scripts/gpu_bench.sh --dry-run` uses it to check the
plumbing on a CPU in seconds; its timings mean nothing. Acceptance between two random models is
~0, so the bench also runs a self-draft (alpha = 1) to show the best case.
"""

import argparse
import dataclasses
import shutil
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from specdemo.cost import dispatch
from specdemo.models import build_tiny_tokenizer
from specdemo.models.convert import quiet_transformers

ARCHS = {"target": dispatch.ARCHS["1.5B"], "draft": dispatch.ARCHS["0.5B"]}


def build(name: str, eos_token_id: int, layers: int | None = None) -> Qwen2ForCausalLM:
    """The random bf16 model `name` ("target" or "draft"), cut to `layers` decoder layers."""
    arch = dataclasses.asdict(ARCHS[name]) | ({"num_hidden_layers": layers} if layers else {})
    torch.manual_seed(0 if name == "target" else 1)
    config = Qwen2Config(
        max_position_embeddings=32768,
        rope_theta=1e6,
        eos_token_id=eos_token_id,
        **arch,
    )
    return Qwen2ForCausalLM(config).to(torch.bfloat16).eval()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, help="decoder layers per model (default: the real)")
    args = parser.parse_args(argv)
    tokenizer = build_tiny_tokenizer()
    for name in ARCHS:
        model = build(name, tokenizer.eos_token_id, args.layers)
        folder = args.out / name
        shutil.rmtree(folder, ignore_errors=True)  # no shards left from a model of another size
        with quiet_transformers():
            model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        n_layers = model.config.num_hidden_layers
        print(f"{folder}: {sum(p.numel() for p in model.parameters()):,} params, {n_layers} layers")


if __name__ == "__main__":
    main()
