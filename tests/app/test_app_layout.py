"""specdemo/app by lesson: every import runs downwards between its folders, each folder says
what it teaches and which file to open first, and the app's tests stand in the same folders."""

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

APP = ROOT / "specdemo" / "app"
# Floors, lowest first: a module may import its own folder and any folder on a lower floor.
FLOORS = {"": 0, "generate": 1, "step": 1, "exact": 2, "page": 3}


def folder_of(module: str) -> str:
    """The folder of `module` ("specdemo.app.page.ui" -> "page"; a shared module -> "")."""
    parts = module.split(".")[2:]
    return parts[0] if parts and parts[0] in FLOORS and parts[0] else ""


def imports(path: Path) -> set[str]:
    """specdemo.app modules and folders `path` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specdemo.app"):
            if node.module == "specdemo.app":
                found |= {f"specdemo.app.{a.name}" for a in node.names}
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("specdemo.app")}
    return found


def module_of(path: Path) -> str:
    parts = path.relative_to(APP.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_import_in_the_app_runs_down_its_floors():
    edges = set()
    for path in APP.rglob("*.py"):
        here = folder_of(module_of(path))
        for target in imports(path):
            there = folder_of(target)
            if there != here:
                edges.add((here or "shared", there or "shared"))
                assert FLOORS[there] < FLOORS[here], f"{module_of(path)} imports {target}"
    # The graph the app's docstring draws: each lesson on the shared floor, exact on generate,
    # the page on every lesson.
    assert edges >= {("generate", "shared"), ("exact", "generate"), ("page", "exact")}
    assert ("page", "step") in edges and ("page", "generate") in edges


@pytest.mark.parametrize("folder", [f for f in FLOORS if f])
def test_each_folder_says_what_it_teaches_and_which_file_to_open_first(folder):
    doc = ast.get_docstring(ast.parse((APP / folder / "__init__.py").read_text()))
    first = re.search(r"Open ``(\w+\.py)`` first", doc)
    assert first and (APP / folder / first.group(1)).exists(), doc
    listed = set(re.findall(r"``(\w+)``", doc))
    modules = {p.stem for p in (APP / folder).glob("*.py")} - {"__init__"}
    assert modules <= listed | {first.group(1).removesuffix(".py")}, modules - listed


def test_the_apps_tests_stand_in_the_same_lesson_folders():
    tests = Path(__file__).resolve().parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders == {f for f in FLOORS if f}
    for folder in folders:  # each lesson's tests import that lesson or drive the page it serves
        for path in (tests / folder).glob("test_*.py"):
            lessons = {folder_of(m) for m in imports(path)}
            assert folder in lessons or folder == "page", path.name
