"""README.md's blocks: the headline table of the current run (automatic K against the target
alone and transformers' assisted generation), the copies table of the edits run, their lead
lines, the step costs that explain a CPU's modest speedups, and a later start's time."""

from docs_writer.cells import table, temp, x
from docs_writer.core import load
from docs_writer.runs import (
    CURRENT,
    EDITS,
    cpu_of,
    current_cell,
    current_cells,
    kernel_of,
    startup_figures,
)


def readme_current() -> str:
    """README's headline: automatic K (the default), fixed K = 3 and transformers' assisted
    generation against the target alone, hybrid drafting on the copy set."""
    r = load(CURRENT)
    rows = []
    for name, t in current_cells(r):
        auto = current_cell(r, name, t, "model, token")
        k3 = current_cell(r, name, t, "model, token", 3)
        hybrid = current_cell(r, name, t, "hybrid, token")
        rows.append([name, temp(t), f"**{x(auto['speedup'])}**", x(k3["speedup"]),
                     x(hybrid["speedup"]), x(auto["peer_speedup"])])  # fmt: skip
    header = ["prompts", "T", "**automatic K**, draft model", "K = 3",
              "hybrid drafting, automatic K",
              "transformers' assisted generation"]  # fmt: skip
    return table(header, rows)


def readme_lead() -> str:
    r = load(CURRENT)
    m = r["machine"]
    return (
        f"Measured {m['date']} on a {cpu_of(m)} with the embedded pair in 4-bit ({kernel_of(r)}) "
        f"and the shipped draft head, {r['settings']['max_new_tokens']} new tokens: tokens per "
        "second against the target alone (transformers' `generate`), run side by side, medians "
        "over each set's prompts."
    )


def readme_steps() -> str:
    """Why a CPU's speedups are modest: the current run's step costs."""
    costs = load(CURRENT)["step_costs"]
    t = costs["t_step"]
    return (
        f"On this CPU a verify pass over 4 tokens (K = 3) costs {costs['t_verify']['3'] / t:.2f} "
        f"target steps and a draft step c = {costs['t_draft'] / t:.2f} of one."
    )


def readme_edits() -> str:
    """README's table for copies: the suffix hybrid, the suffix copy and transformers' prompt
    lookup against the target alone on the edits and copy sets."""
    r = load(EDITS)
    rows = []
    for name, t in current_cells(r):
        hybrid, suffix = (current_cell(r, name, t, d) for d in ("suffix-hybrid", "suffix"))
        rows.append(
            [
                name,
                temp(t),
                f"**{x(hybrid['speedup'])}**",
                x(suffix["speedup"]),
                x(hybrid["peer_speedup"]),
            ]
        )
    header = [
        "prompts",
        "T",
        "**suffix hybrid**, automatic K",
        "suffix copy, automatic K",
        "transformers' prompt lookup",
    ]
    return table(header, rows)


def readme_edits_lead() -> str:
    r = load(EDITS)
    m, s = r["machine"], r["settings"]
    return (
        f"Edits (a 30–50-line file or a long paragraph returned with a change), up to "
        f"{s['max_new_tokens']} new tokens, measured {m['date']} on a {cpu_of(m)}: tokens "
        "per second against the target alone, side by side."
    )


def readme_start() -> str:
    """README's later start, from startup.json."""
    f = startup_figures()
    return f"A later start was ready in {f['ready']} ({f['where']}, `docs/bench/startup.json`)."


BLOCKS = {
    "readme-start": readme_start,
    "readme-lead": readme_lead,
    "readme-current": readme_current,
    "readme-edits-lead": readme_edits_lead,
    "readme-edits": readme_edits,
    "readme-steps": readme_steps,
}
