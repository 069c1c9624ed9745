"""Tokenizer glue shared by the CLI, the app and the bench: prompts in, text pieces out.

The engine works on token ids only; this module applies the chat template, turns a growing list
of ids into per-token text pieces that concatenate to the exact decoded text, and shows single
tokens as visible labels for tables and charts.
"""

from dataclasses import dataclass, field

MAX_PROMPT_TOKENS = 4096


def encode_prompt(
    tokenizer, prompt: str, system: str | None = None, chat: bool = True
) -> list[int]:
    """Token ids of `prompt`, wrapped in the chat template when the tokenizer has one."""
    if chat and getattr(tokenizer, "chat_template", None):
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}
        ]
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        # Some tokenizer versions return a BatchEncoding even with return_dict=False.
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    return tokenizer(prompt, add_special_tokens=True)["input_ids"]


@dataclass
class Detokenizer:
    """Incremental decoding: each new token's text piece, robust to multi-token characters."""

    tokenizer: object
    ids: list[int] = field(default_factory=list)  # tokens already decoded (e.g. a resumed answer)
    text: str = field(init=False)

    def __post_init__(self):
        self.text = self.decode(self.ids) if self.ids else ""

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def push(self, token: int) -> str:
        """Append a token; return the text it adds (may be '' until a character completes)."""
        self.ids.append(token)
        new_text = self.decode(self.ids)
        if new_text.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for more bytes
            return ""
        piece, self.text = new_text[len(self.text) :], new_text
        return piece

    def peek(self, token: int) -> str:
        """The text `token` would add, without appending it (for struck-through rejects)."""
        return self.decode(self.ids + [token])[len(self.text) :]


def token_text(tokenizer, token: int) -> str:
    """A token as visible text: escapes for newlines and tabs, ␣ for a leading space."""
    text = tokenizer.decode([token])
    text = text.replace("\n", "\\n").replace("\t", "\\t")
    return "␣" + text[1:] if text.startswith(" ") else text or f"<{token}>"


def token_labels(tokenizer, tokens: list[int]) -> list[str]:
    """Each token's visible text; a text two tokens share gets the id, keeping chart bars apart."""
    texts = [token_text(tokenizer, t) for t in tokens]
    return [f"{x} #{t}" if texts.count(x) > 1 else x for x, t in zip(texts, tokens, strict=True)]
