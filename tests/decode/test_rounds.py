"""rounds.py: a Round built from a proposal and a verdict, and the Stats that count rounds."""

import pytest
import torch

import specdemo
from specdemo.decode.rounds import Round, Stats
from specdemo.draft.drafters import Proposal
from specdemo.judge.verify import Verdict


def round_of(draft, n_accepted, next_token=9, draft_steps=None, source="model", k_asked=None):
    steps = len(draft) if draft_steps is None else draft_steps
    proposal = Proposal(torch.tensor(draft), None, draft_steps=steps, source=source)
    next_dist = torch.zeros(10)
    next_dist[next_token] = 1.0
    verdict = Verdict(n_accepted, next_token, [0.5] * len(draft), [0.4] * len(draft),
                      [1.0] * len(draft), [0.1] * len(draft), next_dist)  # fmt: skip
    tokens = draft[:n_accepted] + [next_token]
    asked = len(draft) if k_asked is None else k_asked
    return Round.judged(draft, proposal, verdict, tokens, False, asked, 0.01, 0.02)


def test_a_round_is_built_from_its_proposal_and_verdict():
    r = round_of([4, 5, 6], 1, source="lookup", draft_steps=0)
    assert (r.k, r.n_accepted, r.rejected, r.bonus) == (3, 1, 5, False)
    assert (r.draft_steps, r.source, r.residual_top) == (0, "lookup", [(9, 1.0)])
    assert r.tokens == [4, 9] and (r.draft_time, r.verify_time) == (0.01, 0.02)
    assert round_of([4, 5], 2).bonus and round_of([4, 5], 2).rejected is None


def test_stats_tell_the_two_acceptance_rates_apart():
    """Of 3 + 3 drafts, 1 + 3 kept: 4 / 6 drafted, but 4 / 5 judged (the two drafts after the
    first round's rejection were never judged): α per draft is the formulas' α."""
    stats = Stats()
    for r in (round_of([1, 2, 3], 1), round_of([1, 2, 3], 3)):
        stats.add(r)
    assert (stats.rounds, stats.drafted, stats.accepted, stats.rejected) == (2, 6, 4, 1)
    assert stats.kept_rate == 4 / 6 and stats.alpha == 4 / 5
    assert stats.new_tokens == 2 + 4 and stats.target_passes == 2
    assert stats.accepted_hist == [0, 1, 0, 1]


def test_bookkeeping_is_the_wall_time_outside_prefill_proposals_and_verify_passes():
    stats = Stats(wall_time=10.0, prefill_time=1.0, draft_time=3.0, verify_time=5.0)
    assert stats.bookkeeping_time == pytest.approx(1.0)
    assert stats.bookkeeping_share == pytest.approx(0.1)
    assert stats.as_dict()["bookkeeping_share"] == pytest.approx(0.1)
    assert Stats().bookkeeping_share == 0.0


def test_a_generations_times_add_up_to_its_wall_time(tiny_qwen):
    result = specdemo.generate(tiny_qwen, tiny_qwen, [1, 2, 3], k=2, max_new_tokens=12, seed=0)
    s = result.stats
    parts = s.prefill_time + s.draft_time + s.verify_time + s.bookkeeping_time
    assert s.bookkeeping_time > 0 and parts == pytest.approx(s.wall_time)
    assert s.draft_time == pytest.approx(sum(r.draft_time for r in result.rounds))


def test_verify_times_are_keyed_by_the_rows_of_the_pass():
    """A chain of k drafts is a pass over k + 1 rows, a fishbone's over its siblings too: a
    tree of K = 2 and width 2 (1 + 2 * 2 = 5 rows) is not timed as a chain of K = 2 (3 rows).
    The step costs hold a pass over n rows at n - 1, and a k = 0 round is the plain step."""
    import dataclasses

    stats = Stats()
    chain, plain = round_of([1, 2], 1), round_of([], 0)
    tree = dataclasses.replace(round_of([1, 2], 1), siblings=((5,), (6,)), width=2,
                               verify_time=0.05)  # fmt: skip
    for r in (chain, tree, plain):
        stats.add(r)
    assert (chain.rows, tree.rows, plain.rows) == (3, 5, 1)
    assert stats.t_verify_rows == {1: 0.02, 3: 0.02, 5: 0.05}
    assert stats.costs().t_verify == {2: 0.02, 4: 0.05} and stats.costs().t_step == 0.02
