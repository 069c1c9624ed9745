"""suffix.py: the suffix automaton's longest match against a plain scan, overlapping copies,
re-anchoring after an edit, and copies through the engine: greedy identity, EOS inside a long
copied block, and long copies priced by their match."""

import random

import pytest
import torch
from conftest import ToyLM

from specdemo.cost.policy import AutoK, evidence
from specdemo.cost.theory import StepCosts
from specdemo.decode.engine import (
    autoregressive_generate,
    check_k,
    make_generator,
    speculative_generate,
)
from specdemo.draft.drafters import make_drafter
from specdemo.draft.suffix import CopyDrafter, Match, SuffixIndex, copy_from
from specdemo.judge.sampling import SamplingConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def reference_match(context: list[int]) -> tuple[int, int, set[int]]:
    """(length, first end, followers) of the longest suffix that also ended earlier, by a scan."""
    n = len(context)
    for length in range(n - 1, 0, -1):
        tail = context[n - length :]
        ends = [e for e in range(length, n) if context[e - length : e] == tail]
        if ends:
            return length, ends[0], {context[e] for e in ends}
    return 0, 0, set()


def test_the_index_finds_the_longest_earlier_match_as_the_context_grows():
    """Random contexts over 1-4 token ids (repeats and self-overlapping matches abound), grown a
    token or a block at a time; one index per text, and one reused across texts that must notice
    a new one and start over."""
    rng = random.Random(0)
    reused = SuffixIndex()
    for _ in range(120):
        fresh = SuffixIndex()
        vocab = rng.randint(1, 4)
        context = [rng.randrange(vocab)]
        while len(context) < 50:
            length, end, followers = reference_match(context)
            for index in (fresh, reused):
                got = index.match(context)
                assert got[:2] == (length, end), context
                assert set(got[2]) == followers
                for token, start in got[2].items():  # each follower's copy starts at the token
                    assert context[start - 1] == token and start - 1 >= length
            context += [rng.randrange(vocab) for _ in range(rng.randint(1, 4))]


def test_a_copy_that_runs_off_the_end_repeats_its_period():
    assert copy_from([7, 8, 7, 8, 7], 3, 5) == [8, 7, 8, 7, 8]
    assert copy_from([5, 6, 9], 1, 6) == [6, 9, 6, 9, 6, 9]
    with pytest.raises(ValueError, match="inside the context"):
        copy_from([1, 2], 2, 3)
    drafter = CopyDrafter()
    context = [4, 1, 2, 3, 1, 2, 3, 1, 2]
    proposal = drafter.propose(context, 10)
    assert proposal.tokens.tolist() == [3, 1, 2] * 3 + [3] and proposal.q is None
    assert proposal.match == Match(6, 5, continuations=1)  # "1 2 3 1 2" ended at 6
    assert drafter.propose([5], 4).tokens.numel() == 0  # nothing earlier: no copy


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="at least one token"):
        CopyDrafter().propose([], 3)
    with pytest.raises(ValueError, match="k must be at most"):
        check_k(10_000)


def test_after_an_edit_the_copy_re_anchors_past_the_changed_tokens():
    """A source `get user ( id ) : return db [ id ]` returned with `get` renamed `fetch`: once
    the target has written the new name, the copy resumes right after the old one, and once a
    token agrees again the copy follows it."""
    get, fetch, user, lp, id_, rp, colon, ret, db, lb, rb, sep = range(12)
    source = [get, user, lp, id_, rp, colon, ret, db, lb, id_, rb]
    drafter = CopyDrafter()
    prompt = source + [sep]
    # The first round finds no match for the separator; a later one copies the source's start.
    text = prompt + [fetch]
    assert drafter.propose(text, 4).tokens.numel() == 0
    text += [user, lp]  # the target wrote " user(" itself: the longest match is 2 tokens
    proposal = drafter.propose(text, 4)
    assert proposal.tokens.tolist() == [id_, rp, colon, ret]
    assert proposal.match.length == 2 and not proposal.match.anchored
    # The target keeps two and writes a token the source lacks: the copy re-anchors after it.
    text += [id_, rp, 99]
    proposal = drafter.propose(text, 4)
    assert proposal.match.anchored and proposal.match.length == 0
    assert proposal.tokens.tolist() == [ret, db, lb, id_]  # ":" replaced by the new token
    text += [ret]  # it agrees again: the copy follows the agreeing token
    proposal = drafter.propose(text, 3)
    assert proposal.tokens.tolist() == [db, lb, id_] and proposal.match.length >= 1


def test_evidence_buckets_trust_a_long_match_further():
    assert evidence(None) is None
    keys = [evidence(Match(0, n)) for n in (1, 2, 3, 4, 9, 17, 40)]
    assert keys == [
        "copy-match1",
        "copy-match2",
        "copy-match2",
        "copy-match4",
        "copy-match8",
        "copy-match16",
        "copy-match16",
    ]
    assert evidence(Match(0, 0, anchored=True)) == "copy-anchor0"
    costs = StepCosts(1.0, 0.3, {k: 1.0 + 0.12 * k for k in (*range(1, 9), 12, 16, 24, 32)})
    policy = AutoK(costs)
    short = policy.choose_source(("lookup",), Match(0, 1))[1]
    long = policy.choose_source(("lookup",), Match(0, 20))[1]
    assert short < long <= 32 and long > 8  # a long match copies past the draft model's cap


def test_a_long_copy_that_keeps_failing_loses_to_a_plain_step():
    """Copies from long matches that the target keeps rejecting at once: automatic K learns it
    and takes a plain step instead, though a copy costs no draft step."""
    from specdemo.decode.rounds import Round

    costs = StepCosts(1.0, 0.3, {k: 1.0 + 0.12 * k for k in (*range(1, 9), 12, 16, 24, 32)})
    policy = AutoK(costs)
    for _ in range(20):
        round_ = Round(
            [1] * 8,
            0,
            2,
            [],
            [],
            [],
            [],
            [],
            [2],
            0.0,
            0.0,
            0,
            False,
            8,
            source="lookup",
            origin=0,
            match=20,
        )
        policy.update(round_)
    assert policy.choose_source(("lookup",), Match(0, 20)) == ("lookup", 0)


def greedy_table(vocab: int, follow: dict[int, int]) -> torch.Tensor:
    table = torch.zeros(vocab, vocab)
    for a, b in follow.items():
        table[a, b] = 5.0
    return table


@pytest.mark.parametrize("kind, width", [("suffix", 1), ("suffix-hybrid", 1), ("suffix", 3)])
@pytest.mark.parametrize("k", [16, "auto"])
def test_greedy_copies_give_the_target_alone_tokens(pair, kind, width, k):
    """Greedy copies, chains and copied trees (a copy with the other tokens that followed its
    match as siblings), give the target alone's tokens."""
    target, draft = pair.target, pair.draft
    prompt = list(range(40, 70)) * 2 + list(range(40, 50))  # a text returned: copies abound
    config = SamplingConfig(0.0)
    alone = [
        s.token for s in autoregressive_generate(target, prompt, sampling=config, max_new_tokens=48)
    ]
    g = make_generator(0, target.device)
    drafter = make_drafter(kind, draft, config, g, target.device)
    policy = AutoK(StepCosts(1.0, 0.3, {n: 1.0 + 0.05 * n for n in (*range(1, 9), 16, 32)}))
    rounds = list(
        speculative_generate(
            target,
            drafter,
            prompt,
            k=policy if k == "auto" else k,
            sampling=config,
            max_new_tokens=48,
            generator=g,
            tree_width=width,
        )
    )
    assert [t for r in rounds for t in r.tokens] == alone
    assert any(r.source == "lookup" and r.k >= 8 for r in rounds)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_eos_inside_a_long_copied_block_ends_the_answer(temperature):
    """The copy runs on past an EOS the target keeps: the answer ends right after the EOS."""
    eos = 5
    target = ToyLM(greedy_table(6, {1: 2, 2: 3, 3: 4, 4: eos, 5: 1, 0: 1}) * 4, eos=eos)
    prompt = [1, 2, 3, 4, eos, 1, 2]
    g = make_generator(0, "cpu")
    config = SamplingConfig(temperature)
    rounds = list(
        speculative_generate(
            target, CopyDrafter(), prompt, k=16, sampling=config, max_new_tokens=40, generator=g
        )
    )
    first = rounds[0]
    assert first.k == 16 and first.draft[:4] == [3, 4, eos, 1]
    assert [t for r in rounds for t in r.tokens][-1] == eos and rounds[-1].finished
    if temperature == 0:
        assert len(rounds) == 1 and first.tokens == [3, 4, eos]
