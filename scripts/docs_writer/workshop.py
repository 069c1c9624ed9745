"""docs/WORKSHOP.md's blocks: a workshop laptop's first and later starts (startup.json), the
room of 30 against ZeroGPU's quotas (gpu.py's prices), the room through the app's API
(room.json), and how many guesses automatic K drafts on prose and code (current.json)."""

import math

from docs_writer.cells import table, temp
from docs_writer.core import load
from docs_writer.runs import CURRENT, cpu_of, current_cell, recorded, startup_figures
from docs_writer.zerogpu import PROMPT_TOKENS, zerogpu_jobs


def workshop_room() -> str:
    """WORKSHOP's room of 30: what the default run asks for and how many each quota starts."""
    j = zerogpu_jobs()
    gpu, run = j["gpu"], j["run"]
    needed = math.ceil(run * gpu.DURATION_FACTOR)  # as gpu.runs_within admits a call
    free, pro = (
        gpu.runs_within(q, run) for q in (gpu.SIGNED_IN_QUOTA_SECONDS, gpu.PRO_QUOTA_SECONDS)
    )
    unsigned = gpu.runs_within(gpu.QUOTA_SECONDS, run)
    quota, signed = gpu.QUOTA_SECONDS, gpu.SIGNED_IN_QUOTA_SECONDS
    lead = (
        f"The default run ({PROMPT_TOKENS}-token prompt, 128 tokens, automatic K) asks for "
        f"{run} s, "
        f"and ZeroGPU starts it only while the visitor's quota has {gpu.DURATION_FACTOR:g} × {run} "
        f"= {needed} s left, then charges the seconds it uses, no more than it asked for."
    )
    rows = [
        ["30 people on one Wi-Fi, not signed in",
         f"{quota // 60} minutes a day, shared per IP address",
         f"{unsigned} runs at least: the second starts with {quota} − {run} = {quota - run} s "
         "left, "
         "a third only if the first two used well under what they asked",
         f"{unsigned}–{unsigned + 1} runs for the whole room: it cannot work"],
        ["each person signed in to a free account", f"{signed // 60} minutes a day each",
         f"{free} at least: a run starts while {needed} s are left, and {signed} − {free - 1} × "
         f"{run} is more than that", f"{30 * free} runs or more"],
        ["each person signed in to PRO", f"{gpu.PRO_QUOTA_SECONDS // 60} minutes a day each",
         f"{pro} at least", "—"],
        ["the instructor on the projector, signed in to PRO",
         f"{gpu.PRO_QUOTA_SECONDS // 60} minutes a day",
         f"{pro} at least, and each sweep cell or exactness check counts too", "the room watches"],
    ]  # fmt: skip
    return lead + "\n\n" + table(["who runs it", "quota", "default runs", "for 30 people"], rows)


def workshop_laptop() -> str:
    """WORKSHOP's laptops: a first start, later starts and memory, from startup.json."""
    f = startup_figures()
    return (
        f"As {f['where']} (`bench/startup.json`), a machine the size of a workshop laptop: the "
        f"first start converts the models in {f['cold']}, and later starts are ready in "
        f"{f['ready']}. The running app "
        f"holds {f['resident']} ({f['warm peak']} at peak while loading); the one-time "
        f"conversion peaks at {f['convert peak']}, so on a laptop with little more memory than "
        "that, close other programs for the first start, or copy a cache converted on one "
        "machine (below)."
    )


def workshop_room_check() -> str:
    """WORKSHOP's room through the app's API (room.json), with what its record lacks."""
    r = load("room.json")
    m = r["machine"]
    return (
        f"Measured {m['date']} on a {cpu_of(m)} (`bench/room.json`{recorded(m)}), through the "
        f"app's public API (`python scripts/room_check.py`): when {r['people']} people pressed "
        f"Generate at once for 16-token answers, each with their own seed, all were served "
        f"within {r['all served (s)']:.0f} s, the median person in "
        f"{r['median person (s)']:.0f} s. One person's default sweep (K 1, 2, 4, auto × T 0, 1; "
        f"128 tokens a cell) took {r['default sweep (s)']:.0f} s, and a 16-token run someone "
        f"else asked for meanwhile was served in {r['16-token run during a sweep (s)']:.0f} s: "
        "it waited only for the cell under way (the first holds the target-alone run too), not "
        f"for the whole grid; asked for again, it was replayed in "
        f"{r['the same run again, replayed (s)']:.1f} s."
    )


def workshop_prose() -> str:
    """How many guesses automatic K drafts a pass on prose and on code (current.json)."""
    r = load(CURRENT)
    temps = r["settings"]["temperatures"]
    drafts = {
        s: [current_cell(r, s, t, "model, token")["mean_k"] for t in temps]
        for s in ("prose", "code")
    }
    at = " and ".join(f"T {temp(t)}" for t in temps)
    return (
        f"On prose automatic K drafted {' and '.join(f'{v:.2f}' for v in drafts['prose'])} "
        f"guesses a pass ({at}), on code {' and '.join(f'{v:.2f}' for v in drafts['code'])} "
        f"(measured {r['machine']['date']} on a {cpu_of(r['machine'])}, `bench/current.json`)."
    )


BLOCKS = {
    "workshop-laptop": workshop_laptop,
    "workshop-room": workshop_room,
    "workshop-room-check": workshop_room_check,
    "workshop-prose": workshop_prose,
}
