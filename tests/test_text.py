"""Tokenizer glue on the tiny byte-level tokenizer: chat prompts, incremental decoding, labels."""

import pytest

from specdemo.models import build_tiny_tokenizer
from specdemo.text import Detokenizer, encode_prompt, token_labels, token_text


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def test_encode_prompt_wraps_the_prompt_in_the_chat_template(tokenizer):
    text = tokenizer.decode(encode_prompt(tokenizer, "hi", system="Be brief."))
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.decode(encode_prompt(tokenizer, "hi")).startswith("<|im_start|>user\nhi")


def test_encode_prompt_without_a_chat_template_is_the_plain_text(tokenizer):
    plain = tokenizer("def f(x):", add_special_tokens=True)["input_ids"]
    assert encode_prompt(tokenizer, "def f(x):", chat=False) == plain
    bare = build_tiny_tokenizer()
    bare.chat_template = None
    assert encode_prompt(bare, "def f(x):", system="ignored") == plain


def test_a_character_split_across_tokens_waits_for_its_last_byte(tokenizer):
    ids = tokenizer.encode("日", add_special_tokens=False)
    assert len(ids) == 3  # one byte per token: the test needs a split character
    detok = Detokenizer(tokenizer)
    assert [detok.push(t) for t in ids] == ["", "", "日"]
    assert detok.text == "日"


def test_pieces_concatenate_to_the_full_decode(tokenizer):
    text = "def is_prime(n):\n    return n > 1  # café ✓ 😀 日本語"
    ids = tokenizer.encode(text, add_special_tokens=False)
    detok = Detokenizer(tokenizer)
    pieces = [detok.push(t) for t in ids]
    assert "".join(pieces) == tokenizer.decode(ids) == text
    assert "" in pieces  # some characters did span several tokens


def test_a_resumed_detokenizer_continues_from_its_ids(tokenizer):
    ids = tokenizer.encode("return n > 1", add_special_tokens=False)
    detok = Detokenizer(tokenizer, ids[:3])
    rest = "".join(detok.push(t) for t in ids[3:])
    assert tokenizer.decode(ids[:3]) + rest == "return n > 1"


def test_peek_shows_a_token_without_appending_it(tokenizer):
    ids = tokenizer.encode("def f", add_special_tokens=False)
    detok = Detokenizer(tokenizer, ids[:-1])
    before = (list(detok.ids), detok.text)
    assert detok.peek(ids[-1]) == tokenizer.decode(ids)[len(detok.text) :]
    assert (detok.ids, detok.text) == before
    peeked = detok.peek(ids[-1])
    assert detok.push(ids[-1]) == peeked and detok.text == tokenizer.decode(ids)


def test_token_text_makes_spaces_and_newlines_visible(tokenizer):
    [space_n] = tokenizer.encode(" n", add_special_tokens=False)
    [newline] = tokenizer.encode("\n", add_special_tokens=False)
    assert token_text(tokenizer, space_n) == "␣n"
    assert token_text(tokenizer, newline) == "\\n"


def test_chart_labels_keep_tokens_with_the_same_text_apart(tokenizer):
    labels = token_labels(tokenizer, [5, 5, 7])
    assert len(set(labels)) == 2 and labels[0] != labels[2]
    byte_tokens = [t for t in range(300) if token_text(tokenizer, t) == "\ufffd"][:2]
    assert len(byte_tokens) == 2
    assert len(set(token_labels(tokenizer, byte_tokens))) == 2
