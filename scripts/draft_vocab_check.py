"""Measure the draft's vocabulary: held-out coverage and step cost per head size, side by side.

    python scripts/draft_vocab_check.py [--out docs/bench/draft-vocab.json] [--answers FILE]

On the embedded pair (or SPECDEMO_PAIR), for head sizes from 4k rows to the whole vocabulary:
  * coverage: the share of the target's own tokens the head holds, on held-out answers (the
    bench's prompts, specdemo/data/bench_prompts.json, never used to rank), per set (code, prose,
    copy): the ranked rows alone, the ranked rows with the ids of the text so far as a drafter
    learns them (``draft_vocab.context_head``), and the first ids (the head cut by id);
  * cost: the median draft step with that head (eager, warm 64-token context), the sizes taking
    turns in each repeat, a line fitted through them (the head's matmul grows with its rows),
    and the target's step and verify pass of 3 tokens;
  * the exactness tab's default prompt (the page's first example, T = 1): Σ min(p, q) of the
    first token with each head, the chance the draft's first guess is kept.
Each size gets a predicted speed, averaged over the sets: a round of K = 2 drafts at the pair's
nominal acceptance ALPHA times the coverage with the text's ids, over 2 fitted draft steps and a
3-token verify pass, all measured here. The default head size is the one with the most
coverage among those predicted within TOLERANCE of the fastest (its rows move to the top of the
draft's own output layer, ``draft_vocab.rank_rows``, so no size costs memory). --answers reuses
the held-out answers of an earlier run. Writes JSON with the machine it ran on; prints a table.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.rank_tokens import machine  # noqa: E402
from specdemo.app.exact.exactness import next_token_probs  # noqa: E402
from specdemo.bench.grid import PROMPTS_FILE  # noqa: E402
from specdemo.cost.profile import pass_seconds  # noqa: E402
from specdemo.decode.engine import generate  # noqa: E402
from specdemo.draft import draft_vocab  # noqa: E402
from specdemo.judge.sampling import SamplingConfig  # noqa: E402
from specdemo.models import load_pair  # noqa: E402
from specdemo.runtime.lm import Stopwatch, cut_head, forward, head_over  # noqa: E402
from specdemo.runtime.modes import synthetic_context  # noqa: E402
from specdemo.text import encode_prompt  # noqa: E402

SIZES = (4096, 8192, 16384, 24576, 32768, 49152, 65536)
EXAMPLES = ROOT / "specdemo" / "data" / "prompts.json"
REPEATS = 15
ALPHA = 0.75  # the pair's acceptance with a full head, between prose and code (BENCHMARKS)
K = 2
# Predicted speeds this close count as equal: from 16,384 rows up the prediction is flat within
# 2%, and between two runs on one machine a size's ratio to the fastest moved by 0.6%.
TOLERANCE = 0.02


def held_out_answers(pair, max_new_tokens: int) -> dict[str, list[list[int]]]:
    """The target's answers to every bench prompt (T = 0.7, seed = the prompt's index)."""
    sets = json.loads(PROMPTS_FILE.read_text(encoding="utf-8"))
    out = {}
    for name, prompts in sets.items():
        out[name] = []
        for i, prompt in enumerate(prompts):
            ids = encode_prompt(pair.tokenizer, prompt)
            result = generate(pair.target, pair.draft, ids, k=0, temperature=0.7,
                              max_new_tokens=max_new_tokens, seed=i)  # fmt: skip
            out[name].append(result.tokens)
            print(f"answers: {name} {i + 1}/{len(prompts)}", flush=True)
    return out


def coverage(answers, kept: set[int], prompts=None) -> dict[str, float]:
    """Per set, the share of the answers' tokens that `kept` holds; with `prompts` (per set, the
    prompts' token ids), also those a drafter's spare rows learned from the text before each."""
    share = {}
    for name, texts in answers.items():
        hit = total = 0
        for i, text in enumerate(texts):
            learned = set()
            for t in prompts[name][i] if prompts else []:
                if t not in kept and len(learned) < draft_vocab.CONTEXT_ROWS:
                    learned.add(t)
            for t in text:
                hit, total = hit + (t in kept or t in learned), total + 1
                if prompts and t not in kept and len(learned) < draft_vocab.CONTEXT_ROWS:
                    learned.add(t)
        share[name] = hit / total
    return share


def tokens_per_round(alpha: float, k: int) -> float:
    return sum(alpha**j for j in range(k + 1))


@torch.inference_mode()
def step_ms(draft, heads: dict[str, object]) -> dict[str, float]:
    """Median ms of one draft step with each head, the heads taking turns in every repeat."""
    context = synthetic_context(draft)
    _, cache = forward(draft, context, None, head=next(iter(heads.values())))
    clock, times = Stopwatch(draft.device), {name: [] for name in heads}
    for _ in range(REPEATS + 1):  # the first round is a warm-up
        for name, head in heads.items():
            clock.lap()
            forward(draft, context[-1:], cache, head=head)
            times[name].append(clock.lap())
            cache.crop(-1)
    return {name: 1000 * statistics.median(t[1:]) for name, t in times.items()}


def first_accept(pair, heads: dict[str, object]) -> dict[str, float]:
    """Σ min(p, q) of the first token on the exactness tab's default prompt (T = 1)."""
    prompt = json.loads(EXAMPLES.read_text(encoding="utf-8"))[0]["prompt"]
    ids = encode_prompt(pair.tokenizer, prompt)
    sampling = SamplingConfig(1.0)
    p = next_token_probs(pair.target, ids, sampling).double()
    out = {}
    for name, head in heads.items():
        q = next_token_probs(pair.draft, ids, sampling, head).double()
        vocab = max(p.shape[-1], q.shape[-1])
        q = torch.nn.functional.pad(q, (0, vocab - q.shape[-1]))
        out[name] = float(torch.minimum(p[:vocab], q).sum())
    return out


def markdown(result: dict) -> str:
    """The coverage and cost table BENCHMARKS shows, from a result of this script."""
    names = list(result["answers"])
    head = " | ".join(f"{n}: ranked / + text / first ids" for n in names)
    lines = [f"| head rows | draft step ms (fitted) | predicted tok/s | {head} |",
             "|" + "---|" * (3 + len(names))]  # fmt: skip
    for r in result["table"]:
        cells = " | ".join(
            " / ".join(f"{100 * r[kind][n]:.1f}%" for kind in ("ranked", "ranked_with_text",
                                                               "first_ids"))
            for n in names
        )  # fmt: skip
        rows = f"**{r['rows']:,}**" if r["rows"] == result["chosen_rows"] else f"{r['rows']:,}"
        lines.append(f"| {rows} | {r['draft_step_ms_fitted']:.1f} | {r['predicted_tok_s']:.2f} "
                     f"| {cells} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench" / "draft-vocab.json"))
    parser.add_argument("--answers", help="reuse the held-out answers of an earlier --out")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    args = parser.parse_args()
    pair = load_pair()
    draft, vocab = pair.draft, pair.draft.get_output_embeddings().weight.shape[0]
    ranked = draft_vocab.ranking_for(draft)
    if ranked is None:
        shipped = draft_vocab.ranking().vocab_size
        sys.exit(f"the shipped ranking is for {shipped:,} ids, not {vocab:,}")
    if args.answers:
        answers = json.loads(Path(args.answers).read_text(encoding="utf-8"))["answers"]
    else:
        answers = held_out_answers(pair, args.max_new_tokens)
    sets = json.loads(PROMPTS_FILE.read_text(encoding="utf-8"))
    prompts = {name: [encode_prompt(pair.tokenizer, p) for p in sets[name]] for name in answers}
    sizes = [n for n in SIZES if n < vocab]
    table = []
    for n in sizes:
        kept = set(ranked.top(n))
        table.append({
            "rows": n,
            "ranked": coverage(answers, kept),
            "ranked_with_text": coverage(answers, kept, prompts),
            "first_ids": coverage(answers, set(range(n))),
        })  # fmt: skip
    everything = coverage(answers, set(range(vocab)))
    table.append({"rows": vocab, "ranked": everything, "ranked_with_text": everything,
                  "first_ids": everything})  # fmt: skip
    heads = {"full": None}
    for n in sizes:
        heads[f"ranked {n}"] = head_over(draft, torch.tensor(ranked.top(n)))
    heads["first 32768"] = cut_head(draft, 32768)
    ms = step_ms(draft, heads)
    for row in table:
        row["draft_step_ms"] = ms["full" if row["rows"] == vocab else f"ranked {row['rows']}"]
    # A step costs the body plus a matmul linear in the head's rows: a line fitted through every
    # size smooths one noisy size's median (a shared machine's) out of the choice.
    rows, step = [r["rows"] for r in table], [r["draft_step_ms"] for r in table]
    fit = statistics.linear_regression(rows, step)
    for row in table:
        row["draft_step_ms_fitted"] = fit.intercept + fit.slope * row["rows"]
    context = synthetic_context(pair.target)
    passes = pass_seconds(pair.target, context, (1, K + 1), repeats=REPEATS)
    for row in table:
        speeds = [
            tokens_per_round(ALPHA * c, K)
            / (K * row["draft_step_ms_fitted"] / 1000 + passes[K + 1])
            for c in row["ranked_with_text"].values()
        ]
        row["predicted_tok_s"] = statistics.mean(speeds)
    fastest = max(r["predicted_tok_s"] for r in table)
    near = [r for r in table if r["predicted_tok_s"] >= (1 - TOLERANCE) * fastest]
    near = [r for r in near if r["rows"] < vocab]
    chosen = max(near, key=lambda r: min(r["ranked_with_text"].values()))["rows"]
    accept = first_accept(pair, {
        "full head": None,
        "first 32,768 ids": heads["first 32768"],
        f"ranked, {chosen:,} rows": heads.get(f"ranked {chosen}"),
    })  # fmt: skip
    result = {
        "machine": machine(),
        "models": {
            "target": pair.summary.target_name,
            "draft": pair.summary.draft_name,
            "precision": pair.summary.precision,
        },  # fmt: skip
        "shipped_rows": ranked.rows,
        "chosen_rows": chosen,
        "rule": f"predicted tokens/s: K = {K}, alpha = {ALPHA} x coverage with the text's ids, "
        "over K draft steps and a K + 1-token verify pass, mean over the sets; of the heads "
        f"within {TOLERANCE:.0%} of the fastest, the most coverage (the default head's rows "
        "move to the top of the draft's own output layer: no size copies any)",
        "target_ms": {n: 1000 * s for n, s in passes.items()},
        "first_32768_step_ms": ms["first 32768"],
        "head_ms_per_1000_rows": 1000 * fit.slope,
        "table": table,
        "first_token_accept_on_the_exactness_default": accept,
        "answers": answers,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(markdown(result), end="")
    print(f"the head costs {1000 * fit.slope:.2f} ms per 1,000 rows (fitted)")
    print(f"first 32,768 ids: {ms['first 32768']:.1f} ms a step")
    print(f"chosen: {chosen:,} rows; Σ min(p, q) on the exactness default: {accept}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
