"""Command line: ``python -m specdemo generate|prepare|bench``.

``generate`` streams the answer with each token coloured by what happened to it (plain text when
stdout is not a terminal) and then prints the stats; ``--json`` prints one JSON object instead.
"""

import argparse
import json
import sys
from pathlib import Path

from specdemo.defaults import DEFAULTS, DRAFTERS, default_drafter
from specdemo.judge.verify import JUDGES
from specdemo.models.pairs import DEVICES, PRECISIONS


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pair", help="named pair (env SPECDEMO_PAIR; default qwen-coder)")
    parser.add_argument(
        "--target", help="target model: hub id or local folder (env SPECDEMO_TARGET)"
    )
    parser.add_argument("--draft", help="draft model: hub id or local folder (env SPECDEMO_DRAFT)")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="env SPECDEMO_PRECISION; 4bit (default): the fastest 4-bit kernel here",
    )
    parser.add_argument("--device", choices=DEVICES, help="env SPECDEMO_DEVICE")


def load(args, quiet: bool = False):
    """The pair named by the flags (or env vars), warmed up so nothing timed pays one-off work."""
    from specdemo.models import ProgressBars, load_pair, warm_up

    pair = load_pair(
        args.pair,
        target=args.target,
        draft=args.draft,
        precision=args.precision,
        device=args.device,
        progress=None if quiet else ProgressBars(),
    )
    warm_up(pair)
    return pair


def cmd_generate(args) -> int:
    from specdemo.decode.engine import (
        check_k,
        check_max_new_tokens,
        check_tree_width,
        make_generator,
        resolve_k,
        speculative_generate,
    )
    from specdemo.decode.render import ansi, legend_ansi, round_spans
    from specdemo.decode.rounds import Stats
    from specdemo.draft.drafters import make_drafter
    from specdemo.judge.sampling import SamplingConfig
    from specdemo.runtime.threads import fitted
    from specdemo.text import Detokenizer, encode_prompt

    sampling = SamplingConfig(args.temperature, args.top_k, args.top_p)  # checked before loading
    if args.k != "auto":  # the library's own checks, before the models load
        check_k(args.k)
    check_max_new_tokens(args.max_new_tokens)
    check_tree_width(args.tree_width)
    if args.tree_width == "auto" and args.k != "auto":
        raise ValueError("--tree-width auto is chosen by automatic K: it needs --k auto")
    pair = load(args, quiet=args.json)
    input_ids = encode_prompt(pair.tokenizer, args.prompt, system=args.system)
    generator = make_generator(args.seed, pair.target.device)
    drafter = make_drafter(
        args.drafter or default_drafter(pair.target.device),
        pair.draft,
        sampling,
        generator,
        pair.target.device,
        adaptive=args.adaptive,
    )
    stats, detok, tokens = Stats(), Detokenizer(pair.tokenizer), []
    colour = sys.stdout.isatty() and not args.json
    if colour:
        print(legend_ansi(), file=sys.stderr)
    rounds = speculative_generate(
        pair.target,
        drafter,
        input_ids,
        k=resolve_k(args.k, pair.target, drafter, args.tree_width),
        sampling=sampling,
        max_new_tokens=args.max_new_tokens,
        generator=generator,
        stats=stats,
        tree_width=args.tree_width,
        verify=args.verify,
    )
    with fitted(pair.target.device):  # the cores other processes leave free, as in the app
        for r in rounds:
            tokens += r.tokens
            spans = round_spans(r, detok, show_rejected=colour)
            if not args.json:
                piece = ansi(spans) if colour else "".join(text for text, _ in spans)
                print(piece, end="", flush=True)
    text = pair.tokenizer.decode(tokens, skip_special_tokens=True)
    if args.json:
        print(
            json.dumps(
                {
                    "text": text,
                    "tokens": tokens,
                    "stats": stats.as_dict(),
                    "models": pair.summary.__dict__,
                }
            )
        )
        return 0
    print()
    print(f"\n{summary(stats)}", file=sys.stderr)
    return 0


def summary(s) -> str:
    """One line of a run's Stats: throughput, acceptance, passes and the measured step times,
    each verify pass by its rows (a tree's pass holds more than k + 1)."""
    verify = ", ".join(f"verify {n} rows: {1000 * t:.0f} ms" for n, t in s.t_verify_rows.items())
    judged = f"judged {JUDGES[s.verify]}"
    if s.verify == "block" and s.judge_gain is not None:
        judged += f" (kept {s.judge_gain:.2f}x what token by token keeps of the same drafts)"
    return (
        f"{s.new_tokens} tokens in {s.wall_time:.2f} s ({s.tokens_per_s:.1f} tok/s) | "
        f"{judged} | α {s.alpha:.2f}, kept/drafted {s.kept_rate:.2f} | "
        f"{s.tokens_per_pass:.2f} tokens per target pass | "
        f"{s.rounds} target passes, {s.draft_passes} draft passes | "
        f"draft step {1000 * s.t_draft:.0f} ms, {verify}"
    )


def cmd_prepare(args) -> int:
    from specdemo.models import ProgressBars, prepare

    folders = prepare(args.pair, precision=args.precision, progress=ProgressBars())
    for folder in folders:
        print(folder)
    return 0


def cmd_bench(args) -> int:
    if args.dispatch:
        return cmd_dispatch(args)
    from specdemo.bench import grid as bench

    return bench.main(load(args, quiet=args.json), args)


def cmd_dispatch(args) -> int:
    """The dispatch cost model (``specdemo.cost.dispatch``): loads no pair, measures on the CPU."""
    import dataclasses

    from specdemo.bench import dispatch_measure
    from specdemo.cost import dispatch

    if args.measured:  # a recorded report's measured inputs, predicted again
        recorded = json.loads(Path(args.measured).read_text())
        report = dispatch.report_from_measured(recorded)
    else:
        report = dispatch_measure.dispatch_report()
    text = (
        json.dumps(dataclasses.asdict(report)) if args.json else dispatch_measure.markdown(report)
    )
    print(text)
    return 0


def add_bench_args(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small grid, about 5 minutes")
    parser.add_argument(
        "--ks", type=k_value, nargs="+", help='k values, "auto" among them (--quick: 2 4 auto)'
    )
    parser.add_argument(
        "--temperatures", type=float, nargs="+", help="default 0 0.7 1 (--quick: 0 1)"
    )
    parser.add_argument(
        "--sets",
        nargs="+",
        help="prompt sets: default code prose copy edits (--quick: code prose, two prompts each)",
    )
    parser.add_argument("--max-new-tokens", type=int, help="default 96 (--quick: 64)")
    parser.add_argument("--per-set", type=int, help="prompts per set (default all; --quick: 2)")
    parser.add_argument(
        "--drafter",
        nargs="+",
        choices=DRAFTERS,
        default=["model"],
        help="our drafters, each run side by side",
    )
    parser.add_argument(
        "--peer",
        choices=["assisted", "lookup"],
        default="assisted",
        help="transformers' generate to compare with at each k: assisted generation with the "
        "same draft, or its prompt lookup (prompt_lookup_num_tokens = k; 10 for auto)",
    )
    parser.add_argument("--adaptive", action="store_true", help="adaptive k in our drafter")
    parser.add_argument("--repeats", type=int, default=1, help="runs per prompt and method")
    parser.add_argument("--no-peer", action="store_true", help="skip the peer (transformers)")
    parser.add_argument(
        "--no-plain", action="store_true", help="skip the engine's own target-only loop"
    )
    parser.add_argument(
        "--draft-head-rows",
        type=lambda v: v if v == "auto" else int(v),
        default="auto",
        help="draft head over the N token ids the target writes most often (exact for any N); "
        "0 = the full head; default auto (the measured count for a ranked vocabulary)",
    )
    parser.add_argument(
        "--self-draft",
        action="store_true",
        help="draft = target (alpha = 1): the best case, for speed checks",
    )
    parser.add_argument(
        "--dispatch",
        action="store_true",
        help="only the dispatch cost model: tiny-width models of the real depths timed here, "
        "GPU step costs predicted for every registered pair; loads no pair (about 30 s)",
    )
    parser.add_argument(
        "--measured",
        metavar="JSON",
        help="with --dispatch: predict from the measured inputs of a recorded report "
        "(bench --dispatch --json) instead of measuring here",
    )
    parser.add_argument(
        "--tree-widths",
        type=k_value,
        nargs="+",
        default=[1],
        help='tree widths per drafter (1: the chain; 2 and more: a fishbone of siblings; "auto": '
        "chosen with automatic K, which it needs)",
    )
    parser.add_argument(
        "--verify",
        type=judge_names,
        nargs="+",
        default=[[DEFAULTS["verify"]]],
        help="the judges to run side by side on the same prompts and seeds: token, block, or "
        "both (token,block or token block)",
    )
    parser.add_argument(
        "--busy",
        type=busy_count,
        nargs="+",
        default=[0],
        help="run every prompt beside each of these numbers of busy processes in turn (e.g. "
        "0 1 2: quiet, one and two busy loops), started and stopped by the bench",
    )
    parser.add_argument(
        "--threads",
        type=thread_count,
        default="auto",
        help="torch threads for every run; default auto: the cores other processes leave free, "
        "measured before each prompt's runs, as the app does",
    )
    parser.add_argument("--out", default="bench_out", help="folder for JSON, Markdown, HTML")
    parser.add_argument("--json", action="store_true", help="print the JSON summary")


def busy_count(text: str) -> int:
    """A --busy value: a whole number of busy processes, 0 or more."""
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"the number of busy processes must be >= 0, got {n}")
    return n


def judge_names(text: str) -> list[str]:
    """A --verify value of the bench: judges by name, comma-separated."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in JUDGES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"judges are {' and '.join(JUDGES)}, got {text!r}")
    return names


def thread_count(text: str) -> int | str:
    """A --threads value: "auto" or a whole number of threads, 1 or more."""
    if text == "auto":
        return text
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"threads must be >= 1 or auto, got {n}")
    return n


def k_value(text: str) -> int | str:
    """A --k value: a whole number or "auto"."""
    return text if text == "auto" else int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m specdemo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="speculative generation in the terminal")
    gen.add_argument("prompt")
    gen.add_argument("--system", help="system prompt for chat models")
    gen.add_argument(
        "--k",
        type=k_value,
        default=DEFAULTS["k"],
        help='draft tokens per round, or "auto": chosen per round from measured costs',
    )
    gen.add_argument(
        "--temperature", type=float, default=DEFAULTS["temperature"], help="0 means greedy"
    )
    gen.add_argument("--top-k", type=int, default=DEFAULTS["top_k"])
    gen.add_argument("--top-p", type=float, default=DEFAULTS["top_p"])
    gen.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    gen.add_argument("--max-new-tokens", type=int, default=DEFAULTS["max_new_tokens"])
    gen.add_argument(
        "--drafter",
        choices=DRAFTERS,
        help="default: suffix-hybrid (a copy from the context where the text repeats, else the "
        "draft model)",
    )
    gen.add_argument(
        "--adaptive", action="store_true", help="stop drafting when the draft is unsure"
    )
    gen.add_argument(
        "--tree-width",
        type=k_value,
        default=1,
        help="guesses tried per position (1: a chain; more: siblings drawn from the draft's q; "
        '"auto", with --k auto: the width that pays, round by round)',
    )
    gen.add_argument(
        "--verify",
        choices=list(JUDGES),
        default=DEFAULTS["verify"],
        help="the judge: token (each draft on its own, stopping at the first rejection) or "
        "block (the drafts as one block: keeps as many or more, still exact; a tree is judged "
        "by traversal)",
    )
    gen.add_argument("--json", action="store_true", help="print one JSON object")
    add_model_args(gen)
    gen.set_defaults(func=cmd_generate)

    prep = sub.add_parser("prepare", help="build the model caches ahead of the first run")
    add_model_args(prep)
    prep.set_defaults(func=cmd_prepare)

    bench = sub.add_parser("bench", help="benchmark against transformers generate")
    add_model_args(bench)
    bench.set_defaults(func=cmd_bench)
    add_bench_args(bench)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from specdemo.runtime import threads

    threads.cap()  # torch's threads within the CPUs and quota this process may use
    try:
        return args.func(args)
    except ValueError as e:  # bad input: a clear message, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
