"""Random-weight models of the real Qwen2.5-Coder 1.5B and 0.5B architectures, for GPU speed
checks on a machine that cannot receive the real weights. Usage: make_random_pair.py OUT_DIR.

Writes OUT_DIR/target and OUT_DIR/draft (bf16 safetensors, with specdemo's tiny tokenizer, whose
ids all lie inside the 151,936-row vocabulary). Acceptance between two random models is ~0, so
the bench runs a self-draft (alpha = 1) to show the best case, besides this pair.
"""

import sys
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from specdemo.models import build_tiny_tokenizer

ARCHS = {  # the published configs of Qwen2.5-Coder-1.5B-Instruct and -0.5B-Instruct
    "target": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        intermediate_size=8960,
        tie_word_embeddings=True,
    ),
    "draft": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        tie_word_embeddings=True,
    ),
}


def main(out: str) -> None:
    tokenizer = build_tiny_tokenizer()
    for name, arch in ARCHS.items():
        torch.manual_seed(0 if name == "target" else 1)
        config = Qwen2Config(
            vocab_size=151936,
            max_position_embeddings=32768,
            rope_theta=1e6,
            eos_token_id=tokenizer.eos_token_id,
            **arch,
        )
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
        folder = Path(out) / name
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        print(folder, sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main(sys.argv[1])
