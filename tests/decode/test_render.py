"""Rounds to labelled spans and terminal colours, on hand-made rounds and a one-letter tokenizer."""

from specdemo.decode.render import ANSI, ansi, legend_ansi, round_spans
from specdemo.decode.rounds import Round
from specdemo.text import Detokenizer

LETTERS = "abcdefgh"


class LetterTokenizer:
    """Token i is the letter LETTERS[i]."""

    def decode(self, ids, skip_special_tokens=False):
        return "".join(LETTERS[i] for i in ids)


def make_round(draft: list[int], n_accepted: int, next_token: int) -> Round:
    k = len(draft)
    return Round(
        draft=draft,
        n_accepted=n_accepted,
        next_token=next_token,
        p_x=[0.5] * k,
        q_x=[0.5] * k,
        accept_prob=[1.0] * k,
        u=[0.1] * k,
        residual_top=[(next_token, 1.0)],
        tokens=draft[:n_accepted] + [next_token],
        draft_time=0.0,
        verify_time=0.0,
        draft_steps=k,
        finished=False,
    )


def test_a_rejection_shows_the_kept_drafts_the_loser_and_its_replacement():
    r = make_round(draft=[0, 1, 2], n_accepted=1, next_token=3)  # kept a; b lost to d
    spans = round_spans(r, Detokenizer(LetterTokenizer()))
    assert spans == [("a", "accepted"), ("b", "rejected"), ("d", "resampled")]


def test_a_fully_accepted_block_earns_a_bonus_token():
    r = make_round(draft=[0, 1], n_accepted=2, next_token=4)
    spans = round_spans(r, Detokenizer(LetterTokenizer()))
    assert spans == [("a", "accepted"), ("b", "accepted"), ("e", "bonus")]


def test_a_round_without_drafts_is_a_plain_target_step():
    r = make_round(draft=[], n_accepted=0, next_token=4)  # automatic K chose K = 0
    assert round_spans(r, Detokenizer(LetterTokenizer())) == [("e", "target")]


def test_rejected_drafts_can_be_left_out_and_do_not_enter_the_text():
    detok = Detokenizer(LetterTokenizer(), [5])
    r = make_round(draft=[0, 1], n_accepted=0, next_token=2)
    assert round_spans(r, detok, show_rejected=False) == [("c", "resampled")]
    assert detok.ids == [5, 2] and detok.text == "fc"  # the loser was only peeked at
    r = make_round(draft=[3], n_accepted=0, next_token=4)
    assert round_spans(r, detok) == [("d", "rejected"), ("e", "resampled")]


def test_ansi_colours_each_label_and_strikes_rejections():
    text = ansi([("a", "accepted"), ("b", "rejected"), ("c", "target")])
    assert text == "\x1b[32ma\x1b[0m\x1b[9;37mb\x1b[0m\x1b[0mc\x1b[0m"
    assert ANSI["rejected"].startswith("9;")  # 9 is strike-through
    assert all(f"\x1b[{ANSI[label]}m{label}" in legend_ansi() for label in ("accepted", "bonus"))


def test_each_label_has_a_terminal_cue_besides_its_colour():
    labels = ("accepted", "resampled", "bonus", "rejected")
    cues = {
        label: {code for code in ANSI[label].split(";") if not 30 <= int(code) <= 37}
        for label in labels
    }
    assert cues == {"accepted": set(), "resampled": {"4"}, "bonus": {"7"}, "rejected": {"9"}}


VISION = (None, "protanomaly", "deuteranomaly", "tritanomaly")  # normal, red-, green-, blue-weak
APART = 8.0  # ΔE in CAM02-UCS between any two kinds, in every vision (1 is about a bare notice)


def closest_kinds(colors: dict[str, str]) -> tuple[float, str, tuple[str, str]]:
    """The smallest colour difference between two kinds as the page paints them (half opacity
    over white), under each vision of VISION at full severity (Machado et al. 2009, as
    colorspacious simulates it): (ΔE, the vision, the two kinds)."""
    import itertools

    import numpy as np
    from colorspacious import cspace_convert, deltaE

    def seen(color: str, vision) -> np.ndarray:
        rgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)]) / 255
        painted = 0.5 * rgb + 0.5
        if vision is None:
            return painted
        space = {"name": "sRGB1+CVD", "cvd_type": vision, "severity": 100}
        return np.clip(cspace_convert(painted, space, "sRGB1"), 0, 1)

    return min(
        (float(deltaE(seen(colors[a], v), seen(colors[b], v), input_space="sRGB1")), v, (a, b))
        for v in VISION
        for a, b in itertools.combinations(colors, 2)
    )


def test_the_token_kinds_stay_apart_for_colour_blind_readers():
    """Accepted, resampled, bonus, rejected and the target's own tokens, painted as the page
    paints them, differ by at least APART for normal vision and for red-, green- and blue-weak
    vision. An earlier palette with blue bonus and grey target tokens fails it (green-weak
    vision sees accepted and target tokens 5.6 apart): the test can fail."""
    from specdemo.decode.render import COLORS

    assert closest_kinds(COLORS)[0] >= APART, closest_kinds(COLORS)
    earlier = {**COLORS, "resampled": "#e69f00", "bonus": "#0072b2", "rejected": "#d55e00",
               "target": "#999999"}  # fmt: skip
    difference, vision, pair = closest_kinds(earlier)
    assert difference < APART and vision is not None, (difference, vision, pair)
