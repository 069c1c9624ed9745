"""docs/bench/judges.md's blocks: the whole block against token by token, run side by side
(block.json) and on the same drafts (block-drafts.json), and what the judge alone costs beside
a target pass (judge-cost.json)."""

from docs_writer.cells import table, temp, x
from docs_writer.core import load
from docs_writer.runs import leads
from specdemo.bench import report as bench_report


def block_bench() -> str:
    """The whole block against token by token, run side by side, cell by cell (block.json)."""
    cells = bench_report.block_vs_token(load("block.json"))
    rows = [[c["prompt_set"], temp(c["temperature"]), c["k"], f"{c['tpp_token']:.2f}",
             f"{c['tpp_block']:.2f}", x(c["tpp_ratio"]), x(c["speedup_ratio"])]
            for c in cells]  # fmt: skip
    header = ["set", "T", "K", "tokens/pass, token by token", "tokens/pass, block",
              "block / token", "wall clock, block / token"]  # fmt: skip
    return table(header, rows)


def block_drafts() -> str:
    """Tokens a pass of the whole block over token by token's on the same drafts, each on
    average over its uniforms, pooled over every round of a cell (block-drafts.json)."""
    result = load("block-drafts.json")
    rows = [[r["prompt_set"], temp(r["temperature"]), r["k"], f"{r['mean_k']:.2f}",
             f"{r['tokens_per_pass']:.2f}", f"**{x(r['expected_gain'], 3)}**",
             x(r["judge_gain"])]
            for r in result["rows"]]  # fmt: skip
    header = ["set", "T", "K", "drafts/pass", "tokens/pass (block)",
              "**tokens/pass, block / token, same drafts**",
              "drafts kept / token by token's, same drafts and uniforms"]  # fmt: skip
    return table(header, rows)


def judge_cost() -> str:
    """The judge alone, token by token and as a block, beside a target pass (judge-cost.json,
    block-drafts.json's step costs)."""
    cost = load("judge-cost.json")
    steps = load("block-drafts.json")["step_costs"]["t_verify"]
    rows = [[k, f"{1000 * c['token']:.2f}", f"{1000 * c['block']:.2f}",
             f"{1000 * (c['block'] - c['token']):.2f}", f"{1000 * steps[k]:.0f}",
             f"{100 * (c['block'] - c['token']) / steps[k]:.2f}%"]
            for k, c in cost["ks"].items()]  # fmt: skip
    header = ["K", "token by token, ms", "the whole block, ms", "difference, ms",
              "verify pass of K + 1 tokens, ms", "difference / verify pass"]  # fmt: skip
    return table(header, rows)


BLOCKS = {
    "block-bench": block_bench,
    "block-drafts": block_drafts,
    "judge-cost": judge_cost,
    **leads("block", "block-drafts", "judge-cost"),
}
