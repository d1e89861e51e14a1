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


def _refuse(message: str) -> int:
    """A mistake in what the command was given: one line, exit code 2."""
    print(f"humanclaw metrics: error: {message}", file=sys.stderr)
    return 2


def _plot_problem(path: Path) -> str | None:
    """Why ``--plot PATH`` cannot be drawn (checked before anything is read or written)."""
    fmt = path.suffix.lstrip(".").lower()
    if not fmt:
        return f"--plot {path}: give the image a file suffix such as .png, .pdf or .svg"
    try:
        import matplotlib.figure  # noqa: F401  (what the plot draws with)
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return (
            "--plot needs matplotlib, which is not installed; install it with: "
            "pip install 'humanclaw-gym[plot]'"
        )
    supported = FigureCanvasBase.get_supported_filetypes()
    if fmt not in supported:
        return (
            f"--plot {path}: .{fmt} is not an image format; allowed: {', '.join(sorted(supported))}"
        )
    return None


def _read_reference(path: Path) -> dict[str, Any]:
    """The summary ``--compare`` names (a ``metrics_summary.json``).

    Raises:
        OSError / ValueError: missing, unreadable, not JSON, not a summary (one line).
    """
    from humanclaw_gym.fileio import loads_json, read_bytes_limited

    data = loads_json(read_bytes_limited(path, 64 << 20, "summary file"), f"--compare {path}")
    if not isinstance(data, dict) or not isinstance(data.get("main"), dict):
        raise ValueError(
            f"--compare {path}: not a metrics summary (a metrics_summary.json with a 'main' "
            "table, as humanclaw run --metrics or humanclaw metrics --write-json write it)"
        )
    return data


def run_metrics(
    directory: Annotated[tyro.conf.Positional[Path], tyro.conf.arg(metavar="DIR")],
    rules: Literal["paper", "strict"] | None = None,
    format: Literal["ours", "upstream"] = "ours",  # noqa: A002 - the CLI flag's name
    as_json: Annotated[bool, tyro.conf.arg(name="json")] = False,
    write_json: bool = False,
    export: Path | None = None,
    plot: Path | None = None,
    compare: Path | None = None,
    task: str | None = None,
) -> int:
    """Aggregate every metrics.json under DIR (any depth, our or the reference layout).

    A mistake in what the command is given (a missing directory, an invalid metrics file,
    --rules other than the files were scored by, --plot without matplotlib, ...) is one
    line with exit code 2, and nothing is written.

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
        compare: a metrics_summary.json (a published run's, e.g. docs/results/...): print
            the figures side by side and, when they differ, the CPU records of both runs
            (node.json of DIR's episodes, the summary's environment).
        task: a task whose metrics layout is not known otherwise (module:Class of a task
            that is neither built in nor an installed entry point; imported first).
    """
    if task is not None:
        from humanclaw_gym.tasks import UnknownTaskError, resolve_task

        try:
            resolve_task(task)
        except UnknownTaskError as exc:
            return _refuse(f"--task: {exc}")
    if plot is not None and (problem := _plot_problem(plot)) is not None:
        return _refuse(problem)
    reference = None
    if compare is not None:
        try:
            reference = _read_reference(compare)
        except (OSError, ValueError) as exc:
            text = str(exc)
            return _refuse(text if text.startswith("--compare") else f"--compare: {text}")
    try:
        rows, names = read_metric_files(directory)
        summary = aggregate(rows, rules=rules, names=names)
        summary["source"] = {"root": str(directory), "files": len(names)}
        if "task" in summary and (
            format == "upstream" or export is not None or plot is not None or compare is not None
        ):
            return _refuse(
                f"the metrics are of task {summary['task']!r}: --format upstream, --export, "
                "--plot and --compare are for the benchmark's find_nav_interact metrics only"
            )
        shown = summary_to_reference_layout(summary) if format == "upstream" else summary
    except FileNotFoundError as exc:
        return _refuse(str(exc))
    except MetricsFileError as exc:
        return _refuse(f"invalid metrics file: {exc}")
    except ValueError as exc:
        return _refuse(f"--format {format}: {exc}")
    comparison = None
    if reference is not None:
        from humanclaw_gym.metrics.aggregate import compare_summaries
        from humanclaw_gym.provenance import episode_cpu_groups

        folders = sorted({Path(name).parent for name in names})
        comparison = compare_summaries(summary, reference, cpu_groups=episode_cpu_groups(folders))
    if export is not None:
        try:
            paths = export_metric_files(rows, export, format)
        except (FileExistsError, ValueError) as exc:
            return _refuse(str(exc))
        print(f"wrote {len(paths)} metrics.json ({format} layout) below {export}", file=sys.stderr)
    if as_json:
        printed = shown if comparison is None else {**shown, "comparison": comparison}
        print(json.dumps(printed, indent=2, ensure_ascii=False))
    else:
        print(format_tables(summary), end="")
        if comparison is not None:
            from humanclaw_gym.metrics.aggregate import format_comparison

            print(f"\nCompared with {compare}")
            print(format_comparison(comparison), end="")
    if write_json:
        path = write_metrics_json(Path(directory) / _SUMMARY_NAME, shown)
        print(f"wrote {path}", file=sys.stderr)
    if plot is not None:
        path = plot_success_breakdown(summary, plot)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    """Entry point used by ``humanclaw metrics``."""
    return int(tyro.cli(run_metrics, args=argv, prog="humanclaw metrics"))
