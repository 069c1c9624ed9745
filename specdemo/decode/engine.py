"""The speculative decoding loop and its target-only baseline, as generators.

``speculative_generate`` yields one ``Round`` per target forward pass; ``autoregressive_generate``
yields one ``Step`` per token. Both take token ids and return token ids: the engine knows nothing
about tokenization, except that optional stop strings are checked with a caller-given decode.
``generate`` is the thin non-streaming wrapper that the app, the bench and outside code call.
The target's passes run through its step object (``steps``: eager, or captured on a
GPU), which owns its KV cache; what one round does with them is ``verify_pass``'s.
"""

import copy
from collections.abc import Callable, Iterator

import torch

from specdemo.cost.policy import AutoK
from specdemo.cost.profile import costs_for
from specdemo.cost.theory import StepCosts
from specdemo.decode.rounds import Result, Round, Stats, Step
from specdemo.decode.verify_pass import check_draft, sprout, verify_round, verify_tree_round
from specdemo.defaults import DEFAULTS, default_drafter
from specdemo.draft.drafters import Drafter, make_drafter
from specdemo.judge.sampling import (
    EXACT,
    AcceptanceRule,
    SamplingConfig,
    check_tokens,
    next_token,
    resolve_rule,
)
from specdemo.judge.verify import Verdict, check_judge
from specdemo.runtime.lm import Stopwatch, eos_ids, vocab_size
from specdemo.runtime.modes import target_step_for, target_step_kind

DEFAULT_SAMPLING = SamplingConfig(DEFAULTS["temperature"], DEFAULTS["top_k"], DEFAULTS["top_p"])
AUTO_TREE_WIDTH = (
    3  # the widest fishbone tree_width="auto" prices: the widths measured (BENCHMARKS)
)


# The most drafts one round may verify: a long copy's pass over 65 rows (``suffix``); more rows
# than that cost a CPU about as much as the plain steps they would replace.
K_LIMIT = 64


def as_list(input_ids: list[int] | torch.Tensor) -> list[int]:
    return input_ids.view(-1).tolist() if isinstance(input_ids, torch.Tensor) else list(input_ids)


def make_generator(seed: int | None, device) -> torch.Generator:
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


class _Stopper:
    """Cuts a block of new tokens at the first EOS, max_new_tokens or stop string."""

    def __init__(self, eos: set[int], max_new_tokens: int, stop_strings, decode):
        check_max_new_tokens(max_new_tokens)
        if stop_strings and decode is None:
            raise ValueError("stop_strings need a decode function (token ids -> text)")
        self.eos, self.max_new_tokens = eos, max_new_tokens
        self.stop_strings, self.decode = tuple(stop_strings or ()), decode
        self.generated: list[int] = []

    @property
    def room(self) -> int:
        return self.max_new_tokens - len(self.generated)

    def cut(self, block: list[int]) -> tuple[list[int], bool]:
        """The part of `block` to emit, and whether generation is finished."""
        kept = block[: self.room]
        done = len(kept) < len(block) or len(self.generated) + len(kept) >= self.max_new_tokens
        for i, t in enumerate(kept):
            if t in self.eos or self._stop_string_ends_at(kept[: i + 1]):
                kept, done = kept[: i + 1], True
                break
        self.generated += kept
        return kept, done

    def _stop_string_ends_at(self, new: list[int]) -> bool:
        # Earlier text held no stop string (we would have stopped), so any match is new.
        return bool(self.stop_strings) and any(
            s in self.decode(self.generated + new) for s in self.stop_strings
        )


@torch.inference_mode()
def speculative_generate(
    target,
    drafter: Drafter,
    input_ids: list[int] | torch.Tensor,
    *,
    k: int | AutoK,
    sampling: SamplingConfig = DEFAULT_SAMPLING,
    max_new_tokens: int = DEFAULTS["max_new_tokens"],
    generator: torch.Generator | None = None,
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
    stats: Stats | None = None,
    rule: AcceptanceRule = EXACT,
    on_verdict: Callable[[Verdict], None] | None = None,
    tree_width: int | str = 1,
    verify: str = "token",
    target_step: str | None = None,
) -> Iterator[Round]:
    """Yield one Round per target pass until EOS, max_new_tokens or a stop string.

    The target's KV cache holds every token but the last emitted one; each round feeds that
    token plus the k drafts in one pass, giving p for k+1 positions, then crops the cache by
    the k - n rejected drafts. `k` is a number of drafts per round or a policy (``AutoK``, see
    ``auto_k``) that chooses it before each round from the rounds so far. `rule` is the
    acceptance rule (``sampling.RULES``: the exact one, or a classic mistake for teaching; the
    drafter must have been made with the same rule). `stats`, if given, and a copy of the policy
    observe every round (the caller's policy is left as it was given); `on_verdict` sees each
    round's ``Verdict`` before its Round is yielded, with the rows of p and q the rule judged
    (the step-through's microscope draws them).

    `tree_width` > 1 verifies a tree instead of a chain (``tree``): at each depth the draft's
    token and up to `tree_width` - 1 siblings drawn from the same q without replacement, judged
    in one target pass with the exact rule for children drawn so. "auto" takes the width the
    policy chooses with each k (up to its ``max_width``; 1 where a tree does not pay) and needs
    `k` to be a policy; with a policy, a whole number `tree_width` is the widest it may choose,
    as on the page, so every round is priced as the tree it verifies.

    `verify` is the judge: "token" judges each draft on its own and stops at the first
    rejection; "block" judges the drafts as one block (``verify``: block verification; a tree by
    traversal verification, ``traversal.traverse``), which keeps at least as many in distribution.
    Both are exact; a greedy round, or a copied draft (a one-hot q), is judged token by token,
    which is the same outcome.

    `target_step` is how the target's passes run (``steps``: "eager", "static", "graph"
    or "auto"; None: $SPECDEMO_TARGET_STEP, else ``steps.DEFAULT_TARGET_STEP``, eager);
    every mode gives the same logits up to rounding (``steps``).
    """
    context = as_list(input_ids)
    check_judge(verify)
    policy = check_k(k)
    if policy is not None:  # the run's own: what it learns and pins stays with it
        policy = copy.deepcopy(policy)
    check_tree_width(tree_width, rule)
    if tree_width == "auto" and policy is None:
        raise ValueError('tree_width="auto" is chosen by automatic K: it needs k="auto"')
    chosen = policy is not None and (tree_width == "auto" or tree_width > 1)
    if chosen and tree_width != "auto":
        policy.max_width = tree_width  # the widest it may choose, priced round by round
    if chosen and sampling.greedy:
        policy.max_width = 1  # greedy: a tree keeps what the chain keeps (``judge``), no more
    if not context:
        raise ValueError("input_ids must hold at least one token")
    stopper = _Stopper(eos_ids(target), max_new_tokens, stop_strings, decode)
    stats = stats if stats is not None else Stats()
    stats.k = "auto" if policy else k
    stats.verify = verify
    observers = [stats.add] + ([policy.update] if policy else [])
    if not max_new_tokens:
        return
    # "auto" on CUDA is measured once per target; the step object is this request's alone, and
    # goes back to the target's idle ones when the run ends or is closed.
    with target_step_for(target, target_step) as runner:
        vocab, clock = vocab_size(target), Stopwatch(target.device)
        prefill(runner, context, stats)
        stats.prefill_time = clock.lap()
        while True:
            if policy:  # a copy is priced by the match it rests on, where the drafter says
                match = drafter.match(context) if hasattr(drafter, "match") else None
                source, wanted = policy.choose_source(drafter.sources(context), match)
            else:
                source, wanted = None, k
            k_asked = min(wanted, stopper.room - 1)  # k drafts + 1 target token fit what is left
            clock.lap()  # what came before (the caller's turn, the choice of k) is bookkeeping
            proposal = drafter.propose(context, k_asked, source)
            draft_time = clock.lap()
            draft = check_draft(proposal.tokens.tolist(), vocab)
            width = policy.width if chosen else tree_width
            if proposal.siblings:  # a copy's siblings are fixed, so its tree runs greedy too
                width = AUTO_TREE_WIDTH if tree_width == "auto" else tree_width
            tree = (
                None
                if sampling.greedy and not proposal.siblings
                else sprout(proposal, width, generator)
            )
            clock.lap()
            if tree is not None:
                check_draft(tree.tokens, vocab)
            rows = 1 + len(draft if tree is None else tree.tokens)  # the pass's rows
            if not runner.fits(len(context) - 1 + rows):  # a static cache started over, larger
                prefill(runner, context, stats)
            if tree is None:
                verdict = verify_round(
                    runner, context[-1], proposal, sampling, generator, rule, verify
                )
                kept = draft[: verdict.n_accepted]
            else:
                verdict = verify_tree_round(
                    runner, context[-1], tree, proposal.q, sampling, generator, verify
                )
                kept = verdict.path
            verify_time = clock.lap()
            if on_verdict is not None:
                on_verdict(verdict)
            tokens, finished = stopper.cut(kept + [verdict.next_token])
            r = Round.judged(
                draft,
                proposal,
                verdict,
                tokens,
                finished,
                k_asked,
                draft_time,
                verify_time,
                tree,
                runner.pass_time,
            )
            for observe in observers:
                observe(r)
            context += tokens
            stats.wall_time = clock.total()
            yield r
            if finished:
                return


def check_tree_width(width: int | str, rule: AcceptanceRule = EXACT) -> int | str:
    """A tree width is a whole number >= 1 or "auto"; a tree is judged by the exact rule only."""
    whole = isinstance(width, int) and not isinstance(width, bool) and width >= 1
    if width != "auto" and not whole:
        raise ValueError(
            f'tree_width must be a whole number >= 1 (1: a chain) or "auto", got {width!r}'
        )
    if width != 1 and rule != EXACT:
        raise ValueError("a tree (tree_width > 1) is judged by the exact rule only")
    return width


def check_k(k: int | AutoK) -> AutoK | None:
    """The policy when `k` is one, None for a whole number >= 0; anything else raises."""
    if isinstance(k, AutoK):
        return k
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(
            f'k must be a whole number >= 0, or "auto" resolved by engine.auto_k, got {k!r}'
        )
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if k > K_LIMIT:
        raise ValueError(f"k must be at most {K_LIMIT} (drafts a round verifies), got {k}")
    return None


def check_max_new_tokens(max_new_tokens: int) -> None:
    """A length is a whole number >= 0; anything else raises."""
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")


def prefill(runner, context: list[int], stats: Stats) -> None:
    """Feed the target's step object (`runner`, empty) every context token but the last
    (nothing for a 1-token context): each round feeds the last emitted token itself."""
    runner.fits(len(context))
    if len(context) >= 2:
        runner.run(context[:-1])
        stats.target_passes += 1


@torch.inference_mode()
def autoregressive_generate(
    target,
    input_ids: list[int] | torch.Tensor,
    *,
    sampling: SamplingConfig = DEFAULT_SAMPLING,
    max_new_tokens: int = DEFAULTS["max_new_tokens"],
    generator: torch.Generator | None = None,
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
    target_step: str | None = None,
) -> Iterator[Step]:
    """The baseline: one target pass per token, same warping and stops as the speculative loop,
    its passes run as `target_step` asks (``speculative_generate``)."""
    context = as_list(input_ids)
    if not context:
        raise ValueError("input_ids must hold at least one token")
    stopper = _Stopper(eos_ids(target), max_new_tokens, stop_strings, decode)
    if not max_new_tokens:
        return
    with target_step_for(target, target_step) as runner:
        clock = Stopwatch(target.device)
        feed = context
        while True:
            if not runner.fits(len(context)):  # a static cache started over, larger: feed it all
                feed = context
            logits = runner.run(feed)
            token = next_token(logits, sampling, generator)
            feed = token
            tokens, finished = stopper.cut(check_tokens(token.tolist(), "target"))
            context += tokens
            yield Step(token=tokens[0], time=clock.lap(), finished=finished)
            if finished:
                return


def generate(
    target,
    draft,
    input_ids,
    *,
    k: int | str = DEFAULTS["k"],
    temperature: float = DEFAULTS["temperature"],
    top_k: int | None = DEFAULTS["top_k"],
    top_p: float | None = DEFAULTS["top_p"],
    max_new_tokens: int = DEFAULTS["max_new_tokens"],
    seed: int | None = DEFAULTS["seed"],
    drafter: str | None = None,
    adaptive: bool = DEFAULTS["adaptive"],
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
    rule: str | AcceptanceRule = "exact",
    tree_width: int | str = 1,
    verify: str = DEFAULTS["verify"],
    target_step: str | None = None,
) -> Result:
    """Speculative generation in one call: the new token ids and the stats. k="auto" chooses k
    before each round (``policy.AutoK``) from step costs measured once per pair on this machine
    (``profile.costs_for``). `rule`: "exact", or one of the mistakes in ``sampling.RULES``
    ("always-accept", "resample-from-p", "greedy-draft"), which break exactness on purpose.
    `tree_width` > 1 verifies a token tree each round (``speculative_generate``); "auto", with
    k="auto", lets the policy choose a width up to AUTO_TREE_WIDTH each round (1 where a tree
    does not pay). `verify`: the judge, "token" (token by token) or "block" (the whole block;
    a tree by traversal), both exact. `target_step`: how the target's passes run
    (``steps``; None: $SPECDEMO_TARGET_STEP, else eager)."""
    check_judge(verify)
    sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
    rule = resolve_rule(rule)
    generator = make_generator(seed, target.device)
    drafter = drafter or default_drafter(target.device)
    proposer = make_drafter(drafter, draft, sampling, generator, target.device, adaptive, rule=rule)
    stats = Stats()
    rounds = list(
        speculative_generate(
            target,
            proposer,
            input_ids,
            k=resolve_k(k, target, proposer, tree_width, target_step),
            sampling=sampling,
            max_new_tokens=max_new_tokens,
            generator=generator,
            stop_strings=stop_strings,
            decode=decode,
            stats=stats,
            rule=rule,
            tree_width=tree_width,
            verify=verify,
            target_step=target_step,
        )
    )
    return Result(tokens=[t for r in rounds for t in r.tokens], stats=stats, rounds=rounds)


def resolve_k(
    k: int | str | AutoK, target, drafter, tree_width: int | str = 1, target_step=None
) -> int | AutoK:
    """A fixed k or a policy as given; "auto" as a policy on this pair's step costs with the
    target's passes in `target_step` mode, choosing tree widths up to AUTO_TREE_WIDTH where
    `tree_width` is "auto", up to a whole number `tree_width`, else the chain."""
    if k == "auto":
        width = AUTO_TREE_WIDTH if tree_width == "auto" else tree_width
        return auto_k(target, drafter, width, target_step)
    check_k(k)
    return k


def auto_k(target, drafter: Drafter, max_width: int = 1, target_step=None) -> AutoK:
    """Automatic K on this target and drafter's step costs (``profile_of``)."""
    return AutoK(profile_of(target, drafter, target_step), max_width=max_width)


def profile_of(target, drafter: Drafter, target_step: str | None = None) -> StepCosts:
    """The step costs automatic K and the cost model price rounds with, measured once per
    target and the mode its passes run in (`target_step`, resolved as ``speculative_generate``
    does: ``modes.target_step_kind``), and per draft, head and step mode, on this
    machine (``profile.costs_for``); a drafter with no draft model (prompt lookup) drafts free."""
    mode = target_step_kind(target, target_step)
    model = drafter.draft_model
    if model is None:
        return costs_for(target, target_mode=mode)
    return costs_for(target, model.model, model.head_rows, model.step.kind, mode)
