"""What a bench run's JSON says about itself and where to find a cell in it: the machine and
kernel it ran on (a lead line), the runs several documents quote (current.json, the edits runs,
the laptops, start-up), a row by set, temperature, drafter and K, and the step costs' rows."""

import functools

from docs_writer.cells import one, span
from docs_writer.core import load

CURRENT = "current.json"
EDITS = "edits.json"
EDIT_DRAFTERS = "edits-drafters.json"
DEFAULT_CHECK = "default.json"
PRECISIONS = {"int4": "torch's int4 kernel", "nf4": "bitsandbytes' NF4 kernel", "bf16": "bf16"}
# The CPUs the kernel and laptop runs were measured on (kernels-CPU.json, laptop-CPU.json).
CPUS = {"avx512": "AVX512-BF16", "avx2-emulated": "AVX2 (emulated)"}


def kernel_of(result: dict) -> str:
    """The 4-bit kernel a run used, from its JSON's precision (never guessed from the CPU)."""
    precision = (result.get("models") or {}).get("precision") or result.get("precision")
    return PRECISIONS.get(precision, precision) if precision else "kernel not recorded"


def cpu_of(machine: dict) -> str:
    """'2-core Intel Xeon Processor (AVX512-BF16, inferred)' from a JSON's machine. torch records
    "AVX512" without saying BF16: that, and any capability the JSON notes as inferred, is said
    to be inferred (BENCHMARKS says from what)."""
    capability, _, how = machine["cpu_capability"].partition(" (")
    model = machine["cpu"].replace("(R)", "").replace(" (model not recorded)", "")
    if capability == "not recorded":
        return f"{machine['cores']}-core {model} (model and capability not recorded)"
    if how.startswith("emulated"):
        capability += ", emulated"
    elif how or capability == "AVX512":
        capability = capability.replace("AVX512", "AVX512-BF16") + ", inferred"
    return f"{machine['cores']}-core {model} ({capability})"


def recorded(machine: dict) -> str:
    """What of a JSON's machine was filled in afterwards, and from what ("" when nothing was)."""
    how = machine.get("recorded", "")
    if not how:
        return ""
    tail = how.split("; ", 1)[1]
    if how.startswith("not recorded when measured"):
        return f"; the machine {tail}"
    return "; " + tail.replace("the date from", "the date filled in afterwards from")


def lead(name: str, verb: str = "Measured") -> str:
    """Where and when a JSON was measured, with the kernel and draft head it ran."""
    r = load(name)
    parts = [f"{verb} {r['machine']['date']} on a {cpu_of(r['machine'])}"]
    if (kernel := kernel_of(r)) != "kernel not recorded":
        parts.append(kernel)
    if rows := (r.get("draft_head") or {}).get("rows"):
        parts.append(f"the draft's head over {rows:,} ranked ids")
    return ", ".join(parts) + f" (`bench/{name}`{recorded(r['machine'])})."


def current_cell(result: dict, set_name: str, t: float, method: str, k="auto") -> dict:
    return next(
        r for r in result["rows"]
        if (r["prompt_set"], r["temperature"], r["drafter"], r["k"]) == (set_name, t, method, k)
    )  # fmt: skip


def current_cells(result: dict):
    """(set, T) in the run's order."""
    s = result["settings"]
    return [(name, t) for name in s["sets"] for t in s["temperatures"]]


def step_rows(costs: dict, draft_label: str) -> list[list]:
    t = costs["t_step"]
    rows = [["target, 1 token (t_step)", f"{t * 1000:.1f}", "1.00"]]
    rows.append([draft_label, f"{costs['t_draft'] * 1000:.1f}", f"c = {costs['t_draft'] / t:.2f}"])
    for k, seconds in sorted(costs["t_verify"].items(), key=lambda kv: int(kv[0])):
        label = f"target verify, {int(k) + 1} tokens (k = {k})"
        rows.append([label, f"{seconds * 1000:.1f}", f"{seconds / t:.2f}"])
    return rows


def auto_row(result: dict, set_name: str, t: float, drafter: str, k="auto") -> dict:
    return next(
        r for r in result["rows"]
        if (r["prompt_set"], r["temperature"], r.get("drafter", "model"), r["k"])
        == (set_name, t, drafter, k)
    )  # fmt: skip


def laptops() -> dict[str, dict]:
    return {cpu: load(f"laptop-{cpu}.json") for cpu in CPUS}


def kernel_picked(r: dict) -> str:
    return "bitsandbytes NF4" if r["precision"] == "nf4" else "torch int4"


def startup_figures() -> dict[str, str]:
    """startup.json's figures as the prose quotes them: where, a cold start, a later start."""
    s = load("startup.json")
    cold, warm, app = s["cold start"], s["warm starts"], s["python app.py"]
    return {
        "where": f"measured {s['machine']['date']} on a {cpu_of(s['machine'])}, {kernel_of(s)}",
        "cold": f"{cold['wall (s)']:.0f} s",
        "convert peak": f"{cold['peak RSS (GB)']:.2f} GB",
        "load": span([r["load_pair (s)"] for r in warm], one) + " s",
        "ready": span([r["ready (s)"] for r in app], one) + " s",
        "warm peak": span([r["peak RSS (GB)"] for r in warm]) + " GB",
        "resident": span([r["resident after warm-up (GB)"] for r in (cold, *warm)]) + " GB",
    }


def leads(*runs: str) -> dict:
    """The blocks "lead-RUN" for each of `runs`: RUN.json's lead line (`lead`)."""
    return {f"lead-{run}": functools.partial(lead, f"{run}.json") for run in runs}
