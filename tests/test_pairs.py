"""specdemo.models.pairs: which pair loads where, hub-format pairs from local folders, and the
embedded pair standing in for a device default that fails to load."""

import dataclasses

import pytest
import torch
from conftest import tiny_model

from specdemo import models
from specdemo.models import kernels, load, pairs
from specdemo.models.int4 import Int4Linear

pytestmark = pytest.mark.usefixtures("clean_model_env")


@pytest.fixture
def online(monkeypatch):
    """The Hub in reach, as far as the environment says (tests set HF_HUB_OFFLINE=1)."""
    for name in pairs.ENV_OFFLINE:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def gpu_default_from(monkeypatch):
    """Point the GPU default pair's target and draft at two folders (or missing paths)."""

    def point(target, draft) -> None:
        spec = models.PAIRS[models.GPU_DEFAULT_PAIR]
        spec = dataclasses.replace(
            spec,
            target=dataclasses.replace(spec.target, source=str(target)),
            draft=dataclasses.replace(spec.draft, source=str(draft)),
        )
        monkeypatch.setitem(models.PAIRS, models.GPU_DEFAULT_PAIR, spec)

    return point


@pytest.fixture
def as_if_on_cuda(monkeypatch):
    """This CPU standing in for a CUDA machine with the Hub in reach, where the GPU default pair
    is chosen when none is named; the models still load on the CPU."""
    monkeypatch.setattr(pairs, "default_pair_name", lambda device="cpu": pairs.GPU_DEFAULT_PAIR)


# ---------------------------------------------------------------- resolution


def test_the_default_pair_is_embedded_on_cpu_and_the_gpu_pair_on_cuda(online):
    assert models.default_pair_name("cpu") == models.DEFAULT_PAIR == "qwen-coder"
    assert models.default_pair_name("cuda") == models.GPU_DEFAULT_PAIR
    assert models.default_pair_name("cuda:1") == models.GPU_DEFAULT_PAIR
    assert models.resolve_pair_spec().name == "qwen-coder"  # no device: the CPU's default
    spec = models.resolve_pair_spec(device="cuda")
    assert spec.name == models.GPU_DEFAULT_PAIR and spec.target.kind == spec.draft.kind == "hub"


@pytest.mark.parametrize(
    "variable, value", [("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "true")]
)
def test_without_the_hub_the_default_on_cuda_is_the_embedded_pair(
    online, monkeypatch, variable, value
):
    monkeypatch.setenv(variable, "0")
    assert not models.hub_offline()
    assert models.default_pair_name("cuda") == models.GPU_DEFAULT_PAIR
    monkeypatch.setenv(variable, value)
    assert models.hub_offline()
    assert models.default_pair_name("cuda") == models.DEFAULT_PAIR
    assert models.fallback_pair_spec(device="cuda") is None


def test_a_zero_gpu_space_loads_the_embedded_pair_with_the_hub_in_reach(online, monkeypatch):
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert not models.hub_offline()
    assert models.default_pair_name("cuda") == models.DEFAULT_PAIR
    assert models.resolve_pair_spec(device="cuda").target.kind == "gguf"  # nothing to download
    assert models.fallback_pair_spec(device="cuda") is None
    monkeypatch.setenv("SPECDEMO_PAIR", "qwen-coder-14b")  # still a choice
    assert models.resolve_pair_spec(device="cuda").name == "qwen-coder-14b"


def test_a_named_pair_beats_the_device_default(online, monkeypatch):
    assert models.resolve_pair_spec("tiny", device="cuda").name == "tiny"
    monkeypatch.setenv("SPECDEMO_PAIR", "qwen-coder")
    assert models.resolve_pair_spec(device="cuda").name == "qwen-coder"
    assert models.resolve_pair_spec("qwen-coder-14b", device="cpu").name == "qwen-coder-14b"


def test_only_a_device_default_nobody_named_has_a_fallback(online, monkeypatch):
    assert models.fallback_pair_spec(device="cuda") == models.PAIRS["qwen-coder"]
    assert models.fallback_pair_spec(device="cpu") is None  # already the embedded pair
    assert models.fallback_pair_spec(models.GPU_DEFAULT_PAIR, device="cuda") is None
    assert models.fallback_pair_spec(target="some/target", device="cuda") is None
    for variable in ("SPECDEMO_PAIR", "SPECDEMO_DRAFT"):
        with monkeypatch.context() as patch:
            patch.setenv(variable, models.GPU_DEFAULT_PAIR)
            assert models.fallback_pair_spec(device="cuda") is None


def test_the_14b_pair_drafts_with_the_7b_pairs_draft():
    spec = models.PAIRS["qwen-coder-14b"]
    assert spec.target.source == "Qwen/Qwen2.5-Coder-14B-Instruct"
    assert spec.draft == models.PAIRS["qwen-coder-7b"].draft
    assert spec.draft.source == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    for name in ("qwen-coder-7b", "qwen-coder-14b"):
        assert "152,064 vs 151,936" in models.PAIRS[name].description


@pytest.mark.parametrize("zero_gpu", [False, True])
def test_load_pair_on_auto_cuda_tries_the_gpu_default_then_the_embedded_pair(
    online, monkeypatch, zero_gpu
):
    """The device is resolved before the pair, so "auto" on a CUDA machine picks the GPU default
    and falls back to the embedded pair; on ZeroGPU (CUDA before torch sees a GPU) the embedded
    pair is the default. When the embedded pair fails, that raises."""
    if zero_gpu:
        monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    else:
        monkeypatch.setattr(pairs.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(load, "_capability", lambda device: None)
    tried = []

    def fail(spec, *args):
        tried.append(spec.name)
        raise RuntimeError(f"cannot load {spec.name}")

    monkeypatch.setattr(load, "_load_checked", fail)
    with pytest.raises(RuntimeError, match="cannot load qwen-coder$"):
        models.load_pair()
    assert tried == ["qwen-coder"] if zero_gpu else [models.GPU_DEFAULT_PAIR, "qwen-coder"]
    tried.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError):
        models.load_pair()
    assert tried == ["qwen-coder"]


# ---------------------------------------------------------------- loading


@pytest.fixture(scope="module")
def hub_folders(tmp_path_factory):
    """A hub-format target and draft saved by save_pretrained: tiny random Qwen2 models on the
    tiny tokenizer, the target with 64 more vocabulary rows than the draft (as 152,064 vs
    151,936)."""
    root = tmp_path_factory.mktemp("hub-pair")
    tokenizer = models.build_tiny_tokenizer()
    for name, extra_rows in (("target", 64), ("draft", 0)):
        model = tiny_model("qwen2", vocab=len(tokenizer) + extra_rows, layers=1)
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root / "target", root / "draft"


def bitsandbytes_works() -> bool:
    return kernels.four_bit_problem() is None


@pytest.mark.parametrize(
    "precision",
    [
        "fp32",
        pytest.param(
            "nf4", marks=pytest.mark.skipif(not bitsandbytes_works(), reason="no 4-bit here")
        ),
        "int4",
    ],
)
def test_a_hub_format_pair_loads_from_local_folders(
    hub_folders, gpu_default_from, tmp_path, precision
):
    """The GPU pairs' path: from_pretrained on a source, quantised at load time for 4-bit."""
    gpu_default_from(*hub_folders)
    pair = models.load_pair(
        models.GPU_DEFAULT_PAIR, precision=precision, device="cpu", cache=tmp_path
    )
    s = pair.summary
    assert (s.pair, s.target_name, s.draft_name) == (
        models.GPU_DEFAULT_PAIR,
        models.PAIRS[models.GPU_DEFAULT_PAIR].target.name,
        "Qwen2.5-Coder-0.5B-Instruct",
    )
    dtype = "float32" if precision == "fp32" else "bfloat16"
    assert (s.precision, s.device, s.dtype, s.note) == (precision, "cpu", dtype, "")
    nf4 = any(hasattr(p, "quant_state") for p in pair.target.parameters())
    int4 = any(isinstance(m, Int4Linear) for m in pair.target.modules())
    assert (nf4, int4) == (precision == "nf4", precision == "int4")
    assert not list(tmp_path.iterdir())  # hub models load directly, nothing is cached
    ids = pair.tokenizer(models.TINY_TEXT[:40], return_tensors="pt").input_ids
    with torch.no_grad():
        p = pair.target(ids.to(pair.target.device)).logits  # (1, n, vocab + 64)
        q = pair.draft(ids.to(pair.draft.device)).logits  # (1, n, vocab)
    assert p.shape[-1] == q.shape[-1] + 64 == len(pair.tokenizer) + 64
    assert torch.isfinite(p).all() and torch.isfinite(q).all()


def test_an_implicit_gpu_default_that_fails_to_load_gives_way_to_the_embedded_pair(
    tmp_path, monkeypatch, gpu_default_from, as_if_on_cuda
):
    monkeypatch.setattr(pairs, "DEFAULT_PAIR", "tiny")  # the embedded pair, built in a second
    missing = tmp_path / "no-such-model"
    gpu_default_from(missing, missing)
    pair = models.load_pair(precision="fp32", device="cpu", cache=tmp_path / "cache")
    s = pair.summary
    assert (s.pair, s.target_name, s.precision, s.requested) == ("tiny", "tiny-target", "fp32", "")
    assert s.note.startswith(f"{models.GPU_DEFAULT_PAIR} failed to load (")
    assert s.note.endswith("): running tiny") and "\n" not in s.note
    assert "OSError" in s.note  # what loading the missing folder raised


@pytest.mark.parametrize("how", ["argument", "env"])
def test_a_named_pair_that_fails_to_load_raises(
    tmp_path, monkeypatch, gpu_default_from, as_if_on_cuda, how
):
    monkeypatch.setattr(pairs, "DEFAULT_PAIR", "tiny")
    missing = tmp_path / "no-such-model"
    gpu_default_from(missing, missing)
    name = models.GPU_DEFAULT_PAIR if how == "argument" else None
    if how == "env":
        monkeypatch.setenv("SPECDEMO_PAIR", models.GPU_DEFAULT_PAIR)
    with pytest.raises(Exception, match="no-such-model"):
        models.load_pair(name, precision="fp32", device="cpu", cache=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # the tiny pair was never built


def test_the_gpu_default_is_the_pair_predicted_to_pay_with_eager_steps():
    """docs/bench/dispatch.json (``bench --dispatch``): on a launch-bound GPU the embedded pair's
    eager draft cannot pay (best K = 0), and the CUDA default is a pair whose can."""
    import json
    from pathlib import Path

    report = json.loads((Path(__file__).parents[1] / "docs/bench/dispatch.json").read_text())
    best = {p["pair"]: p["best"]["eager"] for p in report["pairs"]}
    assert best[models.DEFAULT_PAIR][0] == 0
    assert best[models.GPU_DEFAULT_PAIR][0] > 0 and best[models.GPU_DEFAULT_PAIR][1] > 1.05
