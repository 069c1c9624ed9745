"""Token trees (specdemo.judge.tree): the node rule is exact, enumerated with fractions; the
rules it replaces are not; one tree pass gives each node the logits of its own path, and the cache
kept after it is the one the accepted tokens fed in turn would give."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
import torch

from specdemo.judge.tree import (
    Fishbone,
    draw_siblings,
    judge,
    node_rule,
    tree_first_tokens,
)
from specdemo.runtime import lm
from specdemo.runtime.kv import keep_rows


def frac(values) -> np.ndarray:
    """Exact probabilities: an object array of Fractions normalised to sum to 1."""
    values = [Fraction(v) for v in values]
    return np.array([v / sum(values) for v in values], dtype=object)


def orderings(q: np.ndarray, width: int, replacement: bool):
    """Every ordered tuple of children a node gets, with its exact probability: `width` draws
    from q, without replacement (capped at q's support) or i.i.d."""
    support = [t for t, v in enumerate(q) if v > 0]
    n = width if replacement else min(width, len(support))
    for children in itertools.product(support, repeat=n):
        if not replacement and len(set(children)) < n:
            continue
        prob, left = Fraction(1), Fraction(1)
        for c in children:
            prob *= q[c] / left
            if not replacement:
                left -= q[c]
        yield list(children), prob


def node_output(p, q, children, renormalise=True) -> np.ndarray:
    """The exact distribution of the token a node emits for these children: the kept child, or
    a draw from what is left of p, over both branches of every comparison ``node_rule`` makes."""
    out = np.array([Fraction(0)] * len(p), dtype=object)

    def walk(decisions: list[bool], weight: Fraction) -> None:
        seen: list = []

        def passes(i, a, p_x, q_x):
            seen.append(Fraction(a))
            return decisions[i] if i < len(decisions) else False

        kept, left = node_rule(p, q, children, passes, renormalise)
        if len(seen) > len(decisions):  # a comparison not decided yet: follow both branches
            a = seen[len(decisions)]
            walk(decisions + [True], weight * a)
            walk(decisions + [False], weight * (1 - a))
        elif kept is not None:
            out[children[kept]] += weight
        else:
            out[:] = out + weight * left

    walk([], Fraction(1))
    return out


def emitted(p, q, width, replacement=False, renormalise=True) -> np.ndarray:
    total = np.array([Fraction(0)] * len(p), dtype=object)
    for children, prob in orderings(q, width, replacement):
        if replacement and not renormalise and len(set(children)) < len(children):
            children = list(dict.fromkeys(children))  # duplicates skipped
        total = total + prob * node_output(p, q, children, renormalise)
    return total


def tv(a, b) -> float:
    return float(sum(abs(x - y) for x, y in zip(a, b, strict=True)) / 2)


CASES = [  # p, q: zeros in either, q one-hot, q's support narrower than the width
    ((5, 3, 2, 0), (2, 5, 1, 2)),
    ((9 / 22, 9 / 44, 9 / 44, 2 / 11), (1, 4, 20, 4)),
    ((16, 13, 1, 17), (3, 3, 13, 1)),
    ((1, 0, 2, 3, 0, 4), (0, 3, 1, 1, 5, 0)),
    ((1, 1, 1, 1, 1, 1), (0, 0, 0, 1, 0, 0)),  # q one-hot: a fixed child (prompt lookup)
    ((0, 0, 1, 0, 0), (1, 2, 3, 4, 5)),  # p one-hot
    ((3, 1, 4, 1, 5, 9), (2, 6, 5, 3, 5, 8)),
    ((1, 2, 3), (0, 1, 1)),  # support 2 under width 3
]


@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize("p, q", CASES)
def test_the_node_rule_emits_exactly_p(p, q, width):
    p, q = frac(p), frac(q)
    assert list(emitted(p, q, width)) == list(p)


def kept_probability(p, q, width) -> Fraction:
    """The exact chance that a node keeps one of its children (drawn without replacement)."""
    total = Fraction(0)
    for children, prob in orderings(q, width, replacement=False):
        rejected = Fraction(1)

        def passes(i, a, p_x, q_x):
            nonlocal rejected
            rejected *= 1 - Fraction(a)
            return False

        node_rule(p, q, children, passes)
        total += prob * (1 - rejected)
    return total


@pytest.mark.parametrize("width", [1, 2, 3, 4])
@pytest.mark.parametrize("p, q", CASES)
def test_the_vectorised_first_token_draws_follow_the_node_rule(p, q, width):
    """The exactness tab's draws (``tree.tree_first_tokens``): 100,000 draws land within 0.01
    of p on every token and keep a child as often as ``node_rule`` enumerated says, within
    0.01 (5 standard errors are 0.008). The rules that are not exact move the output by a total
    variation of 0.078 or more on these cases, and a wrong acceptance probability moves the
    kept rate, so either kind of slip fails here. Seeded: the same draws every run."""
    n = 100_000
    exact_p, exact_q = frac(p), frac(q)
    generator = torch.Generator().manual_seed(width)
    p_t = torch.tensor([float(v) for v in exact_p], dtype=torch.float64)
    q_t = torch.tensor([float(v) for v in exact_q], dtype=torch.float64)
    tokens, kept = tree_first_tokens(p_t, q_t, n, width, generator)
    freq = torch.bincount(tokens, minlength=len(p)).double() / n
    assert (freq - p_t).abs().max() < 0.01, (freq, p_t)
    assert abs(kept.double().mean() - float(kept_probability(exact_p, exact_q, width))) < 0.01


def test_one_child_is_the_chain_rule():
    """With one child the rule is min(1, p/q), then max(0, p - q) normalised."""
    p, q = frac((5, 3, 2, 0)), frac((2, 5, 1, 2))
    seen = []
    kept, left = node_rule(p, q, [1], lambda i, a, p_x, q_x: seen.append(a) or False)
    assert seen == [Fraction(3, 5)] and kept is None
    assert list(left) == [Fraction(3, 4), 0, Fraction(1, 4), 0]


def test_the_iid_rule_on_children_drawn_without_replacement_is_not_exact():
    p, q = frac((9 / 22, 9 / 44, 9 / 44, 2 / 11)), frac((1, 4, 20, 4))
    assert tv(emitted(p, q, 2, renormalise=False), p) == pytest.approx(0.246, abs=5e-4)
    assert tv(emitted(p, q, 2), p) == 0


def test_skipping_duplicate_siblings_under_the_iid_rule_is_not_exact():
    p, q = frac((16, 13, 1, 17)), frac((3, 3, 13, 1))
    wrong = emitted(p, q, 2, replacement=True, renormalise=False)
    assert tv(wrong, p) == pytest.approx(0.078, abs=5e-4)


def test_siblings_are_drawn_without_replacement_from_q():
    q = torch.tensor([0.5, 0.3, 0.2, 0.0])
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(4)
    for _ in range(4000):
        siblings = draw_siblings(q, 0, 3, g)
        assert len(siblings) == 2 and sorted(siblings) == [1, 2]  # support capped, no repeat
        counts[siblings[0]] += 1
    # After token 0, token 1 comes next with 0.3 / 0.5.
    assert counts[1] / 4000 == pytest.approx(0.6, abs=0.03)
    assert draw_siblings(torch.tensor([0.0, 1.0]), 1, 3, g) == []  # one-hot q: no siblings


class TargetGenerator:
    """The target's generator on a GPU, stood in on the CPU: it says it sits on "cuda" and
    draws with `real`, a CPU generator, once asked for numbers on its own device."""

    device = torch.device("cuda", 0)

    def __init__(self, real: torch.Generator):
        self.real = real


def test_siblings_are_drawn_with_the_targets_generator_while_q_sits_on_the_drafts_device(
    monkeypatch,
):
    """A draft on another device than the target: the round's q lies on the draft's device, the
    engine's generator on the target's, and a fishbone draws each depth's siblings from q there
    (``draw_siblings``). A generator draws only on its own device (emulated as CUDA checks it:
    ``torch.rand`` refuses one whose device is not the device asked for), so the uniforms are
    drawn on the generator's device, the same draws as a CPU generator of the same seed's."""
    real_rand = torch.rand

    def rand(*size, generator=None, device=None, **kwargs):
        if not isinstance(generator, TargetGenerator):
            return real_rand(*size, generator=generator, device=device, **kwargs)
        if torch.device(device) != generator.device:
            raise RuntimeError(
                f"Expected a '{torch.device(device).type}' device type for generator but found "
                f"'{generator.device.type}'"
            )
        return real_rand(*size, generator=generator.real, **kwargs)

    q = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])  # (k, vocab), on the draft's
    chain = [3, 0]

    def siblings(generator) -> list[list[int]]:
        return [draw_siblings(row, x, 3, generator) for row, x in zip(q, chain, strict=True)]

    want = siblings(torch.Generator().manual_seed(4))
    monkeypatch.setattr(torch, "rand", rand)
    assert siblings(TargetGenerator(torch.Generator().manual_seed(4))) == want
    assert all(len(group) == 2 for group in want)


def test_the_fishbone_lays_out_rows_and_parents():
    tree = Fishbone(chain=[7, 8, 9], siblings=[[4], [], [5, 6]])
    assert tree.tokens == [7, 8, 9, 4, 5, 6]
    assert tree.parents == [-1, 0, 1, 2, 0, 2, 2]
    assert tree.sibling_rows(0) == [4] and tree.sibling_rows(2) == [5, 6]


def test_judging_keeps_a_sibling_and_takes_the_bonus_from_its_row():
    """A chain token p gives nothing is rejected; its sibling, which p wants, is kept, and the
    bonus comes from the sibling's own row."""
    tree = Fishbone(chain=[1], siblings=[[2]])
    p = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.25] * 4, [0.0, 0.0, 0.0, 1.0]])  # rows 0, 1, 2
    q = torch.tensor([[0.0, 0.5, 0.5, 0.0]])
    verdict = judge(tree, p, q, torch.Generator().manual_seed(0))
    assert verdict.n_accepted == 0 and verdict.sibling == 2 and verdict.path == [2]
    assert verdict.next_token == 3 and verdict.bonus and verdict.rows == [0, 2]
    assert [[t.token for t in depth] for depth in verdict.trials] == [[1, 2]]


def path_logits(model, prefix: list[int], path: list[int]) -> torch.Tensor:
    logits, _ = lm.forward(model, prefix + path, None, n_logits=1)
    return logits[-1]


@pytest.mark.parametrize("arch", ["tiny_qwen", "tiny_llama"])
def test_one_tree_pass_scores_each_node_as_its_own_path(arch, request):
    """Each row's logits equal a plain forward of the prefix and that row's path; the cache kept
    for an accepted path equals the cache those tokens fed in turn give."""
    model = request.getfixturevalue(arch)
    prefix = [5, 17, 42, 3, 99, 7]
    tree = Fishbone(chain=[11, 12, 13], siblings=[[21, 22], [], [23]])
    rows = [prefix[-1], *tree.tokens]

    def tree_pass():
        _, cache = lm.forward(model, prefix[:-1], None)
        return lm.tree_forward(model, rows, tree.parents, cache)

    logits, _ = tree_pass()
    for r in range(len(rows)):
        path, node = [], r
        while node > 0:
            path.insert(0, rows[node])
            node = tree.parents[node]
        torch.testing.assert_close(logits[r], path_logits(model, prefix, path), atol=1e-4, rtol=0)
    past = len(prefix) - 1  # the root's row
    # Kept: the chain's first two tokens; then the second sibling at depth 1 (row 5).
    for kept_rows, path in [([1, 2], [11, 12]), ([5], [22]), ([1, 2, 6], [11, 12, 23])]:
        _, cache = tree_pass()
        held = [(layer.keys.data_ptr(), layer.values.data_ptr()) for layer in cache.layers]
        keep_rows(cache, [*range(past + 1), *(past + r for r in kept_rows)])
        _, fed = lm.forward(model, prefix + path, None)
        for kept, want in zip(cache.layers, fed.layers, strict=True):
            torch.testing.assert_close(kept.keys, want.keys, atol=1e-5, rtol=0)
            torch.testing.assert_close(kept.values, want.values, atol=1e-5, rtol=0)
        # Gathered in place: the rows kept stay in the buffers the pass wrote, not a copy.
        assert [(layer.keys.data_ptr(), layer.values.data_ptr()) for layer in cache.layers] == held


@pytest.mark.parametrize("static", [False, True])
def test_the_gather_moves_only_the_rows_after_the_first_gap_in_place(tiny_qwen, static):
    """Each layer ends up holding exactly `rows` of what it held, in order, in the same buffers:
    the rows before the first gap never move, the later ones are written down into place, and
    the tail is cropped (a dynamic cache's view, a static one's length)."""
    from transformers import StaticCache

    cache = StaticCache(config=tiny_qwen.config, max_cache_len=32) if static else None
    _, cache = lm.forward(tiny_qwen, list(range(3, 12)), cache)
    held = [(layer.keys[..., :9, :].clone(), layer.values[..., :9, :].clone(),
             layer.keys.data_ptr()) for layer in cache.layers]  # fmt: skip
    rows = [0, 1, 2, 3, 4, 6, 8]  # the prefix and the root, a kept chain node, then a sibling
    keep_rows(cache, rows)
    assert int(cache.get_seq_length()) == len(rows)
    for layer, (keys, values, address) in zip(cache.layers, held, strict=True):
        assert torch.equal(layer.keys[..., : len(rows), :], keys[..., rows, :])
        assert torch.equal(layer.values[..., : len(rows), :], values[..., rows, :])
        assert layer.keys.data_ptr() == address


@pytest.mark.parametrize("window", [4, 64])
def test_a_cache_with_sliding_window_layers_is_refused_not_cut(window):
    """A sliding-window layer holds only its window's tail, so after a tree pass the prefix rows
    that the rejected rows pushed out are gone (a window of 4 under 7 rows), and its length
    is its own count, which a gather does not update (a window of 64): the gather refuses such
    a cache."""
    from conftest import tiny_model

    model = tiny_model(use_sliding_window=True, sliding_window=window, max_window_layers=1)
    _, cache = lm.forward(model, [5, 17, 42], None)
    tree = Fishbone(chain=[11, 12], siblings=[[21], []])
    _, cache = lm.tree_forward(model, [3, *tree.tokens], tree.parents, cache)
    with pytest.raises(ValueError, match="sliding-window"):
        keep_rows(cache, [0, 1, 2, 3, 4])


def test_a_greedy_tree_is_the_chain(pair):
    """At temperature 0 the draft's q is one-hot: no siblings, the chain's own tokens."""
    from specdemo import generate

    ids = pair.tokenizer("def f(x):")["input_ids"]
    runs = [
        generate(
            pair.target, pair.draft, ids, k=3, temperature=0.0, max_new_tokens=24, tree_width=width
        )  # fmt: skip
        for width in (1, 3)
    ]
    assert runs[0].tokens == runs[1].tokens and runs[1].stats.siblings_kept == 0


def test_a_tree_needs_the_exact_rule_and_a_width_of_one_or_more(pair):
    from specdemo import generate

    for width, rule, message in [
        (0, "exact", "tree_width must be"),
        ("wide", "exact", "tree_width must be"),
        (2, "always-accept", "exact rule"),
        ("auto", "always-accept", "exact rule"),
        ("auto", "exact", 'needs k="auto"'),
    ]:
        with pytest.raises(ValueError, match=message):
            generate(pair.target, pair.draft, [1, 2], k=2, tree_width=width, rule=rule)


def test_a_width_chosen_automatically_runs_and_greedy_stays_the_chain(pair):
    """tree_width="auto" with k="auto": the policy may choose trees (whether it does depends on
    this machine's measured pass costs); at T = 0 it keeps to chains and writes their tokens."""
    from specdemo import generate

    ids = pair.tokenizer("def f(x):")["input_ids"]
    greedy = [
        generate(
            pair.target,
            pair.draft,
            ids,
            k="auto",
            temperature=0.0,
            max_new_tokens=16,
            tree_width=width,
        )
        for width in (1, "auto")
    ]
    assert greedy[0].tokens == greedy[1].tokens and greedy[1].stats.tree_rounds == 0
    sampled = generate(pair.target, pair.draft, ids, k="auto", temperature=1.0,
                       max_new_tokens=16, tree_width="auto", seed=1)  # fmt: skip
    assert len(sampled.tokens) == 16
    assert all(r.width == 1 or r.siblings_tried or r.n_accepted == r.k for r in sampled.rounds)


def test_a_tree_runs_auto_k_at_the_width_it_verifies_and_counts_kept_siblings(pair):
    """k="auto" with a whole-number tree width prices trees up to that width (as the page does),
    so every round the engine verifies is a shape the policy priced; a kept sibling counts in the
    kept-tokens histogram."""
    from specdemo import generate
    from specdemo.decode.engine import make_generator, resolve_k
    from specdemo.draft.drafters import make_drafter
    from specdemo.judge.sampling import SamplingConfig

    drafter = make_drafter(
        "model", pair.draft, SamplingConfig(1.0), make_generator(0, "cpu"), "cpu"
    )
    assert resolve_k("auto", pair.target, drafter, 3).max_width == 3
    ids = pair.tokenizer("def f(x):", return_tensors="pt").input_ids
    result = generate(pair.target, pair.draft, ids, k="auto", temperature=1.0, tree_width=3,
                      max_new_tokens=48, seed=0)  # fmt: skip
    assert all(r.width <= 3 for r in result.rounds)
    hist = result.stats.accepted_hist
    assert sum(n * count for n, count in enumerate(hist)) == sum(r.kept for r in result.rounds)
    assert sum(hist) == result.stats.rounds


@pytest.mark.parametrize("p", [p for p, _ in CASES])
def test_fixed_children_judged_one_hot_emit_exactly_p(p):
    """Children fixed rather than drawn (a copy and the other tokens that followed its match):
    each judged with its own one-hot q (q None), every ordered set of up to three children,
    enumerated exactly; and the same children judged as if drawn from one shared q, which is
    not exact."""
    p = frac(p)
    vocab = len(p)
    for n in (1, 2, 3):
        for children in itertools.permutations(range(vocab), n):
            assert list(node_output(p, None, list(children))) == list(p), children
    shared = np.array([Fraction(1, 2), Fraction(1, 2), Fraction(0), Fraction(0)], dtype=object)
    wrong = node_output(frac((1, 2, 3, 4)), shared, [0, 1])  # two fixed children as if drawn
    assert tv(wrong, frac((1, 2, 3, 4))) > 0.05
