"""The step-through: one speculative round at a time on a growing context, explained.

``next_round`` runs one round after the context in a ``StepState`` (plain picklable data, kept in a
``gr.State``) and returns the grown state, the ``Round`` and a ``Microscope``: p and q over the
whole vocabulary where the round ended, the very rows the acceptance rule judged, and for a copy
from the suffix index the earlier text it came from (``CopySource``). ``round_table``
turns the round into the table the tab shows (its columns follow the judge: a block round adds
each guess's running weight w and stopping chance h); ``lesson.round_markdown`` into its three
notes.
"""

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from specdemo.app.config import RunConfig, encode
from specdemo.app.numbers import prob
from specdemo.app.spans import Span, guess_spans
from specdemo.decode.engine import make_generator, resolve_k, speculative_generate
from specdemo.decode.rounds import Round, Stats
from specdemo.draft.drafters import make_drafter
from specdemo.draft.suffix import CopyDrafter
from specdemo.judge.sampling import residual
from specdemo.judge.tree import node_steps
from specdemo.judge.verify import Verdict
from specdemo.runtime.lm import Stopwatch, eos_ids
from specdemo.text import Detokenizer, token_labels, token_text

STEP_LIMIT = 512  # new tokens in the step-through tab
TOP_TOKENS = 8  # tokens the microscope shows one by one; the rest of the vocabulary is one bar
OTHERS = "other tokens"
# The verdict comes second, where a phone's narrow table still shows it.
STEP_COLUMNS = ["#", "verdict", "draft token", "q(x)", "p(x)", "min(1, p/q)", "u"]
# Judged as a block, u is compared with h, the chance to stop the block at that guess.
BLOCK_COLUMNS = ["#", "verdict", "draft token", "q(x)", "p(x)", "min(1, p/q)", "w", "h", "u"]
# A copy's source as shown: this many tokens of the text before the match, and of the match at
# most this many (its last ones; a long match is said in words too).
LEAD_TOKENS = 12
MATCH_SHOWN = 48


@dataclass(frozen=True)
class StepState:
    """The step-through tab's context: token ids so far and their coloured text."""

    prompt: str
    system: str
    context: tuple[int, ...]
    prompt_len: int
    spans: tuple[Span, ...] = ()
    rounds: int = 0
    finished: bool = False
    # The last round's context fed again, timed apart from the round: (tokens, target seconds,
    # draft model seconds). Each click starts from the context, so both models read it anew.
    # A timing, not the state: two states with the same text are equal whatever it took.
    refed: tuple[int, float, float] = field(default=(0, 0.0, 0.0), compare=False)
    # The context's length at each copy from the suffix index so far, so that each click's new
    # drafter knows where the copies left the source, as a generation's drafter does
    # (``resume_copies``).
    copies: tuple[int, ...] = ()


@dataclass(frozen=True)
class CopySource:
    """Where a copy from the suffix index came from, in the context the round read
    (``Round.origin``, ``match``, ``anchored``): the `match` tokens before `origin` agreed with
    the text's end, and the copy starts at `origin`. The texts: `before`, the text leading up to
    the match; `matched`, the match (its last MATCH_SHOWN tokens); `copied`, what followed it, as
    far as the context went (a copy past the end repeats its own start: `overlap` tokens)."""

    origin: int
    match: int
    anchored: bool
    in_prompt: bool  # the copy starts in the prompt, not in the answer so far
    before: str
    matched: str
    copied: str
    overlap: int = 0

    @property
    def cut(self) -> int:
        """Tokens of the match left out of `matched`."""
        return max(0, self.match - MATCH_SHOWN)


def copy_source(tokenizer, r: Round, context: Sequence[int], prompt_len: int) -> CopySource | None:
    """Round `r`'s copy in the `context` it read, or None: a round not copied from the suffix
    index (``Round.origin`` None), or one without guesses."""
    if r.origin is None or not r.k:
        return None
    start = max(0, r.origin - min(r.match, MATCH_SHOWN))  # the match as shown
    lead = start - LEAD_TOKENS if r.match <= MATCH_SHOWN else start  # a cut match: no lead
    end = min(r.origin + r.k, len(context))

    def text(ids: Sequence[int]) -> str:
        return tokenizer.decode(list(ids)) if ids else ""

    return CopySource(
        origin=r.origin,
        match=r.match,
        anchored=r.anchored,
        in_prompt=r.origin < prompt_len,
        before=text(context[max(0, lead) : start]),
        matched=text(context[start : r.origin]),
        copied=text(context[r.origin : end]),
        overlap=r.origin + r.k - end,
    )


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
    copy: CopySource | None = None  # a copy from the suffix index: the text it came from
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
    # A tree's node: the p each guess there was judged against, in the order tried (the draft's
    # guess, then its siblings), each after the rejections before it, and what was left after
    # the last one when every guess was rejected; (label, values per label) each.
    stages: list[tuple[str, list[float]]] = field(default_factory=list)
    kept_sibling: int | None = None  # the sibling kept at this node, if one was
    # Judged as a block: the running weight w the kept guesses carry here. The overlap is then
    # min(w·p, q), and the residual the block residual max(0, w·p − q) / Σ (w = 1: token-wise).
    judge: str = "token"
    weight: float = 1.0
    drawn_from: str = "max(0, p − q) / Σ"  # what `residual` is, in words


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
    resume_copies(drafter, state)
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
        verify=config.judge,
    )
    with contextlib.closing(rounds):
        r = next(rounds)
    scope = microscope(pair.tokenizer, r, verdicts[-1], drafter.draft_model)
    copy = copy_source(pair.tokenizer, r, state.context, state.prompt_len)
    scope = replace(scope, copy=copy) if copy is not None else scope
    generated = list(state.context[state.prompt_len :])
    detok = Detokenizer(pair.tokenizer, generated)
    spans = guess_spans(r, detok, show_rejected=True)
    state = replace(
        state,
        context=state.context + tuple(r.tokens),
        spans=state.spans + tuple(spans),
        rounds=state.rounds + 1,
        finished=any(t in eos_ids(pair.target) for t in r.tokens),
        refed=(len(context) - 1, stats.prefill_time, draft_seconds),
        copies=(*state.copies, len(context)) if copy is not None else state.copies,
    )
    return state, r, scope


def resume_copies(drafter, state: StepState) -> None:
    """Each click makes a new drafter; one that copies from the suffix index
    (``suffix.CopyDrafter``, alone or in a hybrid) first makes the copies so far again, in
    order, each on the context it read (a copy is deterministic, and each re-anchors from where
    the one before left the source), so it re-anchors after an edit as one generation's drafter
    does."""
    copier = getattr(drafter, "lookup", drafter)
    if isinstance(copier, CopyDrafter):
        for length in state.copies:
            copier.propose(list(state.context[:length]), 1)


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
        if r.bonus and r.sibling is None  # the whole chain kept (a kept sibling: a rejection)
        else "rejected"
    )
    scope = Microscope(kind, i, r.rejected, r.next_token, r.source)
    if draft_model is not None and r.source == "model" and kind == "rejected" and r.sibling is None:
        outside = not draft_model.covers(r.next_token)
        scope = replace(scope, outside=outside, head_rows=draft_model.head_rows)
    if kind == "greedy":
        return scope
    p = verdict.p[i].double()
    q = verdict.q[i].double() if kind == "rejected" else None
    if r.judge == "block" and q is not None:  # w at the stop: weights[i - 1], 1 before any
        weight = r.weights[i - 1] if i else 1.0
        tree = r.sibling is not None or any(r.siblings_tried[i : i + 1])
        drawn_from = (
            "max(0, w·p − q) / Σ"
            if not tree
            else "p at the kept sibling's own row"
            if r.sibling is not None
            else "what the removals left of p"
        )
        scope = replace(scope, judge="block", weight=weight, drawn_from=drawn_from)
        return _fill(scope, tokenizer, p, q, weight=weight, drawn_from=verdict.next_dist)
    tried = r.siblings_tried[i] if kind == "rejected" and i < len(r.siblings_tried) else ()
    if tried:  # a tree: siblings were tried here, each against what the rejections left of p
        return _fill(scope, tokenizer, p, q, [r.draft[i], *(t.token for t in tried)], r.sibling)
    return _fill(scope, tokenizer, p, q)


def _stages(tokenizer, p, q, children: Sequence[int], kept: int | None) -> list:
    """(label, (vocab,) p) for each guess tried at a node, up to the one kept, and what was
    left after the last when none was (``tree.node_steps``)."""
    stages = []
    for j, child, p_j, _ in node_steps(p, q.clone(), children):
        before = f"after {token_text(tokenizer, children[j - 1])!r} was rejected" if j else ""
        if child is None:
            stages.append((f"what is left {before}", p_j))
            break
        stages.append((f"p judging {token_text(tokenizer, child)!r} {before}".strip(), p_j))
        if child == kept:
            break
    return stages


def _fill(
    scope: Microscope,
    tokenizer,
    p: torch.Tensor,
    q: torch.Tensor | None,
    children: Sequence[int] = (),
    kept: int | None = None,
    weight: float = 1.0,
    drawn_from: torch.Tensor | None = None,
) -> Microscope:
    """The microscope's numbers from (vocab,) float64 p and q (q None: p only); `children`,
    the guesses a tree's node tried in order, with the sibling `kept` there, if one was. A block
    weighs p by `weight` before q is taken away, and `drawn_from` is the distribution the engine
    drew the next token from (the block residual; None: max(0, p − q) / Σ)."""
    score = p if q is None else torch.maximum(p, q)
    drawn = scope.drawn if kept is None else None  # below a kept sibling: the next position's
    shown = [t for t in (scope.drafted, *children[1:], drawn) if t is not None]
    shown = list(dict.fromkeys(shown))
    for t in torch.topk(score, min(TOP_TOKENS, score.numel())).indices.tolist():
        if len(shown) < TOP_TOKENS and t not in shown and score[t] > 0:
            shown.append(t)
    shown.sort(key=lambda t: -float(score[t]))
    rows = {"p": p, "residual": p}
    if q is not None:
        rest = residual(p, q) if drawn_from is None else drawn_from.double()
        rows = {"p": p, "q": q, "overlap": torch.minimum(weight * p, q), "residual": rest}
    stages = _stages(tokenizer, p, q, children, kept) if children else []
    rows.update({f"stage {j}": row for j, (_, row) in enumerate(stages)})
    values = {name: row[shown].tolist() for name, row in rows.items()}
    labels = token_labels(tokenizer, shown)
    # The rest of the vocabulary as one bar, so that each kind of bar sums to the whole.
    others = {name: max(float(row.sum()) - sum(values[name]), 0.0) for name, row in rows.items()}
    if max(others.values()) > 1e-4:
        labels.append(OTHERS)
        for name, rest in others.items():
            values[name].append(rest)
    named = [(label, values.pop(f"stage {j}")) for j, (label, _) in enumerate(stages)]
    scope = replace(scope, tokens=shown, labels=labels, stages=named, kept_sibling=kept, **values)
    if q is None:
        return scope
    overlap = rows["overlap"]
    x = scope.drafted
    return replace(
        scope,
        kept=float(overlap.sum()),
        left=float((weight * p - overlap).sum()),
        p_x=float(p[x]),
        q_x=float(q[x]),
    )


def round_table(r: Round, tokenizer, outside: bool = False) -> dict:
    """The round as the tab's table: its columns (STEP_COLUMNS, or BLOCK_COLUMNS for a round
    judged as a block) and ``round_rows``."""
    columns = BLOCK_COLUMNS if r.judge == "block" else STEP_COLUMNS
    return {"headers": columns, "data": round_rows(r, tokenizer, outside)}


def round_rows(r: Round, tokenizer, outside: bool = False) -> list[list]:
    """One row per draft position, then the target's own token (columns: STEP_COLUMNS, or
    BLOCK_COLUMNS for a round judged as a block, ``block_rows``); `outside`: that token is one
    the draft cannot propose (``Microscope.outside``)."""
    if r.judge == "block":
        return block_rows(r, tokenizer, outside)
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
    rows.append(
        [r.kept + 1, token_text(tokenizer, r.next_token), "", "", "", "", last_verdict(r, outside)]
    )
    return verdict_second(rows)


def verdict_second(rows: list[list]) -> list[list]:
    """Rows built with the verdict last, as the columns have it: second."""
    return [[row[0], row[-1], *row[1:-1]] for row in rows]


def block_rows(r: Round, tokenizer, outside: bool = False) -> list[list]:
    """A block round's rows (BLOCK_COLUMNS): every guess has its running weight w, its chance h
    of ending the block there and its own u, all drawn; the block keeps up to the last guess
    with u < h, so a guess before it is kept whatever its own test said. A tree's siblings (a
    walk leaf to root, ``traversal.traverse``) show the chance they were tried with as h."""
    n, rows = r.n_accepted, []
    later = "a later guess passed" if r.sibling is None else "a sibling below it was kept"
    for i, token in enumerate(r.draft):
        passed = r.u[i] < r.stop_chance[i]
        test = "u < h" if passed else "u ≥ h"
        if i >= n:
            verdict = f"rejected: {test}"
        elif i == n - 1 and r.sibling is None:
            verdict = f"accepted: {test}, the last that passed"
        else:
            verdict = f"accepted: {test}, {'and' if passed else 'but'} {later}"
        cells = [
            prob(r.q_x[i]),
            prob(r.p_x[i]),
            prob(r.accept_prob[i]),
            prob(r.weights[i]),
            prob(r.stop_chance[i]),
            prob(r.u[i]),
            verdict,
        ]
        rows.append([i + 1, token_text(tokenizer, token), *cells])
        for j, t in enumerate(r.siblings_tried[i] if i < len(r.siblings_tried) else ()):
            test = "u < h" if t.u < t.accept_prob else "u ≥ h"
            verdict = f"{'accepted' if t.kept else 'rejected'} (sibling): {test}"
            ratio = min(1.0, t.p_x / t.q_x) if t.q_x > 0 else 1.0
            cells = [prob(t.q_x), prob(t.p_x), prob(ratio), "", prob(t.accept_prob), prob(t.u)]
            rows.append(
                [f"{i + 1}, sibling {j + 1}", token_text(tokenizer, t.token), *cells, verdict]
            )
    rows.append(
        [r.kept + 1, token_text(tokenizer, r.next_token), *[""] * 6, last_verdict(r, outside)]
    )
    return verdict_second(rows)


def last_verdict(r: Round, outside: bool = False) -> str:
    """What the round's own token was: a plain target step, a bonus, or a replacement drawn
    from the residual (a block's: max(0, w·p − q))."""
    block = r.judge == "block"
    verdict = (
        "plain target step (no guesses, from p)"
        if not r.k
        else "bonus (from p)"
        if r.bonus
        else "resampled (from the block residual max(0, w·p − q))"
        if block
        else "resampled (from the residual)"
    )
    return verdict + (", a token the draft cannot propose" if outside else "")
