"""The apply journal's writer (act/journal.py) after a crash that tore its last line."""

from __future__ import annotations

from vacate.act.journal import Journal

SHA = "ab" * 32


def test_a_torn_last_line_costs_the_next_run_no_record(tmp_path):
    path = str(tmp_path / "plan.journal")
    with Journal(path, SHA) as j:
        j.intent("01-delete", "delete")
    with open(path, "ab") as f:         # the crash: an outcome cut short, no newline
        f.write(b'{"t":1.5,"event":"outcome","step":"01-del')
    with Journal(path, SHA) as j:       # the rerun
        j.intent("01-delete", "delete")
        j.outcome("01-delete", "ok", "done")
    recs = Journal(path, SHA).records()
    assert [(r["event"], r.get("step")) for r in recs] == [
        ("begin", None), ("intent", "01-delete"), ("intent", "01-delete"),
        ("outcome", "01-delete")]
    with open(path, "rb") as f:
        assert f.read().count(b"\n") == 5      # the torn line ended on a line of its own


def test_a_whole_journal_gets_no_empty_line(tmp_path):
    path = str(tmp_path / "plan.journal")
    for _ in range(2):
        with Journal(path, SHA) as j:
            j.intent("01-delete", "delete")
    with open(path, "rb") as f:
        assert b"\n\n" not in f.read()
