"""The step-through: one speculative round at a time on a growing context, explained.

``next_round`` runs one round after the context in a ``StepState`` (plain picklable data, kept in a
``gr.State``) and returns the grown state, the ``Round`` and a ``Microscope``: p and q over the
whole vocabulary where the round ended, the very rows the acceptance rule judged. ``round_rows`` and
``round_markdown`` turn the round into the table and the three plain-language notes the tab shows.
"""

import contextlib
from dataclasses import dataclass, field, replace

import torch

from specdemo.app.config import RunConfig, encode
from specdemo.app.numbers import prob
from specdemo.drafters import HYBRID_MIN_NGRAM, make_drafter
from specdemo.engine import make_generator, resolve_k, speculative_generate
from specdemo.lm import Stopwatch, eos_ids
from specdemo.render import round_spans
from specdemo.rounds import Round, Stats
from specdemo.sampling import residual
from specdemo.text import Detokenizer, token_labels, token_text
from specdemo.verify import Verdict

STEP_LIMIT = 512  # new tokens in the step-through tab
TOP_TOKENS = 8  # tokens the microscope shows one by one; the rest of the vocabulary is one bar
OTHERS = "other tokens"
STEP_COLUMNS = ["#", "draft token", "q(x)", "p(x)", "min(1, p/q)", "u", "verdict"]


@dataclass(frozen=True)
class StepState:
    """The step-through tab's context: token ids so far and their coloured text."""

    prompt: str
    system: str
    context: tuple[int, ...]
    prompt_len: int
    spans: tuple[tuple[str, str], ...] = ()
    rounds: int = 0
    finished: bool = False
    # The last round's context fed again, timed apart from the round: (tokens, target seconds,
    # draft model seconds). Each click starts from the context, so both models read it anew.
    # A timing, not the state: two states with the same text are equal whatever it took.
    refed: tuple[int, float, float] = field(default=(0, 0.0, 0.0), compare=False)


@dataclass(frozen=True)
class Microscope:
    """p and q where a round ended: at the first rejected guess, or at the bonus position after
    a full accept (p only; there is no q there). Per-token lists follow `labels`: the top tokens,
    then OTHERS, whose entries sum the rest of the vocabulary. At temperature 0 (kind "greedy")
    p and q are one-hot and only the kind, position and tokens are filled in."""

    kind: str  # "rejected", "bonus", "plain" (a round with no guesses) or "greedy"
    position: int  # the draft position examined, 0-based (= n_accepted)
    drafted: int | None  # the rejected guess
    drawn: int  # the target's token at that position
    source: str = "model"  # who drafted: "model" or "lookup" (q one-hot on the copied token)
    tokens: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    p: list[float] = field(default_factory=list)
    q: list[float] = field(default_factory=list)  # empty after a full accept
    overlap: list[float] = field(default_factory=list)  # min(p, q)
    residual: list[float] = field(default_factory=list)  # max(0, p − q) / Σ; p after a full accept
    kept: float | None = None  # Σ min(p, q) = 1 − TV(p, q): the chance a draft token is kept
    left: float | None = None  # Σ max(0, p − q): the mass the residual renormalises
    p_x: float | None = None  # p and q of the rejected guess
    q_x: float | None = None
    # The draft model's head leaves `drawn` out (``draft_vocab``): it could never have guessed
    # it, and q there is 0. `head_rows` is how many token ids that head scores.
    outside: bool = False
    head_rows: int | None = None


def next_round(
    pair, config: RunConfig, state: StepState | None
) -> tuple[StepState, Round, Microscope]:
    """One speculative round on the current context; a new prompt starts a new context."""
    if state is None or (state.prompt, state.system) != (config.prompt, config.system):
        ids = encode(pair, replace(config, max_new_tokens=STEP_LIMIT))
        state = StepState(config.prompt, config.system, tuple(ids), len(ids))
    if state.finished:
        raise ValueError("The answer is finished (the target chose an end token): press Reset.")
    if len(state.context) - state.prompt_len + config.k + 1 > STEP_LIMIT:
        raise ValueError(f"Step-through stops after {STEP_LIMIT} new tokens: press Reset.")
    device = pair.target.device
    generator = make_generator(config.seed * 100_003 + state.rounds, device)
    drafter = make_drafter(
        config.drafter, pair.draft, config.sampling, generator, device, config.adaptive
    )
    verdicts, stats = [], Stats()
    context = list(state.context)
    draft_model, clock = drafter.draft_model, Stopwatch(device)
    if draft_model is not None:  # the context again, timed apart from the round's own steps
        draft_model.prefill(context, config.k + 1)
    draft_seconds = clock.lap()
    rounds = speculative_generate(
        pair.target,
        drafter,
        context,
        k=resolve_k(config.k, pair.target, drafter),
        sampling=config.sampling,
        max_new_tokens=config.k + 1,  # room for k drafts and the target's token
        generator=generator,
        on_verdict=verdicts.append,
        stats=stats,
        tree_width=config.tree_width,
    )
    with contextlib.closing(rounds):
        r = next(rounds)
    scope = microscope(pair.tokenizer, r, verdicts[-1], drafter.draft_model)
    generated = list(state.context[state.prompt_len :])
    detok = Detokenizer(pair.tokenizer, generated)
    spans = round_spans(r, detok, show_rejected=True)
    state = replace(
        state,
        context=state.context + tuple(r.tokens),
        spans=state.spans + tuple(spans),
        rounds=state.rounds + 1,
        finished=any(t in eos_ids(pair.target) for t in r.tokens),
        refed=(len(context) - 1, stats.prefill_time, draft_seconds),
    )
    return state, r, scope


def microscope(tokenizer, r: Round, verdict: Verdict, draft_model=None) -> Microscope:
    """p and q at the position where round `r` ended, from its `verdict`: the rows of p and q
    the acceptance rule judged (q from the drafter's own head, 0 at every token id it leaves
    out; one-hot on a copied guess). A greedy round has none to show. `draft_model` (a
    ``drafters.ModelDrafter``) says whether a model-drafted round's token was one the draft could
    propose at all."""
    i = r.n_accepted
    kind = (
        "greedy"
        if verdict.p is None
        else "plain"
        if not r.k
        else "bonus"
        if r.bonus
        else "rejected"
    )
    scope = Microscope(kind, i, r.rejected, r.next_token, r.source)
    if draft_model is not None and r.source == "model" and not r.bonus:
        outside = not draft_model.covers(r.next_token)
        scope = replace(scope, outside=outside, head_rows=draft_model.head_rows)
    if kind == "greedy":
        return scope
    p = verdict.p[i].double()
    q = verdict.q[i].double() if kind == "rejected" else None
    if r.sibling is not None or any(r.siblings_tried):  # a tree: siblings were tried here
        # The next token came from the row of a kept sibling, or from what the siblings'
        # rejections left of p: that is the distribution shown as drawn from.
        return _fill(scope, tokenizer, p, q, drawn_from=verdict.next_dist.double())
    return _fill(scope, tokenizer, p, q)


def _fill(scope: Microscope, tokenizer, p: torch.Tensor, q: torch.Tensor | None,
          drawn_from: torch.Tensor | None = None) -> Microscope:  # fmt: skip
    """The microscope's numbers from (vocab,) float64 p and q (q None: p only); `drawn_from`
    replaces the residual when the next token came from elsewhere (a tree's siblings)."""
    score = p if q is None else torch.maximum(p, q)
    shown = [t for t in (scope.drafted, scope.drawn) if t is not None]
    for t in torch.topk(score, min(TOP_TOKENS, score.numel())).indices.tolist():
        if len(shown) < TOP_TOKENS and t not in shown and score[t] > 0:
            shown.append(t)
    shown.sort(key=lambda t: -float(score[t]))
    rows = {"p": p, "residual": p}
    if q is not None:
        rows = {"p": p, "q": q, "overlap": torch.minimum(p, q), "residual": residual(p, q)}
    if drawn_from is not None:
        rows["residual"] = drawn_from
    values = {name: row[shown].tolist() for name, row in rows.items()}
    labels = token_labels(tokenizer, shown)
    # The rest of the vocabulary as one bar, so that each kind of bar sums to the whole.
    others = {name: max(float(row.sum()) - sum(values[name]), 0.0) for name, row in rows.items()}
    if max(others.values()) > 1e-4:
        labels.append(OTHERS)
        for name, rest in others.items():
            values[name].append(rest)
    scope = replace(scope, tokens=shown, labels=labels, **values)
    if q is None:
        return scope
    overlap = rows["overlap"]
    x = scope.drafted
    return replace(
        scope,
        kept=float(overlap.sum()),
        left=float((p - overlap).sum()),
        p_x=float(p[x]),
        q_x=float(q[x]),
    )


def round_rows(r: Round, tokenizer, outside: bool = False) -> list[list]:
    """One row per draft position, then the target's own token (columns: STEP_COLUMNS);
    `outside`: that token is one the draft cannot propose (``Microscope.outside``)."""
    rows = []
    for i, token in enumerate(r.draft):
        verdict = "accepted" if i < r.n_accepted else "rejected" if i == r.n_accepted else "—"
        checked = i <= r.n_accepted
        rows.append(
            [
                i + 1,
                token_text(tokenizer, token),
                prob(r.q_x[i]),
                prob(r.p_x[i]),
                prob(r.accept_prob[i]),
                prob(r.u[i]) if checked else "",
                verdict,
            ]
        )
        # A tree's siblings at this position, tried in turn: q without the earlier children,
        # p what the earlier rejections left.
        for j, t in enumerate(r.siblings_tried[i] if i < len(r.siblings_tried) else ()):
            verdict = "accepted (sibling)" if t.kept else "rejected (sibling)"
            cells = [prob(t.q_x), prob(t.p_x), prob(t.accept_prob), prob(t.u), verdict]
            rows.append([f"{i + 1}, sibling {j + 1}", token_text(tokenizer, t.token), *cells])
    verdict = (
        "plain target step (no guesses, from p)"
        if not r.k
        else "bonus (from p)"
        if r.bonus
        else "resampled (from the residual)"
    )
    if outside:
        verdict += ", a token the draft cannot propose"
    rows.append([r.kept + 1, token_text(tokenizer, r.next_token), "", "", "", "", verdict])
    return rows


def cannot_propose(token: str, rows: int | None = None) -> str:
    """The sentence for a target token outside the draft's head (``draft_vocab``)."""
    head = f"the {rows:,} token ids" if rows else "the token ids"
    return (
        f"The draft cannot propose {token}: its output layer scores only {head} the target "
        "writes most often and the ids already in this text, and this is neither, so q = 0 "
        "there and no guess could have matched it. Exactness is untouched: such a token comes "
        "from the target's own p."
    )


def draft_cost(steps: int, seconds: float, verify_seconds: float) -> str:
    """The draft steps' cost beside the verify pass's, in words chosen from the two figures."""
    each, share = seconds / max(steps, 1), seconds / max(steps, 1) / verify_seconds
    figures = f"{steps} took {1000 * seconds:.0f} ms, {1000 * each:.0f} ms each"
    if share <= 0.5:
        verify = f"{1000 * verify_seconds:.0f} ms"
        return f"Draft steps are cheap: {figures}, against {verify} for the verify pass."
    if share < 1:
        return (
            f"Draft steps are meant to be cheap, and these barely were: {figures}, "
            f"{share:.0%} of the verify pass."
        )
    return (
        f"These draft steps were not cheap: {figures}, each more than the whole verify pass "
        f"({1000 * verify_seconds:.0f} ms). At such costs drafting cannot pay; a busy machine "
        "can slow one pass more than another."
    )


def verify_cost(k: int, seconds: float, t_step: float | None) -> str:
    """The end of the verify sentence: the pass's price in ordinary target steps (`t_step`, the
    profile's; None: not measured), in words chosen from the figures."""
    if not t_step:
        return "."
    steps = seconds / t_step
    one = f"one ordinary target step takes {1000 * t_step:.0f} ms here"
    if steps <= 1.3:
        return f": about the price of a single ordinary token ({one})."
    if steps < k + 1:
        return (
            f": {steps:.1f} ordinary steps' worth ({one}), still less than the {k + 1} steps "
            "that tokens one at a time would cost."
        )
    return (
        f": {steps:.1f} ordinary steps' worth ({one}), no cheaper than {k + 1} tokens one at a "
        "time, so this round saved nothing (a busy machine can do this)."
    )


def round_markdown(
    r: Round,
    tokenizer,
    config: RunConfig,
    t_step: float | None = None,
    outside: bool = False,
    refed: tuple[int, float, float] = (0, 0.0, 0.0),
) -> tuple[str, str, str]:
    """Plain-language notes on the round's three phases: draft, verify, accept/reject. Every
    comparison is chosen from the figures printed beside it; `t_step` is one plain target
    step's measured seconds (``profile.costs_for``), None when not measured; `outside`: the
    target's token is one the draft cannot propose (``Microscope.outside``); `refed`: the
    context fed again before the round (``StepState.refed``), said apart from its costs."""

    def tok(token: int) -> str:
        return f"`{token_text(tokenizer, token)}`"

    drafts = ", ".join(tok(t) for t in r.draft)
    # A hybrid round says which of its two drafters ran, and why.
    hybrid = config.drafter == "hybrid"
    if r.source == "lookup" and not r.k:
        draft = "Prompt lookup found no earlier match for the last tokens, so it guessed nothing."
    elif r.source == "lookup":
        found = (
            f"The hybrid drafter found the last {HYBRID_MIN_NGRAM} tokens"
            if hybrid
            else "Prompt lookup found the last few tokens"
        )
        draft = (
            f"{found} earlier in the text and proposed the {r.k} that followed them: {drafts}. "
            "No model pass at all; a copied guess is certain of itself, so q(x) = 1."
        )
    else:
        guessed = (
            f"The hybrid drafter found no earlier copy of the last {HYBRID_MIN_NGRAM} tokens to "
            "reuse, so the small draft model guessed"
            if hybrid
            else "The small draft model guessed"
        )
        draft = (
            f"{guessed} {r.k} tokens one after another, each drawn from its own distribution q: "
            f"{drafts}. {draft_cost(r.draft_steps, r.draft_time, r.verify_time)}"
        )
    verify = (
        f"The big target model read the context plus all {r.k} guesses in **one** forward "
        f"pass ({1000 * r.verify_time:.0f} ms). That pass gives the target's own distribution p "
        f"at all {r.k + 1} positions at once{verify_cost(r.k, r.verify_time, t_step)}"
    )
    tokens, target_seconds, draft_seconds = refed
    if tokens:
        models = "both models" if draft_seconds else "the target"
        verify += (
            f" *Each click starts from the text so far: before this round {models} read its "
            f"{tokens:,} tokens again ({1000 * (target_seconds + draft_seconds):.0f} ms), timed "
            "apart and left out of the figures above; a generation keeps them in its caches.*"
        )
    greedy = config.temperature == 0
    if greedy:
        rule = (
            "At temperature 0 both models are greedy: a guess is kept while it is the target's "
            "top choice (p(x) = 1 in the table)."
        )
    else:
        rule = (
            "Left to right, guess x is kept when a uniform draw u is below min(1, p(x)/q(x)): "
            "always if the target likes x at least as much as the draft did, else with "
            "probability p/q."
        )
    i = r.n_accepted
    if r.k == 0:
        outcome = f"With no guesses, the target produced one token itself: {tok(r.next_token)}."
    elif r.bonus:
        outcome = (
            f"All {r.k} guesses were kept, so the target's p at the next position gives a free "
            f"**bonus** token, {tok(r.next_token)}: {r.k + 1} tokens from one target pass."
        )
    elif greedy:
        outcome = (
            f"Guess {i + 1}, {tok(r.draft[i])}, was not the target's top choice, so it was "
            f"**rejected** with everything after it; the target's own choice "
            f"{tok(r.next_token)} takes its place. This round: {i} kept + 1 = {i + 1} tokens."
        )
    else:
        outcome = (
            f"Guess {i + 1}, {tok(r.draft[i])}, had p = {prob(r.p_x[i])} and q = {prob(r.q_x[i])}; "
            f"u = {prob(r.u[i])} was not below {prob(r.accept_prob[i])}, so it was **rejected** "
            f"with everything after it. The target drew {tok(r.next_token)} from the residual "
            "max(0, p − q), renormalised — the probability the draft under-proposed. That "
            f"correction makes every token follow p exactly. This round: {i} kept + 1 = "
            f"{i + 1} tokens."
        )
    if outside:
        outcome += f" {cannot_propose(tok(r.next_token))}"
    return (
        f"**1 · Draft.** {draft}",
        f"**2 · Verify.** {verify}",
        f"**3 · Accept or reject.** {rule} {outcome}",
    )
