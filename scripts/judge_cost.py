"""What judging costs, token by token against the whole block, on this machine.

    python scripts/judge_cost.py [--out docs/bench/judge-cost.json]

One round's ``verify.verify`` on rows of the embedded pair's vocabulary (151,936 ids), k = 3-5,
p and q softmaxes of random logits of the spread a model's have; each judge timed alternately,
the median of 200 rounds each. The model passes around it are not run: this is the judge alone,
to set beside a target pass (bench/block.json's step costs).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdemo.bench.machine import machine  # noqa: E402
from specdemo.judge.verify import verify  # noqa: E402

VOCAB = 151_936


def rows(k: int, generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    logits = torch.randn(k + 1, VOCAB, generator=generator) * 3
    draft_logits = logits[:k] + torch.randn(k, VOCAB, generator=generator)
    p, q = torch.softmax(logits, -1), torch.softmax(draft_logits, -1)
    draft = torch.multinomial(q, 1, generator=generator).view(-1)
    return draft, q, p


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/bench/judge-cost.json")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    result = {"machine": machine(torch.device("cpu")), "vocab": VOCAB,
              "threads": torch.get_num_threads(), "ks": {}}  # fmt: skip
    for k in (3, 4, 5):
        times = {"token": [], "block": []}
        draft, q, p = rows(k, g)
        for _ in range(args.rounds):
            for judge in times:
                start = time.perf_counter()
                verify(draft, q, p, g, judge=judge)
                times[judge].append(time.perf_counter() - start)
        result["ks"][k] = {judge: statistics.median(t) for judge, t in times.items()}
        print(k, {judge: f"{1000 * s:.2f} ms" for judge, s in result["ks"][k].items()})
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
