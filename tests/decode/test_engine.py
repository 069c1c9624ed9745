"""The speculative loop on tiny real architectures: greedy identity, KV caches, stops, seeds."""

import pytest
import torch
from conftest import BigramLM, tiny_model, toy_tables

import specdemo
from specdemo.decode.engine import autoregressive_generate, make_generator, speculative_generate
from specdemo.decode.rounds import Stats
from specdemo.draft import draft_vocab
from specdemo.draft.drafters import LookupDrafter, ModelDrafter, Proposal
from specdemo.judge.sampling import SamplingConfig

PROMPTS = [[1, 2, 3, 4, 5], [17], [200, 13, 13, 13, 9, 42, 7, 7]]


def reference_greedy(target, prompt, n):
    """Target-only greedy tokens from transformers' own generate."""
    ids = torch.tensor([prompt])
    out = target.generate(ids, do_sample=False, max_new_tokens=n, min_new_tokens=n)
    return out[0, len(prompt) :].tolist()


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("draft_kind", ["random", "self", "noisy"])
def test_greedy_matches_transformers_generate(arch, draft_kind):
    target = tiny_model(arch, seed=0)
    draft = {
        "random": lambda: tiny_model(arch, seed=99, layers=1),  # alpha ~ 0
        "self": lambda: target,  # alpha = 1
        "noisy": lambda: noisy_copy(target, 0.05),
    }[draft_kind]()
    for prompt in PROMPTS:
        expected = reference_greedy(target, prompt, 24)
        for k in (1, 3, 6):
            result = specdemo.generate(target, draft, prompt, k=k, temperature=0, max_new_tokens=24)
            assert result.tokens == expected, (prompt, k)
            # The draft model alone: the default drafter also copies, and a copy can miss.
            by_model = specdemo.generate(
                target, draft, prompt, k=k, temperature=0, max_new_tokens=24, drafter="model"
            )
            assert by_model.tokens == expected, (prompt, k)
            if draft_kind == "self":
                assert by_model.stats.kept_rate == 1.0
            if draft_kind == "random":
                assert by_model.stats.kept_rate < 0.3


def test_greedy_with_a_frequency_ranked_head_matches_transformers_generate(monkeypatch):
    """The target itself as the draft, its head over every other id (a ranked vocabulary, not
    the first rows) and the ids of the text so far: greedy output is the target's own, and
    only ids the head holds are ever proposed."""
    target = tiny_model("qwen2", seed=0)
    ranked = tuple(range(255, -1, -2))  # the odd ids, most "frequent" first
    ranking = draft_vocab.Ranking(256, ranked, 128)
    monkeypatch.setattr(draft_vocab, "ranking", lambda: ranking)
    for prompt in PROMPTS:
        expected = reference_greedy(target, prompt, 24)
        result = specdemo.generate(target, target, prompt, k=3, temperature=0, max_new_tokens=24)
        assert result.tokens == expected
        text = list(prompt)
        for r in result.rounds:
            held = {t for t in text if t % 2 == 0}  # the even ids the head has read so far
            assert all(t % 2 or t in held for t in r.draft)
            if r.k and not r.bonus:  # the draft is the target: it misses only ids it lacks
                assert r.next_token % 2 == 0 and r.next_token not in held
            text += r.tokens
        assert result.stats.drafted and result.stats.kept_rate < 1.0


def test_greedy_lookup_matches_transformers_generate(tiny_qwen):
    prompt = PROMPTS[2]
    expected = reference_greedy(tiny_qwen, prompt, 24)
    result = specdemo.generate(
        tiny_qwen, None, prompt, k=4, temperature=0, max_new_tokens=24, drafter="lookup"
    )
    assert result.tokens == expected


def noisy_copy(model, scale):
    import copy

    draft = copy.deepcopy(model)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale * p.std())
    return draft


class Recorder(torch.nn.Module):
    """Wraps a model; after every call checks the cached logits against a fresh prefill of all
    tokens the cache claims to hold, and records the history at each call."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.generation_config = model.generation_config
        self.history: list[int] = []
        self.calls: list[tuple[list[int], int, bool]] = []  # (history, cache length, matched)

    @property
    def device(self):
        return self.model.device

    def get_output_embeddings(self):
        return self.model.get_output_embeddings()

    def forward(self, input_ids, cache=None, use_cache=True, logits_to_keep=1):
        cached = cache.get_seq_length() if cache is not None else 0
        self.history = self.history[:cached] + input_ids[0].tolist()
        out = self.model(
            input_ids=input_ids, cache=cache, use_cache=True, logits_to_keep=logits_to_keep
        )
        fresh = self.model(input_ids=torch.tensor([self.history]), use_cache=False).logits
        n = out.logits.shape[1]
        matched = torch.allclose(out.logits[0], fresh[0, -n:], atol=1e-4, rtol=1e-4)
        self.calls.append((list(self.history), cached, matched))
        return out


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_kv_caches_track_the_accepted_text(temperature, tiny_qwen):
    target = Recorder(tiny_qwen)
    draft = Recorder(noisy_copy(tiny_qwen, 0.3))
    prompt = PROMPTS[0]
    sampling = SamplingConfig(temperature)
    g = make_generator(0, "cpu")
    drafter = ModelDrafter(draft, sampling, g)
    text = list(prompt)
    rounds = 0
    for r in speculative_generate(
        target, drafter, prompt, k=4, sampling=sampling, max_new_tokens=40, generator=g
    ):
        # The target call of this round saw exactly the accepted text, then the drafts.
        history, cached, matched = target.calls[-1]
        assert matched
        assert cached == len(text) - 1
        assert history == text + r.draft
        text += r.tokens
        rounds += 1
    assert rounds > 3 and all(m for _, _, m in draft.calls)
    # Every draft round started from the accepted text: its first call's history is a prefix.
    assert any(cached > 0 for _, cached, _ in draft.calls[1:]), "draft cache was never reused"


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_an_observer_sees_each_verdict_with_the_rows_the_rule_judged(temperature, tiny_qwen):
    sampling = SamplingConfig(temperature)
    g = make_generator(0, "cpu")
    drafter = ModelDrafter(noisy_copy(tiny_qwen, 0.3), sampling, g)
    verdicts, rounds = [], []
    for r in speculative_generate(
        tiny_qwen, drafter, PROMPTS[0], k=3, sampling=sampling, max_new_tokens=30, generator=g,
        on_verdict=verdicts.append,
    ):  # fmt: skip
        rounds.append(r)
    assert len(verdicts) == len(rounds) > 3
    for v, r in zip(verdicts, rounds, strict=True):
        assert (v.n_accepted, v.next_token) == (r.n_accepted, r.next_token)
        if temperature == 0:
            assert v.p is None and v.q is None  # a greedy verify compares argmaxes only
            continue
        assert v.p.shape == (r.k + 1, v.q.shape[1]) and v.q.shape[0] == r.k
        assert torch.allclose(v.p.sum(-1), torch.ones(r.k + 1, dtype=v.p.dtype), atol=1e-5)
        for i, token in enumerate(r.draft):
            assert float(v.p[i, token]) == pytest.approx(r.p_x[i], abs=1e-6)
            assert float(v.q[i, token]) == pytest.approx(r.q_x[i], abs=1e-6)


def test_stops_on_every_eos_id_inside_an_accepted_block(tiny_qwen):
    prompt = PROMPTS[0]
    free = reference_greedy(tiny_qwen, prompt, 20)
    eos = free[6]  # a token the greedy text reaches at position 6
    first = free.index(eos)
    tiny_qwen.generation_config.eos_token_id = [12345, eos]
    try:
        result = specdemo.generate(
            tiny_qwen, tiny_qwen, prompt, k=8, temperature=0, max_new_tokens=20
        )
    finally:
        tiny_qwen.generation_config.eos_token_id = None
    assert result.tokens == free[: first + 1]
    assert result.rounds[-1].finished


def test_max_new_tokens_is_exact(tiny_qwen):
    for n in (1, 2, 5, 13):
        result = specdemo.generate(
            tiny_qwen, tiny_qwen, PROMPTS[0], k=4, temperature=1.0, max_new_tokens=n, seed=0
        )
        assert len(result.tokens) == n


def test_stop_strings_cut_the_block(tiny_qwen):
    pieces = {i: chr(ord("a") + i % 26) for i in range(256)}

    def decode(ids):
        return "".join(pieces[i] for i in ids)

    free = reference_greedy(tiny_qwen, PROMPTS[0], 20)
    stop = decode(free[4:6])
    want = decode(free).index(stop) + len(stop)
    result = specdemo.generate(
        tiny_qwen,
        tiny_qwen,
        PROMPTS[0],
        k=8,
        temperature=0,
        max_new_tokens=20,
        stop_strings=(stop,),
        decode=decode,
    )
    assert decode(result.tokens).endswith(stop) and len(result.tokens) == want


def test_seed_reproducibility(tiny_qwen):
    draft = noisy_copy(tiny_qwen, 0.3)
    runs = [
        specdemo.generate(
            tiny_qwen, draft, PROMPTS[1], k=3, temperature=1.0, max_new_tokens=30, seed=s
        )
        for s in (5, 5, 6)
    ]
    assert runs[0].tokens == runs[1].tokens
    assert [r.draft for r in runs[0].rounds] == [r.draft for r in runs[1].rounds]
    assert runs[0].tokens != runs[2].tokens


def test_autoregressive_baseline_matches_generate(tiny_llama):
    prompt = PROMPTS[0]
    steps = list(
        autoregressive_generate(tiny_llama, prompt, sampling=SamplingConfig(0.0), max_new_tokens=16)
    )
    assert [s.token for s in steps] == reference_greedy(tiny_llama, prompt, 16)
    assert steps[-1].finished and all(s.time > 0 for s in steps)


def test_sampled_baseline_and_speculative_share_a_seeded_first_token():
    """With k = 0 the speculative loop is target-only sampling: same seed, same tokens."""
    table, _ = toy_tables()
    target = BigramLM(table)
    sampling = SamplingConfig(1.0)
    base = [
        s.token
        for s in autoregressive_generate(
            target, [0], sampling=sampling, max_new_tokens=20, generator=make_generator(3, "cpu")
        )
    ]
    g = make_generator(3, "cpu")
    spec = [
        t
        for r in speculative_generate(
            target, LookupDrafter(), [0], k=0, sampling=sampling, max_new_tokens=20, generator=g
        )
        for t in r.tokens
    ]
    assert spec == base


def test_stats_add_up(tiny_qwen):
    draft = noisy_copy(tiny_qwen, 0.3)
    stats = Stats()
    rounds = list(
        speculative_generate(
            tiny_qwen,
            ModelDrafter(draft, SamplingConfig(1.0)),
            PROMPTS[0],
            k=4,
            sampling=SamplingConfig(1.0),
            max_new_tokens=40,
            stats=stats,
        )
    )
    assert stats.rounds == len(rounds)
    assert stats.new_tokens == sum(len(r.tokens) for r in rounds) == 40
    assert stats.drafted == sum(r.k for r in rounds)
    assert stats.accepted == sum(r.n_accepted for r in rounds)
    assert sum(stats.accepted_hist) == stats.rounds
    assert 0 < stats.kept_rate < 1
    assert stats.target_passes == stats.rounds + 1  # + the prefill
    assert stats.draft_passes == sum(r.draft_steps for r in rounds) == sum(r.k for r in rounds)
    # c = t_draft / t_step needs a plain target step, which a run at k = 4 never takes.
    assert stats.c is None and stats.costs() is None
    assert set(stats.t_verify_rows) == {r.k + 1 for r in rounds}  # a chain's pass: k + 1 rows
    stats.t_step = 2 * stats.t_draft
    assert stats.c == pytest.approx(0.5)
    costs = stats.costs()
    assert costs.verify_cost(4) == pytest.approx(stats.t_verify_rows[5] / stats.t_step)


def test_zero_new_tokens_is_an_empty_answer(tiny_qwen):
    steps = autoregressive_generate(
        tiny_qwen, PROMPTS[0], sampling=SamplingConfig(1.0), max_new_tokens=0
    )
    assert list(steps) == []
    assert specdemo.generate(tiny_qwen, tiny_qwen, PROMPTS[0], max_new_tokens=0).tokens == []


def test_a_draft_token_outside_the_target_vocabulary_raises_before_the_target_runs():
    table, _ = toy_tables(6)
    target = BigramLM(table)
    calls = []
    target.register_forward_pre_hook(lambda *a: calls.append(1))

    class Outsider:
        def sources(self, context):
            return ("model",)

        def propose(self, context, k, source=None):
            return Proposal(torch.tensor([2, 9]), None)

    rounds = speculative_generate(target, Outsider(), [0], k=2, sampling=SamplingConfig(1.0))
    with pytest.raises(ValueError, match="token id 9, outside the target's vocabulary of 6"):
        next(rounds)
    assert not calls  # no target pass ran: a one-token prompt has no prefill

    class Broken:  # what sample() gives for a draft row of NaNs
        def sources(self, context):
            return ("model",)

        def propose(self, context, k, source=None):
            return Proposal(torch.tensor([-1]), None)

    rounds = speculative_generate(target, Broken(), [0], k=1, sampling=SamplingConfig(1.0))
    with pytest.raises(ValueError, match="invalid distribution"):
        next(rounds)


def test_a_draft_with_nan_logits_raises_a_clear_error():
    table, _ = toy_tables(6)
    nan_draft = BigramLM(torch.full((6, 6), float("nan")))
    with pytest.raises(ValueError, match="invalid distribution"):
        specdemo.generate(BigramLM(table), nan_draft, [0], k=3, temperature=1.0)


def test_bad_arguments_are_rejected(tiny_qwen):
    with pytest.raises(ValueError):
        specdemo.generate(tiny_qwen, tiny_qwen, [], k=2)
    with pytest.raises(ValueError):
        specdemo.generate(tiny_qwen, tiny_qwen, [1], k=-1)
    with pytest.raises(ValueError):
        specdemo.generate(tiny_qwen, None, [1], k=2, drafter="model")
    with pytest.raises(ValueError):
        specdemo.generate(tiny_qwen, tiny_qwen, [1], temperature=float("nan"))


def test_round_times_exclude_the_time_the_caller_holds_the_generator():
    import time

    table, close = toy_tables()
    sampling = SamplingConfig(1.0)
    rounds = speculative_generate(
        BigramLM(table), ModelDrafter(BigramLM(close), sampling), [0], k=2, sampling=sampling,
        max_new_tokens=12,
    )  # fmt: skip
    for r in rounds:
        assert r.draft_time < 0.05 and r.verify_time < 0.05
        time.sleep(0.06)  # a slow consumer: rendering, streaming to a browser


def test_the_loop_takes_a_resolved_k_and_says_how_to_resolve_auto():
    """K is resolved before the loop: a number, or a ready policy (``engine.auto_k``)."""
    from specdemo.decode.engine import auto_k, resolve_k

    table, close = toy_tables(6)
    target, draft = BigramLM(table), BigramLM(close)
    drafter = ModelDrafter(draft, SamplingConfig(1.0))
    with pytest.raises(ValueError, match="engine.auto_k"):
        next(speculative_generate(target, drafter, [0], k="auto", max_new_tokens=4))
    policy = auto_k(target, drafter)
    assert resolve_k("auto", target, drafter).costs == policy.costs  # one profile per pair
    rounds = list(speculative_generate(target, drafter, [0], k=policy, max_new_tokens=12))
    assert sum(len(r.tokens) for r in rounds) == 12 and any(r.k_asked for r in rounds)


def test_a_run_leaves_the_policy_it_is_given_as_it_was():
    """A greedy run pins its tree width to 1 and every run learns acceptance: on a copy, so a
    policy handed to two runs starts each from the same place."""
    from specdemo.decode.engine import auto_k

    table, close = toy_tables(6)
    target, draft = BigramLM(table), BigramLM(close)
    drafter = ModelDrafter(draft, SamplingConfig(0.0))
    policy = auto_k(target, drafter, max_width=4)
    before = (policy.max_width, repr(policy.acceptance))
    run = speculative_generate(
        target,
        drafter,
        [0],
        k=policy,
        max_new_tokens=12,
        sampling=SamplingConfig(0.0),
        tree_width="auto",
    )
    assert sum(len(r.tokens) for r in run) == 12
    assert (policy.max_width, repr(policy.acceptance)) == before


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_each_round_times_the_targets_pass_apart_from_its_judge(tiny_qwen, mode):
    """The pass alone (what automatic K's load compares with the profile's same passes) is
    within the round's verify time, which also holds the judge."""
    sampling = SamplingConfig(1.0)
    drafter = ModelDrafter(noisy_copy(tiny_qwen, 0.3), sampling)
    generator = make_generator(0, tiny_qwen.device)
    run = speculative_generate(
        tiny_qwen,
        drafter,
        [1, 2, 3],
        k=3,
        sampling=sampling,
        max_new_tokens=12,
        target_step=mode,
        generator=generator,
    )
    rounds = list(run)
    assert rounds and all(0 < r.pass_time <= r.verify_time for r in rounds)
