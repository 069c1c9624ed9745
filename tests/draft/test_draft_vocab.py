"""draft_vocab.py: the shipped frequency ranking of Qwen2.5's ids, and the heads built from it."""

import json

import torch
from conftest import ROOT, load_script, tiny_model

from specdemo.draft import draft_vocab
from specdemo.draft.drafters import make_drafter
from specdemo.judge.sampling import SamplingConfig

QWEN_VOCAB = 151_936
ENDOFTEXT, IM_END, IM_START = 151_643, 151_645, 151_644
BACKTICKS = 73_594  # "```", which the first 32,768 ids leave out


def test_the_shipped_ranking_holds_each_id_once_and_says_where_it_comes_from():
    data = json.loads(draft_vocab.RANKS_FILE.read_text(encoding="utf-8"))
    assert data["about"] and data["command"].startswith("python scripts/rank_tokens.py")
    ranking = draft_vocab.ranking()
    assert ranking.vocab_size == QWEN_VOCAB and 0 < ranking.rows < QWEN_VOCAB
    ids = ranking.ranked
    assert len(set(ids)) == len(ids) and 0 <= min(ids) and max(ids) < QWEN_VOCAB
    first = set(ids[:300])  # the chat's special tokens and the 256 byte tokens lead
    assert {ENDOFTEXT, IM_END, IM_START} <= first and set(range(256)) <= first
    assert BACKTICKS in set(ids[: ranking.rows])


def test_the_default_head_holds_every_token_the_target_wrote_twice_in_its_ranking_answers():
    """The ranking is built from these answers (scripts/rank_tokens.py): a token the target wrote
    at least twice there is among the rows a drafter keeps."""
    answers = json.loads((ROOT / "docs" / "bench" / "rank-answers.json").read_text())
    counts = {}
    for texts in answers["answers"].values():
        for text in texts:
            for t in text:
                counts[t] = counts.get(t, 0) + 1
    kept = set(draft_vocab.ranking().top(draft_vocab.ranking().rows))
    assert sum(counts.values()) > 5000
    missing = [t for t, n in counts.items() if n >= 2 and t not in kept]
    assert not missing, missing[:20]


def test_top_fills_past_the_ranked_ids_in_id_order_without_repeats():
    ranking = draft_vocab.Ranking(10, (7, 2, 9), 4)
    assert ranking.top(2) == [7, 2]
    assert ranking.top(6) == [7, 2, 9, 0, 1, 3]
    assert sorted(ranking.top(10)) == list(range(10))


def test_a_qwen_sized_draft_keeps_the_shipped_rows_and_a_small_one_its_full_head():
    sampling = SamplingConfig(1.0)
    assert draft_vocab.default_rows(tiny_model("qwen2", seed=0)) is None
    draft = tiny_model("qwen2", seed=0, vocab=QWEN_VOCAB, layers=1)
    ranking = draft_vocab.ranking()
    assert draft_vocab.default_rows(draft) == ranking.rows
    drafter = make_drafter("model", draft, sampling, torch.Generator().manual_seed(0), "cpu")
    assert drafter.head_rows == ranking.rows
    assert set(drafter.head.ids.tolist()) == set(ranking.top(ranking.rows))
    assert drafter.covers(BACKTICKS) and drafter.covers(IM_END)
    assert set(drafter.propose([1, 2, 3], 4).tokens.tolist()) <= set(drafter.head.ids.tolist())


def test_the_docs_figures_are_what_the_measured_json_gives():
    """The vocabulary's method page shows the check's own rendering of its JSON, measured with
    the head size the package ships."""
    result = json.loads((ROOT / "docs" / "bench" / "draft-vocab.json").read_text())
    assert result["chosen_rows"] == result["shipped_rows"] == draft_vocab.ranking().rows
    method = (ROOT / "docs" / "bench" / "draft-vocab.md").read_text(encoding="utf-8")
    assert load_script("draft_vocab_check").markdown(result) in method


def test_a_loaded_pair_drafts_from_its_ranked_rows_in_place_and_writes_what_a_copied_head_does(
    monkeypatch,
):
    """load_pair moves the default head's rows to the top of the draft's output layer: the head
    is then a view of the draft's own weights, and generation (T = 1, a fixed seed) writes the
    same tokens, round by round, as the same draft with its rows copied out."""
    from specdemo import generate
    from specdemo.models import load_pair
    from specdemo.runtime.lm import vocab_size

    pair = load_pair("tiny")
    plain = pair.draft
    vocab = vocab_size(plain)
    ranked = tuple(reversed(range(vocab)))[:40]  # the last ids first: every row moves
    ranking = draft_vocab.Ranking(vocab, ranked, rows=24)
    monkeypatch.setattr(draft_vocab, "ranking", lambda: ranking)
    copied = draft_vocab.draft_head(plain, 24)
    assert copied.weight.data_ptr() != plain.get_output_embeddings().weight.data_ptr()
    ids = [5, 17, 33, 8]
    before = generate(pair.target, plain, ids, k=3, temperature=1.0, max_new_tokens=24, seed=3)

    moved = load_pair("tiny").draft
    weight = moved.get_output_embeddings().weight
    head = draft_vocab.draft_head(moved, 24)
    assert head.weight.data_ptr() == weight.data_ptr() and head.rows == 24
    assert sorted(head.ids.tolist()) == sorted(ranked[:24])
    after = generate(pair.target, moved, ids, k=3, temperature=1.0, max_new_tokens=24, seed=3)
    assert after.tokens == before.tokens
    assert [r.n_accepted for r in after.rounds] == [r.n_accepted for r in before.rounds]
    assert before.stats.drafted > 0 and before.stats.accepted < before.stats.drafted
