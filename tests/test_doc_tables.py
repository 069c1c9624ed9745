"""The docs' measured tables are what their raw JSON gives (scripts/docs_writer, run by
scripts/docs_writer.py), their targets are what targets.toml holds, and every raw JSON says where
it was measured."""

import json
import re
import sys
import tomllib

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import docs_writer  # noqa: E402
from docs_writer import core  # noqa: E402

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
    assert docs_writer.differing() == []


def test_the_check_catches_a_changed_figure():
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    block = docs_writer.BLOCK.search(text)
    changed = text.replace(block[3], block[3].replace("|", "| 9.99", 1), 1)
    assert docs_writer.rewrite(changed) == text  # drawn anew from the JSON, the figure goes


def test_every_measured_table_is_drawn_from_json():
    """A table with a figure in README, BENCHMARKS or INSTALL is marked, or listed above."""
    loose = []
    for name in ("README.md", "docs/BENCHMARKS.md", "docs/INSTALL.md"):
        text = docs_writer.BLOCK.sub("", (ROOT / name).read_text(encoding="utf-8"))
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
    before = {doc: doc.read_text(encoding="utf-8") for doc in docs_writer.DOCS}
    with pytest.raises(SystemExit) as exit_:
        docs_writer.main([])
    assert exit_.value.code == 2 and "--write" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        docs_writer.main(["--help"])
    assert "--write" in capsys.readouterr().out
    assert docs_writer.main(["--check"]) == 0
    assert {doc: doc.read_text(encoding="utf-8") for doc in docs_writer.DOCS} == before


def test_no_figure_is_typed_by_hand_but_those_listed_with_a_reason():
    """README and every doc: measured-looking figures outside the marked tables and code blocks
    are only those TYPED lists, at most BUDGETS, each with its reason and each still in its
    doc."""
    assert docs_writer.hand_typed() == []
    assert len(docs_writer.TYPED) <= docs_writer.BUDGETS
    for (name, figure), reason in docs_writer.TYPED.items():
        assert reason and figure in (ROOT / name).read_text(encoding="utf-8"), (name, figure)


def test_a_target_row_is_drawn_from_targets_toml(monkeypatch):
    """The copies' target for the edits set at T 0 is the number targets.toml holds: its row
    prints that bound, and with the bound moved below and then above any speedup, the row's
    bound and verdict follow (a bound typed into the renderer would leave both as they were)."""
    held = tomllib.loads((ROOT / "scripts" / "docs_writer" / "targets.toml").read_text())

    def edits_row() -> str:
        rows = core.writers()["edits-targets"]().splitlines()
        return next(r for r in rows if r.startswith("| edits set, T 0, suffix hybrid |"))

    assert f"| ≥ {held['copies']['edits_t0']:g}× |" in edits_row()
    monkeypatch.setitem(core.TARGETS["copies"], "edits_t0", 0.5)
    assert "| ≥ 0.5× |" in edits_row() and edits_row().endswith("| yes |")
    monkeypatch.setitem(core.TARGETS["copies"], "edits_t0", 99.0)
    assert "| ≥ 99× |" in edits_row() and edits_row().endswith("| **no** |")


def test_the_figure_pattern_sees_every_unit_a_measurement_comes_in():
    """A time, a speedup, a rate, a size, a share, minutes and a count of draws are each caught
    in prose; names, settings, dates, versions and a bandwidth are not."""
    prose = (
        "Automatic K ran at 1.23× the target alone, its step 45 ms, and 9.5 tok/s in 2–3 s. "
        "The conversion peaks at 6.7 GB and the app holds 2.18–2.21 GB, 512 MiB free; 12% more "
        "kept, after 3 minutes, over 20,000 draws, 8,000 samples a case, 20 people at once.\n"
    )
    counted = [m[0] for m in docs_writer.FIGURE.finditer(prose)]
    assert counted == ["1.23×", "45 ms", "9.5 tok/s", "2–3 s", "6.7 GB", "2.18–2.21 GB",
                       "512 MiB", "12%", "3 minutes", "20,000 draws", "8,000 samples",
                       "20 people"]  # fmt: skip
    for missed in ("Qwen2.5-Coder-1.5B", "K = 3", "2026-12-07", "torch 2.13.0", "1,792 GB/s",
                   "a 28-layer target", "the 0.5B draft", "1.25 times as fast"):  # fmt: skip
        assert not docs_writer.FIGURE.search(missed), missed


def test_a_figure_typed_into_a_doc_is_counted_and_a_generated_one_is_not(monkeypatch, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Measured here: 1.40× on code.\n\n<!-- table: current-steps -->\n| a | 52 ms |\n"
        "<!-- /table -->\n\n```bash\nsleep 5 s\n```\nThe conversion peaks at 6.7 GB; 12% "
        "more kept after 3 minutes and 20,000 draws. One call asks at most 80 s.\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(core, "DOCS", [doc])  # hand_typed reads them from core
    monkeypatch.setattr(core, "ROOT", tmp_path)
    assert docs_writer.hand_typed({("doc.md", "80 s"): "a budget"}) == [
        "doc.md:1: 1.40×",
        "doc.md:10: 6.7 GB",
        "doc.md:10: 12%",
        "doc.md:10: 3 minutes",
        "doc.md:10: 20,000 draws",
    ]


def test_a_current_doc_cites_the_history_only_for_a_figure_from_an_older_run():
    """Older runs stay in bench/HISTORY.md; a current doc's line that cites it says that its
    figure comes from an older run."""
    for doc in docs_writer.DOCS:
        name = str(doc.relative_to(ROOT))
        if name == "docs/bench/HISTORY.md":
            continue
        text = docs_writer.rewrite(doc.read_text(encoding="utf-8"))
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
    for doc in docs_writer.DOCS:
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
