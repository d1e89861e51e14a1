"""``humanclaw metrics DIR``: print the paper tables of every metrics.json under DIR.

Read-only by default; ``--write-json`` also writes ``DIR/metrics_summary.json``. Loads no
simulator, renderer or policy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import tyro

from humanclaw_gym.metrics import (
    MetricsFileError,
    aggregate_metric_files,
    format_tables,
    plot_success_breakdown,
    write_metrics_json,
)

__all__ = ["main", "run_metrics"]

_SUMMARY_NAME = "metrics_summary.json"


def run_metrics(
    directory: Annotated[tyro.conf.Positional[Path], tyro.conf.arg(metavar="DIR")],
    as_json: Annotated[bool, tyro.conf.arg(name="json")] = False,
    write_json: bool = False,
    plot: Path | None = None,
) -> int:
    """Aggregate every metrics.json under DIR (any depth) into the paper table.

    Args:
        directory: a run directory, or a parent of several run shards.
        as_json: print the whole summary as JSON instead of the text tables.
        write_json: also write DIR/metrics_summary.json (atomically).
        plot: also draw success by category and difficulty into this image (needs matplotlib).
    """
    try:
        summary = aggregate_metric_files(directory)
    except FileNotFoundError as exc:
        print(f"humanclaw metrics: {exc}", file=sys.stderr)
        return 1
    except MetricsFileError as exc:
        print(f"humanclaw metrics: invalid metrics file: {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        print(format_tables(summary), end="")
    if write_json:
        path = write_metrics_json(Path(directory) / _SUMMARY_NAME, summary)
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
