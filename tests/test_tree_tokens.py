"""scripts/tree_tokens.py: tokens per pass pooled over runs, and each tree compared with the chain
of its own prompt and seed."""

import pytest
from conftest import load_script


def run(prompt, seed, width, tokens, rounds):
    return dict(set="prose", prompt=prompt, seed=seed, width=width, tokens=tokens,
                rounds=rounds, siblings_kept=width - 1)  # fmt: skip


def test_tokens_per_pass_pool_the_runs_and_pair_each_tree_with_its_chain():
    script = load_script("tree_tokens")
    runs = [
        run(0, 0, 1, 60, 40), run(0, 0, 2, 60, 30),  # 1.5 against 2.0
        run(1, 0, 1, 64, 32), run(1, 0, 2, 64, 16),  # 2.0 against 4.0
    ]  # fmt: skip
    chain, tree = script.summarise(runs)
    assert (chain["width"], chain["tokens_per_pass"], chain["vs_chain"]) == (1, 124 / 72, 0)
    assert tree["tokens_per_pass"] == 124 / 46  # pooled, not the mean of 2.0 and 4.0
    assert tree["vs_chain"] == pytest.approx((0.5 + 2.0) / 2)  # paired by prompt and seed
    # 1.96 * stdev(0.5, 2.0) / sqrt(2)
    assert tree["vs_chain_interval"] == pytest.approx(1.96 * 1.0606601717798212 / 2**0.5)
    assert (tree["runs"], tree["rounds"], tree["siblings_kept"]) == (2, 46, 2)


def test_the_block_judge_is_paired_with_the_token_judge_at_the_same_width():
    script = load_script("tree_tokens")
    runs = [
        {**run(0, 0, 2, 60, 30), "judge": "token"}, {**run(0, 0, 2, 60, 20), "judge": "block"},
        {**run(1, 0, 2, 64, 32), "judge": "token"}, {**run(1, 0, 2, 64, 32), "judge": "block"},
    ]  # fmt: skip
    token, block = script.summarise(runs)
    assert (token["judge"], block["judge"]) == ("token", "block")
    assert "vs_token" not in token and token["vs_chain"] is None  # no chain was run
    assert block["vs_token"] == pytest.approx((1.0 + 0.0) / 2)  # 3.0 - 2.0, then 2.0 - 2.0
    assert block["tokens_per_pass"] == 124 / 52
