"""Rank the draft's vocabulary by how often the target writes each token, for
specdemo/data/token_ranks.json:

    python scripts/rank_tokens.py answers [--out docs/bench/rank-answers.json]
    python scripts/rank_tokens.py build [--answers docs/bench/rank-answers.json] [--rows N]

``answers`` runs the embedded pair's target on every prompt of scripts/data/rank_prompts.json
(code, prose and copy tasks; none of them a bench prompt or a page example, so coverage is
measured on held-out text) and keeps the token ids of each answer, with the machine it ran on.

``build`` scores each id by its share of four sources and writes the ranking:
  * the target's answers, weighted most: they hold the chat's own tokens ("```", "<|im_end|>",
    markdown, code) as the target writes them;
  * English word frequencies from the `wordfreq` package (its "large" list: 100,000 words, from
    Wikipedia, subtitles, news, books, web text and social media), each word's frequency
    credited to the tokens of " word", "word" and " Word" as the target's tokenizer splits them:
    the long tail of prose that a few thousand answers cannot reach;
  * code: this Python's standard library (its top-level modules) and npm's own JavaScript, as
    the tokenizer splits them: names, operators and indentation;
  * the tokenizer's merge order: a byte-level BPE numbers its tokens in the order it merged
    them, most frequent pairs first, over a corpus far larger than the others; id i gets a
    Zipf share 1 / (i + 100).
The weights were chosen by building on half of the answers and measuring coverage on the other
half. Every token of the chat template and the 256 byte tokens come first. `--rows` is the head
size a drafter keeps by default, chosen by `python scripts/draft_vocab_check.py` from the draft
step's cost against held-out coverage (docs/BENCHMARKS.md, "The draft's vocabulary"). Needs
`pip install wordfreq` for `build` only; the package never imports it.
"""

import argparse
import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPTS = ROOT / "scripts" / "data" / "rank_prompts.json"
ANSWERS = ROOT / "docs" / "bench" / "rank-answers.json"
RANKS = ROOT / "specdemo" / "data" / "token_ranks.json"
WORDS = 100_000  # wordfreq's English list, most frequent first
# Each source's weight on its share of the tokens: the answers are the target's own text, the
# other sources fill the long tail (chosen on halves of the answers, scripts/rank_tokens.py).
WEIGHTS = {"answers": 4.0, "words": 1.0, "code": 1.0, "merge order": 1.0}
ZIPF_OFFSET = 100
KEPT = 65_536  # ranked ids the file keeps: more than any head uses


def machine() -> dict:
    """Where the answers were generated (``specdemo.bench.machine``)."""
    from specdemo.bench.machine import machine as where

    return where("cpu")


def answers(args) -> None:
    import specdemo
    from specdemo.models import load_pair
    from specdemo.text import encode_prompt

    pair = load_pair()
    prompts = json.loads(PROMPTS.read_text(encoding="utf-8"))
    out = {
        "about": "The target's answers to scripts/data/rank_prompts.json, as token ids "
        "(python scripts/rank_tokens.py answers).",
        "machine": machine(),
        "model": pair.summary.target_name,
        "settings": {"temperature": args.temperature, "max_new_tokens": args.max_new_tokens},
        "answers": {},
    }
    start = time.perf_counter()
    for name, texts in prompts.items():
        if name.startswith("_"):
            continue
        out["answers"][name] = []
        for i, prompt in enumerate(texts):
            ids = encode_prompt(pair.tokenizer, prompt)
            result = specdemo.generate(
                pair.target, pair.draft, ids, k=0, temperature=args.temperature,
                max_new_tokens=args.max_new_tokens, seed=i,
            )  # fmt: skip
            out["answers"][name].append(result.tokens)
            done = sum(len(a) for v in out["answers"].values() for a in v)
            seconds = time.perf_counter() - start
            print(f"{name} {i + 1}/{len(texts)}: {done} tokens, {seconds:.0f} s", flush=True)
            Path(args.out).write_text(json.dumps(out))
    print(f"wrote {args.out}")


def word_counts(tokenizer) -> Counter:
    """Each word's frequency (per million words) credited to the tokens it is written with."""
    import wordfreq

    counts: Counter = Counter()
    for word in wordfreq.top_n_list("en", WORDS, wordlist="large"):
        share = wordfreq.word_frequency(word, "en", wordlist="large") * 1e6
        # Mostly mid-sentence (" word"), sometimes first in a line or a sentence.
        for form, weight in ((f" {word}", 0.8), (word, 0.1), (f" {word.capitalize()}", 0.1)):
            for t in tokenizer(form, add_special_tokens=False)["input_ids"]:
                counts[t] += share * weight
    return counts


def code_counts(tokenizer) -> tuple[Counter, list[str]]:
    """Token counts over this Python's standard library and npm's JavaScript; what was read."""
    import sysconfig

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    files += sorted(Path("/usr/lib/node_modules/npm/lib").rglob("*.js"))
    counts: Counter = Counter()
    for f in files:
        text = f.read_text(errors="ignore")
        counts.update(tokenizer(text, add_special_tokens=False)["input_ids"])
    read = [f"Python {platform.python_version()} standard library, top-level modules"]
    if any(f.suffix == ".js" for f in files):
        read.append("npm's lib/ JavaScript (/usr/lib/node_modules/npm)")
    return counts, read


def share(counts: Counter) -> dict[int, float]:
    total = sum(counts.values())
    return {t: n / total for t, n in counts.items()}


def build(args) -> None:
    from specdemo.models import load_pair

    data = json.loads(Path(args.answers).read_text(encoding="utf-8"))
    pair = load_pair()
    tokenizer, vocab = pair.tokenizer, pair.draft.get_output_embeddings().weight.shape[0]
    answered = Counter(t for texts in data["answers"].values() for a in texts for t in a)
    code, code_read = code_counts(tokenizer)
    harmonic = sum(1 / (i + ZIPF_OFFSET) for i in range(vocab))
    sources = {
        "answers": share(answered),
        "words": share(word_counts(tokenizer)),
        "code": share(code),
        "merge order": {i: 1 / (i + ZIPF_OFFSET) / harmonic for i in range(vocab)},
    }
    score = Counter()
    for name, shares in sources.items():
        for t, v in shares.items():
            score[t] += WEIGHTS[name] * v
    chat = tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    first = sorted(set(tokenizer.all_special_ids) | set(chat) | set(range(256)))
    lead = set(first)
    ranked = first + [t for t, _ in score.most_common() if t not in lead and t < vocab]
    ranked = ranked[:KEPT]  # ids past these follow in id order (draft_vocab.Ranking.top)
    weights = ", ".join(f"{w:g} x {name}" for name, w in WEIGHTS.items())
    out = {
        "about": "Token ids of the Qwen2.5 vocabulary, most frequent first, for the draft's "
        "output head (specdemo/draft/draft_vocab.py): the chat's special tokens and the 256 byte "
        f"tokens, then by a score, the sum of {weights}: each id's share of the target's "
        "answers (docs/bench/rank-answers.json), of English word frequencies (wordfreq "
        f"{wordfreq_version()}, top {WORDS:,} words), of code ({'; '.join(code_read)}), and a "
        f"Zipf share 1/(id + {ZIPF_OFFSET}) from the tokenizer's merge order.",
        "command": "python scripts/rank_tokens.py answers && python scripts/rank_tokens.py build "
        f"--rows {args.rows}",
        "answers": {
            "tokens": answered.total(),
            "distinct": len(answered),
            "machine": data["machine"],
        },  # fmt: skip
        "vocab_size": vocab,
        "rows": args.rows,
        "ranked": ranked,
    }
    Path(args.ranks).write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"wrote {args.ranks}: {len(ranked):,} ranked ids, default head {args.rows:,} rows")


def wordfreq_version() -> str:
    from importlib.metadata import version

    return version("wordfreq")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("answers", help="the target's answers to the ranking prompts")
    a.add_argument("--out", default=str(ANSWERS))
    a.add_argument("--temperature", type=float, default=0.7)
    a.add_argument("--max-new-tokens", type=int, default=128)
    b = sub.add_parser("build", help="count, rank and write specdemo/data/token_ranks.json")
    b.add_argument("--answers", default=str(ANSWERS))
    b.add_argument("--ranks", default=str(RANKS))
    b.add_argument("--rows", type=int, required=True, help="the default head size")
    args = parser.parse_args()
    answers(args) if args.command == "answers" else build(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
