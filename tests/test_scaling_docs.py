"""The VLM-bound throughput table in docs/performance.md is the one
benchmarks/vlm_throughput.py renders from benchmarks/report.json (no hand-edited figure)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def _harness():
    spec = importlib.util.spec_from_file_location(
        "vlm_throughput", _ROOT / "benchmarks" / "vlm_throughput.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_throughput_table_equals_the_report():
    harness = _harness()
    section = json.loads((_ROOT / "benchmarks" / "report.json").read_text())[harness.SECTION]
    page = (_ROOT / "docs" / "performance.md").read_text()
    block = page.split(harness.DOC_BEGIN, 1)[1].split(harness.DOC_END, 1)[0]
    assert block.strip() == harness.render_table(section)
    workers = [r["workers"] for r in section["runs"] if r["executor"] == "local"]
    assert workers == [1, 2, 4, 8, 16]
    assert [r["workers"] for r in section["runs"] if r["executor"] == "ray"] == workers
    assert section["conditions"]["latency_s"] == 2.0


def test_the_table_is_rewritten_between_its_markers(tmp_path):
    harness = _harness()
    section = json.loads((_ROOT / "benchmarks" / "report.json").read_text())[harness.SECTION]
    doc = tmp_path / "performance.md"
    doc.write_text(f"before\n{harness.DOC_BEGIN}\nold table\n{harness.DOC_END}\nafter\n")
    harness.write_docs(section, doc)
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("\nafter\n")
    assert "old table" not in text and harness.render_table(section) in text
