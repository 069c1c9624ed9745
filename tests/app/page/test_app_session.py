"""A session's results: exports to its own folder, removed with it; the table the app shows."""

import csv
import json
import os
from dataclasses import replace

from specdemo.app.generate.run_record import RunRecord
from specdemo.app.page.session import RESULT_COLUMNS, Session, discard, export, results_table

# 30 tokens/s against 20: a speedup of 1.5.
ROW = RunRecord(
    k=4,
    temperature=1.0,
    drafter="lookup",
    kept_rate=0.5,
    tokens_per_pass=2.5,
    spec_tokens=30,
    spec_seconds=1.0,
    target_tokens=30,
    target_seconds=1.5,
    c=None,
    predicted_speedup=None,
)


def test_export_writes_csv_and_json_then_discard_removes_them():
    session = Session()
    assert export(session) == (None, None)
    session.runs += [ROW, replace(ROW, k=2, c=0.25)]
    csv_path, json_path = export(session)
    rows = list(csv.DictReader(open(csv_path)))
    assert [r["run"] for r in rows] == ["1", "2"] and rows[1]["k"] == "2"
    assert json.loads(open(json_path).read())[1]["c"] == 0.25
    discard(session)
    assert not os.path.exists(csv_path) and not os.path.exists(json_path)
    discard(None)


def test_results_table_is_newest_first_with_c_blank_when_unknown():
    table = results_table([ROW, replace(ROW, k=2, c=0.25, predicted_speedup=1.234)])
    assert [row[0] for row in table] == [2, 1] and len(table[0]) == len(RESULT_COLUMNS)
    assert table[0][-1] == 0.25 and table[1][-1] == ""
    assert table[1][5] == "Prompt lookup"
