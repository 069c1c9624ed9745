"""docs/INSTALL.md's blocks: the first and later starts and the disk the pair takes
(startup.json, models.pairs), which laptop picks which kernel (laptop-*.json), a ZeroGPU Space's
predicted speedups, asks and quotas (dispatch.json and gpu.py), the larger pairs a roomy GPU is
told of, and what the χ² suite's draws can see."""

import re

from docs_writer.cells import table
from docs_writer.core import ROOT, load
from docs_writer.runs import kernel_picked, laptops, startup_figures
from docs_writer.zerogpu import PROMPT_TOKENS, zerogpu_jobs
from specdemo.cost import dispatch

LAPTOP_CPUS = {
    "avx512": "x86 with AVX512-BF16 (Xeon Sapphire Rapids and later, AMD Zen 4 and later)",
    "avx2-emulated": "x86 with AVX2 only (Intel Core, AMD Ryzen before Zen 4), emulated",
}
NOT_MEASURED = "not measured"


def install_laptops() -> str:
    rows = [
        [LAPTOP_CPUS[cpu], kernel_picked(r), f"{r['target step ms']:.0f} ms",
         f"{r['ready seconds']:.0f} s"]
        for cpu, r in laptops().items()
    ]  # fmt: skip
    rows.append(
        ["Apple silicon (M1 and later)", "none: fp16 on the GPU (MPS)", *[NOT_MEASURED] * 2]
    )
    header = ["laptop CPU", "kernel picked", "target step", "ready, warm start"]
    return table(header, rows)


def zerogpu_asks() -> str:
    j = zerogpu_jobs()
    calls, seconds = j["sweep"]
    return (
        f"For a {PROMPT_TOKENS}-token prompt on the defaults that is {j['run']} s to generate, "
        f"{j['exact']} s for the exactness check and {j['step']} s for a step. The default sweep "
        f"is {calls} calls asking for {seconds} s in all."
    )


def zerogpu_steps() -> str:
    j = zerogpu_jobs()
    gpu = j["gpu"]
    return (
        "A step's budget comes from the loaded pair's own depth and bytes (`gpu.budget_of`, "
        f"`dispatch.step_budget`): the larger of {dispatch.HOST_LAYER_S * 1e3:g} ms of host-side "
        "dispatch per decoder layer (measured on a 2-core CPU, "
        "[BENCHMARKS](BENCHMARKS.md#gpu-predicted-from-the-dispatch-model); a datacenter host "
        "may dispatch faster) and the device time the dispatch model predicts. "
        f"That is {gpu.EMBEDDED.t_step * 1e3:.0f} ms a target step for the embedded 28-layer "
        f"1.5B, {j['deep'].t_step * 1e3:.0f} ms for the 48-layer 14B, and "
        f"{gpu.EMBEDDED.t_draft * 1e3:.0f} ms a draft step for the 24-layer 0.5B."
    )


ZEROGPU_ROWS = {
    "eager": "draft step eager, against an eager target alone, code",
    "captured": "draft step captured, against an eager target alone, code",
    "lookup": "prompt lookup, against an eager target alone, copy-heavy prompts",
    "both captured": "**draft step and target captured, against the target alone captured, code**",
    "lookup, target captured": "**prompt lookup, target captured, against the target alone "
    "captured, copy-heavy prompts**",
}


def zerogpu_pairs() -> str:
    """The predicted speedups of the embedded pair and the 14B on an H200, each against the
    target alone run as the speculative side runs it, and each pair's ask for the default run."""
    best = {p["pair"]: p["best"] for p in load("dispatch.json")["pairs"] if p["gpu"] == "H200"}
    j = zerogpu_jobs()

    def cell(pair: str, how: str) -> str:
        k, speedup = best[pair][how]
        return f"{speedup:.2f}× " + ("(K = 0: drafting would not pay)" if k == 0 else f"(K = {k})")

    rows = [[label, cell("qwen-coder", how), cell("qwen-coder-14b", how)]
            for how, label in ZEROGPU_ROWS.items()]  # fmt: skip
    rows.append([f"GPU seconds asked for the default run ({PROMPT_TOKENS}-token prompt, "
                 "automatic K; computed from each pair's step budgets)",
                 f"{j['run']} s", f"{j['run_14b']} s"])  # fmt: skip
    header = ["predicted on an H200 (dispatch model)", "embedded pair (1.5B / 0.5B)",
              "`qwen-coder-14b` (14B / 0.5B)"]  # fmt: skip
    return table(header, rows)


def gguf_size() -> str:
    """The embedded pair's two GGUF files, as `models.pairs` records their sizes."""
    from specdemo.models import pairs  # noqa: PLC0415

    size = pairs.QWEN_CODER_1_5B_GGUF.size + pairs.QWEN_CODER_0_5B_GGUF.size
    return f"{size / 1e9:.1f} GB"


def install_start() -> str:
    """INSTALL's first and later starts, their memory, and the disk the pair takes."""
    f = startup_figures()
    return (
        f"As {f['where']} (`bench/startup.json`): a first start from an empty cache took "
        f"{f['cold']}, its conversion peaking at {f['convert peak']} of memory; a later "
        f"`python app.py` was ready in {f['ready']}, {f['load']} of it loading the pair and the "
        f"rest warming it up and profiling the step costs, at a peak of {f['warm peak']}; the "
        f"running app holds {f['resident']}. On disk the GGUF files are kept twice, "
        f"{gguf_size()} in the installed chunk packages and as much again assembled under "
        "`<cache>/gguf/`, beside the 4-bit models, about as large again ([MODELS](MODELS.md))."
    )


def exactness_draws() -> str:
    """The χ² suite's draws a case and what they can see, from tests/test_exactness.py."""
    text = (ROOT / "tests" / "test_exactness.py").read_text(encoding="utf-8")
    n = int(re.search(r"^N_DRAWS = ([\d_]+)", text, re.M)[1])
    tv = float(re.search(r"^DETECTABLE_TV = ([\d.]+)", text, re.M)[1])
    return (
        f"The χ² suite (`tests/test_exactness.py`) draws {n:,} samples a case (`N_DRAWS`), "
        f"enough to catch a departure of {tv:g} in total variation at least 95% of the time "
        "(`DETECTABLE_TV`)."
    )


def larger_pairs() -> str:
    """The larger pairs a roomy GPU is told of, their download and GPU memory (models.pairs)."""
    from specdemo.models import pairs  # noqa: PLC0415

    cells = [
        f"`{name}` ({pairs.PAIRS[name].target.name}: a {pairs.PAIRS[name].download_gb:g} GB "
        f"download of bf16 safetensors, about {pairs.PAIRS[name].gpu_gb:g} GB of GPU memory in "
        "4-bit)"
        for name in pairs.LARGER_PAIRS
    ]
    return "The larger pairs, as `models.pairs` sizes them: " + "; ".join(cells) + "."


def zerogpu_quotas() -> str:
    """ZeroGPU's daily quotas and admission, as gpu.py holds them."""
    gpu = zerogpu_jobs()["gpu"]
    return (
        f'The page\'s tiers: "Unauthenticated: {gpu.QUOTA_SECONDS // 60} minutes", '
        f'"Free account: {gpu.SIGNED_IN_QUOTA_SECONDS // 60} minutes", '
        f'"PRO account: {gpu.PRO_QUOTA_SECONDS // 60} minutes (extensible)" a day '
        "(`gpu.QUOTA_SECONDS`, `SIGNED_IN_QUOTA_SECONDS`, `PRO_QUOTA_SECONDS`). So a call on "
        f"`large` starts only if the visitor's quota has {gpu.DURATION_FACTOR:g} times its ask "
        f"left, and is then charged the seconds it uses. One call asks for at most "
        f"{gpu.max_seconds()} s (`gpu.max_seconds()`: the unauthenticated quota over that "
        "factor)."
    )


BLOCKS = {
    "install-start": install_start,
    "install-laptops": install_laptops,
    "zerogpu-pairs": zerogpu_pairs,
    "zerogpu-quotas": zerogpu_quotas,
    "zerogpu-asks": zerogpu_asks,
    "zerogpu-steps": zerogpu_steps,
    "larger-pairs": larger_pairs,
    "exactness-draws": exactness_draws,
}
