"""Measure the levers on a draft step and a target verify, each against the eager baseline.

    python scripts/levers.py [--out docs/bench/levers.json]
    python scripts/levers.py --bf16 [--out docs/bench/levers-bf16.json]
    python scripts/levers.py --kernels [--out docs/bench/kernels.json]

On the embedded 4-bit pair (or SPECDEMO_PAIR), at a warm 64-token context, median of 9 passes:
  * a KV cache of fixed size (transformers' StaticCache) instead of the growing DynamicCache;
  * torch.compile (inductor) of the whole forward pass, on top of the fixed-size cache;
  * the draft's output layer cut to its first N vocabulary rows: step time, and how often the
    draft's argmax still equals the target's greedy token on the code prompts (teacher-forced);
  * torch threads: the step times with 1 thread beside the default;
  * --bf16 alone: the same steps with both models in bfloat16 instead of 4-bit, side by side;
  * --kernels alone: the steps and target passes of 1-5 tokens on each 4-bit kernel (NF4, int4),
    side by side; under scripts/as_laptop.sh, as on an AVX2 laptop.
Prints a table and writes JSON. Every tensor is built on its model's device, and every time
comes from ``lm.Stopwatch``, which synchronises a CUDA device around each pass.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from transformers import DynamicCache, StaticCache

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdemo.bench.grid import PROMPTS_FILE  # noqa: E402
from specdemo.bench.machine import machine  # noqa: E402
from specdemo.models import load_pair, warm_up  # noqa: E402
from specdemo.runtime.lm import Stopwatch, cut_head  # noqa: E402
from specdemo.runtime.modes import synthetic_context  # noqa: E402
from specdemo.text import encode_prompt  # noqa: E402

REPEATS = 9
MAX_CACHE = 256


def timed(fn, device, repeats=REPEATS) -> float:
    """Median seconds of `fn()` after one warm-up, each call between two synchronised laps."""
    fn()  # warm-up
    clock, times = Stopwatch(device), []
    for _ in range(repeats):
        clock.lap()
        fn()
        times.append(clock.lap())
    return statistics.median(times)


@torch.inference_mode()
def step_time(model, context, n_tokens, static=False, call=None, head=None) -> float:
    """Median seconds of a pass over the last n_tokens of context after a warm cache."""
    prefix, fed = context[:-n_tokens], context[-n_tokens:]
    ids = torch.tensor([prefix], dtype=torch.long, device=model.device)
    feed = torch.tensor([fed], dtype=torch.long, device=model.device)
    with torch.device(model.device):  # where the cache builds its own counters
        cache = StaticCache(model.config, max_cache_len=MAX_CACHE) if static else DynamicCache()
    model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)

    def once():
        if head is not None:
            out = (call or model.base_model)(input_ids=feed, cache=cache, use_cache=True)
            head(out.last_hidden_state[0, -1:])
        else:
            (call or model)(input_ids=feed, cache=cache, use_cache=True, logits_to_keep=n_tokens)
        cache.crop(-n_tokens)  # a static cache is then overwritten in place at the same positions

    return timed(once, model.device)


@torch.inference_mode()
def agreement(pair, rows_list, n_new=48) -> dict:
    """Share of the target's greedy tokens that the draft's argmax over the first `rows` rows
    also picks, teacher-forced on the code prompts."""
    prompts = json.loads(PROMPTS_FILE.read_text())["code"]
    hits = {rows: 0 for rows in rows_list}
    total = 0
    for prompt in prompts:
        ids = encode_prompt(pair.tokenizer, prompt)
        batch = torch.tensor([ids], device=pair.target.device)
        seq = pair.target.generate(batch, max_new_tokens=n_new, do_sample=False)[0].tolist()
        logits = pair.draft(input_ids=torch.tensor([seq], device=pair.draft.device)).logits[0]
        new = torch.tensor(seq[len(ids) :], device=logits.device)
        drafted = logits[len(ids) - 1 : len(seq) - 1]
        for rows in rows_list:
            hits[rows] += int((drafted[:, :rows].argmax(-1) == new).sum())
        total += len(new)
    return {rows: hits[rows] / total for rows in rows_list}


def precisions(out: Path, names=("bf16", "4bit"), widths=(1, 5)) -> int:
    """The draft step and target passes of `widths` tokens in each of `names`, alternating."""
    results: dict = {
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": torch.backends.cpu.get_cpu_capability(),
    }
    for precision in (*names, *names):
        pair = load_pair(precision=precision)
        warm_up(pair)
        results.setdefault("kernel notes", {})[precision] = pair.summary.kernel_note
        context = synthetic_context(pair.target, pair.draft)
        steps = {
            "draft step, 32k head": step_time(
                pair.draft, context, 1, head=cut_head(pair.draft, 32768)
            ),
            **{
                f"target {n} token{'s' * (n > 1)}": step_time(pair.target, context, n)
                for n in widths
            },
        }
        for name, seconds in steps.items():
            key = f"{name}, {precision} (ms)"
            results.setdefault(key, []).append(round(seconds * 1000, 2))
            print(f"{key:44s} {seconds * 1000:9.2f}", flush=True)
        del pair
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine("cpu"), **results}, indent=1) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--bf16", action="store_true", help="bf16 against 4-bit, and nothing else")
    parser.add_argument("--kernels", action="store_true", help="NF4 against int4, 1-5 tokens")
    args = parser.parse_args()
    if args.bf16:
        return precisions(Path(args.out or "docs/bench/levers-bf16.json"))
    if args.kernels:
        out = Path(args.out or "docs/bench/kernels.json")
        return precisions(out, ("nf4", "int4"), (1, 2, 4, 5))
    args.out = args.out or "docs/bench/levers.json"
    pair = load_pair()
    target, draft = pair.target, pair.draft
    context = synthetic_context(target, draft)
    head32 = cut_head(draft, 32768)
    results: dict = {"threads": torch.get_num_threads(), "torch": torch.__version__}

    def record(name, seconds):
        results[name] = round(seconds * 1000, 2)
        print(f"{name:44s} {results[name]:9.2f}", flush=True)

    record("draft step, eager, full head (ms)", step_time(draft, context, 1))
    record("draft step, eager, 32k head (ms)", step_time(draft, context, 1, head=head32))
    record(
        "draft step, 32k head, static cache (ms)",
        step_time(draft, context, 1, static=True, head=head32),
    )
    for n in (1, 5):
        record(f"target {n} tokens, eager (ms)", step_time(target, context, n))
        record(f"target {n} tokens, static cache (ms)", step_time(target, context, n, static=True))

    torch.set_num_threads(1)
    record("draft step, 1 thread (ms)", step_time(draft, context, 1, head=head32))
    record("target 5 tokens, 1 thread (ms)", step_time(target, context, 5))
    torch.set_num_threads(results["threads"])

    rows_list = [8192, 16384, 32768, 65536, draft.get_output_embeddings().weight.shape[0]]
    for rows in rows_list[:-1]:
        record(
            f"draft step, {rows} head rows (ms)",
            step_time(draft, context, 1, head=cut_head(draft, rows)),
        )
    for rows, share in agreement(pair, rows_list).items():
        results[f"greedy agreement, {rows} rows"] = round(share, 3)
        print(f"greedy agreement, {rows} rows: {share:.3f}", flush=True)

    # The draft's base model is compiled and its 32k head stays a plain matmul, as it runs.
    for name, model, widths, head in (
        ("draft", draft, (1,), head32),
        ("target", target, (1, 5), None),
    ):
        forward_fn = model.base_model.forward if head is not None else model.forward
        for n in widths:
            torch._dynamo.reset()  # each width gets its own graph, compiled from scratch
            compiled = torch.compile(forward_fn, dynamic=False)
            clock = Stopwatch(model.device)
            step_time(model, context, n, static=True, call=compiled, head=head)
            results[f"{name} {n} tokens, compile (s)"] = round(clock.total(), 1)
            record(
                f"{name} {n} tokens, compiled + static (ms)",
                step_time(model, context, n, static=True, call=compiled, head=head),
            )

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"machine": machine("cpu"), **results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
