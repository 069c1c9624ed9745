"""``python -m specdemo bench``: specdemo against target-only and assisted `generate`.

For each temperature and k, every prompt runs three ways, interleaved, on the same model
objects: transformers `generate` with the target alone (baseline), transformers assisted
generation with the same draft and k (peer), and specdemo. Medians over prompts, plus the
measured step costs that predict the speedup, go to JSON, Markdown and (when plotly is
installed) a chart. Every time comes from ``lm.Stopwatch``, which waits for a CUDA device; all
three ways run under a ``ForwardTimer``, so each pays the same wait around every model pass.
With ``--busy 0 1 2`` every prompt's runs are repeated beside that many busy processes of the
bench's own (``busy.busy``), each load in turn, so that quiet and loaded cells are measured side
by side; the step costs automatic K prices with are profiled once, on the quiet machine, as an
app profiles at start-up before its users' load arrives. Each prompt's runs under one load use
the torch threads the app would (``threads.fitted``: the cores the load leaves), or
``--threads N``.
"""

import dataclasses
import importlib.util
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path

from tqdm import tqdm

from specdemo.bench.busy import busy
from specdemo.bench.machine import machine
from specdemo.bench.report import best_fixed_vs_auto, chart, markdown
from specdemo.bench.runs import coverage, run_hf, run_ours, run_plain, step_costs
from specdemo.cost.theory import StepCosts, expected_speedup
from specdemo.decode.rounds import pooled_expected_gain, pooled_judge_gain
from specdemo.defaults import DEFAULTS
from specdemo.draft.draft_vocab import draft_head
from specdemo.draft.drafters import auto_head_rows
from specdemo.judge.sampling import SamplingConfig
from specdemo.runtime.threads import fitted
from specdemo.text import encode_prompt

PROMPTS_FILE = files("specdemo") / "data" / "bench_prompts.json"  # {set name: [prompt, ...]}


@dataclass
class Row:
    prompt_set: str
    temperature: float
    drafter: str
    k: int | str  # a fixed k, or "auto"
    baseline_tok_s: float
    peer_tok_s: float | None
    ours_tok_s: float
    speedup: float  # ours / baseline, median over prompts
    peer_speedup: float | None
    vs_peer: float | None  # ours / peer
    kept_rate: float  # accepted / drafted
    alpha: float  # accepted / (accepted + rejected): the formulas' alpha
    tokens_per_pass: float
    c: float  # measured t_draft / t_step (0 for prompt lookup)
    overhead: float  # share of wall time outside model forward passes
    bookkeeping: float = 0.0  # share of wall time outside prefill, proposals and verify passes
    # The cost model's view, for a fixed k with one kind of draft (None for auto k and hybrid):
    verify_cost: float | None = None  # t_verify(k+1) / t_step
    predicted: float | None = None  # from measured step costs
    paper: float | None = None  # (1 - a^(k+1)) / ((1 - a)(c k + 1))
    efficiency: float | None = None  # speedup / predicted
    predicted_tpp: float | None = None  # the same, with the measured tokens per pass
    efficiency_tpp: float | None = None  # speedup / predicted_tpp: what the loop loses
    busy: int = 0  # busy processes running beside the cell's runs (``busy.busy``)
    # Prompt runs of the cell whose busy processes ended before the runs did: a cell with any
    # is flagged here and left out of the tables (``bench.report.held``).
    busy_died: int = 0
    mean_k: float = 0.0  # drafted tokens per target pass
    judge: str = "token"  # who judged the drafts: "token" or "block"
    # Drafts kept over what judging token by token keeps of the same drafts with the same
    # uniforms, pooled over the cell's chain rounds (1.0 for the token judge).
    judge_gain: float | None = None
    # Block rounds only: tokens a pass the block gives over token by token's on the same drafts,
    # each on average over its uniforms, pooled over the cell's rounds (``Stats.expected_gain``).
    expected_gain: float | None = None
    # Drafts copied from the context over all drafts, and verified rows neither kept nor a
    # pass's first row over all rows verified (``Stats.wasted_share``): medians over prompts.
    copied_share: float | None = None
    wasted_share: float | None = None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def bench(pair, args, progress=True) -> dict:
    prompt_sets = json.loads(PROMPTS_FILE.read_text(encoding="utf-8"))
    quick = args.quick
    ks = args.ks or ([2, 4, "auto"] if quick else [*range(1, 9), "auto"])
    temps = args.temperatures or ([0.0, 1.0] if quick else [0.0, 0.7, 1.0])
    names = args.sets or (["code", "prose"] if quick else ["code", "prose", "copy", "edits"])
    per_set = args.per_set or (2 if quick else None)
    sets = {name: prompt_sets[name][:per_set] for name in names}
    max_new_tokens = args.max_new_tokens or (64 if quick else 96)
    encoded = {
        name: [encode_prompt(pair.tokenizer, p) for p in prompts] for name, prompts in sets.items()
    }
    first = next(iter(encoded.values()))[0]
    # Warm-up: one short run of each method (and the auto-k profile), so lazy init stays out.
    run_hf(pair, first, SamplingConfig(0.0), 8, 0)
    for kind in args.drafter:
        run_ours(pair, first, "auto" if "auto" in ks else 3, SamplingConfig(0.0), 8, 0, args, kind)
    fixed = [k for k in ks if k != "auto"]
    costs = step_costs(pair, first, fixed or [1], args.draft_head_rows)
    head_rows = args.draft_head_rows
    head = draft_head(pair.draft, auto_head_rows(pair.draft) if head_rows == "auto" else head_rows)
    written = {name: [] for name in encoded}  # the target's own tokens (target-only generate)

    # Each drafter at each tree width and judge: "model" is the chain, "model, tree 3" its
    # fishbone; with two judges, ", block" or ", token" names the judge.
    judges = judges_of(args)
    methods = {
        (kind if width == 1 else f"{kind}, tree {width}")
        + (f", {judge}" if len(judges) > 1 else ""): (kind, width, judge)
        for kind in args.drafter
        for width in getattr(args, "tree_widths", None) or [1]
        for judge in judges
    }
    loads = getattr(args, "busy", None) or [0]
    device, wanted = pair.target.device, getattr(args, "threads", "auto")
    total = sum(len(v) for v in encoded.values()) * len(temps) * args.repeats * len(loads)
    bar = tqdm(total=total, desc="bench", disable=not progress)
    rows, plains = [], []
    for set_name, prompts in encoded.items():
        for temp in temps:
            sampling = SamplingConfig(temp)
            # A width chosen automatically goes with automatic K only.
            cells = {
                (method, k, n): []
                for n in loads
                for method, (_, width, _) in methods.items()
                for k in ks
                if width != "auto" or k == "auto"
            }
            plain = {n: [] for n in loads}
            threads_used = {n: [] for n in loads}
            died = dict.fromkeys(loads, 0)  # prompt runs whose busy processes ended early
            for i, ids in enumerate(prompts):
                for rep in range(args.repeats):
                    seed = 1000 * i + rep
                    for n in loads:
                        with busy(n) as procs, fitted(device, wanted) as used:
                            base = run_cells(
                                pair,
                                ids,
                                sampling,
                                max_new_tokens,
                                seed,
                                args,
                                ks,
                                methods,
                                n,
                                cells,
                                plain[n],
                            )
                            died[n] += not procs.held
                        threads_used[n].append(used)
                        if n == loads[0]:
                            written[set_name] += base
                        bar.update()
            for n in loads:
                plains.append(plain_row(set_name, temp, plain[n], n, threads_used[n], died[n]))
                if died[n]:
                    print(
                        f"warning: busy processes ended early in {died[n]} of {set_name}'s "
                        f"runs at T {temp:g} under {n} busy: those cells are flagged "
                        "(busy_died) and left out of the tables",
                        file=sys.stderr,
                    )
            for (kind, k, n), runs in cells.items():
                rows.append(row(set_name, temp, kind, k, runs, costs, n, methods[kind][2]))
                rows[-1].busy_died = died[n]
    bar.close()
    return {
        "machine": machine(pair.target.device),
        "models": asdict(pair.summary),
        "settings": {
            "ks": ks,
            "temperatures": temps,
            "sets": list(sets),
            "max_new_tokens": max_new_tokens,
            "repeats": args.repeats,
            "draft_head_rows": args.draft_head_rows,
            "adaptive": args.adaptive,
            "drafters": args.drafter,
            "tree_widths": getattr(args, "tree_widths", None) or [1],
            "verify": judges,
            "busy": loads,
            "peer": peer_of(args),
        },
        "step_costs": asdict(costs),
        "draft_head": {
            "rows": head.rows if head is not None else None,
            # The share of the target's own tokens (target-only generate, every T) the head holds.
            "coverage": {name: coverage(tokens, head) for name, tokens in written.items()},
        },
        "plain_loop": plains,
        "rows": [asdict(r) for r in rows],
    }


def peer_of(args) -> str | None:
    """The peer each prompt's runs are compared with: transformers' assisted generation with the
    same draft ("assisted"), its prompt lookup ("lookup"), or None (--no-peer)."""
    return None if args.no_peer else getattr(args, "peer", "assisted")


def judges_of(args) -> list[str]:
    """The bench's judges, in order, each once (--verify token,block or token block)."""
    given = getattr(args, "verify", None) or [[DEFAULTS["verify"]]]
    names = [name for group in given for name in ([group] if isinstance(group, str) else group)]
    return list(dict.fromkeys(names))


def run_cells(pair, ids, sampling, max_new_tokens, seed, args, ks, methods, n, cells, plain):
    """One prompt's runs under one load, interleaved: target-only generate, the engine's plain
    loop, and for each k the peer and each method; appends to `cells` (keyed (method, k, n))
    and `plain`, and returns generate's tokens."""
    n_base, t, tokens = run_hf(pair, ids, sampling, max_new_tokens, seed)
    base = n_base / t
    if not getattr(args, "no_plain", False):
        plain.append((base, run_plain(pair, ids, sampling, max_new_tokens, seed)))
    for k in ks:
        peer = None
        if peer_of(args):
            n_p, t_p, _ = run_hf(pair, ids, sampling, max_new_tokens, seed, k, peer_of(args))
            peer = n_p / t_p
        for method, (kind, width, judge) in methods.items():
            if (method, k, n) not in cells:
                continue
            stats, overhead = run_ours(
                pair, ids, k, sampling, max_new_tokens, seed, args, kind, width, judge
            )
            cells[method, k, n].append((base, peer, stats, overhead))
    return tokens


def plain_row(
    set_name: str, temp: float, runs: list, n: int = 0, threads=(), died: int = 0
) -> dict:
    """The engine's plain target loop against target-only generate: medians over prompts; the
    torch threads each prompt's runs used under `n` busy processes, and how many of those runs'
    busy processes ended before the runs did (`died`)."""
    return {
        "prompt_set": set_name,
        "temperature": temp,
        "busy": n,
        "busy_died": died,
        "threads": list(threads),
        "generate_tok_s": median([b for b, _ in runs]),
        "plain_tok_s": median([p for _, p in runs]),
        "ratio": median([p / b for b, p in runs]),
    }


def row(
    set_name: str,
    temp: float,
    kind: str,
    k,
    runs: list,
    costs: StepCosts,
    n: int = 0,
    judge: str = "token",
) -> Row:
    """Medians over one cell's runs: (baseline tok/s, peer tok/s, our Stats, overhead); `kind`
    names the method ("model", "lookup, tree 2", "model, block"), its drafter first."""
    drafter = kind.split(",")[0]
    alpha = median([s.alpha for _, _, s, _ in runs])
    speedup = median([s.tokens_per_s / b for b, _, s, _ in runs])
    tpp = median([s.tokens_per_pass for _, _, s, _ in runs])
    if drafter in ("lookup", "suffix"):  # a copy costs no model step
        costs = dataclasses.replace(costs, t_draft=0.0)
    cell = Row(
        prompt_set=set_name,
        temperature=temp,
        drafter=kind,
        k=k,
        baseline_tok_s=median([b for b, _, _, _ in runs]),
        peer_tok_s=median([p for _, p, _, _ in runs]),
        ours_tok_s=median([s.tokens_per_s for _, _, s, _ in runs]),
        speedup=speedup,
        peer_speedup=median([p / b if p else None for b, p, _, _ in runs]),
        vs_peer=median([s.tokens_per_s / p if p else None for _, p, s, _ in runs]),
        kept_rate=median([s.kept_rate for _, _, s, _ in runs]),
        alpha=alpha,
        tokens_per_pass=tpp,
        c=costs.c,
        overhead=median([o for _, _, _, o in runs]),
        bookkeeping=median([s.bookkeeping_share for _, _, s, _ in runs]),
        busy=n,
        mean_k=median([s.drafted / s.rounds if s.rounds else 0.0 for _, _, s, _ in runs]),
        judge=judge,
        judge_gain=pooled_judge_gain([s for _, _, s, _ in runs]),
        expected_gain=pooled_expected_gain([s for _, _, s, _ in runs]),
        copied_share=median([s.copied / s.drafted if s.drafted else 0.0 for _, _, s, _ in runs]),
        wasted_share=median([s.wasted_share for _, _, s, _ in runs]),
    )
    if k == "auto" or drafter in (
        "hybrid",
        "suffix-hybrid",
    ):  # k or the draft's cost changes from round to round
        return cell
    predicted, predicted_tpp = costs.speedup(min(alpha, 1.0), k), costs.speedup_at(tpp, k)
    return dataclasses.replace(
        cell,
        verify_cost=costs.verify_cost(k),
        predicted=predicted,
        paper=expected_speedup(alpha, k, costs.c),
        efficiency=speedup / predicted if predicted else None,
        predicted_tpp=predicted_tpp,
        efficiency_tpp=speedup / predicted_tpp,
    )


def main(pair, args) -> int:
    """Bench a loaded, warmed-up pair with the CLI's arguments; write JSON, Markdown and HTML."""
    if args.self_draft:
        pair = dataclasses.replace(pair, draft=pair.target)
    result = bench(pair, args, progress=not args.json)
    result["best_fixed_vs_auto"] = best_fixed_vs_auto(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=2))
    (out / "bench.md").write_text(markdown(result))
    written = ["bench.json", "bench.md"]
    if importlib.util.find_spec("plotly") is not None:  # optional: a GPU box may lack it
        chart(result).write_html(out / "bench.html", include_plotlyjs="cdn")
        written.append("bench.html")
    if args.json:
        print(json.dumps(result))
    else:
        print(markdown(result))
        print(f"step costs: {json.dumps(result['step_costs'])}")
        print(f"wrote {out}/{', '.join(written)}")
    return 0
