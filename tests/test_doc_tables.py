"""The docs' measured tables are what their raw JSON gives (scripts/doc_tables.py), and every
raw JSON says where it was measured."""

import importlib.util
import json
import re

from conftest import ROOT

spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "scripts" / "doc_tables.py")
doc_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doc_tables)

# Tables in README, BENCHMARKS and INSTALL that are not drawn from docs/bench's JSON, and why.
NOT_FROM_JSON = {
    "| command | measures | raw result |": "how to reproduce: commands, no figures",
    "| variable | meaning |": "settings",
    "| document | what it holds |": "a list of documents",
    "| measure | measured | predicted (below) |": "the GPU smoke run's own report, "
    "bench/gpu-smoke-h200.md: a lent machine's output",
    "| | embedded pair (1.5B / 0.5B) |": "ZeroGPU's budgets, from gpu.py and dispatch.json "
    "(tests/app/page/test_zerogpu.py)",
}


def test_every_marked_table_is_what_its_json_gives():
    assert doc_tables.differing() == []


def test_the_check_catches_a_changed_figure():
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    block = doc_tables.BLOCK.search(text)
    changed = text.replace(block[3], block[3].replace("|", "| 9.99", 1), 1)
    assert doc_tables.rewrite(changed) == text  # drawn anew from the JSON, the figure goes


def test_every_measured_table_is_drawn_from_json():
    """A table with a figure in README, BENCHMARKS or INSTALL is marked, or listed above."""
    loose = []
    for name in ("README.md", "docs/BENCHMARKS.md", "docs/INSTALL.md"):
        text = doc_tables.BLOCK.sub("", (ROOT / name).read_text(encoding="utf-8"))
        for table in re.findall(r"(?:^\|.*\n)+", text, re.M):
            header = table.split("\n")[0]
            known = any(header.startswith(h) for h in NOT_FROM_JSON)
            if not known and re.search(r"\d", table.split("\n", 2)[2]):
                loose.append(f"{name}: {header[:60]}")
    assert loose == []


def test_every_raw_json_records_its_machine():
    for path in sorted((ROOT / "docs" / "bench").glob("*.json")):
        machine = json.loads(path.read_text())["machine"]
        assert {"cpu", "cpu_capability", "cores", "torch", "date"} <= set(machine), path.name
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", machine["date"]), path.name


def test_the_script_writes_only_when_told_and_says_how(capsys):
    """No argument is an error that changes nothing (a stray call must not rewrite every doc);
    --help names --write and --check."""
    import pytest

    before = {doc: doc.read_text(encoding="utf-8") for doc in doc_tables.DOCS}
    with pytest.raises(SystemExit) as exit_:
        doc_tables.main([])
    assert exit_.value.code == 2 and "--write" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        doc_tables.main(["--help"])
    assert "--write" in capsys.readouterr().out
    assert doc_tables.main(["--check"]) == 0
    assert {doc: doc.read_text(encoding="utf-8") for doc in doc_tables.DOCS} == before


def test_no_figure_is_typed_by_hand_but_those_listed_with_a_reason():
    """README and every doc: measured-looking figures outside the marked tables and code blocks
    are only those TYPED lists, at most BUDGETS, each with its reason and each still in its
    doc."""
    assert doc_tables.hand_typed() == []
    assert len(doc_tables.TYPED) <= doc_tables.BUDGETS
    for (name, figure), reason in doc_tables.TYPED.items():
        assert reason and figure in (ROOT / name).read_text(encoding="utf-8"), (name, figure)


def test_the_figure_pattern_sees_every_unit_a_measurement_comes_in():
    """A time, a speedup, a rate, a size, a share, minutes and a count of draws are each caught
    in prose; names, settings, dates, versions and a bandwidth are not."""
    prose = (
        "Automatic K ran at 1.23× the target alone, its step 45 ms, and 9.5 tok/s in 2–3 s. "
        "The conversion peaks at 6.7 GB and the app holds 2.18–2.21 GB, 512 MiB free; 12% more "
        "kept, after 3 minutes, over 20,000 draws, 8,000 samples a case, 20 people at once.\n"
    )
    counted = [m[0] for m in doc_tables.FIGURE.finditer(prose)]
    assert counted == ["1.23×", "45 ms", "9.5 tok/s", "2–3 s", "6.7 GB", "2.18–2.21 GB",
                       "512 MiB", "12%", "3 minutes", "20,000 draws", "8,000 samples",
                       "20 people"]  # fmt: skip
    for missed in ("Qwen2.5-Coder-1.5B", "K = 3", "2026-12-07", "torch 2.13.0", "1,792 GB/s",
                   "a 28-layer target", "the 0.5B draft", "1.25 times as fast"):  # fmt: skip
        assert not doc_tables.FIGURE.search(missed), missed


def test_a_figure_typed_into_a_doc_is_counted_and_a_generated_one_is_not(monkeypatch, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Measured here: 1.40× on code.\n\n<!-- table: current-steps -->\n| a | 52 ms |\n"
        "<!-- /table -->\n\n```bash\nsleep 5 s\n```\nThe conversion peaks at 6.7 GB; 12% "
        "more kept after 3 minutes and 20,000 draws. One call asks at most 80 s.\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(doc_tables, "DOCS", [doc])
    monkeypatch.setattr(doc_tables, "ROOT", tmp_path)
    assert doc_tables.hand_typed({("doc.md", "80 s"): "a budget"}) == [
        "doc.md:1: 1.40×",
        "doc.md:10: 6.7 GB",
        "doc.md:10: 12%",
        "doc.md:10: 3 minutes",
        "doc.md:10: 20,000 draws",
    ]


def test_a_current_doc_cites_the_history_only_for_a_figure_from_an_older_run():
    """Older runs stay in bench/HISTORY.md; a current doc's line that cites it says that its
    figure comes from an older run."""
    for doc in doc_tables.DOCS:
        name = str(doc.relative_to(ROOT))
        if name == "docs/bench/HISTORY.md":
            continue
        text = doc_tables.rewrite(doc.read_text(encoding="utf-8"))
        cites = [line for line in text.splitlines() if "HISTORY.md" in line]
        assert all("older run" in line for line in cites), name


def heading_anchors(path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    headings = re.findall(r"^#+ (.*)$", path.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_in_the_docs_resolves():
    """A link from README or a doc to a file in the repository names a file that exists, and
    its #anchor a heading of that file (docs move sections; a dead link misleads)."""
    dead = []
    for doc in doc_tables.DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if link.startswith(("http:", "https:", "mailto:")):
                continue
            path, _, anchor = link.partition("#")
            target = (doc.parent / path) if path else doc
            if not target.exists():
                dead.append(f"{doc.name}: {link}")
            elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
                dead.append(f"{doc.name}: {link} (no such heading)")
    assert dead == []
