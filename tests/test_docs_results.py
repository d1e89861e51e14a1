"""The figures in README.md and docs/ are the ones in docs/results/*.json (single source)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "make_results.py"


def _check() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "docs", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_docs_agree_with_the_results():
    out = _check()
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_drifted_figure_is_caught(tmp_path, monkeypatch):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import make_results
    finally:
        sys.path.remove(str(SCRIPT.parent))
    doc = tmp_path / "doc.md"
    doc.write_text("NavSR <!--r:oracle:main.nav_sr_20cm_pct:.1f-->12.3<!--/r--> %\n")
    monkeypatch.setattr(make_results, "ROOT", tmp_path)
    assert make_results.check_docs((doc,)) == ["doc.md"]
    fixed = make_results.render(doc.read_text())
    value = make_results.lookup(make_results.load_summary("oracle"), "main.nav_sr_20cm_pct")
    assert f"-->{value:.1f}<!--/r-->" in fixed
    doc.write_text(fixed)
    assert make_results.check_docs((doc,)) == []
    assert sum("<!--r:" in p.read_text() for p in make_results.DOCS) >= 1  # the README uses it


def test_empty_tables_are_filled_each_in_its_place(tmp_path, monkeypatch):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import make_results
    finally:
        sys.path.remove(str(SCRIPT.parent))
    monkeypatch.setitem(make_results.TABLES, "t-one", lambda: "| one |")
    monkeypatch.setitem(make_results.TABLES, "t-two", lambda: "| two |")
    text = "<!--table:t-one-->\n<!--/table-->\n\n<!--table:t-two-->\n<!--/table-->\n"
    once = make_results.render(text)
    assert once == (
        "<!--table:t-one-->\n| one |\n<!--/table-->\n\n<!--table:t-two-->\n| two |\n<!--/table-->\n"
    )
    assert make_results.render(once) == once
