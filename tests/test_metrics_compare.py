"""``humanclaw metrics``: input mistakes exit 2 with nothing written, and ``--compare``
names the CPU records of both runs when their figures differ (a run on another CPU used to
say nothing about why its figures were not the published ones)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_metrics_aggregate import SECOND, episode

from humanclaw_gym.cli.metrics_cmd import main as metrics_main
from humanclaw_gym.metrics import aggregate_metric_files, write_metrics_json
from humanclaw_gym.provenance import (
    cpu_record,
    cpu_record_differences,
    describe_cpu,
    write_node_record,
)


def _run(root: Path, *, node: dict | None = None, **change) -> Path:
    """Two episode folders with metrics.json and node.json (this CPU, or ``node``)."""
    for name, fields in (("a", {}), ("b", SECOND)):
        folder = root / name / "rollout_00"
        write_metrics_json(folder / "metrics.json", episode(**{**fields, **change}))
        if node is None:
            write_node_record(folder)
        else:
            (folder / "node.json").write_text(
                json.dumps({"schema": "humanclaw_node_v1", "cpu": node})
            )
    return root


def _published(path: Path, run: Path, cpu: dict) -> Path:
    summary = aggregate_metric_files(run)
    summary["environment"] = {"cpu": cpu, "episode_cpus": [{"cpu": cpu, "episodes": 2}]}
    path.write_text(json.dumps(summary))
    return path


# -- exit code 2, nothing written ---------------------------------------------------------------


def test_plot_without_matplotlib_exits_2_before_writing_anything(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path / "run")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes every matplotlib import fail
    rc = metrics_main([str(run), "--write-json", "--plot", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("humanclaw metrics: error: --plot needs matplotlib")
    assert len(err.strip().splitlines()) == 1
    assert not (run / "metrics_summary.json").exists() and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("name", ["plot", "plot.notanimage"])
def test_a_plot_path_matplotlib_cannot_write_exits_2(tmp_path, capsys, name):
    pytest.importorskip("matplotlib")
    run = _run(tmp_path / "run")
    assert metrics_main([str(run), "--write-json", "--plot", str(tmp_path / name)]) == 2
    assert "--plot" in capsys.readouterr().err
    assert not (run / "metrics_summary.json").exists()


def test_rules_other_than_the_files_were_scored_by_exit_2(tmp_path, capsys):
    run = _run(tmp_path / "run")
    assert metrics_main([str(run), "--rules", "strict", "--write-json"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "scored by 'paper' metric rules" in err
    assert not (run / "metrics_summary.json").exists()


def test_a_missing_directory_exits_2(tmp_path, capsys):
    assert metrics_main([str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


# -- --compare ----------------------------------------------------------------------------------


def test_compare_names_both_cpu_records_when_the_figures_differ(tmp_path, capsys):
    here = cpu_record()
    other = {**here, "blas": {**(here["blas"] or {"api": "openblas", "version": "x"})}}
    other["blas"]["architecture"] = "SomeOtherKernel"
    published = _published(tmp_path / "published.json", _run(tmp_path / "pub", node=other), other)
    run = _run(tmp_path / "run", steps=14)  # other figures, this CPU
    assert metrics_main([str(run), "--compare", str(published)]) == 0
    out = capsys.readouterr().out
    assert f"Compared with {published}" in out
    assert f"this run: 2 episodes on {describe_cpu(here)}" in out
    assert f"compared: 2 episodes on {describe_cpu(other)}" in out
    assert "SomeOtherKernel" in out
    note = [line for line in out.splitlines() if line.startswith("note: the figures differ")]
    assert len(note) == 1 and "(BLAS kernel)" in note[0] and "Across machines" in note[0]

    assert metrics_main([str(run), "--compare", str(published), "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)["comparison"]
    assert comparison["schema"] == "humanclaw_metrics_comparison_v1"
    assert comparison["figures_differ"] is True
    assert comparison["cpu"]["same"] is False and comparison["cpu"]["differences"] == [
        "BLAS kernel"
    ]
    steps = next(r for r in comparison["rows"] if r["key"] == "avg_steps")
    assert steps["difference"] == steps["this_run"] - steps["compared"] != 0


def test_compare_on_the_same_cpu_record_says_the_cause_is_elsewhere(tmp_path, capsys):
    published = _published(tmp_path / "p.json", _run(tmp_path / "pub"), cpu_record())
    same = _run(tmp_path / "same")
    assert metrics_main([str(same), "--compare", str(published)]) == 0
    out = capsys.readouterr().out
    assert "note: the figures are equal" in out and "CPU records (" not in out
    changed = _run(tmp_path / "changed", steps=14)
    assert metrics_main([str(changed), "--compare", str(published)]) == 0
    out = capsys.readouterr().out
    assert "note: the figures differ on the same CPU record" in out


def test_compare_says_when_a_cpu_is_not_recorded(tmp_path, capsys):
    published = _published(tmp_path / "p.json", _run(tmp_path / "pub"), cpu_record())
    run = _run(tmp_path / "run", steps=14)
    for node in run.rglob("node.json"):
        node.unlink()
    assert metrics_main([str(run), "--compare", str(published)]) == 0
    out = capsys.readouterr().out
    assert "this run: not recorded" in out
    assert "this run's episode folders record no CPU" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no such summary file"), ("[1]", "not a metrics summary"), ("{", "not valid JSON")],
)
def test_a_bad_compare_file_exits_2_naming_it(tmp_path, capsys, content, expected):
    run = _run(tmp_path / "run")
    path = tmp_path / "p.json"
    if content is not None:
        path.write_text(content)
    assert metrics_main([str(run), "--compare", str(path), "--write-json"]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(path) in err and len(err.strip().splitlines()) == 1
    assert not (run / "metrics_summary.json").exists()


def test_cpu_record_differences_are_named() -> None:
    a = cpu_record()
    assert cpu_record_differences(a, dict(a)) == []
    b = {**a, "numpy_simd": ["X86_V2"], "model": "Other"}
    assert cpu_record_differences(a, b) == ["CPU model", "numpy SIMD"]
    assert cpu_record_differences(a, None) == ["record"]
    assert describe_cpu(None) == "not recorded"


def test_the_published_rows_of_across_machines_come_from_docs_results() -> None:
    """docs/baselines.md quoted a published summary by hand that no longer matched
    docs/results; every figure of those rows is a marker now (tests/test_docs_results.py
    keeps markers equal to the results)."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "baselines.md").read_text()
    section = text[text.index("## Across machines") : text.index("## How they were fixed")]
    rows = [line for line in section.splitlines() if line.startswith("| published summary")]
    assert len(rows) == 2
    marker = r"<!--r:oracle(_mujoco)?:[\w.]+:[^>]*-->[^<]*<!--/r-->"
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")[1:]]
        assert len(cells) == 6
        for cell in cells:
            assert re.fullmatch(rf"{marker}( / {marker})?", cell), (row, cell)
