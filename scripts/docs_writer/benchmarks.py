"""docs/BENCHMARKS.md's blocks, in its sections' order: the current run, copies from the
context and their targets, beside busy processes and four visitors at once, judging the whole
block, token trees, which 4-bit kernel, start-up and memory, and the GPU (measured on an H200,
predicted from the dispatch model). Each is drawn from the run its lead line names."""

import json
import re
import statistics

from docs_writer.cells import nth_table, pct, span, table, temp, x, xs, yes
from docs_writer.core import BENCH, ROOT, TARGETS, load
from docs_writer.runs import (
    CPUS,
    CURRENT,
    DEFAULT_CHECK,
    EDIT_DRAFTERS,
    EDITS,
    cpu_of,
    current_cell,
    current_cells,
    kernel_of,
    kernel_picked,
    laptops,
    lead,
    leads,
    recorded,
    step_rows,
)
from specdemo.bench import dispatch_measure
from specdemo.bench import report as bench_report
from specdemo.cost import dispatch

# ------------------------------------------------------------------ the current run (current.json)


def current_lead() -> str:
    """The current run's lead line: where, when, how, from the JSON."""
    r = load(CURRENT)
    m, s = r["machine"], r["settings"]
    sets = load_prompt_counts(s["sets"])
    return (
        f"Measured {m['date']} on a {cpu_of(m)}, the embedded pair in 4-bit "
        f"({kernel_of(r)}), the draft's head over the {r['draft_head']['rows']:,} token ids the "
        f"target writes most often, torch {m['torch'].split('+')[0]}: every prompt of each set "
        f"({sets}), {s['max_new_tokens']} new tokens, "
        f"T {' and '.join(temp(t) for t in s['temperatures'])}, "
        f"{s['repeats']} run each. Each method ran beside the target alone on the same prompt and "
        "seed, interleaved; each figure is the median over a set's prompts of tokens per second "
        "against the target alone (`bench/current.json`)." + remeasured(s)
    )


def remeasured(settings: dict) -> str:
    """A sentence on the sets a run measured again, and why, when it did."""
    again = settings.get("remeasured")
    if not again:
        return ""
    return (
        f" The {' and '.join(again['sets'])} set was measured again in a second pass, the same "
        f"way, because {again['why']}; the step costs are {again['step_costs']}."
    )


def load_prompt_counts(names: list[str]) -> str:
    prompts = json.loads((ROOT / "specdemo" / "data" / "bench_prompts.json").read_text())
    return ", ".join(f"{name} {len(prompts[name])}" for name in names)


def current() -> str:
    """Every method of the current run against the target alone, per set and temperature."""
    r = load(CURRENT)
    rows = []
    for name, t in current_cells(r):
        auto = current_cell(r, name, t, "model, token")
        cells = [current_cell(r, name, t, m, k) for m, k in (
            ("model, token", 3), ("model, block", 3), ("model, token", "auto"),
            ("model, block", "auto"), ("model, tree auto, token", "auto"),
            ("hybrid, token", "auto"))]  # fmt: skip
        marks = [x(c["speedup"]) for c in cells]
        marks[2] = f"**{marks[2]}**"
        rows.append([name, temp(t), f"{auto['baseline_tok_s']:.2f}", x(auto["peer_speedup"]),
                     *marks, f"{auto['mean_k']:.2f}", f"{auto['alpha']:.2f}"])  # fmt: skip
    header = ["set", "T", "target alone tok/s", "assisted generation", "K = 3", "K = 3, block",
              "**automatic K**", "automatic K, block", "automatic K and tree width",
              "hybrid, automatic K", "automatic K: drafts a pass", "α"]  # fmt: skip
    return table(header, rows)


def current_steps() -> str:
    r = load(CURRENT)
    head = r["draft_head"]["rows"]
    return table(
        ["", "ms", "relative to one target step"],
        step_rows(r["step_costs"], f"draft step (head over {head:,} ids, eager)"),
    )


# ----------------- edits: copying from the context (edits.json, edits-drafters.json, default.json)


# The drafters run, in the tables' order: (drafter, heading).
EDIT_METHODS = [("suffix", "suffix copy"), ("suffix-hybrid", "**suffix hybrid**")]
DRAFTER_METHODS = [
    ("model", "draft model"),
    ("lookup", "prompt lookup"),
    ("hybrid", "hybrid"),
    ("suffix", "suffix copy"),
]


def run_lead(name: str, what: str) -> str:
    """A bench run's lead line: where, when, how, from the JSON."""
    r = load(name)
    m, s = r["machine"], r["settings"]
    peer = {
        "lookup": "transformers' prompt lookup",
        "assisted": "transformers' assisted generation",
    }.get(s.get("peer", "assisted"), "no peer")
    return (
        f"Measured {m['date']} on a {cpu_of(m)}, the embedded pair in 4-bit ({kernel_of(r)}), "
        f"the draft's head over {r['draft_head']['rows']:,} ranked ids, torch "
        f"{m['torch'].split('+')[0]}: {what} every prompt of each set "
        f"({load_prompt_counts(s['sets'])}), up to {s['max_new_tokens']} new tokens, "
        f"T {' and '.join(temp(t) for t in s['temperatures'])}, {s['repeats']} run each, every "
        f"method and {peer} beside the target alone on the same prompt and seed, interleaved; "
        f"medians over a set's prompts (`bench/{name}`)."
    )


# The first columns of the copy tables: the cell, the target alone, transformers' prompt lookup.
AGAINST_LOOKUP = ["set", "T", "target alone tok/s", "transformers' prompt lookup"]


def against_lookup(name: str, t: float, cell: dict) -> list[str]:
    """A copy table's first cells (AGAINST_LOOKUP) from one of the row's bench cells."""
    return [name, temp(t), f"{cell['baseline_tok_s']:.2f}", x(cell["peer_speedup"])]


def edits() -> str:
    """Copies from the suffix index against the target alone and transformers' prompt lookup
    on the edits and copy sets, at automatic K, side by side."""
    r = load(EDITS)
    rows = []
    for name, t in current_cells(r):
        cells = {d: current_cell(r, name, t, d) for d, _ in EDIT_METHODS}
        hybrid = cells["suffix-hybrid"]
        marks = [x(cells[d]["speedup"]) for d, _ in EDIT_METHODS]
        marks[-1] = f"**{marks[-1]}**"
        rows.append(
            [
                *against_lookup(name, t, hybrid),
                *marks,
                x(hybrid["vs_peer"]),
                pct(hybrid["copied_share"]),
                pct(hybrid["wasted_share"]),
                f"{hybrid['tokens_per_pass']:.2f}",
            ]
        )
    header = [
        *AGAINST_LOOKUP,
        *(h for _, h in EDIT_METHODS),
        "suffix hybrid / transformers' lookup",
        "suffix hybrid: guesses copied",
        "suffix hybrid: rows wasted",
        "suffix hybrid: tokens a pass",
    ]
    return table(header, rows)


def edits_drafters() -> str:
    """Each drafter at automatic K on the edits and copy sets, side by side in one run."""
    r = load(EDIT_DRAFTERS)
    rows = []
    for name, t in current_cells(r):
        cells = [current_cell(r, name, t, d) for d, _ in DRAFTER_METHODS]
        rows.append(
            [
                *against_lookup(name, t, cells[0]),
                *(x(c["speedup"]) for c in cells),
                *(pct(c["wasted_share"]) for c in cells),
            ]
        )
    header = [
        *AGAINST_LOOKUP,
        *(h for _, h in DRAFTER_METHODS),
        *(f"{h}: rows wasted" for _, h in DRAFTER_METHODS),
    ]
    return table(header, rows)


def edit_targets() -> list[tuple]:
    """What copying from the context is to reach (targets.toml's [copies]): (measure, JSON,
    drafter, set, T, key, bound); key "vs_peer" is against transformers' prompt lookup,
    "wasted_share" at most. The suffix hybrid ran on the edits set; on the copy set, the suffix
    copy."""
    c = TARGETS["copies"]
    hybrid, lookup = (EDITS, "suffix-hybrid", "edits"), "against transformers' prompt lookup"
    return [
        ("edits set, T 0, suffix hybrid", *hybrid, 0.0, "speedup", c["edits_t0"]),
        ("edits set, T 1, suffix hybrid", *hybrid, 1.0, "speedup", c["edits_t1"]),
        ("copy set, T 0, suffix copy", EDIT_DRAFTERS, "suffix", "copy", 0.0, "speedup", c["copy"]),
        ("copy set, T 1, suffix copy", EDIT_DRAFTERS, "suffix", "copy", 1.0, "speedup", c["copy"]),
        (f"{lookup}, edits, T 0", *hybrid, 0.0, "vs_peer", c["against_lookup"]),
        (f"{lookup}, edits, T 1", *hybrid, 1.0, "vs_peer", c["against_lookup"]),
        ("verified rows not kept, edits, T 0", *hybrid, 0.0, "wasted_share", c["wasted"]),
        ("verified rows not kept, edits, T 1", *hybrid, 1.0, "wasted_share", c["wasted"]),
    ]


def edits_targets() -> str:
    """Each target for copies against the median in its cell (`edit_targets`), and the default
    on code and prose against the draft model run beside it."""
    check = load(DEFAULT_CHECK)
    floor = TARGETS["copies"]["default_vs_model"]
    rows = []
    for measure, name, drafter, prompts, t, key, bound in edit_targets():
        value = current_cell(load(name), prompts, t, drafter)[key]
        if key == "wasted_share":
            rows.append([measure, f"≤ {bound:.0%}", pct(value), yes(value <= bound)])
        else:
            rows.append([measure, f"≥ {bound:g}×", x(value), yes(value >= bound)])
    for name, t in current_cells(check):
        hybrid, beside = (current_cell(check, name, t, d) for d in ("suffix-hybrid", "model"))
        same = hybrid["tokens_per_pass"] == beside["tokens_per_pass"]
        ratio = hybrid["speedup"] / beside["speedup"]
        rounds = "the same tokens a pass" if same else "other rounds"
        rows.append(
            [
                f"{name}, T {temp(t)}: the default against the draft model",
                f"no lower, within one run's timing noise ({1 - floor:.0%})",
                f"{x(hybrid['speedup'])} against {x(beside['speedup'])} ({rounds})",
                yes(ratio >= floor),
            ]
        )
    return table(["measure", "target", "measured", "met"], rows)


def default_check() -> str:
    """The default drafter against the draft model (the library's default before) on code and
    prose, both at automatic K, side by side."""
    r = load(DEFAULT_CHECK)
    rows = []
    for name, t in current_cells(r):
        model, hybrid = (current_cell(r, name, t, d) for d in ("model", "suffix-hybrid"))
        rows.append(
            [
                name,
                temp(t),
                f"{model['baseline_tok_s']:.2f}",
                x(model["speedup"]),
                f"**{x(hybrid['speedup'])}**",
                x(hybrid["speedup"] / model["speedup"]),
                pct(hybrid["copied_share"]),
                x(model["peer_speedup"]),
            ]
        )
    header = [
        "set",
        "T",
        "target alone tok/s",
        "draft model, automatic K",
        "**suffix hybrid**, automatic K",
        "suffix hybrid / draft model",
        "suffix hybrid: guesses copied",
        "transformers' assisted generation",
    ]
    return table(header, rows)


def copy_widths() -> str:
    """A long copy's pass: measured against the straight line between the widths the profile
    times, in target steps."""
    r = load("copy-widths.json")
    shown = [w for w in r["widths"] if w["rows"] in (2, 5, 9, 13, 17, 21, 25, 29, 33)]
    rows = [
        [
            w["rows"],
            f"{w['measured_steps']:.2f}",
            "timed" if w["timed_by_profile"] else f"{w['line_steps']:.2f}",
        ]
        for w in shown
    ]
    return table(["rows", "measured (target steps)", "the profile's line"], rows)


def copy_widths_sentence() -> str:
    r = load("copy-widths.json")
    return (
        f"Between the widths the profile times, the line is off by {pct(r['mean_error'])} on "
        f"average and {pct(r['max_error'])} at most over the widths between them (10–16 and "
        f"18–32 rows); one target step took {1000 * r['t_step']:.1f} ms (`bench/copy-widths.json`, "
        f"measured {r['machine']['date']} on a {cpu_of(r['machine'])})."
    )


# ---------------------------------------------- beside busy processes (busy.json, room-races.json)


def where(cell: dict) -> str:
    """A bench cell's set and temperature: "prose, T 1"."""
    return f"{cell['prompt_set']}, T {temp(cell['temperature'])}"


def busy_targets() -> str:
    """The issue's targets read off busy.json: automatic K against the target alone and
    against the best fixed K, worst cell per load."""
    best = bench_report.best_fixed_vs_auto(load("busy.json"))
    rows = []
    for n in sorted({b["busy"] for b in best}):
        cells = [b for b in best if b["busy"] == n]
        low = min(cells, key=lambda b: b["auto_speedup"])
        low_best = min(cells, key=lambda b: b["auto_vs_best"])
        rows.append([n, x(statistics.median(b["auto_speedup"] for b in cells)),
                     f"{x(low['auto_speedup'])} ({where(low)})",
                     f"{low_best['auto_vs_best']:.2f} ({where(low_best)})"])  # fmt: skip
    header = ["busy processes", "auto K / target alone, median of cells", "lowest cell",
              "auto K / best fixed K, lowest cell"]  # fmt: skip
    return table(header, rows)


def room_races() -> str:
    """Four visitors' default races sent at once (room-races.json)."""
    result = load("room-races.json")
    rows = [[r["seed"], f"**{x(r['speedup'])}**", f"{r['mean K']:.1f}", f"{r['auto tok/s']:.2f}",
             f"{r['target alone tok/s']:.2f}", f"{r['waited (s)']:.0f}"]
            for r in result["races"]]  # fmt: skip
    header = ["visitor (seed)", "speedup the page showed", "mean K", "auto K tok/s",
              "target alone tok/s", "waited (s)"]  # fmt: skip
    return table(header, rows)


# ----------------------- judging the whole block (block-drafts.json, block.json, tree-judges.json)


BLOCK_RUNS = [("block-drafts.json", "tokens a pass on the same drafts"),
              ("block.json", "the wall clock, the two judges side by side")]  # fmt: skip


def block_targets_lead() -> str:
    """Which run each of block-targets' columns comes from, and the kernel each ran."""
    runs = {name: load(name) for name, _ in BLOCK_RUNS}
    parts = [
        f"{what} from `bench/{name}` (measured {runs[name]['machine']['date']} on a "
        f"{cpu_of(runs[name]['machine'])}, {kernel_of(runs[name])})"
        for name, what in BLOCK_RUNS
    ]
    mixed = len({kernel_of(r) for r in runs.values()}) > 1
    return (
        "The summary's columns: " + "; ".join(parts) + "."
        + (" The two runs ran different 4-bit kernels." if mixed else "")
    )  # fmt: skip


def block_targets() -> str:
    """The judge's targets read off block-drafts.json (tokens a pass on the same drafts) and
    block.json (wall clock, run side by side)."""
    drafts = load("block-drafts.json")["rows"]
    side = bench_report.block_vs_token(load("block.json"))
    deep_k = TARGETS["judge"]["deep_k"]
    rows = []
    for name in dict.fromkeys(r["prompt_set"] for r in drafts):
        fixed = [r for r in drafts if r["prompt_set"] == name and r["k"] != "auto"]
        deep = [r["expected_gain"] for r in fixed if r["k"] >= deep_k]
        auto = [r["expected_gain"] for r in drafts if r["prompt_set"] == name and r["k"] == "auto"]
        wall = [c["speedup_ratio"] for c in side if c["prompt_set"] == name and c["k"] == "auto"]
        low = min(fixed, key=lambda r: r["expected_gain"])
        rows.append([name, f"{x(low['expected_gain'], 3)} (K {low['k']}, "
                     f"T {temp(low['temperature'])})", xs(deep), xs(auto), xs(wall)])  # fmt: skip
    header = ["set", "tokens/pass, block / token, K 3–5, lowest cell",
              f"the same at K ≥ {deep_k}", "the same at automatic K",
              "automatic K, wall clock block / token"]  # fmt: skip
    return table(header, rows)


def tree_judges() -> str:
    """A fishbone judged root to leaf (token) and leaf to root (traversal), tokens per pass
    counted, the block judge paired with the token judge of the same prompt and seed."""
    result = load("tree-judges.json")
    s = result["settings"]
    by = {(r["set"], r["judge"]): r for r in result["rows"]}
    rows = []
    for name in dict.fromkeys(r["set"] for r in result["rows"]):
        token, block = by[name, "token"], by[name, "block"]
        rows.append([name, token["runs"], f"{token['tokens_per_pass']:.2f}",
                     f"{block['tokens_per_pass']:.2f}",
                     f"**{block['vs_token']:+.2f}** ± {block['vs_token_interval']:.2f}",
                     x(block["tokens_per_pass"] / token["tokens_per_pass"])])  # fmt: skip
    header = [f"set (K = {s['k']}, width {s['widths'][0]}, T = {temp(s['temperature'])})",
              "runs", "tokens/pass, root to leaf", "tokens/pass, traversal",
              "**traversal − root to leaf** (paired, 95%)", "ratio"]  # fmt: skip
    return table(header, rows)


# ------------------------------------------------ token trees (tree-tokens.json, trees-auto*.json)


def tree_tokens() -> str:
    """Tokens per target pass of the chain and of each fishbone width at the same K, pooled over
    every bench prompt and seed, with the paired difference to the chain and its interval."""
    result = load("tree-tokens.json")
    rows = [
        [r["set"], r["width"], r["runs"], r["rounds"], f"{r['tokens_per_pass']:.2f}",
         "—" if r["width"] == 1 else f"**{r['vs_chain']:+.2f}** ± {r['vs_chain_interval']:.2f}",
         r["siblings_kept"]]
        for r in result["rows"]
    ]  # fmt: skip
    header = ["set", "tree width", "runs", "rounds", "tokens/pass",
              "**vs the chain** (paired, 95%)", "siblings kept"]  # fmt: skip
    return table(header, rows)


def trees_auto(name: str = "trees-auto.json") -> str:
    """Automatic K with the chain only against automatic K that may choose trees, same prompts
    and seeds: the speed of each and their ratio."""
    result = load(name)
    by = {(r["prompt_set"], r["temperature"], r["drafter"]): r for r in result["rows"]}
    rows = []
    for (name, temperature, drafter), chain in by.items():
        tree = by.get((name, temperature, f"{drafter}, tree auto"))
        if tree is None:
            continue
        rows.append([
            name, temp(temperature), f"{chain['baseline_tok_s']:.2f}",
            f"{chain['ours_tok_s']:.2f}", x(chain["speedup"]), f"{tree['ours_tok_s']:.2f}",
            x(tree["speedup"]), f"{chain['tokens_per_pass']:.2f} / {tree['tokens_per_pass']:.2f}",
            f"**{x(tree['ours_tok_s'] / chain['ours_tok_s'])}**",
        ])  # fmt: skip
    header = ["set", "T", "`generate` tok/s", "auto K, chain tok/s", "speedup",
              "auto K and width tok/s", "speedup", "tokens/pass chain / auto width",
              "**auto width / chain**"]  # fmt: skip
    return table(header, rows)


# ---------------------------------------------- which 4-bit kernel (kernels-*.json, laptop-*.json)


KERNELS = {
    ("avx512", "nf4"): "bitsandbytes NF4, fused",
    ("avx2-emulated", "nf4"): "bitsandbytes NF4, dequantising",
}


def kernels() -> str:
    rows = []
    for cpu, name in CPUS.items():
        r = load(f"kernels-{cpu}.json")
        median = {k: statistics.median(v) for k, v in r.items() if k.endswith("(ms)")}
        picked = load(f"laptop-{cpu}.json")["precision"]  # what the app picked there
        for q in ("nf4", "int4"):
            one = f"{median[f'target 1 token, {q} (ms)']:.1f}"
            rows.append([
                name, KERNELS.get((cpu, q), "torch int4"),
                f"{median[f'draft step, 32k head, {q} (ms)']:.1f}",
                f"**{one}**" if q == picked else one,
                *(f"{median[f'target {n} tokens, {q} (ms)']:.1f}" for n in (2, 4, 5)),
            ])  # fmt: skip
    header = ["CPU", "kernel", "draft step (32k head)", "target, 1 token", "2 tokens",
              "4 tokens", "5 tokens"]  # fmt: skip
    return table(header, rows)


def laptop_race() -> str:
    """Each CPU's kernel and its steps in the app's own profile (the races on these runs drafted
    with an older draft head: their speedups are kept with the older runs)."""
    rows = [
        [CPUS[cpu], kernel_picked(r), f"{r['target step ms']:.1f} ms",
         f"{r['verify cost (steps) by K']['4']:.2f} steps", f"{r['ready seconds']:.0f} s"]
        for cpu, r in laptops().items()
    ]  # fmt: skip
    header = ["CPU", "kernel picked", "target step (profile)", "verify of 5 tokens",
              "ready, warm start"]  # fmt: skip
    return table(header, rows)


# -------------------------------------------------------------- start-up and memory (startup.json)


def startup() -> str:
    """scripts/startup_check.py's run: a cold start, warm starts and python app.py."""
    s = load("startup.json")
    cold, warm, app, target = s["cold start"], s["warm starts"], s["python app.py"], s["targets"]
    secs = lambda key, runs: span([r[key] for r in runs], lambda v: f"{v:.1f}")  # noqa: E731
    gb = lambda key, runs: span([r[key] for r in runs], lambda v: f"{v:.2f}")  # noqa: E731
    loaded = max(r["load_pair (s)"] for r in warm)
    resident = max(r["resident after warm-up (GB)"] for r in warm)
    peak = max(r["peak RSS (GB)"] for r in warm)
    rows = [
        ["Cold start: process start → both models converted, loaded and warmed up, from the "
         "installed chunk packages (an empty cache)",
         f"**{cold['wall (s)']:.0f} s** (peak RSS {cold['peak RSS (GB)']:.1f} GB while converting)",
         f"≤ {target['cold start (s)'] // 60:.0f} min",
         yes(cold["wall (s)"] <= target["cold start (s)"])],
        ["Warm start: process start → `load_pair()` returns",
         f"**{secs('load_pair (s)', warm)} s**",
         f"≤ {target['warm start (s)']:.0f} s", yes(loaded <= target["warm start (s)"])],
        ["Warm start with the first forward of each model (`warm_up`)",
         f"**{secs('wall (s)', warm)} s**", "—", "—"],
        ["`python app.py`: page served", f"**{secs('page served (s)', app)} s**", "—", "—"],
        ["`python app.py` on a later start: the page turns into the app (pair loaded, warmed up, "
         "step costs profiled)", f"**{secs('ready (s)', app)} s**", "—", "—"],
        ["Resident memory of the 4-bit pair after warm-up",
         f"**{gb('resident after warm-up (GB)', warm)} GB**", f"≤ {target['memory (GB)']:.0f} GB",
         yes(resident <= target["memory (GB)"])],
        ["Peak RSS during a warm start", f"**{gb('peak RSS (GB)', warm)} GB**",
         f"≤ {target['memory (GB)']:.0f} GB", yes(peak <= target["memory (GB)"])],
    ]  # fmt: skip
    return table(["", "measured", "target", "met"], rows)


# ------------------------------ GPU, measured (gpu-smoke-h200.md) and predicted (dispatch.json)


def gpu_smoke_steps() -> str:
    """The H200 report's eager target step and captured draft step, in each of its runs,
    beside the host time the dispatch model predicts for the target's step."""
    report = (BENCH / "gpu-smoke-h200.md").read_text(encoding="utf-8")
    steps = re.findall(r"^\| 5 t_step \| pass \| ([\d.]+) ms", report, re.M)
    drafts = re.findall(r"^\| 5 t_draft graph \| ran \| ([\d.]+) ms", report, re.M)
    host = load("dispatch.json")["measured"]["1.5B"]["host"]["1"] * 1e3
    runs = ["first", "second", "third"][: len(steps)]
    took = " and ".join(f"{ms} ms in the {run} run" for ms, run in zip(steps, runs, strict=True))
    return (
        f"The 28-layer target's eager step took {took}, against {host:.1f} ms predicted: the "
        "host time of this project's 2-core CPU, not the lent machine's own host. The 24-layer "
        f"draft's step captured as a CUDA graph took {' and '.join(drafts)} ms."
    )


def dispatch_alpha() -> str:
    """Where each α the dispatch model prices with was measured (dispatch.ALPHA_*)."""
    history = (BENCH / "HISTORY.md").read_text(encoding="utf-8")
    sources = [
        ("code", dispatch.ALPHA_CODE, "main.json", "the 0.5B draft, the median per-token α over "
         "K 1–4"),
        ("copy", dispatch.ALPHA_COPY, "lookup.json", "prompt lookup, the median over K 2, 4 "
         "and 8"),
        ("edits", dispatch.ALPHA_EDITS, EDITS, "the suffix copy under automatic K"),
    ]  # fmt: skip
    parts = []
    for set_name, alpha, name, what in sources:
        m = load(name)["machine"]
        older = f"docs/bench/{name}" in history and name != EDITS
        parts.append(
            f"{set_name} {alpha:.2f}, {what} (`bench/{name}`, measured {m['date']} on a "
            f"{cpu_of(m)}{recorded(m)}"
            + ("; an older run, kept in [bench/HISTORY.md](bench/HISTORY.md))" if older else ")")
        )  # fmt: skip
    return "α, greedy, on the embedded pair: " + "; ".join(parts) + "."


def dispatch_pairs() -> str:
    report = dispatch.report_from_measured(load("dispatch.json"))
    return nth_table(dispatch_measure.markdown(report), 1)


def dispatch_trees() -> str:
    """Tree passes and the fastest chain and fishbone on the H200, predicted from the dispatch
    model's measured inputs (``specdemo.cost.dispatch_trees``)."""
    from specdemo.cost import dispatch_trees as trees  # noqa: PLC0415

    measured = dispatch.report_from_measured(load("dispatch.json")).measured
    rows = []
    for p in trees.predict(measured):
        steps = " / ".join(f"{p.steps[n]:.2f}" for n in trees.TREE_ROWS)
        device = " / ".join(f"{p.device_ms[n]:.1f}" for n in trees.TREE_ROWS)
        (k, _, n, chain), (tk, w, tn, tree) = p.chain, p.tree
        rows.append([p.gpu, p.pair, steps, device, f"K = {k} ({n} rows): {x(chain)}",
                     f"K = {tk}, width {w} ({tn} rows): **{x(tree)}**"])  # fmt: skip
    sizes = " / ".join(str(n) for n in trees.TREE_ROWS)
    header = ["GPU", "pair", f"pass over {sizes} rows (target steps)", "device ms, same",
              "best chain, captured draft", "best fishbone, captured draft"]  # fmt: skip
    return table(header, rows)


BLOCKS = {
    "current-lead": current_lead,
    "current": current,
    "current-steps": current_steps,
    "edits-lead": lambda: run_lead(EDITS, "the edits set,"),
    "edits": edits,
    "edits-drafters-lead": lambda: run_lead(EDIT_DRAFTERS, "the edits and copy sets,"),
    "edits-drafters": edits_drafters,
    "edits-targets": edits_targets,
    "default-lead": lambda: run_lead(DEFAULT_CHECK, "the code and prose sets,"),
    "default-check": default_check,
    "copy-widths-sentence": copy_widths_sentence,
    "copy-widths": copy_widths,
    "busy-targets": busy_targets,
    "room-races": room_races,
    "block-targets-lead": block_targets_lead,
    "block-targets": block_targets,
    "tree-tokens": tree_tokens,
    "trees-auto-avx512": lambda: trees_auto("trees-auto-avx512.json"),
    "tree-judges": tree_judges,
    "kernels": kernels,
    "laptop-race": laptop_race,
    "startup": startup,
    "gpu-smoke-steps": gpu_smoke_steps,
    "lead-dispatch": lambda: lead("dispatch.json", "Predicted from inputs measured"),
    "dispatch-alpha": dispatch_alpha,
    "dispatch-pairs": dispatch_pairs,
    "dispatch-trees": dispatch_trees,
    **leads(
        "busy",
        "room-races",
        "tree-tokens",
        "trees-auto-avx512",
        "tree-judges",
        "kernels-avx512",
        "laptop-avx512",
        "laptop-avx2-emulated",
        "startup",
    ),
}
