"""The step-through's words: one round's three phases (draft, verify, accept or reject) in plain
language, every comparison chosen from the figures printed beside it, and the sentence for a
token the draft cannot propose. A round judged as a whole block (``block_outcome``) is told with
its running weights w, stopping chances h and uniforms u, beside what token by token would have
kept of the same guesses. A copy from the suffix index shows the earlier text it came from, the
match highlighted (``copied_draft``).
"""

import html

from specdemo.app.config import RunConfig
from specdemo.app.numbers import prob
from specdemo.app.step.stepping import MATCH_SHOWN, CopySource
from specdemo.decode.rounds import Round
from specdemo.draft.drafters import HYBRID_MIN_NGRAM
from specdemo.draft.suffix import LONG_MATCH
from specdemo.text import token_text

# A draft step "cheap" up to half a target step: at α 0.8 and K 4 the textbook speedup,
# (1 − α^5) / ((1 − α)(cK + 1)) = 3.36 / (4c + 1), is still above 1.1 there.
CHEAP_C = 0.5


def cannot_propose(token: str, rows: int | None = None) -> str:
    """The sentence for a target token outside the draft's head (``draft_vocab``)."""
    head = f"the {rows:,} token ids" if rows else "the token ids"
    return (
        f"The draft cannot propose {token}: its output layer scores only {head} the target "
        "writes most often and the ids already in this text, and this is neither, so q = 0 "
        "there and no guess could have matched it. Exactness is untouched: such a token comes "
        "from the target's own p."
    )


def draft_cost(steps: int, seconds: float, t_step: float | None) -> str:
    """The draft steps' cost in words chosen from the figures: each step against one ordinary
    target step (`t_step`, the profile's; None: not measured), the c the lesson's formulas use."""
    each = seconds / max(steps, 1)
    figures = f"{steps} took {1000 * seconds:.0f} ms, {1000 * each:.0f} ms each"
    if not t_step:
        return f"Draft steps: {figures}."
    c = each / t_step
    step = f"one ordinary target step ({1000 * t_step:.0f} ms here)"
    if c <= CHEAP_C:
        return f"Draft steps are cheap: {figures}, c = {c:.2f} of {step}."
    if c < 1:
        return (
            f"Draft steps are meant to be cheap, and these barely were: {figures}, "
            f"c = {c:.2f} of {step}."
        )
    return (
        f"These draft steps were not cheap: {figures}, each more than {step}, c = {c:.2f}. "
        "At such costs drafting cannot pay; a busy machine can slow one model more than the other."
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
    copy: CopySource | None = None,
) -> tuple[str, str, str]:
    """Plain-language notes on the round's three phases: draft, verify, accept/reject. Every
    comparison is chosen from the figures printed beside it; `t_step` is one plain target
    step's measured seconds (``profile.costs_for``), None when not measured; `outside`: the
    target's token is one the draft cannot propose (``Microscope.outside``); `refed`: the
    context fed again before the round (``StepState.refed``), said apart from its costs;
    `copy`: where a copy from the suffix index came from (``Microscope.copy``)."""

    def tok(token: int) -> str:
        return f"`{token_text(tokenizer, token)}`"

    drafts = ", ".join(tok(t) for t in r.draft)
    # A hybrid round says which of its two drafters ran, and why.
    hybrid = config.drafter == "hybrid"
    suffix = config.drafter in ("suffix", "suffix-hybrid")
    if r.source == "lookup" and not r.k:
        draft = (
            "The suffix index found no earlier match of the text's end, so it guessed nothing."
            if suffix
            else "Prompt lookup found no earlier match for the last tokens, so it guessed nothing."
        )
    elif copy is not None:
        draft = copied_draft(copy, r.k, drafts, config.drafter == "suffix-hybrid")
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
            else "The hybrid drafter found no earlier match of the text's end to copy, so the "
            "small draft model guessed"
            if config.drafter == "suffix-hybrid"
            else "The small draft model guessed"
        )
        draft = (
            f"{guessed} {r.k} tokens one after another, each drawn from its own distribution q: "
            f"{drafts}. {draft_cost(r.draft_steps, r.draft_time, t_step)}"
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
    block = r.judge == "block"
    if greedy:
        rule = (
            "At temperature 0 both models are greedy: a guess is kept while it is the target's "
            "top choice (p(x) = 1 in the table)."
        )
        if config.judge == "block":
            rule += " Judging the whole block gives the same outcome here."
    elif block:
        rule = BLOCK_RULE
    else:
        rule = (
            "Left to right, guess x is kept when a uniform draw u is below min(1, p(x)/q(x)): "
            "always if the target likes x at least as much as the draft did, else with "
            "probability p/q."
        )
        if config.judge == "block" and r.k:  # a copied guess: q one-hot
            rule += (
                " A copied guess has all of q on one token, and there judging the whole block "
                "gives the same outcome, so this round was judged token by token."
            )
    i = r.n_accepted
    tried = r.siblings_tried[i] if i < len(r.siblings_tried) else ()
    if r.k == 0:
        outcome = f"With no guesses, the target produced one token itself: {tok(r.next_token)}."
    elif block:
        outcome = block_outcome(r, tok)
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


def copied_draft(copy: CopySource, k: int, drafts: str, hybrid: bool) -> str:
    """A copy from the suffix index in words: the match it rests on, whether it was re-anchored
    after an edit, and the earlier text itself (``copy_block``)."""
    who = "The hybrid drafter's suffix index" if hybrid else "The suffix index"
    where = "the prompt" if copy.in_prompt else "the answer so far"
    tokens = f"{copy.match} token{'s' * (copy.match != 1)}"
    box = "the dashed box below" + (f", its last {MATCH_SHOWN}" if copy.cut else "")
    if not copy.anchored:
        found = (
            f"{who} found the text's last {tokens} earlier, in {where} ({box}): "
            "the longest earlier match, not a re-anchoring after an edit. It"
        )
    else:
        at = (
            f"where the latest {tokens} agree with it again ({box})"
            if copy.match
            else "where the source would be had the new tokens replaced as many old ones "
            "(no tokens agree yet)"
        )
        found = (
            f"**Re-anchored after an edit:** the longest earlier match was shorter than "
            f"{LONG_MATCH} tokens, as when the target writes what the source lacks, so "
            f"{who[0].lower()}{who[1:]} looked near where the last copy left the source, in "
            f"{where}, {at}, and"
        )
    overlap = (
        f" The copy ran {copy.overlap} token{'s' * (copy.overlap != 1)} past the end of the text, "
        "so it went on from its own start (an overlapping copy)."
        if copy.overlap
        else ""
    )
    return (
        f"{found} copied the {k} that followed (a bar above them, as on copied tokens): {drafts}. "
        "No model pass at all; "
        f"a copied guess is certain of itself, so q(x) = 1.{overlap}" + copy_block(copy)
    )


def copy_block(copy: CopySource) -> str:
    """The earlier text a copy came from, as an HTML block in the Markdown (on one line: a blank
    line ends a block): the text before the match, the match in a dashed box (``<mark>``), then
    the copied span with a bar above, as copied tokens have it, each newline in those two shown
    as ↵; each part named to a screen reader. A match cut to its last tokens says how many are
    left out."""

    def text(s: str, marked: bool = False) -> str:
        return html.escape(s).replace("\n", "↵&#10;" if marked else "&#10;")

    match = ""
    if copy.matched:
        tokens = f"{copy.match} token{'s' * (copy.match != 1)}"
        cut = f", its first {copy.cut} left out" if copy.cut else ""
        match = (
            f'<span class="sr-only">the match, {tokens}{cut}: </span>'
            f'<mark class="copy-match" title="the match: {tokens} that agree with the text\'s '
            f'end">{text(copy.matched, True)}</mark>'
        )
    return (
        f'\n\n<div class="copy-source">…{text(copy.before)}{match}'
        '<span class="sr-only">; copied: </span>'
        '<span class="copied copy-span" title="copied: what followed the match">'
        f"{text(copy.copied, True)}</span>"
        '<span class="sr-only">; end of the copy.</span>…</div>\n\n'
    )


BLOCK_RULE = (
    "Judged as a **whole block**: each guess carries a running weight w = min(1, w before it · "
    "p(x)/q(x)), starting from 1, the share of the target's mass the guesses so far still carry. "
    "Guess i may end the block with chance h = r / (r + 1 − w), where r is the mass of "
    "max(0, w·p − q) there (the last guess's h is its w). Every guess gets its own uniform u, and "
    "the block keeps every guess up to the **last** one whose u is below its h: a guess before "
    "it is kept even when its own u was not."
)


def span(first: int, last: int) -> str:
    """Guesses `first` to `last` (1-based) in words."""
    return f"guess {first}" if first == last else f"guesses {first} to {last}"


def block_outcome(r: Round, tok) -> str:
    """What judging the whole block did with the round's guesses, from its u and h (the last
    guess with u < h ends the kept block), and what judging token by token would have kept of
    the same guesses with the same u (``Round.token_kept``); a tree, walked leaf to root, in
    its own words (``traversal.traverse``)."""
    n, k, drawn = r.n_accepted, r.k, tok(r.next_token)
    passed = [r.u[i] < r.stop_chance[i] for i in range(k)]

    def test(i: int) -> str:
        sign = "<" if passed[i] else "≥"
        return f"u = {prob(r.u[i])} {sign} h = {prob(r.stop_chance[i])}"

    if r.width > 1:
        return tree_block_outcome(r, tok, test)
    failed = [str(i + 1) for i in range(n) if not passed[i]]
    despite = ""
    if failed:
        which = (
            f"guess {failed[0]} too, though its"
            if len(failed) == 1
            else (f"guesses {', '.join(failed)} too, though their")
        )
        despite = f" ({which} own u was not below h: a later guess passed)"
    if n == k:
        outcome = (
            f"Guess {k}, the last, passed ({test(k - 1)}), so all {k} guesses were **kept**"
            f"{despite}, and the target's p at the next position gives a free **bonus** token, "
            f"{drawn}: {k + 1} tokens from one target pass."
        )
    elif n:
        outcome = (
            f"Guess {n} was the last whose u fell below its h ({test(n - 1)}), so "
            f"{span(1, n)} {'was' if n == 1 else 'were'} **kept**{despite}, and "
            f"{span(n + 1, k)} **rejected** (u ≥ h). The target drew {drawn} from the block "
            f"residual max(0, w·p − q) at position {n + 1}, renormalised, with w = "
            f"{prob(r.weights[n - 1])} the weight the kept guesses carry. This round: {n} kept "
            f"+ 1 = {n + 1} tokens."
        )
    else:
        outcome = (
            f"No guess's u fell below its h (guess 1: {test(0)}), so none was kept. The target "
            f"drew {drawn} from max(0, p − q) at position 1, renormalised: before any kept guess "
            "w = 1, and the block residual is token by token's. This round: 0 kept + 1 = 1 token."
        )
    if r.token_kept is None:
        return outcome
    more = n - r.token_kept
    words = "the same number" if not more else f"{abs(more)} {'more' if more > 0 else 'fewer'}"
    outcome += (
        f" **Token by token would have kept {r.token_kept}** of the same guesses with the same "
        f"u (it stops at the first u not below min(1, p/q)): the block kept {words}."
    )
    if more < 0:
        outcome += " One round can go either way; on average the block keeps at least as many."
    return outcome


def tree_block_outcome(r: Round, tok, test) -> str:
    """A tree judged as a block: walked leaf to root (traversal verification), the deepest
    guesses and their siblings first, until one is kept with the path above it."""
    n, k, drawn = r.n_accepted, r.k, tok(r.next_token)
    walk = (
        "The tree was walked leaf to root (traversal verification): the deepest guess first, "
        "then each position's siblings in the order drawn and the guess above them, each kept "
        "with its chance h, until one was kept with every guess above it."
    )
    if r.sibling is not None:
        return (
            f"{walk} The first kept was the sibling {tok(r.sibling)} at position {n + 1}. The "
            f"round ends below it, with a **bonus** token {drawn} from the target's p at that "
            f"sibling's own row. This round: {n} + 1 kept + 1 = {n + 2} tokens."
        )
    if n == k:
        return (
            f"{walk} The deepest guess was kept at once ({test(k - 1)}), so all {k} guesses "
            f"were **kept**, and the target's p below it gives a **bonus** token {drawn}: "
            f"{k + 1} tokens from one target pass."
        )
    stop = (
        f"No guess or sibling below guess {n} was kept, so the walk stopped at guess {n}, kept "
        "with every guess above it"
        if n
        else "No guess or sibling was kept, so the walk ended at the text so far"
    )
    return (
        f"{walk} {stop}. The target drew {drawn} from what the removals left of p at position "
        f"{n + 1}. This round: {n} kept + 1 = {n + 1} tokens."
    )
