"""Count the tokens a fishbone keeps per target pass against the chain at the same K, with enough
sampled answers to tell them apart.

    python scripts/tree_tokens.py [--seeds 2] [--k 2] [--max-new-tokens 64] [--out FILE]
        [--widths 1 2 3] [--verify token block]

On the embedded pair (or SPECDEMO_PAIR), at T = 1, for every bench prompt
(specdemo/data/bench_prompts.json) and seed: the chain (tree width 1) and fishbones of width 2
and 3, in turn. Tokens per pass is a count, not a timing, so it does not depend on the machine's
load. Per set and width: tokens per pass pooled over runs (new tokens / rounds), a 95% interval
from the runs (normal, run-level standard error), and the difference to the chain with its own
interval (the chain and the tree of one prompt and seed paired). A fishbone keeps the chain's
spine and adds siblings that can only be kept where the spine's guess was rejected, so its
expected tokens per pass are never below the chain's; sampled answers differ run to run, which
is why the interval is reported. With --verify token block each width runs under both judges
(root to leaf, and traversal verification leaf to root), and the block judge's rows also give
the paired difference to the token judge at the same width. Writes JSON with the machine it ran
on; prints a table.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specdemo.bench.grid import PROMPTS_FILE  # noqa: E402
from specdemo.bench.machine import machine  # noqa: E402
from specdemo.decode.engine import generate  # noqa: E402
from specdemo.models import load_pair  # noqa: E402
from specdemo.text import encode_prompt  # noqa: E402

WIDTHS = (1, 2, 3)
Z95 = 1.96


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its normal 95% interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("nan")
    return mean, Z95 * statistics.stdev(values) / len(values) ** 0.5


def per_pass(*runs: dict) -> float:
    """New tokens per target pass (round), pooled over `runs`."""
    return sum(r["tokens"] for r in runs) / sum(r["rounds"] for r in runs)


def paired(mine: list[dict], others: dict) -> tuple[float | None, float | None]:
    """The mean paired difference in tokens per pass to `others` (keyed by prompt and seed) and
    its interval's half-width; None where there is nothing to pair with."""
    diffs = [per_pass(r) - per_pass(others[r["prompt"], r["seed"]]) for r in mine
             if (r["prompt"], r["seed"]) in others]  # fmt: skip
    return interval(diffs) if diffs else (None, None)


def summarise(runs: list[dict]) -> list[dict]:
    """Per set, width and judge: pooled tokens per pass, its interval, the paired difference to
    the chain of the same prompt, seed and judge, and for the block judge to the token judge at
    the same width."""
    rows = []
    for name in dict.fromkeys(r["set"] for r in runs):
        here = [r for r in runs if r["set"] == name]

        def runs_of(width, judge, here=here):
            return {(r["prompt"], r["seed"]): r for r in here
                    if r["width"] == width and r.get("judge", "token") == judge}  # fmt: skip

        for width in sorted({r["width"] for r in here}):
            for judge in dict.fromkeys(r.get("judge", "token") for r in here):
                mine = list(runs_of(width, judge).values())
                if not mine:
                    continue
                _, half = interval([per_pass(r) for r in mine])
                diff, diff_half = paired(mine, runs_of(1, judge))
                row = {
                    "set": name,
                    "width": width,
                    "judge": judge,
                    "runs": len(mine),
                    "rounds": sum(r["rounds"] for r in mine),
                    "tokens_per_pass": per_pass(*mine),
                    "interval": half,
                    "vs_chain": diff,
                    "vs_chain_interval": diff_half,
                    "siblings_kept": sum(r["siblings_kept"] for r in mine),
                }
                if judge == "block":
                    row["vs_token"], row["vs_token_interval"] = paired(
                        mine, runs_of(width, "token")
                    )
                rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--out", default="bench_out/tree-tokens.json")
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS))
    parser.add_argument("--verify", nargs="+", choices=["token", "block"], default=["token"])
    args = parser.parse_args(argv)
    pair = load_pair()
    sets = json.loads(PROMPTS_FILE.read_text(encoding="utf-8"))
    runs = []
    for name, prompts in sets.items():
        for i, prompt in enumerate(prompts):
            ids = encode_prompt(pair.tokenizer, prompt)
            for seed in range(args.seeds):
                for width in args.widths:
                    for judge in args.verify:
                        result = generate(pair.target, pair.draft, ids, k=args.k,
                                          temperature=1.0, max_new_tokens=args.max_new_tokens,
                                          seed=seed, drafter="model", tree_width=width,
                                          verify=judge)  # fmt: skip
                        s = result.stats
                        runs.append({"set": name, "prompt": i, "seed": seed, "width": width,
                                     "judge": judge, "tokens": s.new_tokens, "rounds": s.rounds,
                                     "siblings_kept": s.siblings_kept})  # fmt: skip
                print(f"{name} {i + 1}/{len(prompts)} seed {seed}", flush=True)
    rows = summarise(runs)
    settings = {"k": args.k, "temperature": 1.0, "seeds": args.seeds,
                "max_new_tokens": args.max_new_tokens, "drafter": "model",
                "widths": args.widths, "verify": args.verify}  # fmt: skip
    out = {"machine": machine(pair.target.device), "settings": settings, "rows": rows, "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    for r in rows:
        head = f"{r['set']:6} w={r['width']} {r['judge']:5} tokens/pass {r['tokens_per_pass']:.2f}"
        diff = (f"vs chain {r['vs_chain']:+.2f} ± {r['vs_chain_interval']:.2f}"
                if r["vs_chain"] is not None else "")  # fmt: skip
        if r.get("vs_token") is not None:
            diff += f"  vs token {r['vs_token']:+.2f} ± {r['vs_token_interval']:.2f}"
        print(f"{head} ± {r['interval']:.2f}  {diff}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
