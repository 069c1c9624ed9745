"""scripts/gpu_smoke.sh without a GPU: its table and exit status, its step-cost verdicts against
the ZeroGPU budgets, and a dry run on the CPU."""

import importlib.util
import os
import subprocess
import time
from pathlib import Path

import pytest

from specdemo.app.page import gpu
from specdemo.cost.theory import StepCosts

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "scripts" / "gpu_smoke.py")
smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke)

ROWS = (
    "0 default pair", "1 versions", "2 nf4 linear", "3 tiny pair", "4 generate", "4 sweep",
    "4 exactness", "4 step",
    "5 t_step", "5 t_draft", "5 t_verify", "5 c", "5 static = eager", "5 t_draft static",
    "5 auto K", "5 target static = eager", "5 t_step static", "5 race, target modes",
    "6 gpu bench", "7 zerogpu load", "8 call share, first call",
    "8 call share, second call",
)  # fmt: skip


def test_every_check_runs_after_one_fails_and_the_status_is_then_1():
    ran = []

    def broken(run):
        ran.append("broken")
        raise RuntimeError("no kernel image\nsecond line")

    def fine(run):
        ran.append("fine")
        return [smoke.Outcome("2 fine", smoke.PASS, "ok")]

    outcomes = smoke.run_checks([("1 broken", broken), ("2 fine", fine)], run=None)
    assert ran == ["broken", "fine"]
    assert outcomes[0] == smoke.Outcome("1 broken", smoke.FAIL, "RuntimeError: no kernel image")
    assert smoke.exit_status(outcomes) == 1
    assert smoke.exit_status(outcomes[1:]) == 0


def test_rows_measured_but_not_judged_do_not_fail():
    outcomes = [smoke.Outcome("5 c", smoke.RAN, "0.7"), smoke.Outcome("1 x", smoke.PASS, "")]
    assert smoke.exit_status(outcomes) == 0


def test_the_table_has_a_header_and_a_row_per_outcome():
    lines = smoke.table([smoke.Outcome("1 versions", smoke.PASS, "torch 2.13")]).splitlines()
    assert lines == [
        "| check | result | figure |",
        "| --- | --- | --- |",
        "| 1 versions | pass | torch 2.13 |",
    ]


T_STEP, T_DRAFT = gpu.EMBEDDED.t_step, gpu.EMBEDDED.t_draft


def costs(t_step: float, t_draft: float, verify_steps: float) -> StepCosts:
    return StepCosts(t_step, t_draft, {k: verify_steps * t_step for k in range(1, 9)})


def test_step_costs_within_half_again_their_budget_pass():
    near_the_limit = costs(1.49 * T_STEP, 1.49 * T_DRAFT, gpu.VERIFY_STEPS)
    rows = {o.check: o for o in smoke.step_cost_outcomes(near_the_limit, judged=True)}
    assert list(rows) == ["5 t_step", "5 t_draft", "5 t_verify", "5 c"]
    assert {o.result for o in rows.values()} == {smoke.PASS, smoke.RAN}
    assert rows["5 c"].result == smoke.RAN
    assert f"= {T_DRAFT / T_STEP:.2f}" in rows["5 c"].figure
    assert "2..9 tokens" in rows["5 t_verify"].figure


def test_a_step_cost_over_half_again_its_budget_fails():
    slow_draft = costs(T_STEP, 1.6 * T_DRAFT, 1.0)
    wide_verify = costs(0.5 * T_STEP, T_DRAFT, 1.6 * gpu.VERIFY_STEPS)  # in steps
    slow_verify = costs(1.4 * T_STEP, T_DRAFT, 1.4 * gpu.VERIFY_STEPS)  # in seconds
    for measured, failing in (
        (slow_draft, "5 t_draft"), (wide_verify, "5 t_verify"), (slow_verify, "5 t_verify")
    ):  # fmt: skip
        rows = smoke.step_cost_outcomes(measured, judged=True)
        assert [o.check for o in rows if o.result == smoke.FAIL] == [failing]
        assert smoke.exit_status(rows) == 1


def test_step_costs_of_a_dry_run_are_shown_not_judged():
    rows = smoke.step_cost_outcomes(costs(10.0, 10.0, 10.0), judged=False)
    assert {o.result for o in rows} == {smoke.RAN}


@pytest.mark.slow
def test_gpu_smoke_dry_run_runs_every_check_on_the_cpu_and_stops_before_cuda(tmp_path):
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_smoke.sh"), "--dry-run", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=400,
        env={
            **os.environ,
            "SPECDEMO_RANDOM_PAIR": str(tmp_path / "pair"),
            "SPECDEMO_CACHE": str(tmp_path / "cache"),
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0].removeprefix("| ") for line in table[2:]] == list(ROWS)
    assert not any(" | FAIL | " in line for line in table)
    assert "dry run: stopped before CUDA (torch.cuda initialised: False)" in done.stdout
    assert not (tmp_path / "out").exists()
    print(f"dry run: {time.perf_counter() - start:.0f} s")
