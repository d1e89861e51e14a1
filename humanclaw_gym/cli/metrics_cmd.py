"""``humanclaw metrics DIR``: print the paper tables of every metrics.json under DIR.

Reads our layout and the reference release's (mixed directories too), and the layout of
any registered task (``--task module:Class`` imports a task that is neither built in nor
an installed entry point, so that its layout is known). Read-only by default;
``--write-json`` also writes ``DIR/metrics_summary.json`` and ``--export OUT`` writes every
episode's metrics.json into ``OUT`` in the layout chosen by ``--format``. Loads no
simulator, renderer or policy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from humanclaw_gym.metrics import (
    MetricsFileError,
    aggregate,
    find_metric_files,
    format_tables,
    plot_success_breakdown,
    read_metric_files,
    reference_rollout_dir,
    summary_to_reference_layout,
    to_reference_layout,
    write_metrics_json,
)

__all__ = ["export_metric_files", "main", "run_metrics"]

_SUMMARY_NAME = "metrics_summary.json"


def export_metric_files(
    rows: list[dict[str, Any]], out: Path, layout: Literal["ours", "upstream"]
) -> list[Path]:
    """Write one metrics.json per row below ``out``
    (``<scene>_ep<n>_<category>/rollout_<NN>/metrics.json``, the reference release's run
    layout) in ``layout``; refuses an ``out`` that already holds metrics.json files."""
    if out.exists() and find_metric_files(out):
        raise FileExistsError(f"--export: {out} already holds metrics.json files")
    converted = [to_reference_layout(row) if layout == "upstream" else row for row in rows]
    written = []
    for row, data in zip(rows, converted, strict=True):
        written.append(write_metrics_json(out / reference_rollout_dir(row) / "metrics.json", data))
    return written


def run_metrics(
    directory: Annotated[tyro.conf.Positional[Path], tyro.conf.arg(metavar="DIR")],
    rules: Literal["paper", "strict"] | None = None,
    format: Literal["ours", "upstream"] = "ours",  # noqa: A002 - the CLI flag's name
    as_json: Annotated[bool, tyro.conf.arg(name="json")] = False,
    write_json: bool = False,
    export: Path | None = None,
    plot: Path | None = None,
    task: str | None = None,
) -> int:
    """Aggregate every metrics.json under DIR (any depth, our or the reference layout).

    Args:
        directory: a run directory, or a parent of several run shards.
        rules: the metric rules the episodes were scored by (paper or strict); default:
            whatever they were scored by, which must be the same for all.
        format: layout of the summary (--json, --write-json) and of --export: ours, or
            upstream (the reference release's; paper rules only).
        as_json: print the whole summary as JSON instead of the text tables.
        write_json: also write DIR/metrics_summary.json (atomically).
        export: also write every episode's metrics.json below this directory in --format.
        plot: also draw success by category and difficulty into this image (needs matplotlib).
        task: a task whose metrics layout is not known otherwise (module:Class of a task
            that is neither built in nor an installed entry point; imported first).
    """
    if task is not None:
        from humanclaw_gym.tasks import UnknownTaskError, resolve_task

        try:
            resolve_task(task)
        except UnknownTaskError as exc:
            print(f"humanclaw metrics: --task: {exc}", file=sys.stderr)
            return 2
    try:
        rows, names = read_metric_files(directory)
        summary = aggregate(rows, rules=rules, names=names)
        summary["source"] = {"root": str(directory), "files": len(names)}
        if "task" in summary and (format == "upstream" or export is not None or plot is not None):
            print(
                f"humanclaw metrics: the metrics are of task {summary['task']!r}: --format "
                "upstream, --export and --plot are for the benchmark's find_nav_interact "
                "metrics only",
                file=sys.stderr,
            )
            return 1
        shown = summary_to_reference_layout(summary) if format == "upstream" else summary
    except FileNotFoundError as exc:
        print(f"humanclaw metrics: {exc}", file=sys.stderr)
        return 1
    except MetricsFileError as exc:
        print(f"humanclaw metrics: invalid metrics file: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"humanclaw metrics: --format {format}: {exc}", file=sys.stderr)
        return 1
    if export is not None:
        try:
            paths = export_metric_files(rows, export, format)
        except (FileExistsError, ValueError) as exc:
            print(f"humanclaw metrics: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {len(paths)} metrics.json ({format} layout) below {export}", file=sys.stderr)
    if as_json:
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        print(format_tables(summary), end="")
    if write_json:
        path = write_metrics_json(Path(directory) / _SUMMARY_NAME, shown)
        print(f"wrote {path}", file=sys.stderr)
    if plot is not None:
        try:
            path = plot_success_breakdown(summary, plot)
        except (RuntimeError, ValueError) as exc:
            print(f"humanclaw metrics: cannot plot: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {path}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    """Entry point used by ``humanclaw metrics``."""
    return int(tyro.cli(run_metrics, args=argv, prog="humanclaw metrics"))
