"""The dispatch cost model: what it measures on tiny-width models of the real depths, how it turns
that into GPU costs per pair, and the CLI's `bench --dispatch`."""

import importlib.util
import json
from pathlib import Path
from unittest import mock

import pytest

from specdemo import cli
from specdemo.bench import dispatch_measure
from specdemo.cost import dispatch
from specdemo.cost.dispatch import ARCHS, Measured, arch_of, best_k, predict, predict_pair
from specdemo.cost.theory import StepCosts
from specdemo.models.kernels import four_bit_problem
from specdemo.models.pairs import PAIRS, ModelSpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def depths() -> dict[int, Measured]:
    """Tiny-width models of 4 layers and of the embedded pair's depths, measured here."""
    four_bit = four_bit_problem() is None
    return dispatch_measure.measure_depths((4, 24, 28), (1, 2), four_bit, repeats=2)


def synthetic(seconds_per_layer=1.5e-3, widths=range(1, 10)) -> dict[str, Measured]:
    """Every arch as if its host time and kernel count were proportional to its depth."""
    return {
        name: Measured(
            arch.num_hidden_layers,
            {w: seconds_per_layer * arch.num_hidden_layers for w in widths},
            {w: 17 + 36 * arch.num_hidden_layers for w in widths},
        )
        for name, arch in ARCHS.items()
    }


def test_kernel_count_is_affine_in_layers(depths):
    k = {n: m.kernels[1] for n, m in depths.items()}
    per_layer = (k[28] - k[24]) / 4
    assert per_layer > 10 and per_layer == (k[24] - k[4]) / 20  # ops are deterministic
    assert k[24] / k[28] == pytest.approx(24 / 28, abs=0.02)


def test_host_time_grows_with_layers(depths):
    # 6x the layers; each figure is the faster of two repeats, so noise of +-50% still passes
    assert depths[24].host[1] > 2 * depths[4].host[1]


def test_eager_c_of_the_embedded_pair_follows_depth(depths):
    """With host time proportional to depth and the real kernel counts, an eager draft step of
    the 24-layer 0.5B costs 24/28 of a step of the 28-layer 1.5B: dispatch, not bytes."""
    measured = {
        name: Measured(n, {w: 1.5e-3 * n for w in (1, 2)}, depths[n].kernels)
        for name, n in (("0.5B", 24), ("1.5B", 28))
    }
    cost = predict_pair(PAIRS["qwen-coder"], measured, ks=(1,))
    assert (cost.target, cost.draft) == ("1.5B", "0.5B")
    assert cost.c["eager"] == pytest.approx(24 / 28, abs=0.02)
    assert cost.c["captured"] < cost.c["eager"] / 5  # a captured draft step is device time only
    assert cost.best["captured"][1] > cost.best["eager"][1]


def test_device_time_is_the_floor_when_dispatch_is_fast():
    """A host faster than the GPU leaves each step at its device time: bytes and kernels."""
    cost = predict_pair(PAIRS["qwen-coder-7b"], synthetic(seconds_per_layer=1e-9))
    assert cost.host[0] < cost.device[0]
    assert cost.c["eager"] == pytest.approx(cost.device[1] / cost.device[0])


def test_best_k_is_plain_steps_when_drafting_cannot_pay():
    verify = {k: 1.0 + 0.05 * k for k in range(1, 9)}
    assert best_k(StepCosts(1.0, 0.9, verify), alpha=0.8) == (0, 1.0)
    k, speedup = best_k(StepCosts(1.0, 0.02, verify), alpha=0.8)
    assert k > 1 and speedup > 2


def test_every_registered_model_pair_is_predicted():
    costs = predict(synthetic())
    expected = {name for name, pair in PAIRS.items() if pair.target.kind != "tiny"}
    assert {p.pair for p in costs} == expected and "tiny" not in expected
    assert {p.pair for p in costs if p.alpha_source == "measured"} == {"qwen-coder"}


def test_arch_of_reads_hub_ids_and_gguf_file_names():
    assert (arch_of(PAIRS["qwen-coder"].target), arch_of(PAIRS["qwen-coder"].draft)) == (
        "1.5B",
        "0.5B",
    )
    for size in ("0.5B", "7B", "14B", "32B"):
        assert arch_of(ModelSpec("m", source=f"Qwen/Qwen2.5-Coder-{size}-Instruct")) == size
    assert arch_of(ModelSpec("m", source="Qwen/Qwen2.5-Coder-3B-Instruct")) is None  # no config
    assert arch_of(PAIRS["tiny"].target) is None


@pytest.mark.parametrize("name, billions", [("0.5B", 0.36), ("1.5B", 1.31), ("7B", 6.53)])
def test_weight_bytes_count_the_published_non_embedding_parameters(name, billions):
    """Qwen2.5-Coder model cards: 0.36B, 1.31B and 6.53B parameters besides the embedding."""
    params = dispatch.weight_bytes(ARCHS[name], head_rows=0) / dispatch.NF4_BYTES_PER_PARAM
    assert params / 1e9 == pytest.approx(billions, rel=0.02)


def test_make_random_pair_builds_the_dispatch_archs():
    spec = importlib.util.spec_from_file_location("mrp", ROOT / "scripts" / "make_random_pair.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.ARCHS == {"target": ARCHS["1.5B"], "draft": ARCHS["0.5B"]}
    with mock.patch.object(script, "Qwen2ForCausalLM") as model:
        script.build("draft", eos_token_id=0, layers=2)
    config = model.call_args.args[0]
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (896, 2, 151936)
    assert config.tie_word_embeddings


def test_cli_bench_dispatch_prints_json_and_a_table_without_loading_a_pair(monkeypatch, capsys):
    by_depth = {m.layers: m for m in synthetic().values()}
    monkeypatch.setattr(dispatch_measure, "measure_depths", lambda depths, *args: by_depth)
    monkeypatch.setattr(cli, "load", mock.Mock(side_effect=AssertionError("loaded a pair")))
    assert cli.main(["bench", "--dispatch", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["measured"]) == set(ARCHS)
    assert {p["pair"] for p in out["pairs"]} >= {"qwen-coder", "qwen-coder-7b"}
    assert 0 < out["pairs"][0]["c"]["captured"] < out["pairs"][0]["c"]["eager"]
    assert cli.main(["bench", "--dispatch"]) == 0
    table = capsys.readouterr().out
    assert "| qwen-coder | 1.5B / 0.5B |" in table and "| 32B | 64 |" in table


def test_each_pair_is_predicted_on_the_h200_and_on_the_gpu_zerogpu_lends():
    """Half an RTX Pro 6000 Blackwell reads weights at half the card's 1,792 GB/s: every device
    time grows, most for the largest weights; host times, being the host's, stay."""
    assert dispatch.RTX_PRO_HALF.bytes_per_s == 0.896e12 < dispatch.H200.bytes_per_s
    costs = predict(synthetic(seconds_per_layer=1e-6))  # device-bound: the bandwidth shows
    by_gpu = {(p.gpu, p.pair): p for p in costs}
    assert {gpu for gpu, _ in by_gpu} == {"H200", "RTX Pro 6000 Blackwell, half (ZeroGPU)"}
    for name in ("qwen-coder", "qwen-coder-14b"):
        h200, rtx = by_gpu["H200", name], by_gpu[dispatch.RTX_PRO_HALF.name, name]
        assert rtx.host == h200.host and rtx.device[0] > h200.device[0]
    grew = {n: by_gpu[dispatch.RTX_PRO_HALF.name, n].device[0] / by_gpu["H200", n].device[0]
            for n in ("qwen-coder", "qwen-coder-14b")}  # fmt: skip
    assert 1 < grew["qwen-coder"] < grew["qwen-coder-14b"] < 4.8e12 / 0.896e12


def test_predictions_are_made_again_from_a_recorded_reports_measured_inputs(capsys):
    """``bench --dispatch --measured FILE``: docs/bench/dispatch.json's own predictions come back
    from its measured inputs, with nothing measured here."""
    path = ROOT / "docs/bench/dispatch.json"
    recorded = json.loads(path.read_text())
    measured = AssertionError("measured")
    with mock.patch.object(dispatch_measure, "measure_depths", side_effect=measured):
        assert cli.main(["bench", "--dispatch", "--measured", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["measured"] == recorded["measured"] and again["pairs"] == recorded["pairs"]


def test_a_tree_pass_costs_its_widest_measured_dispatch_or_its_device_time(monkeypatch):
    """Past the widths measured, an eager pass costs the widest measured host time (dispatch
    does not grow with rows) unless the device's time, which grows with rows (dequantised
    weights and arithmetic), is larger; the fishbone priced with siblings never kept is no
    faster than the chain."""
    from specdemo.cost import dispatch_trees

    arch = dispatch.ARCHS["1.5B"]
    slow_host = dispatch.Measured(28, {1: 0.040, 9: 0.048}, {1: 1025, 9: 1032})
    seconds, device = dispatch_trees.pass_seconds(arch, slow_host, 64)
    assert seconds == 0.048 and 0 < device < seconds
    assert dispatch_trees.pass_seconds(arch, slow_host, 32)[1] < device  # fewer rows, less work
    fast_host = dispatch.Measured(28, {1: 1e-6, 9: 1e-6}, {1: 1025, 9: 1032})
    assert dispatch_trees.pass_seconds(arch, fast_host, 64) == (device, device)
    measured = {"1.5B": slow_host, "0.5B": dispatch.Measured(24, {1: 0.036}, {1: 881})}
    [best] = dispatch_trees.predict(measured, {"qwen-coder": dispatch.PAIRS["qwen-coder"]})
    assert best.steps[64] == pytest.approx(0.048 / 0.040) and best.tree[3] > best.chain[3]
    monkeypatch.setattr(dispatch_trees, "SIBLING_PRIOR", 0.0)
    [flat] = dispatch_trees.predict(measured, {"qwen-coder": dispatch.PAIRS["qwen-coder"]})
    assert flat.tree[3] <= flat.chain[3]
