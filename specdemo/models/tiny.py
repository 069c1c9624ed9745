"""The tiny pair: random-weight Qwen2 models on a 400-token BPE tokenizer, built in a second.

Everything is determined by `TINY_TEXT` and a `TinySpec`: the same numbers always give the same
tokenizer and weights, so tests and the conversion cache can rely on them without any download.
"""

from __future__ import annotations

import math

import torch

from specdemo.models.pairs import PAD_TOKEN, TinySpec

TINY_TEXT = '''
def is_prime(n):
    """Return True when n is a prime number."""
    if n < 2:
        return False
    for i in range(2, int(n ** 0.5) + 1):
        if n % i == 0:
            return False
    return True


def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        return self.items.pop()


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]

Speculative decoding lets a small draft model propose a few tokens, and the large target model
checks them all in one pass. Each draft token is accepted with probability min(1, p / q); when one
is rejected, a replacement is sampled from the normalised difference of the two distributions, so
the output follows the target model exactly. The closer the draft is to the target, the more
tokens are accepted per pass and the faster the text appears.
Write a Python function that checks whether a number is prime. Write a function that returns the
sum of a list of numbers. The quick brown fox jumps over the lazy dog.
'''
TINY_VOCAB = 400
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_tokenizer():
    """A byte-level BPE tokenizer trained on `TINY_TEXT`, with Qwen's special tokens and chat."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([TINY_TEXT], trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=TINY_CHAT_TEMPLATE,
    )


def build_tiny_model(spec: TinySpec, tokenizer):
    """A float32 Qwen2ForCausalLM, weights drawn from `spec.seed` (+ `spec.noise` for a draft)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        intermediate_size=spec.intermediate,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        initializer_range=spec.init_std,
        bos_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config).eval()
    weights = torch.Generator().manual_seed(spec.seed)
    noise = torch.Generator().manual_seed(spec.noise_seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1:  # norm scales and biases: ones and zeros
                p.fill_(1.0 if "norm" in name else 0.0)
                continue
            # lm_head sets the logit spread: a unit-RMS hidden state gets logits of std logit_std.
            std = (
                spec.logit_std / math.sqrt(spec.hidden)
                if name == "lm_head.weight"
                else spec.init_std
            )
            p.normal_(0.0, std, generator=weights)
            if spec.noise:
                drift = torch.randn(p.shape, generator=noise, device=noise.device)
                p.add_(drift * (spec.noise * std))
    return model
