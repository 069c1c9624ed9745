"""Speculative sampling reproduces target-only sampling exactly: a χ² test on enumerated toys.

Toy LMs over 4-6 tokens make the exact probability of every continuation computable: each case
draws 8,000 speculative continuations through the real engine, long enough that the first round
runs its full K, and they must fit (p > 0.001). The test's power: at that N each case catches
any departure of total variation 0.06 or more with probability 0.95 whatever its shape
(``chi_square.detectable_tv``, test_each_case_sees_a_small_departure), and deliberately wrong
rules fail it: the classic mistakes of ``sampling.RULES`` (accepting every draft, resampling
from p instead of the residual, drafting greedily with the softmax as q) and a KV cache rollback
that keeps one rejected draft, each at p < 1e-10 at this N.
"""

import collections
import functools

import pytest
import torch
from conftest import ToyLM, ToyStaticCache, toy_tables

from specdemo.app.exact import chi_square
from specdemo.cost.policy import MIN_EVIDENCE, Acceptance, AutoK
from specdemo.cost.theory import StepCosts
from specdemo.decode.engine import make_generator, speculative_generate
from specdemo.decode.rounds import Stats
from specdemo.draft.drafters import LookupDrafter, ModelDrafter, make_drafter
from specdemo.judge.sampling import EXACT, RULES, AcceptanceRule, SamplingConfig, logits_to_probs
from specdemo.runtime import steps
from specdemo.runtime.lm import head_over

N_DRAWS = 8_000
DETECTABLE_TV = 0.06  # the largest total variation a case may miss 5% of the time at N_DRAWS


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one thread (conftest)


def exact_distribution(target: ToyLM, prompt: list[int], config: SamplingConfig, length: int):
    """P(continuation | prompt) under target-only sampling with the same warping, for every
    continuation of `length` tokens or fewer that ends at an EOS id. Runs the model itself on each
    prefix (no cache), so it holds for history-dependent toys too."""
    eos = target.generation_config.eos_token_id
    vocab = target.lm_head.weight.shape[0]

    @functools.cache
    def next_probs(prefix: tuple[int, ...]) -> list[float]:
        logits = target(torch.tensor([prompt + list(prefix)])).logits[0]
        return logits_to_probs(logits, config)[0].double().tolist()

    dist = {}

    def walk(prefix: tuple[int, ...], prob: float) -> None:
        if len(prefix) == length or (prefix and prefix[-1] == eos):
            dist[prefix] = prob
            return
        for t, pt in enumerate(next_probs(prefix)):
            if pt > 0:
                walk(prefix + (t,), prob * pt)

    walk((), 1.0)
    assert len(dist) <= vocab**length
    return dist


def draw(target, make, prompt, k, config, length, n=N_DRAWS, seed=0, rule=EXACT, width=1,
         judge="token", stats=None):  # fmt: skip
    generator = make_generator(seed, "cpu")
    counts = {}
    for _ in range(n):
        rounds = speculative_generate(
            target,
            make(config, generator, rule),
            prompt,
            k=k() if callable(k) else k,
            sampling=config,
            max_new_tokens=length,
            generator=generator,
            rule=rule,
            tree_width=width,
            verify=judge,
            stats=stats,
        )
        seq = tuple(t for r in rounds for t in r.tokens)
        counts[seq] = counts.get(seq, 0) + 1
    return counts


def chi2_pvalue(counts: dict, dist: dict) -> float:
    """The app's χ² goodness of fit (``chi_square.chi2_pvalue``) over the continuations."""
    assert set(counts) <= set(dist), "drew a continuation the target gives probability 0"
    observed = torch.tensor([counts.get(seq, 0) for seq in dist], dtype=torch.double)
    return chi_square.chi2_pvalue(observed, torch.tensor(list(dist.values()), dtype=torch.double))


def model_drafter(draft: ToyLM, **kwargs):
    return lambda config, g, rule=EXACT: ModelDrafter(draft, config, g, rule=rule, **kwargs)


def ranked_head_drafter(draft: ToyLM, ids: list[int]):
    head = head_over(draft, torch.tensor(ids))
    return lambda config, g, rule=EXACT: ModelDrafter(draft, config, g, rule=rule, head=head)


def lookup_drafter(config, g, rule=EXACT):
    return LookupDrafter()


def hybrid_drafter(draft: ToyLM, kind: str = "hybrid"):
    return lambda config, g, rule=EXACT: make_drafter(kind, draft, config, g, "cpu", rule=rule)


def suffix_drafter(config, g, rule=EXACT):
    return make_drafter("suffix", None, config, g, "cpu", rule=rule)


def cycle_lm() -> ToyLM:
    """A target over 4 tokens that cycles 1 2 3 1 2 3 ... except at 1, which is followed by 2
    (0.85), by 3 (0.08) or by the EOS, 0 (0.07): continuations of 30 tokens stay few enough to
    enumerate, and a long copy of the cycle is kept far, then rejected into a residual of 3 and
    the EOS, or kept whole and followed by a bonus."""
    never = -1e4  # softmax gives exactly 0: the enumeration skips it
    table = torch.full((4, 4), never)
    table[1] = torch.tensor([0.07, 0.0, 0.85, 0.08]).log().clamp_min(never)
    table[2, 3] = table[3, 1] = table[0, 1] = 0.0
    return ToyLM(table, eos=0)


def long_copy_auto_k() -> AutoK:
    """Automatic K at costs where a long copy pays: it copies up to 32 tokens a round."""
    return AutoK(StepCosts(1.0, 0.3, {k: 1.0 + 0.02 * k for k in (*range(1, 9), 12, 16, 24, 32)}))


T6, CLOSE6 = toy_tables(6, closeness=0.3, seed=0)
_, FAR6 = toy_tables(6, closeness=2.0, seed=1)
T4, CLOSE4 = toy_tables(4, closeness=0.3, seed=2)
MIX4, MIX4_DRAFT = toy_tables(4, closeness=0.3, seed=3)


def history_pair():
    """Target and draft whose next token depends on the token two back: what the KV caches
    hold matters, so a cache that keeps a rejected draft changes the output distribution."""
    target = ToyLM(T4, mix=2.5 * MIX4)
    return target, ToyLM(CLOSE4, mix=2.5 * MIX4_DRAFT)


HISTORY_TARGET, HISTORY_DRAFT = history_pair()
# A draft of an unrelated toy: about a quarter of its drafts are kept, so drafting barely pays.
_, FAR4 = toy_tables(4, closeness=2.0, seed=5)
HISTORY_FAR_DRAFT = ToyLM(FAR4, mix=2.5 * MIX4_DRAFT)
# Ends in a 3-gram seen before (0 1 1): prompt lookup copies from the first round on.
HISTORY_PROMPT = [0, 1, 1, 2, 2, 0, 1, 1]


def seasoned_auto_k() -> AutoK:
    """Automatic K with MIN_EVIDENCE first drafts already judged (3 kept), as later in a request,
    at costs near break-even: its choice moves between K = 0 (a plain step) and K = 1 with the
    rounds' outcomes (test_automatic_k_chooses_plain_steps)."""
    policy = AutoK(StepCosts(1.0, 0.25, {k: 1.0 + 0.1 * k for k in range(1, 5)}))
    policy.acceptance["model"] = Acceptance(judged=[MIN_EVIDENCE], kept=[3])
    return policy


# name: (target, drafter factory, prompt, k, sampling, continuation length)
# Every K in 1..4 (unclipped: length >= k + 1), temperature, warping, drafter and closeness
# appears at least once; automatic K chooses K = 0 in one case.
CASES = {
    "k1-t1-close": (ToyLM(T6), model_drafter(ToyLM(CLOSE6)), [0], 1, SamplingConfig(1.0), 3),
    "k2-t0.5-topk-far": (
        ToyLM(T6),
        model_drafter(ToyLM(FAR6)),
        [0],
        2,
        SamplingConfig(0.5, top_k=3),
        3,
    ),
    "k4-t1.7-topp-close": (
        ToyLM(T4),
        model_drafter(ToyLM(CLOSE4)),
        [0],
        4,
        SamplingConfig(1.7, top_p=0.8),
        5,
    ),
    "k1-t1.7-topk-topp-far": (
        ToyLM(T6),
        model_drafter(ToyLM(FAR6)),
        [0],
        1,
        SamplingConfig(1.7, top_k=4, top_p=0.9),
        3,
    ),
    "k4-t1-adaptive-close": (
        ToyLM(T4),
        model_drafter(ToyLM(CLOSE4), adaptive=True, threshold=0.5),
        [0],
        4,
        SamplingConfig(1.0),
        5,
    ),
    # A draft with a smaller vocabulary (like Qwen2.5 0.5B under the 7B): q is zero-padded and
    # token 5 only ever comes from a residual or a bonus.
    "k2-t1-small-vocab": (
        ToyLM(T6),
        model_drafter(ToyLM(CLOSE6[:, :5])),
        [0],
        2,
        SamplingConfig(1.0),
        3,
    ),
    # The draft model's head cut to the first 3 of 4 rows (lm.cut_head), under sampling.
    "k3-t1-cut-head": (
        ToyLM(T4),
        model_drafter(ToyLM(CLOSE4), head_rows=3),
        [1],
        3,
        SamplingConfig(1.0),
        4,
    ),
    # The draft's head over a ranked subset that is not the first rows (draft_vocab): its rows
    # map back to token ids 0, 2, 4 and 5; tokens 1 and 3 have q = 0 and come only from a
    # residual or a bonus.
    "k3-t1-ranked-head": (
        ToyLM(T6),
        ranked_head_drafter(ToyLM(CLOSE6), [5, 0, 2, 4]),
        [0],
        3,
        SamplingConfig(1.0),
        4,
    ),
    "k2-t1-lookup": (
        ToyLM(T6),
        lookup_drafter,
        [0, 1, 2, 0, 1, 3, 0],
        2,
        SamplingConfig(1.0, top_k=5),
        3,
    ),
    "k4-t0.5-lookup": (ToyLM(T4), lookup_drafter, [2, 3, 2, 3, 1, 2], 4, SamplingConfig(0.5), 5),
    # EOS (token 3) often sits inside a fully accepted block: the block is cut right after it.
    "k3-t1-eos-in-block": (
        ToyLM(T4, eos=3),
        model_drafter(ToyLM(CLOSE4, eos=3)),
        [0],
        3,
        SamplingConfig(1.0),
        5,
    ),
    "k3-t1-history-caches": (
        HISTORY_TARGET,
        model_drafter(HISTORY_DRAFT),
        [0, 1],
        3,
        SamplingConfig(1.0),
        5,
    ),
    # The history toy with each other way of drafting: rejected copies, rejected drafts of
    # either source, and plain steps between rounds must each leave the target's cache right.
    "k2-t1-history-lookup": (
        HISTORY_TARGET,
        lookup_drafter,
        HISTORY_PROMPT,
        2,
        SamplingConfig(1.0),
        5,
    ),
    "k3-t1-history-hybrid": (
        HISTORY_TARGET,
        hybrid_drafter(HISTORY_DRAFT),
        HISTORY_PROMPT,
        3,
        SamplingConfig(1.0),
        5,
    ),
    "auto-t1-history-plain-steps": (
        HISTORY_TARGET,
        model_drafter(HISTORY_FAR_DRAFT),
        [0, 1],
        seasoned_auto_k,
        SamplingConfig(1.0),
        5,
    ),
    # Hybrid: the prompt ends in a 3-gram seen before, so the first round copies (q one-hot), and
    # later rounds mix copies and draft-model samples (see test_hybrid_cases_use_both_sources).
    "k4-t1-hybrid": (
        ToyLM(T4),
        hybrid_drafter(ToyLM(CLOSE4)),
        [0, 1, 2, 3, 0, 2, 1, 0, 1, 2],
        4,
        SamplingConfig(1.0),
        5,
    ),
    # Copies from the suffix index: 24 tokens of the cycle a round, the first rounds copying a
    # match that runs off the end of the context (an overlapping copy), kept whole or cut by a
    # rejection whose residual holds the EOS.
    "k24-t1-suffix-long-copy": (
        cycle_lm(),
        suffix_drafter,
        [1, 2, 3] * 4 + [1, 3, 1, 2, 3, 1],
        24,
        SamplingConfig(1.0),
        28,
    ),
    "auto-t0.8-suffix-long-copy": (
        cycle_lm(),
        suffix_drafter,
        [1, 2, 3] * 4 + [1],
        long_copy_auto_k,
        SamplingConfig(0.8),
        28,
    ),
    "k4-t1-history-suffix": (
        HISTORY_TARGET,
        suffix_drafter,
        HISTORY_PROMPT,
        4,
        SamplingConfig(1.0),
        5,
    ),
    "auto-t1-history-suffix-hybrid": (
        HISTORY_TARGET,
        hybrid_drafter(HISTORY_DRAFT, "suffix-hybrid"),
        HISTORY_PROMPT,
        long_copy_auto_k,
        SamplingConfig(1.0),
        5,
    ),
    # Automatic K with the hybrid drafter: k changes from round to round with the acceptance
    # seen so far (a fresh policy per generation, short of MIN_EVIDENCE: k = 1 and 2 get chosen).
    "auto-t0.7-topp-far-hybrid": (
        ToyLM(T6),
        hybrid_drafter(ToyLM(FAR6)),
        [0, 4, 5, 2, 1, 3, 0, 4, 5],
        lambda: AutoK(StepCosts(1.0, 0.1, {k: 1.0 + 0.15 * k for k in range(1, 9)})),
        SamplingConfig(0.7, top_p=0.9),
        5,
    ),
}


def tree_auto_k() -> AutoK:
    """Automatic K and tree width (``AutoK.max_width`` 3) on rows cheap enough that its prior
    makes a tree worth trying; whether a round is a tree then depends on the siblings the
    generation saw kept so far (tests/cost/test_policy.py)."""
    return AutoK(StepCosts(1.0, 0.1, {k: 1.0 + 0.02 * k for k in range(1, 5)}), max_width=3)


# Cases run as trees only (the chain's cases above cover their drafting).
TREE_ONLY = {
    "auto-tree-t1-history": (
        HISTORY_TARGET,
        model_drafter(HISTORY_DRAFT),
        [0, 1],
        tree_auto_k,
        SamplingConfig(1.0),
        5,
    ),
}
CASES.update(TREE_ONLY)


def run_case(name: str, rule: AcceptanceRule = EXACT, width: int | str = 1, judge="token",
             stats=None) -> float:  # fmt: skip
    target, make, prompt, k, config, length = CASES[name]
    counts = draw(target, make, prompt, k, config, length, rule=rule, width=width, judge=judge,
                  stats=stats)  # fmt: skip
    return chi2_pvalue(counts, exact_distribution(target, prompt, config, length))


def test_each_case_sees_a_small_departure():
    """The power behind every pass below: a wrong engine whose continuations differ from the
    target's by DETECTABLE_TV in total variation fails a case 95% of the time or more."""
    for name, (target, _, prompt, _, config, length) in CASES.items():
        exact = torch.tensor(list(exact_distribution(target, prompt, config, length).values()))
        assert chi_square.detectable_tv(exact.double(), N_DRAWS) <= DETECTABLE_TV, name


@pytest.mark.parametrize("name", [name for name in CASES if name not in TREE_ONLY])
def test_speculative_samples_match_target_distribution(name):
    assert run_case(name) > 1e-3


@pytest.mark.parametrize(
    "name", ["k3-t1-history-caches", "k3-t1-history-hybrid", "auto-t1-history-plain-steps"]
)
def test_a_static_draft_cache_keeps_the_target_distribution(name, monkeypatch):
    """The draft model's passes through fixed buffers (``steps.StaticStep``, the CUDA
    graph's cache), here a toy buffer whose crop only moves its length: history-reading toys,
    and 12 slots for 8-token prompts, so generations outgrow the buffer and start over."""
    monkeypatch.setenv(steps.ENV_DRAFT_STEP, "static")
    monkeypatch.setattr(steps, "static_cache", lambda _, capacity: ToyStaticCache(capacity))
    monkeypatch.setattr(steps, "FIRST_CAPACITY", 12)
    assert CASES[name][1](SamplingConfig(1.0), None).draft_model.step.kind == "static"
    assert run_case(name) > 1e-3


# Tree rounds on history-reading toys (a wrong cache gather shows), one with hybrid drafting:
# copied rounds stay chains, the draft model's grow siblings.
# The width chosen round by round by automatic K, from the rounds before.
TREE_CASES = [
    ("k3-t1-history-caches", 2),
    ("k3-t1-history-hybrid", 3),
    ("auto-tree-t1-history", "auto"),
    # Copies whose match was followed by other tokens too: those are the copy's siblings, fixed
    # rather than drawn, judged with one-hot q.
    ("k24-t1-suffix-long-copy", 2),
    ("auto-t1-history-suffix-hybrid", 3),
]


@pytest.mark.parametrize("name, width", TREE_CASES)
def test_token_trees_keep_the_target_distribution(name, width):
    """Tree rounds (tree_width > 1): siblings drawn without replacement, one tree pass, the
    cache gathered to the kept path; history-reading toys, so a wrong gather shows."""
    assert run_case(name, width=width) > 1e-3


def test_the_tree_cases_keep_siblings():
    """The tree cases exercise what they name: rounds that keep a sibling, and a bonus after;
    with the width chosen automatically, both trees and chains."""
    for name, width in TREE_CASES:
        target, make, prompt, k, config, length = CASES[name]
        g = make_generator(0, "cpu")
        kept, widths = 0, collections.Counter()
        for _ in range(200):
            rounds = list(speculative_generate(
                target, make(config, g), prompt, k=k() if callable(k) else k, sampling=config,
                max_new_tokens=length, generator=g, tree_width=width,
            ))  # fmt: skip
            kept += sum(r.sibling is not None and r.bonus for r in rounds)
            widths.update(r.width for r in rounds)
        assert kept > 10, (name, kept)
        if width == "auto":
            assert widths[1] > 50 and sum(n for w, n in widths.items() if w > 1) > 50, widths


def test_a_wrong_tree_gather_fails_the_test(monkeypatch):
    """A gather that keeps the cache's first rows, right for a chain's kept tokens but not for a
    kept sibling, is caught."""
    from specdemo.runtime import kv

    real = kv.keep_rows
    monkeypatch.setattr(steps, "keep_rows", lambda cache, rows: real(cache, list(range(len(rows)))))
    assert run_case("k3-t1-history-caches", width=2) < 1e-3


def test_cases_run_their_full_k_and_hit_eos_inside_accepted_blocks():
    """The suite exercises what it names: full-K first rounds, and EOS inside a kept block."""
    for name, (target, make, prompt, k, config, length) in CASES.items():
        if callable(k):
            continue  # automatic K: see test_automatic_k_varies_k
        g = make_generator(0, "cpu")
        first = next(speculative_generate(target, make(config, g), prompt, k=k, sampling=config,
                                          max_new_tokens=length, generator=g))  # fmt: skip
        assert first.k == k or name.startswith(("k4-t1-adaptive", "k2-t1-lookup", "k4-t0.5-look"))
    target, make, prompt, k, config, length = CASES["k3-t1-eos-in-block"]
    g = make_generator(0, "cpu")
    cut_inside = 0
    for _ in range(300):
        rounds = list(speculative_generate(target, make(config, g), prompt, k=k, sampling=config,
                                           max_new_tokens=length, generator=g))  # fmt: skip
        last = rounds[-1]
        cut_inside += last.tokens[-1] == 3 and len(last.tokens) <= last.n_accepted
    assert cut_inside > 10


def chosen_k(name: str, generations: int = 200) -> collections.Counter:
    """How often each k was asked for over a case's first draws, in rounds that do not finish
    the generation: k_asked is the policy's k clipped to the tokens left minus one, so a finishing
    round asks for 0 whenever one token is left, while a K = 0 in any other round was chosen."""
    target, make, prompt, k, config, length = CASES[name]
    g = make_generator(0, "cpu")
    chosen = collections.Counter()
    for _ in range(generations):
        for r in speculative_generate(target, make(config, g), prompt, k=k(), sampling=config,
                                      max_new_tokens=length, generator=g):  # fmt: skip
            chosen[r.k_asked] += not r.finished
    return chosen


def test_automatic_k_varies_k():
    chosen = chosen_k("auto-t0.7-topp-far-hybrid")
    assert chosen[1] > 20 and chosen[2] > 20, chosen


def test_automatic_k_chooses_plain_steps():
    """The plain-steps case really runs rounds with K = 0 between speculative ones."""
    chosen = chosen_k("auto-t1-history-plain-steps")
    assert chosen[0] > 50 and chosen[1] > 50, chosen


def test_hybrid_cases_use_both_sources():
    """Each hybrid case drafts from both sources, and some of both kinds of draft are kept."""
    for name in [n for n in CASES if n.endswith("hybrid")]:
        target, make, prompt, k, config, length = CASES[name]
        g = make_generator(0, "cpu")
        drafted, kept = collections.Counter(), collections.Counter()
        for _ in range(200):
            k_ = k() if callable(k) else k
            for r in speculative_generate(target, make(config, g), prompt, k=k_, sampling=config,
                                          max_new_tokens=length, generator=g):  # fmt: skip
                drafted[r.source] += r.k
                kept[r.source] += r.n_accepted
        assert min(kept["model"], kept["lookup"]) > 20, (name, drafted, kept)


def keep_one_rejected(cache, n):
    if n > 1:
        cache.crop(1 - n)


@pytest.mark.parametrize(
    "rule, case",
    [
        ("always-accept", "k1-t1-close"),  # every draft kept: the output follows q
        ("resample-from-p", "k2-t1-lookup"),  # a rejection draws from p, not max(0, p - q)
        ("resample-from-p", "k24-t1-suffix-long-copy"),  # the same, after a long copy
        ("greedy-draft", "k1-t1-close"),  # the argmax is drafted, softmax q is reported
        # judged as a block by min(1, prod p/q) with the token-wise residual
        ("block-prefix", "k4-t1.7-topp-close"),
    ],
)
def test_wrong_rules_fail_the_test(rule, case):
    """The test has power: each classic mistake of ``sampling.RULES``, run through the engine
    with the same draw count, is caught (at p < 1e-10 here; the bar is the cases' 1e-3)."""
    assert run_case(case, RULES[rule]) < 1e-3


# Judged as a block: chains at K 3-4 (EOS inside kept blocks, history-reading caches, copies
# mixed with drafts), automatic K, and a width-2 fishbone judged by traversal.
BLOCK_CASES = [
    ("k4-t1.7-topp-close", 1),
    ("k3-t1-eos-in-block", 1),
    ("k3-t1-history-hybrid", 1),
    ("auto-t0.7-topp-far-hybrid", 1),
    ("k3-t1-history-caches", 2),
]


@pytest.mark.parametrize("name, width", BLOCK_CASES)
def test_judging_the_block_keeps_the_target_distribution(name, width):
    """The block judge through the engine: exact, and on the chains it keeps what judging token
    by token keeps of the same drafts with the same uniforms, or more (block verification is
    better in distribution, not on every block: within 2% where the gain is small)."""
    stats = Stats()
    assert run_case(name, width=width, judge="block", stats=stats) > 1e-3
    assert stats.rounds > N_DRAWS
    if width == 1:
        assert stats.token_rounds > N_DRAWS // 2
        assert stats.chain_kept >= 0.98 * stats.token_kept
    if name == "k4-t1.7-topp-close":  # K = 4, a draft close to the target: the gain shows
        assert stats.chain_kept > 1.03 * stats.token_kept


def test_a_wrong_cache_rollback_fails_the_test(monkeypatch):
    """A KV cache crop that keeps one rejected draft is caught too."""
    monkeypatch.setattr(steps, "drop_last", keep_one_rejected)
    assert run_case("k3-t1-history-caches") < 1e-3
