"""The step-through on the tiny pair: a growing context, and every kind of round explained."""

import dataclasses
import html

import pytest
import torch
from conftest import PROMPT

from specdemo.app import charts, numbers
from specdemo.app.config import encode, parse_run
from specdemo.app.step import lesson, microscope, stepping
from specdemo.decode.engine import make_generator, speculative_generate
from specdemo.decode.rounds import Round
from specdemo.draft import draft_vocab
from specdemo.draft.drafters import make_drafter
from specdemo.draft.suffix import LONG_MATCH
from specdemo.runtime.lm import vocab_size
from specdemo.text import token_labels


def test_step_through_advances_the_context(pair):
    config = parse_run(PROMPT, k=3, temperature=1.0)
    state, r, _ = stepping.next_round(pair, config, None)
    assert len(state.context) - state.prompt_len == len(r.tokens) == r.n_accepted + 1
    state2, r2, _ = stepping.next_round(pair, config, state)
    assert state2.context[: len(state.context)] == state.context and state2.rounds == 2
    rows = stepping.round_rows(r2, pair.tokenizer)
    assert len(rows) == r2.k + 1 and rows[-1][1].startswith(("bonus", "resampled"))
    draft, verify, accept = lesson.round_markdown(r2, pair.tokenizer, config)
    assert "Draft" in draft and "one" in verify and ("rejected" in accept or "bonus" in accept)
    restarted, _, _ = stepping.next_round(pair, parse_run("Another prompt", k=3), state2)
    assert restarted.rounds == 1


@pytest.mark.parametrize(
    "steps, draft_ms, verify_ms, t_step_ms, draft_says, verify_says",
    [
        # Figures as an idle machine gives them: the textbook wording holds.
        (4, 120, 90, 80, "Draft steps are cheap", "about the price of a single ordinary token"),
        # A busy machine: 4 draft steps took 3442 ms beside a verify of 838 ms.
        (4, 3442, 838, 300, "were not cheap", "2.8 ordinary steps' worth"),
        # Each draft step 0.72 of a target step: cheap beside the verify pass, not by c.
        (4, 244, 226, 85, "barely were: 4 took 244 ms, 61 ms each, c = 0.72", "less than the 5"),
        (4, 240, 90, 15, "were not cheap: 4 took 240 ms, 60 ms each", "no cheaper than 5"),
    ],
)
def test_the_step_notes_follow_the_figures_beside_them(
    pair, steps, draft_ms, verify_ms, t_step_ms, draft_says, verify_says
):
    config = parse_run(PROMPT, k=4, temperature=1.0, drafter="model")
    _, r, _ = stepping.next_round(pair, config, None)
    r = dataclasses.replace(
        r, draft_steps=steps, draft_time=draft_ms / 1000, verify_time=verify_ms / 1000,
        draft=r.draft[:4] + [r.draft[0]] * (4 - len(r.draft)), source="model",
    )  # fmt: skip
    draft, verify, _ = lesson.round_markdown(r, pair.tokenizer, config, t_step_ms / 1000)
    assert draft_says in draft and verify_says in verify
    textbook = ("Draft steps are cheap", "about the price")
    contradicted = textbook if draft_says != "Draft steps are cheap" else ()
    for wording in contradicted:
        assert wording not in draft + verify
    _, unmeasured, _ = lesson.round_markdown(r, pair.tokenizer, config)
    assert "price" not in unmeasured and "ordinary" not in unmeasured


def test_the_same_seed_replays_the_same_round(pair):
    config = parse_run(PROMPT, k=3, temperature=1.0, seed=5)
    first, _, _ = stepping.next_round(pair, config, None)
    again, _, _ = stepping.next_round(pair, config, None)
    assert first == again


def test_a_finished_answer_or_a_full_context_asks_for_reset(pair):
    config = parse_run(PROMPT, k=3)
    state, _, _ = stepping.next_round(pair, config, None)
    with pytest.raises(ValueError, match="The answer is finished"):
        stepping.next_round(
            pair, config, stepping.StepState(**{**state.__dict__, "finished": True})
        )
    full = state.context + (0,) * stepping.STEP_LIMIT
    with pytest.raises(ValueError, match="stops after 512 new tokens"):
        stepping.next_round(pair, config, stepping.StepState(**{**state.__dict__, "context": full}))


@pytest.mark.parametrize(
    "drafter, temperature", [("lookup", 1.0), ("model", 0.0), ("lookup", 0.0), ("hybrid", 1.0)]
)
def test_step_through_explains_every_kind_of_round(pair, drafter, temperature):
    config = parse_run(PROMPT + " " + PROMPT, k=4, temperature=temperature, drafter=drafter)
    state = None
    for _ in range(3):
        state, r, scope = stepping.next_round(pair, config, state)
        draft, verify, accept = lesson.round_markdown(r, pair.tokenizer, config)
        assert draft.startswith("**1 · Draft.**") and accept.startswith("**3 · Accept")
        assert len(stepping.round_rows(r, pair.tokenizer)) == r.k + 1
        charts.step_chart(r, lambda ids: token_labels(pair.tokenizer, ids))
        note = microscope.markdown(scope, r, pair.tokenizer)
        assert ("one-hot" in note) == (temperature == 0)
        assert all(fig.layout for fig in microscope.figures(scope))
        assert scope.kind == "greedy" if temperature == 0 else scope.p


def test_a_hybrid_rounds_draft_note_names_the_drafter_that_ran(pair):
    """Each round of a hybrid run says whether it copied or asked the draft model, and why."""
    config = parse_run(PROMPT, k=2, temperature=1.0, drafter="hybrid")
    common = dict(n_accepted=1, next_token=7, p_x=[0.5, 0.2], q_x=[1.0, 1.0],
                  accept_prob=[0.5, 0.2], u=[0.1, 0.9], residual_top=[(7, 0.6)], tokens=[5, 7],
                  draft_time=0.0, verify_time=0.01, finished=False, k_asked=2)  # fmt: skip
    copied = Round(draft=[5, 6], draft_steps=0, source="lookup", **common)
    guessed = Round(draft=[5, 6], draft_steps=2, source="model", **common)
    draft, _, _ = lesson.round_markdown(copied, pair.tokenizer, config)
    assert "hybrid drafter found the last 3 tokens earlier" in draft and "q(x) = 1" in draft
    draft, _, _ = lesson.round_markdown(guessed, pair.tokenizer, config)
    assert "hybrid drafter found no earlier copy" in draft and "draft model guessed 2" in draft


def copied_round(context: list[int], origin: int, match: int, k: int, kept: int, **changes):
    """A round that copied k tokens from context[origin] on a match of `match` tokens."""
    draft = [context[(origin + i) % len(context)] for i in range(k)]
    return Round(draft=draft, n_accepted=kept, next_token=context[0], p_x=[0.5] * k,
                 q_x=[1.0] * k, accept_prob=[0.5] * k, u=[0.1] * k,
                 residual_top=[(context[0], 1.0)], tokens=[*draft[:kept], context[0]],
                 draft_time=0.0, verify_time=0.01, draft_steps=0, finished=False, k_asked=k,
                 source="lookup", origin=origin, match=match, **changes)  # fmt: skip


def test_a_copy_shows_the_earlier_text_it_came_from_with_its_match_highlighted(pair):
    """The text ends with `def f(x):`, which began the prompt: the copy's 5-token match is
    highlighted in a dashed box and the 5 tokens copied from after it have the copies' bar,
    in an HTML block that CommonMark passes through whole (each newline a character reference,
    so no blank line ends it early)."""
    tokenizer = pair.tokenizer
    context = tokenizer.encode("def f(x):\n    return x\n\ndef f(x):", add_special_tokens=False)
    head = tokenizer.encode("def f(x):", add_special_tokens=False)
    assert context[: len(head)] == context[-len(head) :] == head
    r = copied_round(context, origin=len(head), match=len(head), k=5, kept=3)
    copy = stepping.copy_source(tokenizer, r, context, prompt_len=len(context))
    assert (copy.origin, copy.match, copy.anchored, copy.in_prompt) == (5, 5, False, True)
    assert copy.matched == "def f(x):" and copy.before == "" and copy.overlap == 0
    assert copy.copied == tokenizer.decode(context[5:10]) and "return" in copy.copied
    config = parse_run(PROMPT, k=5, temperature=1.0, drafter="suffix")
    draft, _, _ = lesson.round_markdown(r, tokenizer, config, copy=copy)
    assert "The suffix index found the text's last 5 tokens earlier, in the prompt" in draft
    assert "not a re-anchoring after an edit" in draft and "copied the 5 that followed" in draft
    assert '<mark class="copy-match" title="the match: 5 tokens' in draft
    assert ">def f(x):</mark>" in draft
    copied = html.escape(copy.copied).replace("\n", "↵&#10;")
    assert f'<span class="copied copy-span" title="copied: what followed the match">{copied}<' in (
        draft
    )
    markdown_it = pytest.importorskip("markdown_it")
    rendered = markdown_it.MarkdownIt("commonmark").render(draft)
    block = rendered[rendered.index('<div class="copy-source">') :]
    assert "</mark>" in block and block.index("</div>") > block.index("end of the copy")
    # A round drafted by the model, or copied by prompt lookup, has no source to show.
    drafted = dataclasses.replace(r, source="model", origin=None, match=0)
    assert stepping.copy_source(tokenizer, drafted, context, len(context)) is None
    assert "copy-source" not in lesson.round_markdown(drafted, tokenizer, config)[0]


def test_a_re_anchored_copy_says_so_and_a_copy_past_the_end_repeats_its_start(pair):
    tokenizer = pair.tokenizer
    context = tokenizer.encode("def f(x):\n    return x\n\ndef f(x):", add_special_tokens=False)
    config = parse_run(PROMPT, k=4, temperature=1.0, drafter="suffix-hybrid")
    r = copied_round(context, origin=7, match=2, k=4, kept=0, anchored=True)
    copy = stepping.copy_source(tokenizer, r, context, prompt_len=3)
    draft, _, _ = lesson.round_markdown(r, tokenizer, config, copy=copy)
    assert draft.startswith("**1 · Draft.** **Re-anchored after an edit:** the longest earlier")
    assert f"shorter than {LONG_MATCH} tokens" in draft and "in the answer so far" in draft
    assert "where the latest 2 tokens agree with it again" in draft
    assert "the hybrid drafter's suffix index looked near where the last copy left" in draft
    assert tokenizer.decode(context[5:7]) == "\n  "
    assert ">↵&#10;  </mark>" in draft  # the match, its newline shown as ↵
    nothing_agrees = dataclasses.replace(r, match=0)
    copy = stepping.copy_source(tokenizer, nothing_agrees, context, prompt_len=3)
    draft, _, _ = lesson.round_markdown(nothing_agrees, tokenizer, config, copy=copy)
    assert "no tokens agree yet" in draft and "<mark" not in draft
    end = len(context) - 2  # a copy of 4 from 2 before the end runs 2 past it
    past = copied_round(context, origin=end, match=1, k=4, kept=0)
    copy = stepping.copy_source(tokenizer, past, context, prompt_len=len(context))
    assert copy.overlap == 2 and copy.copied == tokenizer.decode(context[end:])
    draft, _, _ = lesson.round_markdown(past, tokenizer, config, copy=copy)
    assert "The copy ran 2 tokens past the end of the text" in draft


@pytest.mark.parametrize("drafter", ["suffix", "suffix-hybrid"])
def test_the_step_through_copies_and_re_anchors_as_one_generation_does(pair, drafter):
    """Greedy, each round's copy depends on the context alone: twelve clicks copy from the same
    places, on the same matches, re-anchored alike, as twelve rounds of one generation, though
    each click makes a new drafter; each copied round's step shows where it came from."""
    config = parse_run(PROMPT, k=4, temperature=0.0, drafter=drafter)
    state, stepped = None, []
    for _ in range(12):
        before = state.context if state else None
        state, r, scope = stepping.next_round(pair, config, state)
        stepped.append((r.draft, r.tokens, r.origin, r.match, r.anchored))
        assert (scope.copy is not None) == (r.origin is not None)
        if scope.copy is not None:
            context = before or state.context[: state.prompt_len]
            shown = tokenizer_text(pair, context[r.origin - r.match : r.origin])
            assert (scope.copy.origin, scope.copy.matched) == (r.origin, shown)
    assert any(anchored for *_, anchored in stepped)  # the tiny target's edits re-anchor
    drafter_ = make_drafter(drafter, pair.draft, config.sampling, None, "cpu")
    rounds = speculative_generate(pair.target, drafter_, encode(pair, config), k=4,
                                  sampling=config.sampling, max_new_tokens=100,
                                  generator=make_generator(0, "cpu"))  # fmt: skip
    generated = [(r.draft, r.tokens, r.origin, r.match, r.anchored) for r in rounds][:12]
    assert stepped == generated
    sources = {source for _, kind, source in state.spans if kind in ("accepted", "rejected")}
    assert "copied" in sources
    assert sources <= ({"copied"} if drafter == "suffix" else {"copied", "drafted"})


def tokenizer_text(pair, ids) -> str:
    return pair.tokenizer.decode(list(ids)) if len(ids) else ""


def step_until(pair, config, wanted, steps: int = 20):
    """Step from a fresh context until `wanted(round)`; the round, the context it ran on and its
    microscope."""
    state = None
    for _ in range(steps):
        context = state.context if state else None
        state, r, scope = stepping.next_round(pair, config, state)
        if wanted(r):
            return context or state.context[: state.prompt_len], r, scope
    pytest.fail(f"no such round in {steps} steps")


def independent_probs(model, ids: list[int], temperature: float) -> torch.Tensor:
    """softmax(logits / T) at the last position, straight from the model (float64)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    return torch.softmax(logits / temperature, -1)


def test_the_microscope_shows_p_and_q_at_the_rejected_guess(pair):
    """Its p and q are the ones the round judged with; the overlap and the residual are the
    paper's min(p, q) and max(0, p − q) / Σ, and together they account for all of p."""
    config = parse_run(PROMPT, k=4, temperature=0.8, seed=3)
    context, r, m = step_until(pair, config, lambda r: not r.bonus)
    n = r.n_accepted
    assert (m.kind, m.position, m.drafted, m.drawn) == ("rejected", n, r.draft[n], r.next_token)
    assert m.p_x == pytest.approx(r.p_x[n], abs=1e-6)
    assert m.q_x == pytest.approx(r.q_x[n], abs=1e-6)

    ids = list(context) + r.draft[:n]
    p = independent_probs(pair.target, ids, 0.8)
    q = independent_probs(pair.draft, ids, 0.8)
    overlap = torch.minimum(p, q)
    rest = (p - q).clamp_min(0) / (p - q).clamp_min(0).sum()
    assert m.kept == pytest.approx(float(overlap.sum()), abs=1e-5)
    assert m.kept + m.left == pytest.approx(1.0, abs=1e-5)
    assert 0 < m.kept < 1
    shown = m.tokens
    assert m.drafted in shown and m.drawn in shown and len(m.labels) in (len(shown), len(shown) + 1)
    for got, want in ((m.p, p), (m.q, q), (m.overlap, overlap), (m.residual, rest)):
        assert got[: len(shown)] == pytest.approx(want[shown].tolist(), abs=1e-5)
        assert sum(got) == pytest.approx(float(want.sum()), abs=1e-5)  # the "others" bar
    # The engine drew its replacement from this very residual.
    for token, prob in r.residual_top:
        assert float(rest[token]) == pytest.approx(prob, abs=1e-5)
    assert m.residual[shown.index(m.drafted)] == 0.0  # the guess had p < q: nothing left of it

    note = microscope.markdown(m, r, pair.tokenizer)
    kept = numbers.prob(m.kept)
    assert note.startswith(f"**Σ min(p, q) = {kept}: the chance a draft token is kept")
    scope, rest = microscope.figures(m)
    names = [trace.name or "" for trace in scope.data]
    assert any(name.startswith("min(p, q)") for name in names)
    assert any(name.startswith("max(0, p − q)") for name in names)
    assert list(rest.data[0].y) == m.residual


def rank_half_the_vocabulary(pair, monkeypatch) -> set[int]:
    """The draft's head over 150 of the tiny pair's 400 ids, none of them the first rows."""
    vocab = vocab_size(pair.draft)
    ranked = tuple(range(vocab - 1, 0, -2))
    ranking = draft_vocab.Ranking(vocab, ranked, 150)
    monkeypatch.setattr(draft_vocab, "ranking", lambda: ranking)
    return set(ranked[:150])


def test_the_microscopes_q_comes_from_the_drafters_ranked_head(pair, monkeypatch):
    """A draft whose output layer keeps only its ranked ids proposes from that head's q; the
    microscope shows that q, not the full head's, and q is 0 at every id the head leaves out."""
    kept = rank_half_the_vocabulary(pair, monkeypatch)
    config = parse_run(PROMPT, k=4, temperature=1.0, seed=1)
    context, r, m = step_until(pair, config, lambda r: not r.bonus)
    n = r.n_accepted
    assert set(r.draft) <= kept
    assert m.q_x == pytest.approx(r.q_x[n], abs=1e-6)
    assert m.p_x == pytest.approx(r.p_x[n], abs=1e-6)
    full = independent_probs(pair.draft, list(context) + r.draft[:n], 1.0)
    assert abs(float(full[r.draft[n]]) - r.q_x[n]) > 1e-3  # the full head would disagree
    assert all(q == 0 for t, q in zip(m.tokens, m.q, strict=False) if t not in kept)
    assert any(q > 0 for t, q in zip(m.tokens, m.q, strict=False) if t in kept)


def said_cannot_propose(pair, config, r, m) -> list[bool]:
    """Whether the table, the round's notes and the microscope say the draft cannot propose."""
    notes = " ".join(lesson.round_markdown(r, pair.tokenizer, config, None, m.outside))
    return [
        "cannot propose" in stepping.round_rows(r, pair.tokenizer, m.outside)[-1][1],
        "The draft cannot propose" in notes,
        "The draft cannot propose" in microscope.markdown(m, r, pair.tokenizer),
    ]


def test_a_token_the_draft_cannot_propose_is_named_as_such(pair, monkeypatch):
    """Where the target's token lies outside the draft's head, the table, the round's notes and
    the microscope say that the draft cannot propose it; with the full head, none ever does."""
    config = parse_run(PROMPT, k=2, temperature=1.0, seed=3)
    state, judged = None, 0
    for _ in range(6):  # the full head: every token can be proposed
        state, r, m = stepping.next_round(pair, config, state)
        assert not m.outside and said_cannot_propose(pair, config, r, m) == [False] * 3
        judged += not r.bonus
    assert judged
    kept = rank_half_the_vocabulary(pair, monkeypatch)
    state = None
    for _ in range(20):
        state, r, m = stepping.next_round(pair, config, state)
        assert m.outside == (not r.bonus and r.next_token not in kept)
        assert said_cannot_propose(pair, config, r, m) == [m.outside] * 3
        if m.outside:
            assert m.head_rows == 150
            return
    pytest.fail("20 rounds never ended on a token outside the head")


def test_a_copied_guess_has_all_of_q_on_it(pair):
    config = parse_run(PROMPT + " " + PROMPT, k=4, temperature=1.0, drafter="lookup")
    _, r, m = step_until(pair, config, lambda r: r.k and not r.bonus)
    assert m.source == "lookup" and m.q_x == 1.0 and sum(m.q) == pytest.approx(1.0)
    assert m.kept == pytest.approx(m.p_x)  # Σ min(p, one-hot at x) = p(x)
    assert m.p_x == pytest.approx(r.p_x[r.n_accepted], abs=1e-6)
    assert "a copied guess" in microscope.markdown(m, r, pair.tokenizer)


def test_after_a_full_accept_the_microscope_shows_p_at_the_bonus_position(pair):
    config = parse_run(PROMPT, k=2, temperature=1.0, seed=2)
    _, r, m = step_until(pair, config, lambda r: r.bonus and r.k)
    assert m.kind == "bonus" and m.position == r.k and m.q == [] and m.kept is None
    assert m.residual == m.p and sum(m.p) == pytest.approx(1.0, abs=1e-5)
    for token, prob in r.residual_top:  # the engine's bonus came from this p
        assert m.p[m.tokens.index(token)] == pytest.approx(prob, abs=1e-5)
    assert "bonus token" in microscope.markdown(m, r, pair.tokenizer)


@pytest.mark.parametrize(
    "x, shown",
    [
        (0.9123, "0.912"),
        (0.04213, "0.0421"),
        (0.00021, "2.1e-4"),
        (0.0002134, "2.13e-4"),
        (0.5, "0.5"),
        (0.0, "0"),
        (1.0, "1"),
        (0.99996, "0.99996"),  # just below 1 is not written as 1
    ],
)
def test_probabilities_are_written_in_three_significant_digits(x, shown):
    assert numbers.prob(x) == shown


def test_a_rejection_with_tiny_probabilities_shows_their_size(pair):
    """A guess with p and q far below 0.001 is written with its digits, not as 0.000."""
    config = parse_run(PROMPT, k=2, temperature=1.0)
    r = Round(draft=[5, 6], n_accepted=0, next_token=7, p_x=[2.1e-5, 0.3], q_x=[4.2e-4, 0.3],
              accept_prob=[0.05, 1.0], u=[0.5, 0.0], residual_top=[(7, 0.6)], tokens=[7],
              draft_steps=2, draft_time=0.0, verify_time=0.01, finished=False, k_asked=2,
              source="model")  # fmt: skip
    _, _, accept = lesson.round_markdown(r, pair.tokenizer, config)
    assert "p = 2.1e-5 and q = 4.2e-4" in accept and "0.000" not in accept
    assert stepping.round_rows(r, pair.tokenizer)[0][3:7] == ["4.2e-4", "2.1e-5", "0.05", "0.5"]
    m = stepping.Microscope("rejected", 0, 5, 7, kept=3e-4, left=0.9997, p_x=2.1e-5, q_x=4.2e-4)
    note = microscope.markdown(m, r, pair.tokenizer)
    assert "q = 4.2e-4 but p = 2.1e-5" in note and "Σ min(p, q) = 3e-4" in note
    assert "0.000" not in note


def test_a_round_with_no_guesses_is_labelled_a_plain_target_step(pair):
    """Prompt lookup with no earlier copy of the context's end makes no guesses: the table, the
    microscope and its charts call the token a plain target step, never a bonus."""
    config = parse_run("zq", k=4, temperature=1.0, drafter="lookup")
    _, r, scope = step_until(pair, config, lambda r: r.k == 0)
    rows = stepping.round_rows(r, pair.tokenizer)
    assert len(rows) == 1 and rows[0][1] == "plain target step (no guesses, from p)"
    assert scope.kind == "plain"
    p_chart, residual = microscope.figures(scope)
    assert p_chart.layout.title.text.startswith("A plain target step, no guesses: p at")
    assert "No guesses this round" in residual.layout.annotations[0].text
    note = microscope.markdown(scope, r, pair.tokenizer)
    assert note.startswith("No guesses this round") and "bonus" not in note.lower()


def test_a_round_is_timed_apart_from_the_context_it_reads_again(pair):
    """Each click feeds the text so far to both models again: that is timed before the round and
    said apart, so the round's draft time is its own steps (one per guess), not the prefill."""
    config = parse_run(PROMPT, k=3, temperature=1.0, drafter="model")
    state, r, _ = stepping.next_round(pair, config, None)
    state, r, _ = stepping.next_round(pair, config, state)
    tokens, target_seconds, draft_seconds = state.refed
    assert tokens == len(state.context) - len(r.tokens) - 1
    assert target_seconds > 0 and draft_seconds > 0
    _, verify, _ = lesson.round_markdown(r, pair.tokenizer, config, refed=state.refed)
    assert f"read its {tokens:,} tokens again" in verify and "both models" in verify
    _, verify, _ = lesson.round_markdown(r, pair.tokenizer, config)
    assert "again" not in verify


def test_a_block_round_is_told_with_w_h_u_and_what_token_by_token_would_keep(pair):
    """Judged as a whole block, a round's table gives each guess its running weight w, its
    stopping chance h and its u, and marks the last guess with u < h; the notes give the same
    figures and set beside them what token by token keeps of the same guesses with the same u
    (stopping at the first u not below min(1, p/q)). A guess kept though its own u was not below
    its h is called kept, never rejected."""
    config = parse_run(PROMPT, k=4, temperature=1.0, judge="block")
    _, r, _ = step_until(pair, config, lambda r: any(
        r.u[i] >= r.stop_chance[i] for i in range(r.n_accepted)))  # fmt: skip
    n, prob = r.n_accepted, numbers.prob
    assert r.judge == "block" and len(r.weights) == len(r.stop_chance) == r.k
    assert r.token_kept == next((i for i in range(r.k) if r.u[i] >= r.accept_prob[i]), r.k)
    table = stepping.round_table(r, pair.tokenizer)
    assert table["headers"] == stepping.BLOCK_COLUMNS
    rows = table["data"]
    for i in range(r.k):
        assert rows[i][6:9] == [prob(r.weights[i]), prob(r.stop_chance[i]), prob(r.u[i])]
    last = max(i for i in range(r.k) if r.u[i] < r.stop_chance[i])
    assert last == n - 1 and rows[last][1] == "accepted: u < h, the last that passed"
    failed = [i for i in range(n) if r.u[i] >= r.stop_chance[i]]
    assert all(rows[i][1] == "accepted: u ≥ h, but a later guess passed" for i in failed)
    assert all(row[1] == "rejected: u ≥ h" for row in rows[n : r.k])
    _, _, accept = lesson.round_markdown(r, pair.tokenizer, config)
    assert "running weight w" in accept and "**last** one whose u is below its h" in accept
    assert f"u = {prob(r.u[last])} < h = {prob(r.stop_chance[last])}" in accept
    assert "own u was not below h: a later guess passed" in accept
    assert f"**Token by token would have kept {r.token_kept}** of the same guesses" in accept
    assert "was not below min(1, p/q)" not in accept and "so it was **rejected**" not in accept
    chart = charts.step_chart(r, lambda ids: token_labels(pair.tokenizer, ids))
    names = [trace.name for trace in chart.data]
    assert "w: running weight" in names and "h: chance to stop here" in names
    assert len(chart.data[-1].y) == r.k  # every u is drawn and read


def test_the_block_microscope_shows_the_block_residual_where_the_round_stopped(pair):
    """Where a block round stopped after kept guesses of weight w < 1, the microscope weighs p by
    that w: its overlap is min(w·p, q) and its residual max(0, w·p − q) / Σ, computed here from
    the models' own logits, the very distribution the engine drew from, and not token by token's
    max(0, p − q) / Σ."""
    config = parse_run(PROMPT, k=4, temperature=1.0, judge="block")
    context, r, m = step_until(
        pair, config, lambda r: 0 < r.n_accepted < r.k and r.weights[r.n_accepted - 1] < 0.9
    )
    n, w = r.n_accepted, r.weights[r.n_accepted - 1]
    assert (m.kind, m.judge, m.position, m.weight) == ("rejected", "block", n, w)
    ids = list(context) + r.draft[:n]
    p = independent_probs(pair.target, ids, 1.0)
    q = independent_probs(pair.draft, ids, 1.0)
    overlap, block = torch.minimum(w * p, q), (w * p - q).clamp_min(0)
    rest, plain = block / block.sum(), (p - q).clamp_min(0) / (p - q).clamp_min(0).sum()
    shown = m.tokens
    assert m.overlap[: len(shown)] == pytest.approx(overlap[shown].tolist(), abs=1e-5)
    assert m.residual[: len(shown)] == pytest.approx(rest[shown].tolist(), abs=1e-5)
    assert m.kept == pytest.approx(float(overlap.sum()), abs=1e-5)
    assert m.left == pytest.approx(float(block.sum()), abs=1e-5)
    for token, drawn in r.residual_top:  # the engine drew its token from this residual
        assert float(rest[token]) == pytest.approx(drawn, abs=1e-5)
    assert float((rest - plain).abs().max()) > 1e-3  # the weight changes where it draws from
    note = microscope.markdown(m, r, pair.tokenizer)
    assert f"w = {numbers.prob(w)}**" in note and "max(0, w·p − q)" in note
    assert "said no" not in note and "the chance a draft token is kept" not in note
    scope, residual = microscope.figures(m)
    names = [trace.name for trace in scope.data]
    assert names[0].startswith("min(w·p, q)") and names[1].startswith("max(0, w·p − q)")
    assert residual.data[0].name == "max(0, w·p − q) / Σ"
    assert f"w = {numbers.prob(w)}" in scope.layout.title.text
