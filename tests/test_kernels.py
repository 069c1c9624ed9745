"""The 4-bit kernels: torch's int4 layer multiplies by the weight it stores, the probe chooses by
what it measures, and every kernel specdemo can choose keeps the target's distribution and its
greedy output. `scripts/as_laptop.sh` runs this file as on an AVX2 laptop too (.ci/run)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import PROMPT

from specdemo.app.config import encode, parse_run
from specdemo.app.exact import exactness, joint
from specdemo.app.page import handlers
from specdemo.decode.engine import make_generator
from specdemo.judge.sampling import RULES
from specdemo.models import convert, int4, kernels, load_pair, pairs
from specdemo.models.kernels import KernelChoice

ROOT = Path(__file__).resolve().parents[1]


def bitsandbytes_works() -> bool:
    return kernels.four_bit_problem() is None


# ---------------------------------------------------------------- torch's int4 layer


def test_an_int4_layer_multiplies_by_its_dequantised_weight():
    torch.manual_seed(0)
    linear = torch.nn.Linear(256, 96)
    layer = int4.Int4Linear.from_linear(linear, int4.group_size(256))
    weight = int4.dequantize(layer)  # (out, in)
    # Each weight lies within half a step of its group's 15-step grid (bf16 scales: + 1%).
    w = linear.weight.detach().reshape(96, 2, 128)
    step = (w.amax(-1, keepdim=True) - w.amin(-1, keepdim=True)) / 15
    error = (weight.reshape(96, 2, 128) - w).abs()
    assert (error <= 0.51 * step + 1e-3).all()
    assert error.mean() > 0.05 * step.mean()  # a real 4-bit grid, not the float weight
    x = torch.randn(2, 3, 256)
    y = layer(x)
    assert y.shape == (2, 3, 96) and y.dtype == torch.float32
    expected = x.to(torch.bfloat16).float() @ weight.T + linear.bias.detach()
    assert torch.allclose(y, expected, rtol=0.02, atol=0.02)


def test_group_size_is_the_largest_that_divides_and_the_output_layer_stays_16_bit(tiny_qwen):
    assert [int4.group_size(n) for n in (1536, 896, 64, 96, 100)] == [128, 128, 64, 32, None]
    names = [name for name, _, _ in int4.int4_layers(tiny_qwen)]
    assert len(names) == 2 * 7 and "lm_head" not in names


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("kernels-cache")


def test_an_int4_cache_is_keyed_by_the_cpus_vector_width(cache, monkeypatch):
    """A layout packed for one vector width is wrong under another: each width gets a folder."""
    spec = pairs.PAIRS["tiny"].target
    folder, _ = convert.cached_model(spec, "int4", cache)
    assert folder.name.endswith(f"-int4-{int4.isa()}")
    other = "avx2" if int4.isa() != "avx2" else "avx512"
    monkeypatch.setattr(int4, "isa", lambda: other)
    folder_b, cold = convert.cached_model(spec, "int4", cache)
    assert cold and folder_b.name.endswith(f"-int4-{other}") and folder_b != folder


def test_a_cached_int4_pair_gives_the_logits_it_was_quantised_to(cache, tmp_path):
    """Loaded from the cache, the model is the one quantised in memory: same logits, bit for bit,
    and the parameter count of the float model."""
    cold = load_pair("tiny", precision="int4", device="cpu", cache=tmp_path)
    warm = load_pair("tiny", precision="int4", device="cpu", cache=tmp_path)
    assert cold.summary.cold and not warm.summary.cold
    float_pair = load_pair("tiny", precision="fp32", device="cpu", cache=cache)
    assert warm.summary.target_params == float_pair.summary.target_params
    ids = warm.tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(cold.target(ids).logits, warm.target(ids).logits)
        p, f = warm.target(ids).logits.float(), float_pair.target(ids).logits
    # The same model in 4 bits (measured: 11% of the logits' norm; a wrong layout gives > 100%).
    assert (p - f).norm() < 0.25 * f.norm()
    assert any(isinstance(m, int4.Int4Linear) for m in warm.target.modules())


# ---------------------------------------------------------------- the probe


def test_the_fastest_kernel_wins_and_a_near_tie_goes_to_nf4():
    assert kernels.pick({"nf4": 1.0, "int4": 0.9}, fused=True) == "nf4"
    assert kernels.pick({"nf4": 1.0, "int4": 1.0 / (kernels.MARGIN + 0.01)}, fused=True) == "int4"
    assert kernels.pick({"nf4": 0.5, "int4": 1.0}, fused=True) == "nf4"
    # NF4 without its fused kernel is timed to be reported, never chosen.
    assert kernels.pick({"nf4-unfused": 0.1, "int4": 1.0}, fused=False) == "int4"
    assert kernels.pick({"nf4-unfused": 0.1}, fused=False) == ""


def test_the_probe_times_its_candidates_in_turns_after_a_warm_up():
    """A fake clock: each pass of layer a takes 2 s and of b 3 s, except a 100 s warm-up pass."""
    now, calls = [0.0], []

    def layer(name, cost):
        def run(x):
            calls.append(name)
            now[0] += 100.0 if calls.count(name) <= len(kernels.PROBE_ROWS) else cost

        return run

    seconds = kernels.time_layers({"a": layer("a", 2.0), "b": layer("b", 3.0)}, lambda: now[0])
    assert seconds == {"a": 2.0, "b": 3.0}
    rows = len(kernels.PROBE_ROWS)
    assert calls[: 4 * rows] == ["a"] * rows + ["b"] * rows + ["a"] * rows + ["b"] * rows


def test_the_page_says_why_with_the_figures_it_measured():
    laptop = KernelChoice("int4", {"nf4-unfused": 0.030, "int4": 0.006}, {}, "avx2", False)
    assert laptop.why == (
        "bitsandbytes' fused NF4 kernel needs AVX512-BF16, which this CPU lacks (measured here "
        "on a 1536×8960 layer: torch int4 6.00 ms, NF4 30.00 ms (5.0× slower))"
    )
    tie = KernelChoice("nf4", {"nf4": 0.0020, "int4": 0.0021}, {}, "avx512", True)
    assert tie.why == (
        "bitsandbytes NF4 runs: torch int4 is not 1.25× faster here, and NF4 is the format a GPU "
        "runs (measured here on a 1536×8960 layer: bitsandbytes NF4 2.00 ms, torch int4 2.10 ms)"
    )
    fast = KernelChoice("int4", {"nf4": 0.004, "int4": 0.002}, {}, "avx512", True)
    assert "torch int4 is 2.0× faster than bitsandbytes NF4" in fast.why
    none = KernelChoice("", {}, {"int4": "RuntimeError: x"}, "default", False)
    assert none.why == "no 4-bit kernel runs on this CPU (torch int4: RuntimeError: x)"


def test_a_start_keeps_the_kernel_whose_models_are_converted(monkeypatch):
    """When the probe's pick has no converted models but the other candidate's are cached (the
    two are close on an AVX512-BF16 CPU and a probe can flip), the start keeps the converted one
    and says why, instead of converting the pair again; with both or neither cached, or the
    other kernel no candidate here, the probe's pick runs."""
    flipped = KernelChoice("int4", {"nf4": 0.0030, "int4": 0.0020}, {}, "avx512", True)
    monkeypatch.setattr(kernels, "choose_kernel", lambda: flipped)
    precision, _, why = kernels.running_precision("4bit", "cpu", converted=lambda k: k == "nf4")
    assert precision == "nf4"
    assert why.startswith("bitsandbytes NF4 runs: its converted models are cached here")
    assert "SPECDEMO_PRECISION=int4 converts them" in why
    for converted in (lambda k: True, lambda k: False, lambda k: k == "int4"):
        assert kernels.running_precision("4bit", "cpu", converted=converted)[0] == "int4"
    laptop = KernelChoice("int4", {"nf4-unfused": 0.03, "int4": 0.006}, {}, "avx2", False)
    monkeypatch.setattr(kernels, "choose_kernel", lambda: laptop)
    assert kernels.running_precision("4bit", "cpu", converted=lambda k: k == "nf4")[0] == "int4"
    assert kernels.running_precision("int4", "cpu", converted=lambda k: k == "nf4")[0] == "int4"


def test_a_tiny_pair_converted_for_one_kernel_loads_it_without_converting_again(
    monkeypatch, tmp_path
):
    """load_pair on a cache holding only the NF4 conversion, with a probe that picks int4, loads
    NF4 and builds nothing."""
    if not bitsandbytes_works():
        pytest.skip("bitsandbytes does not run here")
    cache = tmp_path / "cache"
    load_pair("tiny", precision="nf4", cache=cache)
    flipped = KernelChoice("int4", {"nf4": 0.0030, "int4": 0.0020}, {}, "avx512", True)
    monkeypatch.setattr(kernels, "choose_kernel", lambda: flipped)
    pair = load_pair("tiny", precision="4bit", cache=cache)
    assert (pair.summary.precision, pair.summary.cold) == ("nf4", False)
    assert "converted models are cached" in pair.summary.kernel_note


def test_4bit_on_a_cpu_runs_the_probes_choice_and_says_why(monkeypatch):
    choice = KernelChoice("int4", {"nf4-unfused": 0.030, "int4": 0.006}, {}, "avx2", False)
    monkeypatch.setattr(kernels, "choose_kernel", lambda: choice)
    stages = []
    precision, note, why = kernels.running_precision(
        "4bit", "cpu", progress=lambda *a: stages.append(a)
    )
    assert (precision, note, why) == ("int4", "", choice.why)
    assert stages == [(kernels.PROBE_STAGE, 0, 1), (kernels.PROBE_STAGE, 1, 1)]
    # A GPU runs NF4 without a probe.
    monkeypatch.setattr(kernels, "four_bit_problem", lambda *a: None)
    monkeypatch.setattr(kernels, "choose_kernel", lambda: pytest.fail("probed for a GPU"))
    assert kernels.running_precision("4bit", "cuda") == ("nf4", "", "")


def test_nf4_asked_for_without_its_fused_kernel_says_what_that_costs(monkeypatch):
    monkeypatch.setattr(kernels, "fused_nf4", lambda: False)
    monkeypatch.setattr(kernels, "four_bit_problem", lambda *a: None)
    precision, note, why = kernels.running_precision("nf4", "cpu")
    assert (precision, note) == ("nf4", "")
    assert "needs AVX512-BF16" in why and "dequantises its weight on each call" in why
    assert kernels.running_precision("int4", "cuda")[:2] == (
        "bf16",
        "4-bit unavailable here (torch int4: torch's int4 kernel runs on the CPU, not on cuda): "
        "running bf16",
    )


# ---------------------------------------------------------------- Apple Silicon


@pytest.fixture
def apple(monkeypatch, clean_model_env):
    """A Mac as torch sees it: no CUDA, an MPS device."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)


def test_on_apple_silicon_the_gpu_runs_16_bit_and_says_it_is_not_measured(apple):
    assert pairs.resolve_device() == "mps" and pairs.resolve_device("cpu") == "cpu"
    assert pairs.compute_dtype("mps") == torch.float16
    precision, note, why = kernels.running_precision("4bit", "mps", torch.float16)
    assert (precision, note) == ("bf16", "")
    assert "Apple's GPU" in why and "not measured" in why
    precision, note, _ = kernels.running_precision("int4", "mps", torch.float16)
    assert precision == "bf16" and note.startswith("4-bit unavailable here") and "fp16" in note
    summary = pairs.LoadSummary("tiny", "t", "d", 1, 1, "bf16", "mps", 2, 2, 0.1, False, "float16")
    assert summary.label == "fp16"


def test_without_mps_auto_is_the_cpu(monkeypatch, clean_model_env):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pairs.resolve_device() == "cpu"
    with pytest.raises(ValueError, match="no Apple GPU"):
        pairs.resolve_device("mps")


# ---------------------------------------------------------------- every kernel stays exact

KERNELS = [
    "int4",
    pytest.param("nf4", marks=pytest.mark.skipif(not bitsandbytes_works(), reason="no bnb")),
    "bf16",
]


@pytest.fixture(scope="module", params=KERNELS)
def kernel_pair(request, cache):
    pair = load_pair("tiny", precision=request.param, device="cpu", cache=cache)
    assert pair.summary.precision == request.param
    return pair


def test_speculative_samples_follow_p_on_every_kernel(kernel_pair):
    """The first token and the first two, 20,000 draws each, against p from the kernel's own
    logits; the classic mistake of resampling from p fails the same checks (the power)."""
    config = parse_run(PROMPT, k=4, temperature=1.0)
    ids = encode(kernel_pair, config)
    ex = exactness.measure(kernel_pair, config, 20_000)
    pairs_ = joint.measure_pairs(
        kernel_pair, ids, config.sampling, 20_000, make_generator(0, "cpu")
    )
    assert ex.p_value_speculative > 1e-3 and pairs_.p_value_speculative > 1e-3
    wrong = RULES["resample-from-p"]
    bad = exactness.measure(kernel_pair, config, 20_000, rule=wrong)
    assert bad.p_value_speculative < 1e-6


def test_greedy_speculative_output_is_the_targets_on_every_kernel(kernel_pair):
    check = exactness.greedy_check(kernel_pair, parse_run(PROMPT, k=4))
    assert check.identical and check.n_tokens > 0


def test_every_tab_runs_on_the_kernel_chosen_here(cache, clean_model_env):
    """Generate, the sweep, the exactness check and the step-through on the automatic choice;
    the model line names the kernel and why it runs."""
    pair = load_pair("tiny", precision="4bit", device="cpu", cache=cache)
    s = pair.summary
    assert s.precision in pairs.FOUR_BIT and s.kernel_note
    line = handlers.model_details(s)
    assert pairs.KERNEL_LABELS[s.precision] in line and s.kernel_note in line
    assert "4-bit" in handlers.model_markdown(s) and s.kernel_note not in handlers.model_markdown(s)
    *_, last = handlers.generate(pair, PROMPT, max_new_tokens=24)
    assert any("Speedup" in str(v) for v in last)
    for values in (
        handlers.sweep(pair, PROMPT),
        handlers.exactness(pair, PROMPT),
        handlers.step(pair, PROMPT),
    ):
        assert isinstance(values, (list, tuple)) and values


# ---------------------------------------------------------------- as on a laptop


def test_as_on_an_avx2_laptop_torch_int4_runs_and_the_page_says_why():
    """scripts/as_laptop.sh holds the libraries back: specdemo's own detection sees no fused
    NF4 kernel and AVX2 vectors, so NF4 is no candidate and int4 runs."""
    code = (
        "import json; from specdemo.models.kernels import choose_kernel; c = choose_kernel(); "
        "print(json.dumps({'kernel': c.kernel, 'isa': c.isa, 'fused': c.fused_nf4, "
        "'why': c.why, 'seconds': c.seconds}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [str(ROOT / "scripts" / "as_laptop.sh"), sys.executable, "-c", code],
        capture_output=True, text=True, env=env, check=True, timeout=300,
    )  # fmt: skip
    laptop = json.loads(out.stdout.strip().splitlines()[-1])
    assert (laptop["kernel"], laptop["isa"], laptop["fused"]) == ("int4", "avx2", False)
    assert set(laptop["seconds"]) == {"int4", "nf4-unfused"} or not bitsandbytes_works()
    assert laptop["why"].startswith("bitsandbytes' fused NF4 kernel needs AVX512-BF16")
