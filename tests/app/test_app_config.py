"""Validation of widget and API values: every bad value gets a message that names the field."""

import math
from types import SimpleNamespace

import pytest
import torch
from conftest import PROMPT, ToyLM

from specdemo.app.config import encode, parse_grid, parse_run, parse_samples
from specdemo.app.settings import DEFAULTS, DRAFTERS, MAX_PROMPT_CHARS, load_examples
from specdemo.defaults import DEFAULTS as LIBRARY_DEFAULTS
from specdemo.draft.drafters import DRAFTERS as LIBRARY_DRAFTERS
from specdemo.draft.drafters import make_drafter
from specdemo.judge.sampling import SamplingConfig
from specdemo.judge.verify import JUDGES, check_judge
from specdemo.models import build_tiny_tokenizer
from specdemo.text import MAX_PROMPT_TOKENS

VALID = {
    "prompt": PROMPT,
    "system": "",
    "k": 4,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "max_new_tokens": 8,
    "seed": 0,
    "drafter": "model",
    "adaptive": False,
    "auto_k": False,
    "tree_width": 1,
    "judge": "token",
}
BAD_INPUT = [
    ({"prompt": ""}, "prompt is empty"),
    ({"prompt": "  \n\t "}, "prompt is empty"),
    ({"prompt": "\x00\x07\x1b"}, "prompt is empty"),
    ({"prompt": None}, "prompt is empty"),
    ({"prompt": 42}, "must be text"),
    ({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, "too long"),
    ({"k": 0}, "K must be between 1 and 16"),
    ({"k": 17}, "K must be between 1 and 16"),
    ({"k": 2.5}, "K must be a whole number"),
    ({"k": "many"}, "K must be a number"),
    ({"k": float("nan")}, "K must be a finite number"),
    ({"k": None}, "K must be a number"),
    ({"k": True}, "K must be a number"),
    ({"temperature": -0.1}, "Temperature must be between 0.0 and 2.0"),
    ({"temperature": 2.5}, "Temperature must be between 0.0 and 2.0"),
    ({"temperature": float("nan")}, "Temperature must be a finite number"),
    ({"temperature": "inf"}, "Temperature must be a finite number"),
    ({"top_p": 0.0}, "Top-p must be above 0"),
    ({"top_p": 1.5}, "Top-p must be above 0"),
    ({"top_p": float("nan")}, "Top-p must be a finite number"),
    ({"top_k": -1}, "Top-k must be between 1 and 200"),
    ({"top_k": 500}, "Top-k must be between 1 and 200"),
    ({"top_k": 3.5}, "Top-k must be a whole number"),
    ({"max_new_tokens": 0}, "Max new tokens must be between 1 and 1024"),
    ({"max_new_tokens": 10**6}, "Max new tokens must be between 1 and 1024"),
    ({"max_new_tokens": "lots"}, "Max new tokens must be a number"),
    ({"seed": -1}, "Seed must be between"),
    ({"drafter": "oracle"}, "Drafter must be one of"),
    ({"adaptive": "yes"}, "Adaptive K must be true or false"),
    ({"auto_k": "yes"}, "Auto K must be true or false"),
    ({"k": "automatic"}, "K must be a number"),
    ({"tree_width": 0}, "Tree width must be between 1 and 4"),
    ({"tree_width": 5}, "Tree width must be between 1 and 4"),
    ({"tree_width": 1.5}, "Tree width must be a whole number"),
    ({"judge": "tokens"}, 'Judge must be one of "token" \\(token by token\\), "block"'),
    ({"judge": None}, "Judge must be one of .*; got None"),
]


def test_k_is_a_number_or_auto():
    assert parse_run(PROMPT, k=" Auto ").k == "auto"
    assert parse_run(PROMPT, k=3, auto_k=True).k == "auto"  # the box wins over the slider
    assert parse_run(PROMPT, k=3, auto_k=False).k == 3
    assert parse_grid(["auto", 4, "2"], [1.0]) == ([2, 4, "auto"], [1.0])


@pytest.mark.parametrize("changes, message", BAD_INPUT)
def test_bad_input_gets_a_clear_message(changes, message):
    with pytest.raises(ValueError, match=message):
        parse_run(**{**VALID, **changes})


def test_widget_defaults_are_the_library_defaults_in_widget_form():
    # every other value at its widget default; the Auto K box is what says "auto"
    config = parse_run(PROMPT, auto_k=DEFAULTS["auto_k"])
    assert (config.k, config.temperature, config.max_new_tokens, config.seed) == (
        LIBRARY_DEFAULTS["k"],
        LIBRARY_DEFAULTS["temperature"],
        LIBRARY_DEFAULTS["max_new_tokens"],
        LIBRARY_DEFAULTS["seed"],
    )
    assert (config.top_p, config.top_k) == (LIBRARY_DEFAULTS["top_p"], LIBRARY_DEFAULTS["top_k"])
    assert (config.drafter, config.adaptive) == (
        LIBRARY_DEFAULTS["drafter"],
        LIBRARY_DEFAULTS["adaptive"],
    )
    assert config.judge == LIBRARY_DEFAULTS["verify"]
    assert parse_samples(DEFAULTS["n"]) == DEFAULTS["n"]


def test_every_judge_the_app_offers_is_one_the_engine_takes():
    """The Judge control's two values, labelled as the engine names them (``verify.JUDGES``)."""
    assert JUDGES == {"token": "token by token", "block": "the whole block"}
    for name in JUDGES:
        assert parse_run(PROMPT, judge=name).judge == check_judge(name) == name


def test_every_drafter_the_app_offers_is_one_the_library_makes():
    assert set(DRAFTERS) == {"model", "lookup", "hybrid", "suffix", "suffix-hybrid"}
    assert set(DRAFTERS) == set(LIBRARY_DRAFTERS)  # each one the library makes, labelled
    for name in DRAFTERS:
        assert parse_run(PROMPT, k=4, drafter=name).drafter == name
        assert make_drafter(name, ToyLM(torch.zeros(4, 4)), SamplingConfig(1.0), None, "cpu")


def test_the_copy_examples_are_long_edits_that_copy_from_the_context():
    """Every example names a drafter the app offers; the two edits return a module of 30 to 40
    lines, long enough for copies of 32 tokens (a line holds several), and copy from the suffix
    index."""
    examples = {e["label"].split(" (")[0]: e for e in load_examples()}
    assert {e["drafter"] for e in examples.values()} <= set(DRAFTERS)
    for label in ("Rewrite", "Edit code"):
        example = examples[label]
        code = example["prompt"].split("```python\n")[1].split("```")[0]
        assert 30 <= len(code.splitlines()) <= 40, label
        assert example["drafter"] == "suffix-hybrid"


def test_off_values_and_numeric_strings_are_accepted():
    config = parse_run(PROMPT, k="3", temperature="0.5", top_p=1.0, top_k=0.0, seed=7.0)
    assert (config.k, config.temperature, config.top_p, config.top_k, config.seed) == (
        3,
        0.5,
        None,
        None,
        7,
    )


def test_control_characters_are_dropped_and_unicode_kept():
    config = parse_run("a\x00b\x1b[31mc\r\n\td\u200b 😀 日本語 é\ud800\x7f")
    assert config.prompt == "ab[31mc\n\td\u200b 😀 日本語 é"


def test_sample_count_is_checked():
    with pytest.raises(ValueError, match="N must be between"):
        parse_samples(10)
    assert parse_samples("500") == 500


def test_sweep_grid_is_checked():
    assert parse_grid([4, "2", 2], "0, 1.0") == ([2, 4], [0.0, 1.0])
    with pytest.raises(ValueError, match="at least one K"):
        parse_grid([], [1.0])
    with pytest.raises(ValueError, match="K must be between"):
        parse_grid([0], [1.0])
    with pytest.raises(ValueError, match="Temperature must be a finite"):
        parse_grid([1], [math.nan])
    with pytest.raises(ValueError, match="at most 64 cells"):
        parse_grid(list(range(1, 17)), [0.0, 0.5, 1.0, 1.5, 2.0])


def test_prompt_over_the_token_cap_or_the_context_is_refused():
    pair = SimpleNamespace(
        tokenizer=build_tiny_tokenizer(),
        target=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=512)),
    )
    words = " ".join(f"w{i}" for i in range(MAX_PROMPT_TOKENS // 2))
    with pytest.raises(ValueError, match="limit is 4,096"):
        encode(pair, parse_run(words))
    with pytest.raises(ValueError, match="does not fit the model's context of 512"):
        encode(pair, parse_run("w " * 200, max_new_tokens=400))
    assert encode(pair, parse_run("hi", max_new_tokens=400))
