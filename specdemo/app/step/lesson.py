"""The step-through's words: one round's three phases (draft, verify, accept or reject) in plain
language, every comparison chosen from the figures printed beside it, and the sentence for a
token the draft cannot propose.
"""

from specdemo.app.config import RunConfig
from specdemo.app.numbers import prob
from specdemo.drafters import HYBRID_MIN_NGRAM
from specdemo.rounds import Round
from specdemo.text import token_text


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
    siblings = sum(len(group) for group in r.siblings)
    if siblings:  # a tree: the chain and its siblings, one pass
        verify = (
            f"The big target model read the context plus all {r.k} guesses and the {siblings} "
            f"siblings drawn beside them ({1 + r.k + siblings} rows, each seeing only the text "
            f"and its own ancestors) in **one** forward pass ({1000 * r.verify_time:.0f} ms). "
            "That pass gives the target's p below every node at once."
        )
    else:
        verify = (
            f"The big target model read the context plus all {r.k} guesses in **one** forward "
            f"pass ({1000 * r.verify_time:.0f} ms). That pass gives the target's own "
            f"distribution p at all {r.k + 1} positions at "
            f"once{verify_cost(r.k, r.verify_time, t_step)}"
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
    tried = r.siblings_tried[i] if i < len(r.siblings_tried) else ()
    if r.k == 0:
        outcome = f"With no guesses, the target produced one token itself: {tok(r.next_token)}."
    elif r.sibling is not None:
        outcome = (
            f"Guess {i + 1}, {tok(r.draft[i])}, was **rejected**; its siblings were tried in "
            "turn, each against what the rejections before it left of p, and "
            f"{tok(r.sibling)} was **kept**. The round ends below it, with a **bonus** token "
            f"{tok(r.next_token)} from the target's p at that sibling's own row. This round: "
            f"{i} + 1 kept + 1 = {i + 2} tokens."
        )
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
    elif tried:
        outcome = (
            f"Guess {i + 1}, {tok(r.draft[i])}, was **rejected**, and so were its siblings "
            f"{', '.join(tok(t.token) for t in tried)}, each tried against what the rejections "
            "before it left of p. The target drew "
            f"{tok(r.next_token)} from what was left after the last one, which keeps every "
            f"token distributed exactly as p. This round: {i} kept + 1 = {i + 1} tokens."
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
