"""An answer's spans say where each guess came from: copied from the context or drafted by the
draft model; the target's own tokens name no source."""

from specdemo.app.spans import guess_spans, target_span
from specdemo.decode.rounds import Round
from specdemo.text import Detokenizer

LETTERS = "abcdefgh"


class LetterTokenizer:
    """Token i is the letter LETTERS[i]."""

    def decode(self, ids, skip_special_tokens=False):
        return "".join(LETTERS[i] for i in ids)


def make_round(draft: list[int], n_accepted: int, next_token: int, source: str) -> Round:
    k = len(draft)
    return Round(draft=draft, n_accepted=n_accepted, next_token=next_token, p_x=[0.5] * k,
                 q_x=[1.0 if source == "lookup" else 0.5] * k, accept_prob=[0.5] * k,
                 u=[0.1] * k, residual_top=[(next_token, 1.0)],
                 tokens=draft[:n_accepted] + [next_token], draft_time=0.0, verify_time=0.0,
                 draft_steps=0 if source == "lookup" else k, finished=False,
                 source=source)  # fmt: skip


def test_a_copied_rounds_guesses_are_marked_copied_and_a_drafted_rounds_drafted():
    copied = make_round([0, 1, 2], n_accepted=2, next_token=3, source="lookup")
    assert guess_spans(copied, Detokenizer(LetterTokenizer())) == [
        ("a", "accepted", "copied"),
        ("b", "accepted", "copied"),
        ("c", "rejected", "copied"),  # the rejected copy too
        ("d", "resampled", ""),  # the target's replacement is no one's guess
    ]
    drafted = make_round([4, 5], n_accepted=2, next_token=6, source="model")
    assert guess_spans(drafted, Detokenizer(LetterTokenizer())) == [
        ("e", "accepted", "drafted"),
        ("f", "accepted", "drafted"),
        ("g", "bonus", ""),
    ]


def test_hiding_rejected_guesses_hides_the_rejected_copy_alone():
    r = make_round([0, 1, 2], n_accepted=1, next_token=3, source="lookup")
    spans = guess_spans(r, Detokenizer(LetterTokenizer()), show_rejected=False)
    assert spans == [("a", "accepted", "copied"), ("d", "resampled", "")]


def test_a_target_token_names_no_source():
    assert target_span("x") == ("x", "target", "")
