"""The command line on the tiny pair: generate (text and JSON), bad input, and a small bench."""

import json

import pytest
import torch

from specdemo import cli
from specdemo.bench import report as bench_report
from specdemo.defaults import DEFAULTS

TINY = ["--pair", "tiny", "--precision", "fp32", "--device", "cpu"]


@pytest.fixture(autouse=True)
def tiny_cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("SPECDEMO_CACHE", str(tmp_path_factory.getbasetemp() / "cli-cache"))


def test_generate_json_reports_tokens_text_and_stats(capsys):
    code = cli.main(["generate", "def is_prime(n):", "--max-new-tokens", "12", "--json", *TINY])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tokens"]) == 12 and isinstance(out["text"], str)
    stats = out["stats"]
    assert stats["new_tokens"] == 12 and stats["k"] == DEFAULTS["k"]
    assert 0 <= stats["kept_rate"] <= 1 and stats["t_draft"] > 0
    assert out["models"]["pair"] == "tiny"


def test_generate_verifies_token_trees(capsys):
    """--tree-width 3 at T = 1: siblings are tried, and some are kept, on the tiny pair."""
    flags = ["--temperature", "1", "--k", "2", "--tree-width", "3", "--max-new-tokens", "48"]
    assert cli.main(["generate", "def f():", "--json", *flags, *TINY]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["new_tokens"] == 48 and stats["siblings_kept"] > 0


def test_generate_judges_the_whole_block_and_says_so(capsys):
    """--verify block at T = 1, K = 4: the rounds are judged as blocks, and the summary names the
    judge and what token by token would have kept of the same drafts."""
    flags = ["--temperature", "1", "--k", "4", "--max-new-tokens", "32", "--verify", "block"]
    assert cli.main(["generate", "def f():", "--json", *flags, *TINY]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["verify"] == "block" and stats["token_rounds"] == stats["rounds"]
    assert stats["judge_gain"] > 0
    assert cli.main(["generate", "def f():", *flags, *TINY]) == 0
    err = capsys.readouterr().err
    assert "judged the whole block (kept" in err and "what token by token keeps" in err


def test_generate_json_says_which_4bit_kernel_runs_and_why(capsys):
    four_bit = ["--pair", "tiny", "--precision", "4bit", "--device", "cpu"]
    assert cli.main(["generate", "def f():", "--max-new-tokens", "4", "--json", *four_bit]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    assert models["precision"] in ("nf4", "int4") and models["requested"] == "4bit"
    assert "measured here" in models["kernel_note"]


def test_a_precision_that_does_not_exist_names_the_choices(capsys, monkeypatch):
    monkeypatch.setenv("SPECDEMO_PRECISION", "int3")
    assert cli.main(["generate", "x", "--pair", "tiny", "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert "unknown precision 'int3'; choose one of: 4bit, nf4, int4, bf16, fp32" in error


def test_generate_streams_plain_text_and_a_summary_line(capsys):
    code = cli.main(
        ["generate", "Write a function.", "--k", "3", "--temperature", "0", "--max-new-tokens",
         "10", *TINY]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "\x1b[" not in captured.out  # not a terminal: no colour codes
    assert "10 tokens in" in captured.err and "draft step" in captured.err


def test_the_summary_names_each_verify_pass_by_its_rows():
    """A chain of K = 2 is a pass over 3 rows; a fishbone of K = 2 at width 3, over 7: the
    summary names each measured pass by its rows, never by a K that a tree's pass is not."""
    from specdemo.decode.rounds import Stats

    stats = Stats(new_tokens=10, wall_time=1.0, rounds=2, verify_times={3: [0.02], 7: [0.05]})
    line = cli.summary(stats)
    assert "verify 3 rows: 20 ms, verify 7 rows: 50 ms" in line and "k=" not in line


def test_cli_defaults_are_the_shared_defaults():
    args = cli.build_parser().parse_args(["generate", "x"])
    for name in ("k", "temperature", "top_k", "top_p", "seed", "max_new_tokens"):
        assert getattr(args, name) == DEFAULTS[name], name
    assert args.drafter is None  # default_drafter(device): the suffix hybrid


def test_the_default_drafter_copies_where_the_text_repeats_on_every_device():
    from specdemo.defaults import default_drafter

    assert default_drafter("cpu") == DEFAULTS["drafter"] == "suffix-hybrid"
    assert default_drafter("cuda:0") == default_drafter(torch.device("cuda")) == "suffix-hybrid"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--k", "-1"], "k must be >= 0"),
        (["--max-new-tokens", "-3"], "max_new_tokens must be >= 0"),
        (["--temperature", "-2"], "temperature must be in"),
        (["--pair", "nope"], "unknown model pair"),
        (["--tree-width", "0"], "tree_width must be a whole number >= 1"),
        (["--k", "2", "--tree-width", "auto"], "--tree-width auto is chosen by automatic K"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(capsys, flags, message):
    assert cli.main(["generate", "x", *TINY, *flags]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"error: {message}") and "Traceback" not in err


def test_bench_writes_its_tables_with_step_costs(tmp_path, capsys):
    out = tmp_path / "bench"
    code = cli.main(
        ["bench", *TINY, "--ks", "1", "2", "auto", "--temperatures", "0", "--sets", "code",
         "--per-set", "1", "--max-new-tokens", "8", "--drafter", "model", "lookup", "--out",
         str(out), "--json"]
    )  # fmt: skip
    assert code == 0
    result = json.loads((out / "bench.json").read_text())
    costs = result["step_costs"]
    assert costs["t_step"] > 0 and costs["t_draft"] > 0 and set(costs["t_verify"]) == {"1", "2"}
    cells = [(r["drafter"], r["k"]) for r in result["rows"]]
    assert cells == [(d, k) for d in ("model", "lookup") for k in (1, 2, "auto")]
    row = result["rows"][0]
    assert row["c"] == pytest.approx(costs["t_draft"] / costs["t_step"])
    assert row["predicted"] > 0 and result["rows"][2]["predicted"] is None  # auto: no one k
    assert result["rows"][3]["c"] == 0.0  # a lookup draft costs no model step
    best = result["best_fixed_vs_auto"]
    assert [(b["drafter"], b["best_k"] in (1, 2), b["auto_speedup"] > 0) for b in best] == [
        ("model", True, True),
        ("lookup", True, True),
    ]
    md = (out / "bench.md").read_text()
    assert md.startswith("| prompt_set") and "| best_k |" in md
    assert json.loads(capsys.readouterr().out)["rows"] == result["rows"]


def test_bench_measures_each_load_in_turn_beside_its_own_busy_processes(tmp_path, monkeypatch):
    """A load that did not last through its runs (here the second prompt's busy process, ended
    on purpose) is flagged in the JSON and left out of the tables."""
    import contextlib

    from specdemo.bench import busy
    from specdemo.bench import grid as bench

    loads = []

    @contextlib.contextmanager
    def counted(n):  # the busy processes that run beside each prompt's runs
        loads.append(n)
        with busy.busy(n) as procs:
            if len(loads) == 4:
                for proc in procs:
                    proc.kill()
                    proc.wait()
            yield procs

    monkeypatch.setattr(bench, "busy", counted)
    out = tmp_path / "bench"
    code = cli.main(
        ["bench", *TINY, "--ks", "1", "auto", "--temperatures", "1", "--sets", "code",
         "--per-set", "2", "--max-new-tokens", "8", "--no-peer", "--busy", "0", "1",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0 and loads == [0, 1, 0, 1]  # interleaved: each prompt under each load
    result = json.loads((out / "bench.json").read_text())
    assert result["settings"]["busy"] == [0, 1]
    assert [(r["busy"], r["k"]) for r in result["rows"]] == [
        (0, 1),
        (0, "auto"),
        (1, 1),
        (1, "auto"),
    ]
    assert [r["busy_died"] for r in result["rows"]] == [0, 0, 1, 1]
    assert [(p["busy"], p["busy_died"]) for p in result["plain_loop"]] == [(0, 0), (1, 1)]
    best = result["best_fixed_vs_auto"]
    assert [b["busy"] for b in best] == [0]  # the flagged load is left out
    assert all(
        b["auto_vs_best"] == pytest.approx(b["auto_speedup"] / b["best_speedup"]) for b in best
    )
    table = bench_report.busy_markdown(result)
    assert table.count("\n| code | 1 |") == 1 and "| **auto K** |" in table
    md = (out / "bench.md").read_text()
    assert table.strip() in md and "Left out: 2 cells whose busy processes ended" in md


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--busy", "-1"], "busy processes must be >= 0"),
        (["--threads", "0"], "threads must be >= 1"),
        (["--verify", "token,whole"], "judges are token and block"),
    ],
)
def test_bad_load_settings_are_refused_before_any_model_loads(capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", *TINY, *flags])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_bench_runs_each_drafter_at_each_tree_width(tmp_path):
    out = tmp_path / "bench"
    code = cli.main(
        ["bench", *TINY, "--ks", "2", "--temperatures", "1", "--sets", "prose", "--per-set", "1",
         "--max-new-tokens", "16", "--drafter", "model", "--tree-widths", "1", "3", "--no-peer",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    result = json.loads((out / "bench.json").read_text())
    assert result["settings"]["tree_widths"] == [1, 3]
    rows = {r["drafter"]: r for r in result["rows"]}
    assert set(rows) == {"model", "model, tree 3"}
    assert all(r["tokens_per_pass"] >= 1 for r in rows.values())


def test_bench_runs_both_judges_on_the_same_prompts_and_seeds(tmp_path):
    out = tmp_path / "bench"
    code = cli.main(
        ["bench", *TINY, "--ks", "3", "--temperatures", "1", "--sets", "code", "--per-set", "1",
         "--max-new-tokens", "16", "--drafter", "model", "--verify", "token,block", "--no-peer",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    result = json.loads((out / "bench.json").read_text())
    assert result["settings"]["verify"] == ["token", "block"]
    rows = {r["drafter"]: r for r in result["rows"]}
    assert set(rows) == {"model, token", "model, block"}
    assert rows["model, token"]["judge_gain"] == 1.0
    (compared,) = bench_report.block_vs_token(result)
    assert compared["drafter"] == "model" and compared["k"] == 3
    assert compared["tpp_ratio"] == pytest.approx(
        rows["model, block"]["tokens_per_pass"] / rows["model, token"]["tokens_per_pass"]
    )
    assert "The whole block against token by token" in (out / "bench.md").read_text()
