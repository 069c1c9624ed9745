"""How well the profile's widths price a long copy's pass: every width from 1 to 33 rows timed,
against the straight line automatic K draws between the widths the profile times.

    python scripts/copy_widths.py [out.json]

The embedded pair's target at the profile's synthetic context (``modes.synthetic_context``),
each width the median of 5 passes, all widths taking turns within each repeat, over two rounds
of the whole grid (``profile.pass_seconds``). The line is ``StepCosts.pass_seconds`` over the
widths ``profile.target_costs`` times: 1-9 rows and the copies' 17 and 33 (docs/BENCHMARKS.md,
"Long copies").
"""

import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specdemo.bench.machine import machine  # noqa: E402
from specdemo.cost.profile import COPY_KS, PROFILE_KS, pass_seconds  # noqa: E402
from specdemo.cost.theory import StepCosts  # noqa: E402
from specdemo.models import load_pair  # noqa: E402
from specdemo.runtime.modes import synthetic_context  # noqa: E402

ROWS = tuple(range(1, 34))


def main(out: Path) -> None:
    pair = load_pair()
    target = pair.target
    context = synthetic_context(target)
    rounds = [pass_seconds(target, context, ROWS) for _ in range(2)]
    measured = {n: min(r[n] for r in rounds) for n in ROWS}  # the quieter of two rounds
    profiled = {k: measured[k + 1] for k in (*PROFILE_KS, *COPY_KS)}
    line = StepCosts(measured[1], 0.0, profiled)
    step = measured[1]
    widths = [
        {
            "rows": n,
            "measured_steps": measured[n] / step,
            "line_steps": line.pass_seconds(n) / step,
            "timed_by_profile": n == 1 or n - 1 in profiled,
        }
        for n in ROWS
    ]
    between = [w for w in widths if not w["timed_by_profile"]]
    errors = [abs(w["line_steps"] / w["measured_steps"] - 1) for w in between]
    result = {
        "machine": machine(target.device),
        "models": asdict(pair.summary),
        "t_step": step,
        "widths": widths,
        "max_error": max(errors),
        "mean_error": sum(errors) / len(errors),
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "widths"}, indent=2))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "copy-widths.json"))
