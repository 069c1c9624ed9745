"""The bench's result as tables and a chart: every cell in Markdown, the best fixed k next to
automatic k per prompt set, and the measured speedup against the predicted one in plotly.

Plain dicts in (``bench.bench``'s result), text and a figure out.
"""


def best_fixed_vs_auto(result: dict) -> list[dict]:
    """Per prompt set, temperature and drafter: the best fixed k's speedup next to auto k's."""
    groups = {}
    for r in result["rows"]:
        groups.setdefault((r["prompt_set"], r["temperature"], r["drafter"]), []).append(r)
    summary = []
    for (set_name, temp, kind), rows in groups.items():
        fixed = [r for r in rows if r["k"] != "auto"]
        auto = next((r for r in rows if r["k"] == "auto"), None)
        best = max(fixed, key=lambda r: r["speedup"]) if fixed else None
        summary.append(
            {
                "prompt_set": set_name,
                "temperature": temp,
                "drafter": kind,
                "best_k": best["k"] if best else None,
                "best_speedup": best["speedup"] if best else None,
                "auto_speedup": auto["speedup"] if auto else None,
                "auto_vs_peer": auto["vs_peer"] if auto else None,
            }
        )
    return summary


COLUMNS = [
    "prompt_set", "temperature", "drafter", "k", "baseline_tok_s", "peer_tok_s", "ours_tok_s",
    "speedup", "vs_peer", "alpha", "alpha_per_token", "tokens_per_pass", "c", "verify_cost",
    "predicted", "paper", "efficiency", "predicted_tpp", "efficiency_tpp", "overhead",
]  # fmt: skip


def table(rows: list[dict], cols: list[str]) -> list[str]:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [
            "—" if r[c] is None else f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c])
            for c in cols
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(result: dict) -> str:
    """Every cell, then per set the best fixed k next to automatic k."""
    lines = table(result["rows"], COLUMNS)
    summary = best_fixed_vs_auto(result)
    if any(s["auto_speedup"] is not None for s in summary):
        lines += ["", *table(summary, list(summary[0]))]
    return "\n".join(lines) + "\n"


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
