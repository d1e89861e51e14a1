"""Reduce per-episode metrics.json files to the paper's summary table.

The columns are declared by the metric parts (:data:`~humanclaw_gym.metrics.episode.
METRIC_SPECS`, each :class:`~humanclaw_gym.metrics.fields.Column` with its
:class:`~humanclaw_gym.metrics.fields.Reduce`); the paper's rules (all percentages are
0-100):

* FindSR, GeoFindSR, NavSR@20cm, GeoNavSR@20cm, NavSR@1m: share of *all* episodes.
* InteractSR, GeoInteractSR: share of the *interact* episodes only (``None`` without any).
* Coll.: mean over episodes of each episode's collision rate (colliding motion steps /
  motion steps). An episode without any motion step scores 0.0 and stays in the mean under
  ``paper`` rules; under ``strict`` rules it has no rate and is left out (counted in
  ``counts.episodes_without_motion`` either way). The body-group columns follow the same
  rule.
* #Dtb/ep: mean number of affected objects per episode (all episodes).
* dDtb(m): pooled over objects: total path length of every affected object / number of
  affected objects with a measured path (not a mean of episode means).
* Motion Jerk: mean over the episodes that have a score.
* avg steps: mean decision steps per episode; in/out tok/step: token totals / total steps.

Every episode in one summary must have been scored by the same metric rules, and an
episode (``episode_id`` with ``rollout_index``) may appear only once: a run directory
copied twice is refused instead of counted twice. Files of the reference release's layout
are read as well as ours (see :mod:`humanclaw_gym.metrics.formats`).

Files of another task (a layout of its own, :class:`~humanclaw_gym.metrics.trackers.
MetricSuite`) are summed up by their trackers' declared columns alone (``main``,
``variants``, ``extra``) with the episode count and the task in the summary; one summary
holds the episodes of one task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from humanclaw_gym.body.skeleton import BODY_GROUPS
from humanclaw_gym.metrics.episode import METRIC_SPECS, MetricsFileError, validate_metrics
from humanclaw_gym.metrics.fields import Column, Reduce
from humanclaw_gym.metrics.formats import read_metrics_record
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, check_rules
from humanclaw_gym.metrics.trackers import BENCHMARK_SUITE, MetricSuite, suite_for_schema
from humanclaw_gym.metrics.usage import combine_token_sources

__all__ = [
    "BREAKDOWN_COLUMNS",
    "COMPARISON_SCHEMA",
    "EXTRA_COLUMNS",
    "MAIN_COLUMNS",
    "SUMMARY_SCHEMA",
    "VARIANT_COLUMNS",
    "aggregate",
    "aggregate_metric_files",
    "compare_summaries",
    "declared_columns",
    "find_metric_files",
    "format_comparison",
    "format_tables",
    "read_metric_files",
    "summary_cpu_groups",
    "read_row",
    "summary_suite",
]

#: Schema tag of metrics_summary.json.
SUMMARY_SCHEMA = "humanclaw_metrics_summary_v2"


def declared_columns(table: str) -> tuple[Column, ...]:
    """The declared columns of one summary table, in order."""
    cols = [c for spec in METRIC_SPECS for c in spec.columns if c.table == table]
    return tuple(sorted(cols, key=lambda c: c.order))


def _triples(columns: Sequence[Column]) -> tuple[tuple[str, str, str], ...]:
    return tuple((c.label, c.key, c.fmt) for c in columns)


#: (column label, key in ``summary["main"]``, number format) in the paper's order.
MAIN_COLUMNS: tuple[tuple[str, str, str], ...] = _triples(declared_columns("main"))

#: Success variants, in the paper's order.
VARIANT_COLUMNS: tuple[tuple[str, str, str], ...] = _triples(declared_columns("variants"))

#: Columns that trackers beyond the paper's table add (``summary["extra"]``).
EXTRA_COLUMNS: tuple[tuple[str, str, str], ...] = _triples(declared_columns("extra"))

_BREAKDOWN = tuple(
    c for table in ("main", "variants", "extra") for c in declared_columns(table) if c.breakdown
)

#: Columns of the by-category and by-difficulty breakdowns.
BREAKDOWN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("episodes", "episodes", "d"),
    *_triples(_BREAKDOWN),
)

_CATEGORY_ORDER = ("chair", "bed", "potted_plant", "toilet", "tv", "couch")
_DIFFICULTY_ORDER = ("easy", "medium", "hard")
_UNLABELLED = "unlabelled"
_METRICS_NAME = "metrics.json"


def _success_block(rows: Sequence[Mapping[str, Any]], rules: str) -> dict[str, Any]:
    block: dict[str, Any] = {
        "episodes": len(rows),
        "interact_episodes": sum(bool(row["interact"]) for row in rows),
    }
    for column in _BREAKDOWN:
        block[column.key] = column.reduce.apply(rows, rules)
    return block


def _ordered_groups(
    rows: Sequence[Mapping[str, Any]],
    key: Callable[[Mapping[str, Any]], str],
    order: Sequence[str],
    rules: str,
) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)

    def rank(name: str) -> tuple[int, int, str]:
        if name in order:
            return (0, order.index(name), name)
        return (2 if name == _UNLABELLED else 1, 0, name)

    return {name: _success_block(groups[name], rules) for name in sorted(groups, key=rank)}


def _common_rules(
    rows: Sequence[Mapping[str, Any]], names: Sequence[str], rules: str | None
) -> str:
    """The one rule set of every row (checked against ``rules`` when given)."""
    by_rules: dict[str, list[str]] = {}
    for row, name in zip(rows, names, strict=True):
        by_rules.setdefault(row["rules"], []).append(name)
    if rules is not None:
        rules = check_rules(rules)
        others = {r: n for r, n in by_rules.items() if r != rules}
        if others:
            other, where = next(iter(others.items()))
            raise MetricsFileError(
                f"{where[0]}: scored by {other!r} metric rules, but {rules!r} were asked for "
                f"({len(where)} such episode(s)); per-episode scores cannot be re-scored from "
                f"metrics.json: aggregate them with rules={other!r} or run them again with "
                f"--metric-rules {rules}"
            )
        return rules
    if len(by_rules) > 1:
        detail = "; ".join(
            f"{r}: {len(n)} episode(s), e.g. {n[0]}" for r, n in sorted(by_rules.items())
        )
        raise MetricsFileError(
            f"episodes scored by different metric rules cannot be averaged together ({detail})"
        )
    return next(iter(by_rules))


def _check_unique(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> None:
    seen: dict[tuple[str, int], str] = {}
    for row, name in zip(rows, names, strict=True):
        key = (row["episode_id"], row["rollout_index"])
        if key in seen:
            raise MetricsFileError(
                f"episode {key[0]!r} (rollout {key[1]}) appears twice: {seen[key]} and {name}; "
                "each episode may be counted once (was a run directory copied?)"
            )
        seen[key] = name


def aggregate(
    metrics: Sequence[Mapping[str, Any]],
    rules: str | None = None,
    names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Summarise per-episode metrics dicts (our layout or the reference's).

    Args:
        metrics: parsed metrics.json contents, one per episode.
        rules: the metric rules the episodes must have been scored by; ``None``: whatever
            they were scored by, as long as it is the same for all.
        names: what to call each entry in errors (file paths); default ``metrics[i]``.

    Returns:
        The summary (``"schema": "humanclaw_metrics_summary_v2"``) with ``rules``, ``main``,
        ``variants``, ``extra``, ``collision_by_group_pct``, ``counts``, ``tokens``,
        ``by_category`` and ``by_difficulty``; see the module docstring for the averaging
        rules. Values without a denominator are ``None``.

    Raises:
        ValueError: for an empty list; :class:`MetricsFileError` for an invalid entry,
        a rule mismatch, or an episode that appears twice.
    """
    if not metrics:
        raise ValueError("aggregate needs at least one episode's metrics")
    names = [f"metrics[{i}]" for i in range(len(metrics))] if names is None else list(names)
    if len(names) != len(metrics):
        raise ValueError(f"names must have {len(metrics)} entries, got {len(names)}")
    rows = [read_row(dict(row), name) for row, name in zip(metrics, names, strict=True)]
    suite = _one_suite(rows, names)
    if suite is not BENCHMARK_SUITE:
        return _aggregate_suite(rows, names, suite, rules)
    rules = _common_rules(rows, names, rules)
    _check_unique(rows, names)
    n = len(rows)

    def table(name: str) -> dict[str, Any]:
        return {c.key: c.reduce.apply(rows, rules) for c in declared_columns(name)}

    with_motion = sum(row["motion_steps"] > 0 for row in rows)
    by_group = {
        group: Reduce("collision", f"collision_rate_by_group.{group}", scale=100.0).apply(
            rows, rules
        )
        for group in BODY_GROUPS
    }
    jerks = sum(row["motion_jerk_m_s3"] is not None for row in rows)
    total_steps = sum(row["steps"] for row in rows)
    tok_reason = sum(row["tokens"]["reasoning_tokens"] for row in rows)
    episodes_by_source: dict[str, int] = {}
    for row in rows:
        label = row["tokens"]["source"]
        episodes_by_source[label] = episodes_by_source.get(label, 0) + 1
    success = _success_block(rows, rules)
    return {
        "schema": SUMMARY_SCHEMA,
        "rules": rules,
        "main": table("main"),
        "variants": table("variants"),
        "extra": table("extra"),
        "collision_by_group_pct": by_group,
        "counts": {
            "episodes": n,
            "interact_episodes": success["interact_episodes"],
            "episodes_with_motion": with_motion,
            "episodes_without_motion": n - with_motion,
            "episodes_with_jerk": jerks,
            "motion_anomaly_frames": sum(r.get("motion_anomaly") or 0 for r in rows),
            "episodes_with_motion_anomaly": sum((r.get("motion_anomaly") or 0) > 0 for r in rows),
            "episodes_without_anomaly_count": sum(r.get("motion_anomaly") is None for r in rows),
            "affected_objects": sum(row["affected_object_count"] for row in rows),
            "affected_objects_with_path": sum(row["affected_objects_with_path"] for row in rows),
            "active_stops": sum(row["active_stop"] for row in rows),
            "total_steps": total_steps,
            "initial_penetration_flagged": sum(row["initial_penetration_flag"] for row in rows),
            "imported_episodes": sum(row.get("imported_from") is not None for row in rows),
        },
        "tokens": {
            "input_tokens": sum(row["tokens"]["input_tokens"] for row in rows),
            "output_tokens": sum(row["tokens"]["output_tokens"] for row in rows),
            "reasoning_tokens": tok_reason,
            "reasoning_tokens_per_step": tok_reason / total_steps if total_steps else None,
            "source": combine_token_sources(episodes_by_source),
            "episodes_by_source": dict(sorted(episodes_by_source.items())),
        },
        "by_category": _ordered_groups(rows, lambda r: r["category"], _CATEGORY_ORDER, rules),
        "by_difficulty": _ordered_groups(
            rows, lambda r: r["difficulty"] or _UNLABELLED, _DIFFICULTY_ORDER, rules
        ),
    }


def read_row(data: Any, where: str = "metrics") -> dict[str, Any]:
    """One validated row from a parsed metrics.json: the benchmark's layout or the
    reference release's (:func:`~humanclaw_gym.metrics.formats.read_metrics_record`), or a
    registered task's own layout (:func:`~humanclaw_gym.metrics.episode.validate_metrics`).

    Raises:
        MetricsFileError: naming ``where`` and the offending field or schema.
    """
    if isinstance(data, Mapping):
        suite = suite_for_schema(data.get("schema"))
        if suite is not None and suite is not BENCHMARK_SUITE:
            return validate_metrics(data, where)
    return read_metrics_record(data, where)


def _one_suite(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> MetricSuite:
    """The one metric suite (task) of every row."""
    suites: dict[str, tuple[MetricSuite, str]] = {}
    for row, name in zip(rows, names, strict=True):
        suite = suite_for_schema(row.get("schema")) or BENCHMARK_SUITE
        suites.setdefault(suite.task, (suite, name))
    if len(suites) > 1:
        detail = "; ".join(f"{task}: e.g. {name}" for task, (_, name) in sorted(suites.items()))
        raise MetricsFileError(
            f"metrics of different tasks cannot be summed up together ({detail})"
        )
    return next(iter(suites.values()))[0]


def _aggregate_suite(
    rows: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    suite: MetricSuite,
    rules: str | None,
) -> dict[str, Any]:
    """The summary of another task's episodes: its declared columns and counts."""
    if all("rules" in row for row in rows):
        rules = _common_rules(rows, names, rules)
    else:
        rules = check_rules(rules or DEFAULT_METRIC_RULES)
    if all("episode_id" in row and "rollout_index" in row for row in rows):
        _check_unique(rows, names)
    counts: dict[str, Any] = {"episodes": len(rows)}
    if all("active_stop" in row for row in rows):
        counts["active_stops"] = sum(bool(row["active_stop"]) for row in rows)
    if all(isinstance(row.get("steps"), int) for row in rows):
        counts["total_steps"] = sum(row["steps"] for row in rows)
    return {
        "schema": SUMMARY_SCHEMA,
        "task": suite.task,
        "metrics_schema": suite.schema,
        "rules": rules,
        **{
            table: {c.key: c.reduce.apply(rows, rules) for c in suite.columns(table)}
            for table in ("main", "variants", "extra")
        },
        "counts": counts,
    }


def summary_suite(summary: Mapping[str, Any]) -> MetricSuite:
    """The metric suite a summary was made with (the benchmark's unless it names another
    task's layout)."""
    return suite_for_schema(summary.get("metrics_schema")) or BENCHMARK_SUITE


def find_metric_files(root: str | Path) -> list[Path]:
    """Every ``metrics.json`` under ``root`` at any depth, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"metrics directory does not exist: {root}")
    return sorted(p for p in root.rglob(_METRICS_NAME) if p.is_file())


def read_metric_files(root: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse and validate every ``metrics.json`` under ``root`` (either layout).

    Returns:
        ``(rows of our layout, file paths)`` in path order.

    Raises:
        FileNotFoundError: when ``root`` is missing or holds no metrics.json.
        MetricsFileError: naming the first unreadable or invalid file.
    """
    paths = find_metric_files(root)
    if not paths:
        raise FileNotFoundError(f"no {_METRICS_NAME} found under {root}")
    rows = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise MetricsFileError(f"{path}: cannot read metrics JSON ({exc})") from exc
        rows.append(read_row(data, str(path)))
    return rows, [str(p) for p in paths]


def aggregate_metric_files(root: str | Path, rules: str | None = None) -> dict[str, Any]:
    """Find, validate and aggregate every ``metrics.json`` under ``root`` (any depth, either
    layout, mixed directories too).

    Args:
        root: a run directory or a parent of several.
        rules: see :func:`aggregate`.

    Raises:
        FileNotFoundError: when ``root`` is missing or holds no metrics.json.
        MetricsFileError: naming the first unreadable or invalid file, the files of a
            duplicated episode, or a file scored by other rules.
    """
    rows, names = read_metric_files(root)
    summary = aggregate(rows, rules=rules, names=names)
    summary["source"] = {"root": str(Path(root)), "files": len(names)}
    return summary


# -- text tables -------------------------------------------------------------------------------


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    return format(value, spec)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [cells[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def _row_table(columns: Sequence[tuple[str, str, str]], values: Mapping[str, Any]) -> str:
    headers = [label for label, _, _ in columns]
    cells = [_fmt(values.get(key), spec) for _, key, spec in columns]
    widths = [max(len(h), len(c)) for h, c in zip(headers, cells, strict=True)]
    head = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))
    return "\n".join([head, rule, body])


def _breakdown_table(title: str, groups: Mapping[str, Mapping[str, Any]]) -> str:
    headers = [title] + [label for label, _, _ in BREAKDOWN_COLUMNS]
    rows = [
        [name] + [_fmt(block.get(key), spec) for _, key, spec in BREAKDOWN_COLUMNS]
        for name, block in groups.items()
    ]
    return _table(headers, rows)


def format_tables(summary: Mapping[str, Any]) -> str:
    """Plain-text, column-aligned tables of a summary from :func:`aggregate`.

    Sections: main table (paper column order), success variants, collision by body group,
    denominators and token source, then the breakdowns by category and by difficulty.
    ``-`` marks a value without a denominator. Another task's summary: its tables and
    counts.
    """
    suite = summary_suite(summary)
    if suite is not BENCHMARK_SUITE:
        return _format_suite(summary, suite)
    counts = summary["counts"]
    tokens = summary["tokens"]
    group_columns = tuple((g, g, ".1f") for g in summary["collision_by_group_pct"])
    denominators = (
        ("episodes", "episodes", "d"),
        ("interact episodes", "interact_episodes", "d"),
        ("with motion", "episodes_with_motion", "d"),
        ("without motion", "episodes_without_motion", "d"),
        ("with jerk score", "episodes_with_jerk", "d"),
        ("anomaly frames", "motion_anomaly_frames", "d"),
        ("eps. with anomaly", "episodes_with_motion_anomaly", "d"),
        ("affected objects", "affected_objects", "d"),
        ("with path", "affected_objects_with_path", "d"),
        ("total steps", "total_steps", "d"),
        ("penetration flagged", "initial_penetration_flagged", "d"),
    )
    sections = [
        (f"Main table ({summary['rules']} metric rules; success in %, Coll. in % of motion "
         "steps, Motion Jerk in m/s^3)",
         _row_table(MAIN_COLUMNS, summary["main"])),
        ("Success variants (%)", _row_table(VARIANT_COLUMNS, summary["variants"])),
        *([("Other metrics", _row_table(EXTRA_COLUMNS, summary["extra"]))]
          if EXTRA_COLUMNS else []),
        ("Collision by body group (% of motion steps)",
         _row_table(group_columns, summary["collision_by_group_pct"])),
        ("Denominators", _row_table(denominators, counts)),
        ("Tokens",
         f"source: {tokens['source']}  (episodes by source: "
         + ", ".join(f"{k}={v}" for k, v in tokens["episodes_by_source"].items())
         + f")\nreasoning tok/step: {_fmt(tokens['reasoning_tokens_per_step'], '.1f')}"
         " (hidden, not in out tok/step)"),
        ("By category", _breakdown_table("category", summary["by_category"])),
        ("By difficulty", _breakdown_table("difficulty", summary["by_difficulty"])),
    ]  # fmt: skip
    return "\n\n".join(f"{title}\n{body}" for title, body in sections) + "\n"


# -- comparing two summaries -------------------------------------------------------------------

#: Schema tag of the result of :func:`compare_summaries`.
COMPARISON_SCHEMA = "humanclaw_metrics_comparison_v1"
_BASELINES_DOC = "docs/baselines.md, Across machines"


def summary_cpu_groups(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The CPU records a ``metrics_summary.json`` names: ``environment.episode_cpus`` (the
    records of its episode folders, written by ``humanclaw run``), else the one record of
    ``environment.cpu`` (the machine that wrote the summary) for all its episodes; empty
    when it names none."""
    environment = summary.get("environment")
    if not isinstance(environment, Mapping):
        return []
    groups = environment.get("episode_cpus")
    if isinstance(groups, list) and any(
        isinstance(g, Mapping) and isinstance(g.get("cpu"), Mapping) for g in groups
    ):
        return [dict(g) for g in groups if isinstance(g, Mapping)]
    cpu = environment.get("cpu")
    if isinstance(cpu, Mapping):
        episodes = (summary.get("counts") or {}).get("episodes")
        return [{"cpu": dict(cpu), "episodes": episodes}]
    return []


def _records(groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for group in groups:
        cpu = group.get("cpu")
        if isinstance(cpu, Mapping):
            seen.setdefault(json.dumps(cpu, sort_keys=True, default=str), dict(cpu))
    return list(seen.values())


def _environment_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Package versions and source revisions that differ between two summaries."""
    env_a, env_b = a.get("environment"), b.get("environment")
    if not isinstance(env_a, Mapping) or not isinstance(env_b, Mapping):
        return []
    out = []
    pkgs_a, pkgs_b = env_a.get("packages") or {}, env_b.get("packages") or {}
    for name in sorted(set(pkgs_a) | set(pkgs_b)):
        if pkgs_a.get(name) != pkgs_b.get(name):
            out.append(f"{name} {pkgs_a.get(name)} vs {pkgs_b.get(name)}")
    git_a, git_b = env_a.get("git") or {}, env_b.get("git") or {}
    if git_a.get("commit") != git_b.get("commit"):
        out.append(f"commit {str(git_a.get('commit'))[:10]} vs {str(git_b.get('commit'))[:10]}")
    return out


def compare_summaries(
    summary: Mapping[str, Any],
    reference: Mapping[str, Any],
    *,
    cpu_groups: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Compare a run's summary with another one (a published run, say), figure by figure,
    and say whether their CPU records differ when the figures do.

    Args:
        summary: this run's summary (:func:`aggregate`).
        reference: the summary compared with (a ``metrics_summary.json``).
        cpu_groups: this run's episodes grouped by CPU record
            (:func:`~humanclaw_gym.provenance.episode_cpu_groups` of its episode folders);
            default: what ``summary`` itself names (:func:`summary_cpu_groups`).

    Returns:
        ``{"schema", "rows": [{"table", "key", "label", "this_run", "compared",
        "difference"}], "figures_differ", "rules", "episodes", "cpu": {"this_run",
        "compared", "same", "differences"}, "notes": [one line each]}``; ``cpu.same`` is
        None when either side names no CPU record.
    """
    from humanclaw_gym.provenance import cpu_record_differences, describe_cpu

    rows = []
    for table in ("main", "variants"):
        ours, theirs = summary.get(table) or {}, reference.get(table) or {}
        for column in declared_columns(table):
            a, b = ours.get(column.key), theirs.get(column.key)
            numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
            rows.append(
                {
                    "table": table,
                    "key": column.key,
                    "label": column.label,
                    "this_run": a,
                    "compared": b,
                    "difference": (a - b) if numbers else None,
                }
            )
    figures_differ = any(row["this_run"] != row["compared"] for row in rows)
    ours_groups = list(summary_cpu_groups(summary) if cpu_groups is None else cpu_groups)
    theirs_groups = summary_cpu_groups(reference)
    ours_records, theirs_records = _records(ours_groups), _records(theirs_groups)
    differences: list[str] = []
    same: bool | None = None
    if ours_records and theirs_records:
        for a in ours_records:
            for b in theirs_records:
                differences += [d for d in cpu_record_differences(a, b) if d not in differences]
        same = not differences
    rules = [summary.get("rules"), reference.get("rules")]
    episodes = [(summary.get("counts") or {}).get("episodes"),
                (reference.get("counts") or {}).get("episodes")]  # fmt: skip
    notes = []
    if rules[0] != rules[1]:
        notes.append(f"scored by other metric rules: {rules[0]} here, {rules[1]} there")
    if episodes[0] != episodes[1]:
        notes.append(f"other episodes: {episodes[0]} here, {episodes[1]} there")
    if not figures_differ:
        notes.append("the figures are equal")
    elif same is False:
        notes.append(
            f"the figures differ and so do the CPU records ({', '.join(differences)}): "
            "numpy and OpenBLAS pick their kernels by CPU, which changes last bits and then "
            f"whole trajectories; compare runs made on one CPU record ({_BASELINES_DOC})"
        )
    elif same is True:
        changed = _environment_differences(summary, reference)
        notes.append(
            "the figures differ on the same CPU record: the code, the settings, the "
            "packages or the episodes differ" + (f" ({'; '.join(changed)})" if changed else "")
        )
    else:
        side = "this run's episode folders" if not ours_records else "the compared summary"
        notes.append(
            f"the figures differ and {side} record no CPU (node.json, environment.cpu), so "
            f"whether the CPUs differ is unknown ({_BASELINES_DOC})"
        )
    if not figures_differ and same is False:
        notes.append(f"the CPU records differ ({', '.join(differences)})")
    return {
        "schema": COMPARISON_SCHEMA,
        "rows": rows,
        "figures_differ": figures_differ,
        "rules": rules,
        "episodes": episodes,
        "cpu": {
            "this_run": ours_groups,
            "compared": theirs_groups,
            "this_run_described": [describe_cpu(r) for r in ours_records],
            "compared_described": [describe_cpu(r) for r in theirs_records],
            "same": same,
            "differences": differences,
        },
        "notes": notes,
    }


def format_comparison(comparison: Mapping[str, Any], label: str = "compared") -> str:
    """Plain text of :func:`compare_summaries`: the figures side by side, the CPU records
    of both sides when the figures differ or the records do, and the notes."""
    from humanclaw_gym.provenance import describe_cpu

    table_rows = []
    for row in comparison["rows"]:
        spec = next(fmt for lab, key, fmt in (*MAIN_COLUMNS, *VARIANT_COLUMNS) if key == row["key"])
        diff = row["difference"]
        table_rows.append(
            [
                row["label"],
                _fmt(row["this_run"], spec),
                _fmt(row["compared"], spec),
                "-" if diff is None else ("0" if diff == 0 else f"{diff:+.4g}"),
            ]
        )
    parts = [_table(["metric", "this run", label, "difference"], table_rows)]
    cpu = comparison["cpu"]
    if comparison["figures_differ"] or cpu["same"] is False:
        lines = ["CPU records (node.json: CPU, numpy SIMD, BLAS kernel):"]
        for side, groups in (("this run", cpu["this_run"]), (label, cpu["compared"])):
            named = [g for g in groups if g.get("cpu") is not None]
            if not named:
                lines.append(f"  {side}: not recorded")
            for group in named:
                lines.append(
                    f"  {side}: {group.get('episodes')} episodes on {describe_cpu(group['cpu'])}"
                )
        parts.append("\n".join(lines))
    parts.append("\n".join(f"note: {note}" for note in comparison["notes"]))
    return "\n\n".join(parts) + "\n"


def _format_suite(summary: Mapping[str, Any], suite: MetricSuite) -> str:
    titles = {"main": "Main table", "variants": "Variants", "extra": "Other metrics"}
    sections = [
        (
            f"{titles[table]} (task {summary['task']}, {summary['rules']} metric rules)",
            _row_table(_triples(suite.columns(table)), summary[table]),
        )
        for table in ("main", "variants", "extra")
        if suite.columns(table)
    ]
    counts = summary["counts"]
    sections.append(("Counts", _row_table(tuple((k, k, "d") for k in counts), counts)))
    return "\n\n".join(f"{title}\n{body}" for title, body in sections) + "\n"
