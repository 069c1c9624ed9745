"""rounds.py: a Round built from a proposal and a verdict, and the Stats that count rounds."""

import torch

from specdemo.drafters import Proposal
from specdemo.rounds import Round, Stats
from specdemo.verify import Verdict


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
