"""The bench's result as tables and a chart: every cell in Markdown, the best fixed k next to
automatic k per prompt set, the measured speedup against the predicted one in plotly, and one
summary table over several runs (``python -m specdemo.bench.report DIR...``, which
scripts/gpu_bench.sh prints at its end).

Plain dicts in (``bench.bench``'s result), text and a figure out.
"""

import json
import sys
from pathlib import Path


def held(rows: list[dict]) -> list[dict]:
    """The rows whose busy processes lasted through every run (``bench.Row.busy_died`` is 0): a
    cell measured partly quiet is flagged in the JSON and left out of every table."""
    return [r for r in rows if not r.get("busy_died")]


def best_fixed_vs_auto(result: dict) -> list[dict]:
    """Per prompt set, temperature, drafter and load: the best fixed k's speedup next to auto
    k's, and their ratio."""
    groups = {}
    for r in held(result["rows"]):
        key = (r["prompt_set"], r["temperature"], r["drafter"], r.get("busy", 0))
        groups.setdefault(key, []).append(r)
    summary = []
    for (set_name, temp, kind, n), rows in groups.items():
        fixed = [r for r in rows if r["k"] != "auto"]
        auto = next((r for r in rows if r["k"] == "auto"), None)
        best = max(fixed, key=lambda r: r["speedup"]) if fixed else None
        summary.append(
            {
                "prompt_set": set_name,
                "temperature": temp,
                "drafter": kind,
                "busy": n,
                "best_k": best["k"] if best else None,
                "best_speedup": best["speedup"] if best else None,
                "auto_speedup": auto["speedup"] if auto else None,
                "auto_vs_best": auto["speedup"] / best["speedup"] if auto and best else None,
                "auto_vs_peer": auto["vs_peer"] if auto else None,
            }
        )
    return summary


def block_vs_token(result: dict) -> list[dict]:
    """A run with ``--verify token,block``: per prompt set, temperature, K, drafter and load,
    the block judge's tokens per target pass and speedup over the token judge's on the same
    prompts and seeds, and the drafts it kept over what token by token keeps of the same drafts
    with the same uniforms (its own rounds, so the ratio carries no drafting noise)."""
    cells = {}
    for r in held(result["rows"]):
        name = r["drafter"].removesuffix(f", {r.get('judge', 'token')}")
        key = (r["prompt_set"], r["temperature"], name, r.get("busy", 0), r["k"])
        cells.setdefault(key, {})[r.get("judge", "token")] = r
    out = []
    for (set_name, temp, name, n, k), judged in cells.items():
        block, token = judged.get("block"), judged.get("token")
        if block is None or token is None:
            continue
        out.append(
            {
                "prompt_set": set_name,
                "temperature": temp,
                "drafter": name,
                "busy": n,
                "k": k,
                "tpp_token": token["tokens_per_pass"],
                "tpp_block": block["tokens_per_pass"],
                "tpp_ratio": block["tokens_per_pass"] / token["tokens_per_pass"],
                "speedup_ratio": block["speedup"] / token["speedup"],
                "kept_vs_token_same_drafts": block.get("judge_gain"),
                "tpp_expected_same_drafts": block.get("expected_gain"),
            }
        )
    return out


def busy_markdown(result: dict) -> str:
    """A run with ``--busy``: per prompt set, T and number of busy processes, target-only
    `generate`'s tok/s, every fixed K's speedup over it and automatic K's (with its drafted
    tokens per pass), and automatic K over the best fixed K: the table BENCHMARKS shows."""
    fixed = sorted({r["k"] for r in held(result["rows"]) if r["k"] != "auto"})
    best = {
        (s["prompt_set"], s["temperature"], s["drafter"], s["busy"]): s
        for s in best_fixed_vs_auto(result)
    }
    lines = [
        "| set | T | busy | `generate` tok/s | "
        + " | ".join(f"K = {k}" for k in fixed)
        + " | **auto K** | auto drafts/pass | auto / best fixed |",
        "|---|---|---|---|" + "---|" * len(fixed) + "---|---|---|",
    ]
    cells = {
        (r["prompt_set"], r["temperature"], r["drafter"], r.get("busy", 0), r["k"]): r
        for r in held(result["rows"])
    }
    for key, s in best.items():
        auto = cells.get((*key, "auto"))
        if auto is None:
            continue
        speeds = " | ".join(
            f"{cells[(*key, k)]['speedup']:.2f}×" if (*key, k) in cells else "—" for k in fixed
        )
        ratio = f"{s['auto_vs_best']:.2f}" if s["auto_vs_best"] is not None else "—"
        lines.append(
            f"| {key[0]} | {key[1]:g} | {key[3]} | {auto['baseline_tok_s']:.2f} | {speeds} "
            f"| **{auto['speedup']:.2f}×** | {auto.get('mean_k', 0.0):.2f} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


COLUMNS = [
    "prompt_set",
    "temperature",
    "drafter",
    "busy",
    "k",
    "baseline_tok_s",
    "peer_tok_s",
    "ours_tok_s",
    "speedup",
    "vs_peer",
    "kept_rate",
    "alpha",
    "tokens_per_pass",
    "c",
    "verify_cost",
    "predicted",
    "paper",
    "efficiency",
    "predicted_tpp",
    "efficiency_tpp",
    "overhead",
    "bookkeeping",
    "mean_k",
]


def table(rows: list[dict], cols: list[str], headers: list[str] | None = None) -> list[str]:
    lines = ["| " + " | ".join(headers or cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [
            "—" if r[col] is None else f"{r[col]:.2f}" if isinstance(r[col], float) else str(r[col])
            for col in cols
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(result: dict) -> str:
    """Every cell, then per set the best fixed k next to automatic k."""
    rows = [{col: r.get(col) for col in COLUMNS} for r in held(result["rows"])]
    lines = table(rows, COLUMNS)
    flagged = len(result["rows"]) - len(rows)
    if flagged:
        lines += [
            "",
            f"Left out: {flagged} cells whose busy processes ended before their runs "
            "did (`busy_died` in the JSON).",
        ]
    summary = best_fixed_vs_auto(result)
    if any(s["auto_speedup"] is not None for s in summary):
        lines += ["", *table(summary, list(summary[0]))]
        if any(r.get("busy") for r in result["rows"]):  # a run with --busy: loads side by side
            lines += ["", busy_markdown(result).strip()]
    judges = block_vs_token(result)
    if judges:
        lines += ["", "The whole block against token by token, same prompts and seeds:", ""]
        lines += table(judges, list(judges[0]))
    if result.get("plain_loop"):
        lines += ["", "The engine's plain target loop against target-only generate:", ""]
        plain = held(result["plain_loop"])
        lines += table(plain, list(result["plain_loop"][0])) if plain else []
    head = result.get("draft_head")
    if head and head["rows"]:
        shares = ", ".join(
            f"{name} {share:.1%}" for name, share in head["coverage"].items() if share is not None
        )
        lines += ["", f"Target tokens the {head['rows']:,}-row draft head covers: {shares}"]
    return "\n".join(lines) + "\n"


def auto_markdown(result: dict) -> str:
    """Automatic K against target-only `generate` per prompt set and T, the engine's plain loop
    against `generate`, and the draft head's coverage: the tables BENCHMARKS shows for a run
    with ``--ks auto``."""
    plain = {(r["prompt_set"], r["temperature"]): r for r in result.get("plain_loop", [])}
    lines = [
        "| set | T | `generate` tok/s | auto K tok/s | **auto K speedup** | α | tokens/pass "
        "| bookkeeping | plain loop / `generate` |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if r["k"] != "auto":
            continue
        loop = plain.get((r["prompt_set"], r["temperature"]))
        ratio = f"{loop['ratio']:.2f}×" if loop else "—"
        lines.append(
            f"| {r['prompt_set']} | {r['temperature']:g} | {r['baseline_tok_s']:.2f} "
            f"| {r['ours_tok_s']:.2f} | **{r['speedup']:.2f}×** | {r['alpha']:.2f} "
            f"| {r['tokens_per_pass']:.2f} | {100 * r['bookkeeping']:.1f}% "
            f"| {ratio} |"
        )
    head = result.get("draft_head") or {}
    if head.get("rows"):
        shares = ", ".join(
            f"{name} {100 * share:.1f}%" for name, share in head["coverage"].items() if share
        )
        lines += [
            "",
            f"Target tokens (target-only `generate`, both T) the {head['rows']:,}-row "
            f"ranked head holds, without the text's ids: {shares}.",
        ]
    return "\n".join(lines) + "\n"


# The summary's columns and their headers: what the GPU check reports for each fixed k.
SUMMARY_COLUMNS = {
    "run": "run",
    "k": "K",
    "baseline_tok_s": "target-only tok/s",
    "ours_tok_s": "speculative tok/s",
    "speedup": "speedup",
    "peer_tok_s": "assisted tok/s",
    "peer_speedup": "assisted speedup",
    "alpha": "α",
    "c": "c",
    "verify_cost": "verify cost",
    "overhead": "overhead",
}


def summary(results: dict[str, dict]) -> str:
    """Named bench results as one table: per run and fixed k (one drafter, one prompt set and
    temperature per run, as scripts/gpu_bench.sh runs them), target-only, speculative and
    assisted tok/s, α, c, the verify cost and the share of time outside forward passes, under a
    line per run saying where it ran."""
    lines = []
    for name, result in results.items():
        machine, models, costs = result["machine"], result["models"], result["step_costs"]
        lines.append(
            f"- {name}: {machine.get('gpu') or models['device']}, {models['precision']} "
            f"({models.get('dtype') or '?'}), torch {machine['torch']}; "
            f"t_step {1000 * costs['t_step']:.1f} ms, t_draft {1000 * costs['t_draft']:.1f} ms"
        )
    rows = [
        {"run": name, **r}
        for name, result in results.items()
        for r in result["rows"]
        if r["k"] != "auto"
    ]
    lines += ["", *table(rows, list(SUMMARY_COLUMNS), list(SUMMARY_COLUMNS.values()))]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Print `summary` of the bench.json in each folder named, each run named by its folder."""
    results = {Path(d).name: json.loads((Path(d) / "bench.json").read_text()) for d in argv}
    print(summary(results), end="")
    return 0


def chart(result: dict):
    import plotly.graph_objects as go

    fig = go.Figure()
    rows = result["rows"]
    for set_name in dict.fromkeys(r["prompt_set"] for r in rows):
        for temp in dict.fromkeys(r["temperature"] for r in rows):
            sel = [
                r
                for r in rows
                if r["prompt_set"] == set_name and r["temperature"] == temp and r["k"] != "auto"
            ]
            label = f"{set_name} T={temp:g}"
            fig.add_scatter(
                x=[r["k"] for r in sel],
                y=[r["speedup"] for r in sel],
                mode="lines+markers",
                name=f"{label} measured",
            )
            fig.add_scatter(
                x=[r["k"] for r in sel],
                y=[r["predicted"] for r in sel],
                mode="lines",
                line={"dash": "dot"},
                name=f"{label} predicted",
            )
    fig.add_hline(y=1.0, line={"color": "grey"})
    fig.update_layout(
        title="Speedup over target-only generate", xaxis_title="k", yaxis_title="speedup (×)"
    )
    return fig


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
