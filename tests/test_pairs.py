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


HUB_PAIR = "qwen-coder-14b"  # the largest pair a GPU is told of


@pytest.fixture
def hub_pair_from(monkeypatch):
    """Point the 14B pair's target and draft at two folders (or missing paths)."""

    def point(target, draft) -> None:
        spec = models.PAIRS[HUB_PAIR]
        spec = dataclasses.replace(
            spec,
            target=dataclasses.replace(spec.target, source=str(target)),
            draft=dataclasses.replace(spec.draft, source=str(draft)),
        )
        monkeypatch.setitem(models.PAIRS, HUB_PAIR, spec)

    return point


@pytest.fixture
def cuda_with_free(monkeypatch):
    """This CPU standing in for a CUDA GPU of compute capability 9.0 with `free` bytes free."""

    def free(n: float) -> None:
        monkeypatch.setattr(load, "_capability", lambda device: (9, 0))
        monkeypatch.setattr(load.torch.cuda, "mem_get_info", lambda device=None: (int(n), int(n)))

    return free


# ---------------------------------------------------------------- resolution


@pytest.mark.parametrize("zero_gpu", [False, True])
def test_the_default_pair_is_the_embedded_one_on_every_device(online, monkeypatch, zero_gpu):
    """With the Hub in reach, on a CUDA machine and on a ZeroGPU Space alike, nothing named
    means the embedded pair: nothing to download."""
    if zero_gpu:
        monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert not models.hub_offline()
    for device in ("cpu", "cuda", "cuda:1", "mps"):
        assert models.default_pair_name(device) == models.DEFAULT_PAIR == "qwen-coder"
    spec = models.resolve_pair_spec(device="cuda")
    assert spec.name == "qwen-coder" and spec.target.kind == spec.draft.kind == "gguf"
    monkeypatch.setenv("SPECDEMO_PAIR", HUB_PAIR)  # a larger pair loads when named
    assert models.resolve_pair_spec(device="cuda").target.kind == "hub"


def test_a_named_pair_beats_the_device_default(online, monkeypatch):
    assert models.resolve_pair_spec("tiny", device="cuda").name == "tiny"
    monkeypatch.setenv("SPECDEMO_PAIR", "qwen-coder")
    assert models.resolve_pair_spec(device="cuda").name == "qwen-coder"
    assert models.resolve_pair_spec(HUB_PAIR, device="cpu").name == HUB_PAIR


def test_a_gpu_with_room_is_told_of_the_largest_pair_that_fits_with_its_download_and_memory():
    assert models.LARGER_PAIRS == (HUB_PAIR, "qwen-coder-7b")
    roomy = models.larger_pair_note(40e9)
    assert roomy.startswith(f"this GPU has room for `{HUB_PAIR}`")
    assert "30.5 GB download" in roomy and "11 GB of GPU memory" in roomy
    assert f"SPECDEMO_PAIR={HUB_PAIR}" in roomy
    assert "`qwen-coder-7b`" in models.larger_pair_note(8e9)
    assert "16.2 GB download" in models.larger_pair_note(8e9)
    assert models.larger_pair_note(4e9) == ""  # a laptop GPU: nothing to suggest
    for name in models.LARGER_PAIRS:  # each sentence's figures are the pair's own
        spec = models.PAIRS[name]
        assert spec.download_gb > spec.gpu_gb > 0 and spec.target.kind == "hub"


@pytest.mark.parametrize("zero_gpu", [False, True])
def test_load_pair_on_a_cuda_machine_loads_only_the_embedded_pair(online, monkeypatch, zero_gpu):
    """The device is resolved before the pair; on a CUDA machine with the Hub in reach, and on
    ZeroGPU, "auto" loads the embedded pair and nothing else, and its failure raises."""
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
    assert tried == ["qwen-coder"]


def test_the_suggestion_names_a_larger_pair_only_for_the_default_on_a_roomy_gpu(
    monkeypatch, cuda_with_free
):
    embedded, tiny = models.PAIRS["qwen-coder"], models.PAIRS["tiny"]
    assert load._suggestion(embedded, "cpu") == ""  # no GPU: nothing to tell
    cuda_with_free(40e9)
    assert load._suggestion(embedded, "cuda").startswith(f"this GPU has room for `{HUB_PAIR}`")
    assert load._suggestion(tiny, "cuda") == ""  # a pair someone named is left alone
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert load._suggestion(embedded, "cuda") == ""  # a Space's pair is fixed
    monkeypatch.delenv("SPACES_ZERO_GPU")
    cuda_with_free(3e9)
    assert load._suggestion(embedded, "cuda") == ""


def test_the_14b_pair_drafts_with_the_7b_pairs_draft():
    spec = models.PAIRS["qwen-coder-14b"]
    assert spec.target.source == "Qwen/Qwen2.5-Coder-14B-Instruct"
    assert spec.draft == models.PAIRS["qwen-coder-7b"].draft
    assert spec.draft.source == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    for name in ("qwen-coder-7b", "qwen-coder-14b"):
        assert "152,064 vs 151,936" in models.PAIRS[name].description


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
    hub_folders, hub_pair_from, tmp_path, precision
):
    """The GPU pairs' path: from_pretrained on a source, quantised at load time for 4-bit."""
    hub_pair_from(*hub_folders)
    pair = models.load_pair(HUB_PAIR, precision=precision, device="cpu", cache=tmp_path)
    s = pair.summary
    assert (s.pair, s.target_name, s.draft_name) == (
        HUB_PAIR,
        models.PAIRS[HUB_PAIR].target.name,
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


@pytest.mark.parametrize("how", ["argument", "env"])
def test_a_named_pair_that_fails_to_load_raises(tmp_path, monkeypatch, hub_pair_from, how):
    monkeypatch.setattr(pairs, "DEFAULT_PAIR", "tiny")
    missing = tmp_path / "no-such-model"
    hub_pair_from(missing, missing)
    name = HUB_PAIR if how == "argument" else None
    if how == "env":
        monkeypatch.setenv("SPECDEMO_PAIR", HUB_PAIR)
    with pytest.raises(Exception, match="no-such-model"):
        models.load_pair(name, precision="fp32", device="cpu", cache=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # the tiny pair was never built


def test_the_largest_pair_a_gpu_is_told_of_is_predicted_to_pay_with_eager_steps():
    """docs/bench/dispatch.json (``bench --dispatch``): on a launch-bound GPU the embedded pair's
    eager draft cannot pay (best K = 0), and the pair a roomy GPU is told of can."""
    import json
    from pathlib import Path

    report = json.loads((Path(__file__).parents[1] / "docs/bench/dispatch.json").read_text())
    best = {p["pair"]: p["best"]["eager"] for p in report["pairs"] if p["gpu"] == "H200"}
    assert best[models.DEFAULT_PAIR][0] == 0
    assert best[HUB_PAIR][0] > 0 and best[HUB_PAIR][1] > 1.05
