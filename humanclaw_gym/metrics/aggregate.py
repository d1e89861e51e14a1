"""Reduce per-episode metrics.json files to the paper's summary table.

Averaging rules (all percentages are 0-100):

* FindSR, GeoFindSR, NavSR@20cm, GeoNavSR@20cm, NavSR@1m: share of *all* episodes.
* InteractSR, GeoInteractSR: share of the *interact* episodes only (``None`` without any).
* Coll.: mean over episodes of each episode's collision rate (colliding motion steps /
  motion steps); episodes without any motion step have no rate, are left out of this mean
  and counted in ``counts.episodes_without_motion``. The body-group columns use the same
  episodes.
* #Dtb/ep: mean number of affected objects per episode (all episodes).
* dDtb(m): pooled over objects: total path length of every affected object / number of
  affected objects with a measured path (not a mean of episode means).
* Motion Jerk: mean over the episodes that have a score.
* Anom./ep: mean ``motion_anomaly`` (realized frames whose joint tracking error exceeds the
  bound) per episode, over the episodes that report it (``humanclaw_metrics_v1`` files
  predate it and are left out, counted in ``counts.episodes_without_anomaly_count``).
* avg steps: mean decision steps per episode; in/out tok/step: token totals / total steps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from humanclaw_gym.body.skeleton import BODY_GROUPS
from humanclaw_gym.metrics.episode import MetricsFileError, validate_metrics
from humanclaw_gym.metrics.usage import combine_token_sources

__all__ = [
    "BREAKDOWN_COLUMNS",
    "MAIN_COLUMNS",
    "SUMMARY_SCHEMA",
    "VARIANT_COLUMNS",
    "aggregate",
    "aggregate_metric_files",
    "find_metric_files",
    "format_tables",
]

#: Schema tag of metrics_summary.json.
SUMMARY_SCHEMA = "humanclaw_metrics_summary_v1"

#: (column label, key in ``summary["main"]``, number format) in the paper's order.
MAIN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("FindSR", "find_sr_pct", ".1f"),
    ("NavSR@20cm", "nav_sr_20cm_pct", ".1f"),
    ("InteractSR", "interact_sr_pct", ".1f"),
    ("Coll.", "collision_pct", ".1f"),
    ("#Dtb/ep", "disturbed_objects_per_episode", ".2f"),
    ("dDtb(m)", "disturbed_path_m", ".3f"),
    ("Motion Jerk", "motion_jerk_m_s3", ".2f"),
    ("Anom./ep", "motion_anomaly_per_episode", ".2f"),
    ("avg steps", "avg_steps", ".1f"),
    ("in tok/step", "input_tokens_per_step", ".1f"),
    ("out tok/step", "output_tokens_per_step", ".1f"),
)

#: Success variants, in the paper's order.
VARIANT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("GeoFindSR", "geo_find_sr_pct", ".1f"),
    ("GeoNavSR@20cm", "geo_nav_sr_20cm_pct", ".1f"),
    ("NavSR@1m", "nav_sr_1m_pct", ".1f"),
    ("GeoInteractSR", "geo_interact_sr_pct", ".1f"),
)

#: Columns of the by-category and by-difficulty breakdowns.
BREAKDOWN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("episodes", "episodes", "d"),
    ("FindSR", "find_sr_pct", ".1f"),
    ("NavSR@20cm", "nav_sr_20cm_pct", ".1f"),
    ("InteractSR", "interact_sr_pct", ".1f"),
    ("GeoFindSR", "geo_find_sr_pct", ".1f"),
    ("GeoNavSR@20cm", "geo_nav_sr_20cm_pct", ".1f"),
    ("NavSR@1m", "nav_sr_1m_pct", ".1f"),
    ("GeoInteractSR", "geo_interact_sr_pct", ".1f"),
)

_CATEGORY_ORDER = ("chair", "bed", "potted_plant", "toilet", "tv", "couch")
_DIFFICULTY_ORDER = ("easy", "medium", "hard")
_UNLABELLED = "unlabelled"
_METRICS_NAME = "metrics.json"


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return math.fsum(values) / len(values) if values else None


def _pct(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    return 100.0 * sum(bool(row[key]) for row in rows) / len(rows) if rows else None


def _success_block(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    interact = [row for row in rows if row["interact"]]
    return {
        "episodes": len(rows),
        "interact_episodes": len(interact),
        "find_sr_pct": _pct(rows, "find_success"),
        "nav_sr_20cm_pct": _pct(rows, "nav_success_20cm"),
        "interact_sr_pct": _pct(interact, "interact_success"),
        "geo_find_sr_pct": _pct(rows, "geo_find_success"),
        "geo_nav_sr_20cm_pct": _pct(rows, "geo_nav_success_20cm"),
        "nav_sr_1m_pct": _pct(rows, "nav_success_1m"),
        "geo_interact_sr_pct": _pct(interact, "geo_interact_success"),
    }


def _ordered_groups(
    rows: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str], order: Sequence[str]
) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)

    def rank(name: str) -> tuple[int, int, str]:
        if name in order:
            return (0, order.index(name), name)
        return (2 if name == _UNLABELLED else 1, 0, name)

    return {name: _success_block(groups[name]) for name in sorted(groups, key=rank)}


def aggregate(metrics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summarise per-episode metrics dicts (each a ``humanclaw_metrics_v2`` or v1 metrics.json).

    Returns:
        The summary (``"schema": "humanclaw_metrics_summary_v1"``) with ``main``,
        ``variants``, ``collision_by_group_pct``, ``counts``, ``tokens``, ``by_category``
        and ``by_difficulty``; see the module docstring for the averaging rules. Values
        without a denominator are ``None``.

    Raises:
        ValueError: for an empty list; :class:`MetricsFileError` for an invalid entry.
    """
    if not metrics:
        raise ValueError("aggregate needs at least one episode's metrics")
    rows = [validate_metrics(dict(row), f"metrics[{i}]") for i, row in enumerate(metrics)]
    n = len(rows)
    success = _success_block(rows)

    with_motion = [row for row in rows if row["collision_rate"] is not None]
    collision_pct = _mean(100.0 * row["collision_rate"] for row in with_motion)
    by_group: dict[str, float | None] = {}
    for group in BODY_GROUPS:
        by_group[group] = _mean(
            100.0 * row["collision_rate_by_group"][group] for row in with_motion
        )

    affected = sum(row["affected_object_count"] for row in rows)
    with_path = sum(row["affected_objects_with_path"] for row in rows)
    path_sum = math.fsum(row["affected_path_length_sum_m"] for row in rows)
    jerks = [row["motion_jerk_m_s3"] for row in rows if row["motion_jerk_m_s3"] is not None]
    anomalies = [row["motion_anomaly"] for row in rows if row["motion_anomaly"] is not None]
    total_steps = sum(row["steps"] for row in rows)
    tok_in = sum(row["tokens"]["input_tokens"] for row in rows)
    tok_out = sum(row["tokens"]["output_tokens"] for row in rows)
    tok_reason = sum(row["tokens"]["reasoning_tokens"] for row in rows)
    episodes_by_source: dict[str, int] = {}
    for row in rows:
        label = row["tokens"]["source"]
        episodes_by_source[label] = episodes_by_source.get(label, 0) + 1

    def per_step(total: int) -> float | None:
        return total / total_steps if total_steps else None

    return {
        "schema": SUMMARY_SCHEMA,
        "main": {
            "find_sr_pct": success["find_sr_pct"],
            "nav_sr_20cm_pct": success["nav_sr_20cm_pct"],
            "interact_sr_pct": success["interact_sr_pct"],
            "collision_pct": collision_pct,
            "disturbed_objects_per_episode": affected / n,
            "disturbed_path_m": path_sum / with_path if with_path else None,
            "motion_jerk_m_s3": _mean(jerks),
            "motion_anomaly_per_episode": _mean(anomalies),
            "avg_steps": total_steps / n,
            "input_tokens_per_step": per_step(tok_in),
            "output_tokens_per_step": per_step(tok_out),
        },
        "variants": {
            "geo_find_sr_pct": success["geo_find_sr_pct"],
            "geo_nav_sr_20cm_pct": success["geo_nav_sr_20cm_pct"],
            "nav_sr_1m_pct": success["nav_sr_1m_pct"],
            "geo_interact_sr_pct": success["geo_interact_sr_pct"],
        },
        "collision_by_group_pct": by_group,
        "counts": {
            "episodes": n,
            "interact_episodes": success["interact_episodes"],
            "episodes_with_motion": len(with_motion),
            "episodes_without_motion": n - len(with_motion),
            "episodes_with_jerk": len(jerks),
            "motion_anomaly_frames": sum(anomalies),
            "episodes_with_motion_anomaly": sum(1 for a in anomalies if a > 0),
            "episodes_without_anomaly_count": n - len(anomalies),
            "affected_objects": affected,
            "affected_objects_with_path": with_path,
            "active_stops": sum(row["active_stop"] for row in rows),
            "total_steps": total_steps,
            "initial_penetration_flagged": sum(row["initial_penetration_flag"] for row in rows),
        },
        "tokens": {
            "input_tokens": tok_in,
            "output_tokens": tok_out,
            "reasoning_tokens": tok_reason,
            "reasoning_tokens_per_step": per_step(tok_reason),
            "source": combine_token_sources(episodes_by_source),
            "episodes_by_source": dict(sorted(episodes_by_source.items())),
        },
        "by_category": _ordered_groups(rows, lambda r: r["category"], _CATEGORY_ORDER),
        "by_difficulty": _ordered_groups(
            rows, lambda r: r["difficulty"] or _UNLABELLED, _DIFFICULTY_ORDER
        ),
    }


def find_metric_files(root: str | Path) -> list[Path]:
    """Every ``metrics.json`` under ``root`` at any depth, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"metrics directory does not exist: {root}")
    return sorted(p for p in root.rglob(_METRICS_NAME) if p.is_file())


def aggregate_metric_files(root: str | Path) -> dict[str, Any]:
    """Find, validate and aggregate every ``metrics.json`` under ``root`` (any depth).

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
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MetricsFileError(f"{path}: cannot read metrics JSON ({exc})") from exc
        rows.append(validate_metrics(data, str(path)))
    summary = aggregate(rows)
    summary["source"] = {"root": str(Path(root)), "files": len(paths)}
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
    ``-`` marks a value without a denominator.
    """
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
        ("Main table (success in %, Coll. in % of motion steps, Motion Jerk in m/s^3, "
         "Anom./ep in frames)",
         _row_table(MAIN_COLUMNS, summary["main"])),
        ("Success variants (%)", _row_table(VARIANT_COLUMNS, summary["variants"])),
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
