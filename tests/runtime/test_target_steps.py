"""The target's step modes compute the same logits; its static passes are ready for CUDA graphs.

Proven on the CPU as the draft's step is (tests/runtime/test_draft_steps.py): the static passes read
nothing back to the host and keep their buffers, and replayed as a CUDA graph replays them
(``StaticStep.capture`` stood in by ``make_fx``, which freezes every Python value and
writes the cache's buffers in place) the plain step and verify passes of 2-9 rows, chains and
trees, follow the eager passes over 32 rounds; a position frozen from a Python int fails the
same check. Through the engine, the static target gives the eager target's tokens (greedy, and
sampled with the same seeds) and passes χ² against the target's exact distribution.
"""

import collections
import contextlib
import functools
import random

import pytest
import torch
from conftest import HostReads, tiny_model, traceable
from torch.fx.experimental.proxy_tensor import make_fx

from specdemo.app.exact import chi_square
from specdemo.decode import engine
from specdemo.decode.engine import autoregressive_generate, make_generator, speculative_generate
from specdemo.draft.drafters import ModelDrafter, make_drafter
from specdemo.judge.sampling import SamplingConfig, logits_to_probs
from specdemo.runtime import modes, steps
from specdemo.runtime.steps import (
    EagerStep,
    StaticStep,
    make_target_step,
    resolve_target_step,
    static_mask,
)

TOLERANCE = 1e-5  # the draft's replay bound (test_draft_step), of the largest logit or key
ROUNDS = 32


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one thread (conftest)


@pytest.fixture(scope="module")
def model():
    return tiny_model("qwen2", seed=0)


# ------------------------------------------------------------- the passes, eager and static

# A prefill, a chain of K = 3 with two drafts rejected, a round of K = 0, a fishbone whose kept
# path ends in a sibling at depth 2 (moved down), a plain step, a kept sibling at depth 1, and
# a chain kept whole. Rows 1 and 3 hang from the root, 2 and 4 from row 1, 5 from row 2.
FISHBONE = [-1, 0, 1, 0, 1, 2]
SCRIPT = [
    ("run", list(range(3, 12))),
    ("verify", [20, 21, 22, 23], None),
    ("crop", 2),
    ("verify", [30], None),
    ("verify", [40, 41, 42, 43, 44, 45], FISHBONE),
    ("keep", [0, 1, 4]),
    ("run", [50]),
    ("verify", [60, 61, 62, 63, 64, 65], FISHBONE),
    ("keep", [0, 3]),
    ("verify", [70, 71, 72], None),
    ("crop", 0),
]


def play(step, script=SCRIPT) -> list[torch.Tensor]:
    """Run a script of passes and rollbacks; the logits of every pass."""
    out = []
    for op, *args in script:
        result = getattr(step, op)(*args)
        if result is not None:
            out.append(result)
    return out


def largest_key_difference(static, eager) -> float:
    """The largest difference of the caches' keys and values, over the largest of them."""
    n = eager.length
    return max(
        float((s[:, :, :n] - e).abs().max() / e.abs().max())
        for a, b in zip(static.cache.layers, eager.cache.layers, strict=True)
        for s, e in ((a.keys, b.keys), (a.values, b.values))
    )


@torch.inference_mode()
def test_static_passes_give_the_eager_logits_through_rollbacks(model):
    eager, static = EagerStep(model), StaticStep(model, capacity=64)
    for e, s in zip(play(eager), play(static), strict=True):
        assert e.shape == s.shape
        torch.testing.assert_close(s, e, atol=1e-5, rtol=1e-5)
    assert static.length == eager.length == 9 + 2 + 1 + 3 + 1 + 2 + 3
    assert int(static.cache.get_seq_length()) == static.length
    assert largest_key_difference(static, eager) < TOLERANCE


@torch.inference_mode()
def test_the_static_passes_are_capturable(model):
    """What a CUDA graph needs, checked on the CPU: verify passes of 2-9 rows, chains and
    trees, read nothing back to the host, and no pass or rollback moves the cache's buffers."""
    step = StaticStep(model, capacity=128)
    step.run(list(range(3, 12)))
    buffers = [(layer.keys.data_ptr(), layer.values.data_ptr()) for layer in step.cache.layers]
    with HostReads() as mode:
        for n in range(2, 10):
            step.verify(list(range(20, 20 + n)))
            step.crop(n - 1)
            step.verify(list(range(30, 30 + n)), [-1, *range(n - 2), 0])  # a sibling at depth 1
            step.crop(n - 1)  # the root kept: the length moved
    assert mode.reads == []
    step.verify([40, 41, 42, 43, 44, 45], FISHBONE)
    step.keep([0, 1, 4])  # a row moved in place (the gather's own host reads are not captured)
    assert [(layer.keys.data_ptr(), layer.values.data_ptr()) for layer in step.cache.layers] == (
        buffers
    )


def test_the_static_mask_is_the_tree_mask_over_every_slot():
    """Row r sees the prefix and the rows `seen` gives it, at length + j; stale slots are masked."""
    seen = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.bool)
    mask, positions = static_mask(seen, torch.tensor([0, 1, 1]), torch.tensor(4), 9, torch.float)
    visible = mask[0, 0] == 0
    assert visible.tolist() == [
        [True] * 4 + [True, False, False] + [False] * 2,
        [True] * 4 + [True, True, False] + [False] * 2,
        [True] * 4 + [True, False, True] + [False] * 2,
    ]
    assert positions.tolist() == [[4, 5, 5]]


# ---------------------------------------------------------------- replayed as a CUDA graph


class TracedGraph:
    """A CUDA graph stood in on the CPU: `fn` traced once by ``make_fx`` over `held`, every
    Python value it computes frozen, the cache's buffers read and written in place; each replay
    runs the trace over the held inputs into the same output, as a graph's replay does."""

    def __init__(self, model, fn, held):
        with traceable(model):
            self.trace = make_fx(lambda *inputs: fn(*inputs))(*held)
        self.held = held

    def replay(self) -> None:
        self.out.copy_(self.trace(*self.held))


def capture_by_tracing(step, key, fn, inputs) -> None:
    """``StaticStep.capture`` on the CPU: a warm-up pass gives the output buffer, the
    trace stands for the recording, and the slots each wrote past the length are undone."""
    held = tuple(x.clone() for x in inputs)
    n = held[0].shape[-1]
    out = fn(*held)
    step.cache.crop(-n)
    graph = TracedGraph(step.model, fn, held)
    step.cache.crop(-n)
    graph.out = out
    step.graphs[key] = (graph, held, out)
    step.traced = getattr(step, "traced", 0) + 1


def replaying(step):
    """`step` (static) replaying each pass from its stand-in graph, captured on first use."""
    step.graph, step.kind = True, "graph"
    step.capture = functools.partial(capture_by_tracing, step)
    return step


class FrozenLength(StaticStep):
    """A static step whose passes take the cache's length from the host's Python int, which a
    capture freezes: a replay then writes each round's rows at the right slots (the cache moves
    its own length) but at the positions, and under the mask, of the round it was traced in."""

    def one_token(self, ids):
        position = torch.tensor([[self.length]], device=ids.device)
        out = self.model(input_ids=ids, position_ids=position, cache=self.cache, use_cache=True)
        return out.logits[0, -1:]

    def tree_pass(self, ids, seen, depth):
        dtype = next(self.model.parameters()).dtype
        mask, positions = static_mask(seen, depth, self.length, self.capacity, dtype)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, cache=self.cache,
            use_cache=True, logits_to_keep=ids.shape[-1],
        )  # fmt: skip
        return out.logits[0]


def random_path(parents: list[int], rng: random.Random) -> list[int]:
    """A root-to-node path of the tree, ascending: what a tree round keeps."""
    node, path = rng.randrange(len(parents)), []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


@torch.no_grad()
def replay_against_eager(model, rows: int, tree: bool, frozen: bool = False):
    """`ROUNDS` rounds of `rows` rows each (a plain step for one row), passed and rolled back as
    the engine does, through a static step replaying stand-in graphs and an eager one: (the
    largest logit difference over the largest logit, the same for the caches, the traces)."""
    rng, context = random.Random(rows), list(range(3, 15))
    capacity = len(context) + ROUNDS * rows + 8
    static = replaying((FrozenLength if frozen else StaticStep)(model, capacity=capacity))
    eager = EagerStep(model)
    static.run(context)
    eager.run(context)
    worst = 0.0
    for _ in range(ROUNDS):
        tokens = [rng.randrange(3, 250) for _ in range(rows)]
        if rows == 1:
            replayed, expected = static.run(tokens), eager.run(tokens)
        else:
            parents = [-1, *(rng.randrange(r) for r in range(1, rows))] if tree else None
            replayed, expected = static.verify(tokens, parents), eager.verify(tokens, parents)
            if tree:
                path = random_path(parents, rng)
                static.keep(path)
                eager.keep(path)
            else:
                kept = rng.randrange(rows)  # drafts kept
                static.crop(rows - 1 - kept)
                eager.crop(rows - 1 - kept)
        assert replayed.shape == expected.shape == (rows, 256)
        worst = max(worst, float((replayed - expected).abs().max() / expected.abs().max()))
    assert static.length == eager.length
    return worst, largest_key_difference(static, eager), static.traced


@pytest.mark.parametrize(
    "rows, tree", [(1, False)] + [(n, tree) for n in range(2, 10) for tree in (False, True)]
)
def test_replayed_passes_follow_the_eager_ones(model, rows, tree):
    """The plain step, and verify passes of 2-9 rows (chains, and trees whose layout changes
    every round), replayed 32 times from one capture each, give the eager logits and cache."""
    logits, keys, traced = replay_against_eager(model, rows, tree)
    assert logits < TOLERANCE and keys < TOLERANCE, (logits, keys)
    assert traced == 1  # one capture per row count, however many rounds replay it


@pytest.mark.parametrize("rows, tree", [(1, False), (5, False), (5, True)])
def test_a_position_frozen_from_a_python_int_is_caught(model, rows, tree):
    logits, keys = replay_against_eager(model, rows, tree, frozen=True)[:2]
    assert logits > 100 * TOLERANCE and keys > 0.1, (logits, keys)


# ------------------------------------------------------------------------- through the engine


def run_greedy(pair, prompt, target_step):
    """Greedy speculative tokens, drafts judged and kept per round, the target alone's tokens."""
    drafter = ModelDrafter(pair.draft, SamplingConfig(0.0))
    rounds = list(speculative_generate(
        pair.target, drafter, prompt, k=3, sampling=SamplingConfig(0.0), max_new_tokens=40,
        target_step=target_step,
    ))  # fmt: skip
    alone = autoregressive_generate(
        pair.target, prompt, sampling=SamplingConfig(0.0), max_new_tokens=40,
        target_step=target_step,
    )  # fmt: skip
    tokens = [t for r in rounds for t in r.tokens]
    return tokens, [(r.k, r.n_accepted) for r in rounds], [s.token for s in alone]


def test_greedy_tokens_are_the_same_through_static_and_replayed_passes(pair, monkeypatch):
    """Same greedy tokens and drafts kept, and the same target-alone tokens, through static
    passes (restarting a cache of 16 slots for a 10-token prompt and 40 new tokens) and through
    stand-in graphs, which capture only the row counts the request used."""
    monkeypatch.setattr(steps, "FIRST_CAPACITY", 16)
    prompt = pair.tokenizer("def is_prime(n):\n    if n")["input_ids"]
    eager = run_greedy(pair, prompt, "eager")
    assert run_greedy(pair, prompt, "static") == eager
    kept, judged = (sum(n for _, n in eager[1]), sum(k for k, _ in eager[1]))
    assert 0 < kept < judged  # drafts kept and rejected: rollbacks ran
    runners = []

    @contextlib.contextmanager
    def replayed_step(model, step=None):
        runners.append(replaying(StaticStep(model, capacity=128)))
        yield runners[-1]

    monkeypatch.setattr(engine, "target_step_for", replayed_step)
    assert run_greedy(pair, prompt, None) == eager
    rounds, alone = runners
    assert set(rounds.graphs) == {1 + k for k, _ in eager[1]} and set(alone.graphs) == {1}


def sample(pair, prompt, width, target_step, seed, length=8, drafter="model"):
    g = make_generator(seed, "cpu")
    config = SamplingConfig(1.0, top_k=3)
    rounds = speculative_generate(
        pair.target, make_drafter(drafter, pair.draft, config, g, "cpu", head_rows=None),
        prompt, k=2, sampling=config, max_new_tokens=length, generator=g, tree_width=width,
        target_step=target_step,
    )  # fmt: skip
    return [t for r in rounds for t in r.tokens]


@pytest.mark.parametrize("width", [1, 2])
def test_sampled_tokens_are_the_same_draw_for_draw(pair, width):
    """With the same seeds, a static target gives the eager one's tokens, chains and trees:
    the logits agree to 1e-5, so every uniform falls on the same side."""
    prompt = pair.tokenizer("def is_prime(n):")["input_ids"]
    for seed in range(15):
        assert sample(pair, prompt, width, "static", seed) == sample(
            pair, prompt, width, "eager", seed
        )


# The hybrid drafter on a prompt ending in a 3-gram seen before (10 80 275), whose earlier
# continuation the target gives 0.53: the first round copies it (a chain of K = 2, kept whole
# or cropped), the later ones draw from the draft model as trees of width 2 (a kept sibling
# moved down), each on the static cache the rounds before rolled back. The first ten tokens
# are the tiny target's greedy text after "def is_prime(n):".
CHI2_PROMPT = [293, 291, 65, 82, 338, 10, 80, 275, 130, 286, 10, 80, 275]
CHI2_CONFIG = SamplingConfig(1.0, top_k=3)
CHI2_LENGTH = 4
CHI2_DRAWS = 1_600
CHI2_DETECTABLE_TV = 0.105  # caught 95% of the time at CHI2_DRAWS (test_exactness: 0.06 at 8,000)


@functools.cache
def target_distribution(target) -> dict[tuple[int, ...], float]:
    """P(continuation) of every CHI2_LENGTH-token continuation under the target alone, from a
    fresh pass over each whole prefix (no cache)."""

    @torch.inference_mode()
    def next_probs(prefix: tuple[int, ...]) -> torch.Tensor:
        ids = torch.tensor([CHI2_PROMPT + list(prefix)])
        return logits_to_probs(target(ids, logits_to_keep=1).logits[0], CHI2_CONFIG)[0].double()

    dist = {}

    def walk(prefix: tuple[int, ...], prob: float) -> None:
        if len(prefix) == CHI2_LENGTH:
            dist[prefix] = prob
            return
        p = next_probs(prefix)
        for t in p.nonzero().view(-1).tolist():
            walk(prefix + (t,), prob * float(p[t]))

    walk((), 1.0)
    return dist


def test_the_chi2_check_sees_a_small_departure(pair):
    exact = torch.tensor(list(target_distribution(pair.target).values()), dtype=torch.double)
    assert chi_square.detectable_tv(exact, CHI2_DRAWS) <= CHI2_DETECTABLE_TV


def chi2_through_static_passes(target, draft, draws: int):
    """(the χ² p-value of `draws` speculative continuations through static target passes against
    the target's exact distribution, the continuations drawn, the kinds of round that were
    followed by another pass: each rollback the static cache makes)."""
    g, config = make_generator(0, "cpu"), CHI2_CONFIG
    counts, kinds = collections.Counter(), collections.Counter()
    for _ in range(draws):
        drafter = make_drafter("hybrid", draft, config, g, "cpu", head_rows=None)
        rounds = list(speculative_generate(
            target, drafter, CHI2_PROMPT, k=2, sampling=config, max_new_tokens=CHI2_LENGTH,
            generator=g, tree_width=2, target_step="static",
        ))  # fmt: skip
        counts[tuple(t for r in rounds for t in r.tokens)] += 1
        for r in rounds[:-1]:  # each followed by a pass on the cache it left
            kind = "tree" if r.width > 1 else "chain" if r.n_accepted == r.k else "chain cropped"
            kinds[kind] += r.k > 0
            kinds["sibling moved"] += r.sibling is not None
    dist = target_distribution(target)
    observed = torch.tensor([counts[seq] for seq in dist], dtype=torch.double)
    expected = torch.tensor(list(dist.values()), dtype=torch.double)
    return chi_square.chi2_pvalue(observed, expected), set(counts), kinds


def test_static_passes_keep_the_target_distribution(pair):
    pvalue, drawn, kinds = chi2_through_static_passes(pair.target, pair.draft, CHI2_DRAWS)
    assert drawn <= set(target_distribution(pair.target)), "drew a continuation of p = 0"
    assert pvalue > 1e-3
    assert min(kinds.values()) > CHI2_DRAWS // 20 and len(kinds) == 4, kinds


def test_a_static_rollback_that_keeps_a_rejected_row_fails(pair, monkeypatch):
    """The check has power on this path: a static cache whose chain rollback keeps one rejected
    draft is caught with a quarter of the draws (p ≈ 1e-5 here; the bar is 1e-3)."""

    def keep_one_rejected(step, n):
        steps.EagerStep.crop(step, n - 1 if n > 1 else n)

    monkeypatch.setattr(StaticStep, "crop", keep_one_rejected)
    assert chi2_through_static_passes(pair.target, pair.draft, CHI2_DRAWS // 4)[0] < 1e-3


# ------------------------------------------------------------------------------ the mode


def test_auto_runs_eager_off_cuda_and_the_mode_comes_from_the_argument_then_the_environment(
    monkeypatch, model
):
    monkeypatch.delenv(steps.ENV_TARGET_STEP, raising=False)
    assert resolve_target_step(None, "cpu") == resolve_target_step("auto", "cpu") == "eager"
    # Unset, eager on CUDA too; "auto" asked for there is target_step_for's to measure.
    assert resolve_target_step(None, "cuda:0") == steps.DEFAULT_TARGET_STEP == "eager"
    assert resolve_target_step("auto", "cuda:0") == "auto"
    with modes.target_step_for(model) as runner:
        assert type(runner) is EagerStep
    monkeypatch.setenv(steps.ENV_TARGET_STEP, "static")
    assert resolve_target_step(None, "cpu") == "static"
    assert resolve_target_step("eager", "cpu") == "eager"
    assert resolve_target_step("graph", "cpu") == "static"  # a graph needs CUDA
    assert resolve_target_step("graph", "cuda:0") == "graph"
    assert make_target_step(model, "graph").kind == "static"
    with pytest.raises(ValueError, match="eager, static, graph"):
        resolve_target_step("compiled", "cpu")
    with pytest.raises(ValueError, match="CUDA"):
        StaticStep(model, graph=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA graph needs a GPU")
@torch.inference_mode()
def test_captured_passes_replay_the_eager_logits():
    model = tiny_model("qwen2", seed=0).to("cuda")
    graph = StaticStep(model, graph=True, capacity=64)
    replayed = play(graph, SCRIPT + SCRIPT[1:])
    assert graph.problem == "" and graph.capture_seconds > 0
    assert set(graph.graphs) == {1, 3, 4, ("tree", 6)}
    for e, g in zip(play(EagerStep(model), SCRIPT + SCRIPT[1:]), replayed, strict=True):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_a_request_reuses_the_step_object_an_earlier_one_gave_back(mode):
    """A target's step objects are kept per model and mode: a static cache's buffers (and on
    CUDA its graphs) are made once per process, not once per request, and a reused one starts
    empty: the same seed gives the same tokens as on a fresh one. Two requests at once hold two."""
    from specdemo.decode.engine import autoregressive_generate
    from specdemo.runtime.modes import target_step_for

    model = tiny_model("qwen2", seed=3)
    sampling = SamplingConfig(1.0)

    def tokens():
        g = make_generator(7, model.device)
        run = autoregressive_generate(
            model, [1, 2, 3], sampling=sampling, max_new_tokens=10, generator=g, target_step=mode
        )
        return [s.token for s in run]

    first = tokens()
    with target_step_for(model, mode) as held:
        assert held.length == 0
        with target_step_for(model, mode) as other:
            assert other is not held  # a second request at once gets its own
    assert tokens() == first
    with target_step_for(model, mode) as again:
        assert again in (held, other) and again.length == 0
