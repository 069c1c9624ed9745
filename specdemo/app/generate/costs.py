"""The session's runs against the cost model, in numbers: pure functions of ``RunRecord``s.

``group_curves`` gives a group of runs (one temperature and drafter) two speedup curves against
K: the textbook's, which charges a round c*K + 1 target steps (verify = one step), and the one
predicted from the costs measured on this machine (``theory.StepCosts``: a plain target step, a
draft step, and the verify pass for each K that ``profile.costs_for`` timed). ``cost_note`` says,
computed from those numbers and in one sentence, why the two differ, with the rest under "More on
the costs"; ``position_counts`` is how often each draft position was kept."""

import itertools
from collections import defaultdict
from dataclasses import dataclass, replace
from statistics import mean

from specdemo.app.generate.loads import uneven_loads
from specdemo.app.generate.run_record import RunRecord
from specdemo.cost.policy import SIBLING_PRIOR, AutoK, SiblingAcceptance, expected_tree_tokens
from specdemo.cost.theory import StepCosts, expected_speedup, expected_tree_tokens_per_pass
from specdemo.defaults import DEFAULTS
from specdemo.runtime.threads import cores as usable_cores

K_AXIS = list(range(1, 17))  # the textbook curve's K values (the app's K slider)
NOTE_PLACEHOLDER = (
    "*After a run: why the curve predicted from measured costs and the textbook's differ.*"
)


def groups(runs: list[RunRecord]) -> list[tuple[tuple, list[RunRecord]]]:
    """The runs by ``RunRecord.group`` (drafter, adaptive, temperature, judge, tree width), in a
    fixed order (the charts' colours)."""
    by_key = defaultdict(list)
    for r in runs:
        by_key[r.group].append(r)
    return sorted(by_key.items())


def group_name(key: tuple) -> str:
    drafter, adaptive, temperature, judge, width = key
    name = f"T={temperature:g}" + ("" if drafter == DEFAULTS["drafter"] else f" {drafter}")
    name += (" adaptive" if adaptive else "") + (" block" if judge == "block" else "")
    return name + (f" tree {width}" if width > 1 else "")


@dataclass(frozen=True)
class Curves:
    """One group's speedup against K: the textbook's and the one predicted from measured costs,
    both at the group's mean per-draft acceptance rate `alpha`."""

    name: str
    alpha: float
    costs: StepCosts  # the group's mean costs
    textbook: dict[int, float]  # K -> E[tokens per pass] / (c*K + 1), K in K_AXIS
    predicted: dict[int, float]  # K -> StepCosts.speedup, for each K with a measured verify
    # The same with the draft step replayed from a CUDA graph, where that step was measured.
    captured: dict[int, float] | None = None
    captured_c: float | None = None
    width: int = 1  # a tree's: each verify pass holds 1 + K * width rows

    @property
    def best_k(self) -> int:
        return max(self.predicted, key=self.predicted.__getitem__)

    @property
    def textbook_best_k(self) -> int:
        return max(self.textbook, key=self.textbook.__getitem__)


def group_curves(key: tuple, group: list[RunRecord]) -> Curves | None:
    """Both curves for one group, from the runs that recorded their costs (None if none did)."""
    measured = [(r, steps) for r in group if (steps := r.costs) is not None]
    if not measured:
        return None
    # The K the app's K slider offers: the profile also times wider passes, for long copies.
    ks = sorted(set.intersection(*(set(steps.t_verify) for _, steps in measured)) & set(K_AXIS))
    costs = StepCosts(
        t_step=mean(steps.t_step for _, steps in measured),
        t_draft=mean(steps.t_draft for _, steps in measured),
        t_verify={k: mean(steps.t_verify[k] for _, steps in measured) for k in ks},
    )
    alpha = min(mean(r.alpha for r, _ in measured), 1.0)
    captured = [t for r, _ in measured if (t := r.cost_t_draft_captured)]
    lever = replace(costs, t_draft=mean(captured)) if captured and costs.t_draft else None
    width = group[0].tree_width if isinstance(group[0].tree_width, int) else 1
    if width > 1:  # a tree's curves are a tree's, at the siblings' measured chance, or none
        return tree_curves(key, measured, alpha, costs, width)
    return Curves(
        name=group_name(key),
        alpha=alpha,
        costs=costs,
        textbook={k: expected_speedup(alpha, k, costs.c) for k in K_AXIS},
        predicted={k: costs.speedup(alpha, k) for k in ks},
        captured={k: lever.speedup(alpha, k) for k in ks} if lever else None,
        captured_c=lever.c if lever else None,
    )


def tree_words(width: int) -> str:
    return f", tree width {width}" if width > 1 else ""


def tree_curves(key, measured: list, alpha: float, costs: StepCosts, width: int) -> Curves:
    """A tree group's curves at width `width`, priced as automatic K prices a tree: E[tokens per
    pass] of the fishbone (``theory.expected_tree_tokens_per_pass``) at the siblings' chance the
    group's runs measured, the policy's prior for a rank none tried (``AutoK.sibling_chance``),
    over a verify of one step (the textbook's) and over the profile's pass of 1 + K * width rows
    (``StepCosts.speedup`` at the width): never a chain's formula under a tree's name."""
    policy = AutoK(costs, max_width=width)
    policy.siblings = SiblingAcceptance.pooled(
        (r.sibling_judged, r.sibling_kept) for r, _ in measured
    )
    sibling = policy.sibling_chance(width)
    textbook = {
        k: expected_tree_tokens_per_pass(alpha, k, sibling) / (costs.c * k + 1.0) for k in K_AXIS
    }
    predicted = {k: costs.speedup(alpha, k, width, sibling) for k in K_AXIS if k in costs.t_verify}
    return Curves(group_name(key), alpha, costs, textbook, predicted, width=width)


BUSY = 1.25  # a run's steps this many times slower (or faster) than profiled: a busier machine
NOISE = 0.9  # a verify timed below this many plain steps is noise, not a cost
MORE = "More on the costs"  # opens what the note's one sentence leaves out


def cost_note(runs: list[RunRecord]) -> str:
    """One sentence, from the measured numbers, on why the latest run's group's two curves
    differ, and beside it any uneven loads its two halves ran under (``uneven``); under it,
    closed (an HTML ``<details>``, which ``gr.Markdown`` keeps), where the verify cost jumps,
    what a tree costs, why a GPU's draft step costs what it does, how much of the measured runs'
    time the formulas leave out, and a change of load. Every ratio comes from
    the profile, whose timings were taken in turns under one load; a run timed on a busier
    machine says so (``load_note``) instead of mixing the two."""
    if not runs:
        return NOTE_PLACEHOLDER
    key = runs[-1].group
    group = [r for r in runs if r.group == key]
    curve = group_curves(key, group)
    if curve is None:
        return "*The cost model needs this machine's step profile; this run has none.*"
    k = runs[-1].k if runs[-1].k in curve.predicted else curve.best_k
    rows = k * curve.width  # the verify pass's rows, less the last emitted token
    verify = curve.costs.pass_seconds(rows + 1) / curve.costs.t_step
    if verify < NOISE:
        disturbed = (
            f"*The step profile is disturbed: it timed a verify of {rows + 1} tokens at "
            f"{verify:.2f} plain steps, which no pass can cost, so the machine's load changed "
            "while it was timed; restart the app on a quieter machine to re-profile.*"
        )
        return disturbed + uneven(runs[-1]) + more(load_note(runs[-1]))
    c = curve.costs.c
    draft = f"a draft step {c:.2f} of one" if c else "a copied draft costs no model step"
    best, textbook = curve.best_k, curve.textbook_best_k
    peak, textbook_peak = curve.predicted[best], curve.textbook[textbook]
    level = " (level with it, within timing noise)" if peak >= textbook_peak else ""
    headline = (
        f"**Why the two curves differ** ({curve.name}, α per draft = {curve.alpha:.2f}): "
        f"verifying {rows + 1} tokens (K = {k}{tree_words(curve.width)}) costs {verify:.2f} "
        "target steps on this machine, "
        f"and {draft}, so the curve predicted from measured costs peaks at {peak:.2f}× "
        f"(K = {best}), while the textbook's, which charges a verify as one step, peaks at "
        f"{textbook_peak:.2f}× (K = {textbook}){level}."
    )
    headline += copy_sentence(runs[-1]) + uneven(runs[-1])
    return headline + more(
        jump_sentence(curve.costs),
        tree_sentence(runs[-1]),
        layers_sentence(runs[-1]),
        overhead_sentence(group),
        load_note(runs[-1]),
    )


def uneven(run: RunRecord) -> str:
    """Beside the measured speedup, not under the fold: where the run's two halves ran under
    loads more than ``loads.LOAD_GAP`` apart, the sentence that says so (``uneven_loads``)."""
    sentence = uneven_loads(run.spec_load, run.target_load)
    return f" {sentence}" if sentence else ""


def copy_sentence(run: RunRecord) -> str:
    """Where copies from the context drafted some of the run's rounds, in one sentence, why such a
    round is cheap: no draft step, only the target's pass over its rows, priced by the profile
    for the run's longest copy (and, where a draft model ran, the draft steps it saved); and
    that a longer copy costs more rows, so automatic K sizes each copy by what it rests on. ""
    without copies."""
    costs = run.costs
    if not run.copied_rounds or costs is None:
        return ""
    n = run.longest_copy
    steps = costs.pass_seconds(n + 1) / costs.t_step
    timed = (
        ""
        if n in costs.t_verify
        else " (extended from the widest pass timed)"
        if n > max(costs.t_verify)
        else " (between the widths the profile timed)"
    )
    saved = (
        f", where drafting them with the model would have added {n} draft steps "
        f"({n * costs.c:.2f} target steps)"
        if costs.c
        else ""
    )
    rounds = f"{run.copied_rounds} of {run.rounds} round{'s' * (run.rounds != 1)}"
    sized = (
        "by the length of the match it rests on"
        if run.drafter in ("suffix", "suffix-hybrid")
        else "by how many of the earlier copies were kept"
    )
    bet = f"automatic K sizes each copy {sized}"
    if run.k != "auto":
        bet = f"with K fixed at {run.k} each copy asked for {run.k} tokens; {bet}"
    return (
        f" **Copied rounds** ({rounds}; {run.copied_kept} of {run.copied} copied guesses kept) "
        f"run no draft step, only the target's pass over their rows: the longest, {n} copied "
        f"tokens, kept {run.longest_copy_kept} of them in one pass over {n + 1} rows at "
        f"{steps:.2f} target steps{timed}{saved}, and since a longer copy's pass holds more rows "
        f"and costs more, {bet}."
    )


def more(*paragraphs: str) -> str:
    """The non-empty `paragraphs` in a closed block under the note's sentence, opened by MORE; ""
    when all are empty. Blank lines around each keep Markdown working inside the HTML."""
    shown = [p.strip() for p in paragraphs if p.strip()]
    if not shown:
        return ""
    body = "\n\n".join(shown)
    return f"\n\n<details><summary>{MORE}</summary>\n\n{body}\n\n</details>"


JUMP = 0.5  # target steps: a verify one token wider costing this much more is a jump


def jump_sentence(costs) -> str:
    """Where the profile's verify cost jumps from one width to the next (torch's int4 kernel
    takes rows in blocks of 4, so 5 tokens cost far more than 4): the widest such jump as
    measured, and the acceptance rate α above which the wider K still pays more, from the
    predicted speedups; "" where the cost rises smoothly."""
    ks = sorted(costs.t_verify)
    rises = [(costs.verify_cost(b) - costs.verify_cost(a), a, b) for a, b in itertools.pairwise(ks)]
    rise, a, b = max(rises, default=(0.0, 0, 0))
    if rise < JUMP:
        return ""
    grid = [i / 100 for i in range(101)]
    wider = next((x for x in grid if costs.speedup(x, b) > costs.speedup(x, a)), None)
    verdict = (
        f"K = {b} pays more than K = {a} only when α ≥ {wider:.2f}"
        if wider is not None
        else f"K = {b} never pays more than K = {a}"
    )
    return (
        f" On this machine checking {b + 1} tokens costs {costs.verify_cost(b):.2f} target "
        f"steps but {a + 1} tokens only {costs.verify_cost(a):.2f}: the cost rises in a jump, so "
        f"{verdict}, and automatic K weighs exactly this."
    )


def tree_sentence(run: RunRecord) -> str:
    """Where the run asked for a tree width above 1: what a fishbone of that width costs against
    the chain at the run's K, from the profile (``StepCosts.pass_seconds``), what its siblings
    are worth from the ones this run saw kept (``policy.AutoK``'s own pricing), and how many
    rounds were trees; "" for a chain, a run without a profile, or copied drafts only."""
    costs, width = run.costs, run.tree_width
    if width < 2 or costs is None or not costs.t_draft:
        return ""
    if run.temperature == 0:
        return (
            f" **Trees:** at T = 0 the draft's q is one-hot, so a tree of width {width} keeps "
            "what the chain keeps: every round ran as a chain."
        )
    k = run.k if run.k != "auto" else max(1, round(run.mean_k))
    rows = {1: k + 1, width: 1 + k * width}
    steps = {w: costs.pass_seconds(n) / costs.t_step for w, n in rows.items()}
    timed = "" if rows[width] - 1 in costs.t_verify else " (extended from the widest pass timed)"
    policy = AutoK(costs, max_width=width)
    policy.siblings = SiblingAcceptance(list(run.sibling_judged), list(run.sibling_kept))
    rates = [min(run.alpha, 1.0)] * k
    speedup = {
        w: expected_tree_tokens(rates, k, policy.sibling_chance(w) if w > 1 else 0.0)
        * costs.t_step
        / policy.seconds(k, "model", w)
        for w in rows
    }
    nodes, kept = sum(run.sibling_judged[:1]), sum(run.sibling_kept)  # each tried a 2nd guess
    seen = (
        f"a sibling was kept at {kept} of the {nodes} nodes whose first guess was rejected"
        if nodes
        else f"no sibling was tried, so each stands at the policy's prior of {SIBLING_PRIOR:g}"
    )
    pays = "pays" if speedup[width] > speedup[1] else "does not pay"
    chose = (
        f"automatic K chose a tree in {run.tree_rounds} of {run.rounds} rounds"
        if run.k == "auto"
        else f"{run.tree_rounds} of {run.rounds} rounds were trees (K is fixed, so the width is "
        "too; with Auto K the policy chooses it)"
    )
    return (
        f" **Trees:** at K = {k} a fishbone of width {width} is one pass over {rows[width]} "
        f"rows, {steps[width]:.2f} target steps here{timed}, against {steps[1]:.2f} for the "
        f"chain's {rows[1]} rows; {seen}. At α = {rates[0]:.2f} that predicts "
        f"{speedup[width]:.2f}× the target alone for the tree and {speedup[1]:.2f}× for the "
        f"chain: a tree {pays} on this machine, and {chose}."
    )


def layers_sentence(run: RunRecord) -> str:
    """On a GPU, why the draft step costs what it does, from the profile's c and the layer counts:
    at batch 1 a step is host-side dispatch per layer, not memory traffic per parameter
    (docs/BENCHMARKS.md, "GPU (measured on an H200)"); "" on a CPU or without a draft model."""
    t_step, t_draft = run.cost_t_step, run.cost_t_draft
    target, draft = run.target_layers, run.draft_layers
    if not run.device.startswith("cuda") or not (t_step and t_draft and draft):
        return ""
    sentence = (
        f" On a GPU at batch 1 a step costs per layer, not per parameter: the draft's {draft} "
        f"layers cost {t_draft / t_step:.2f} of the target's {target}"
    )
    if run.draft_step == "graph":
        return sentence + ", its step replayed from one captured CUDA graph." + baseline(run)
    sentence += (
        f" ({draft / target:.2f} by layer count); a draft step captured as a CUDA graph "
        "(SPECDEMO_DRAFT_STEP=graph) launches all its kernels in one call"
    )
    captured = run.cost_t_draft_captured
    if captured:
        sentence += f", and measured here costs {captured / t_step:.2f} of a target step"
    return sentence + "." + baseline(run)


def baseline(run: RunRecord) -> str:
    """Which target the speedup is against: both runs pass the target the same way."""
    if run.target_step == "graph":
        return (
            " The target's passes ran from captured CUDA graphs in both runs, so the speedup is "
            "against a captured target alone."
        )
    return (
        f" The target's passes ran {run.target_step or 'eager'} in both runs, so the speedup is "
        "against an eager target alone, whose step waits on the host; a captured one "
        "(SPECDEMO_TARGET_STEP=graph) is the stronger baseline."
    )


def load_note(run: RunRecord) -> str:
    """When the target alone's steps took more than BUSY times the profile's price, or less
    than 1/BUSY (``RunRecord.target_load``), the machine's load changed since the profile:
    say by how much, that automatic K priced its choices at the load it measured, and on how
    many threads the runs computed where other work left fewer than every core; "" otherwise.
    (The draft step is not compared: the engine's includes its sampling, the profile's does
    not.)"""
    load = run.target_load
    if not load or 1 / BUSY <= load <= BUSY:
        return ""
    note = (
        f" *The machine's load changed since the profile: this run's target steps took "
        f"{load:.2f}× the profiled time, so its measured speedup carries that load."
    )
    if run.policy_load:
        note += (
            f" Automatic K priced every choice at the load it measured on its own target passes "
            f"({run.policy_load:.1f}× the profile), so a load that slows both models alike "
            "changes neither its K nor the curves, which keep the profile's ratios; a draft "
            "slowed more than the target counts as a dearer draft."
        )
    else:
        note += " The curves use the profile, timed under one load."
    cores = usable_cores()  # the count the race's threads were fitted to
    if run.threads and run.device == "cpu" and run.threads < cores:
        plural = "thread" if run.threads == 1 else "threads"
        note += (
            f" Both runs computed on {run.threads} {plural} of this machine's {cores} cores: "
            "other processes were using the rest, and a step spread over a core they hold "
            "waits for it."
        )
    return note + "*"


def overhead_sentence(group: list[RunRecord]) -> str:
    """The measured runs' prefill and bookkeeping share, and how close they came to their own
    prediction (mean measured / predicted speedup), where recorded."""
    splits = [(r, s) for r in group if (s := r.time_split)]
    seconds = sum(r.spec_seconds for r, _ in splits)
    if not seconds:
        return ""
    share = sum(s["prefill"] + s["other"] for _, s in splits) / seconds
    sentence = (
        f" The measured runs also spend {share:.0%} of their time on the prompt's prefill and "
        "per-round bookkeeping, which neither curve counts"
    )
    ratios = [e for r in group if (e := r.efficiency) is not None]
    if ratios:
        sentence += f"; they reach {mean(ratios):.0%} of the speedup predicted at their K"
    return sentence + "."


def position_counts(runs: list[RunRecord]) -> tuple[list[int], list[int]]:
    """Summed over `runs`: per draft position, the rounds that judged it and those that kept it."""
    judged, kept = [], []
    for r in runs:
        for totals, counts in ((judged, r.position_judged), (kept, r.position_kept)):
            totals += [0] * (len(counts) - len(totals))
            for i, n in enumerate(counts):
                totals[i] += n
    return judged, kept
