"""The metric trackers of metrics.json, and everything derived from their tuple.

:data:`TRACKERS` lists the :class:`~humanclaw_gym.metrics.tracker.Tracker` classes in the
order of the paper's table. From it follow: the declared fields and columns
(:data:`METRIC_SPECS`), the layout written (:data:`METRICS_SCHEMA`: the highest ``since`` of
any field) and those read (:data:`METRICS_SCHEMAS`), the key order of a file
(:data:`LAYOUT`), the observer needs of the metrics wrapper (:data:`METRIC_NEEDS`), the
``thresholds`` object of every file (:data:`THRESHOLDS`) and, through the specs' columns,
the summary tables of :mod:`humanclaw_gym.metrics.aggregate`.

Adding a metric: a module with a tracker class (its ``spec``, ``needs``, ``thresholds``,
``on_reset`` / ``on_decision`` / ``on_frame`` / ``summary``), one line in :data:`TRACKERS`,
and a test. A field that older files lack declares ``since=`` the next layout version (and
the ``legacy`` value those files stand for), so they keep loading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from humanclaw_gym.metrics.collision import CollisionMetric
from humanclaw_gym.metrics.disturbance import DisturbanceMetric
from humanclaw_gym.metrics.fields import MetricField, MetricSpec
from humanclaw_gym.metrics.find import FindMetric
from humanclaw_gym.metrics.interact import InteractMetric
from humanclaw_gym.metrics.jerk import JerkMetric
from humanclaw_gym.metrics.nav import NavMetric
from humanclaw_gym.metrics.outcome import EpisodeMetric
from humanclaw_gym.metrics.tracker import TRACKER_NEEDS, Tracker
from humanclaw_gym.metrics.tracking import MotionAnomalyMetric
from humanclaw_gym.metrics.usage import UsageMetric

__all__ = [
    "LAYOUT",
    "METRICS_SCHEMA",
    "METRICS_SCHEMAS",
    "METRICS_VERSION",
    "METRIC_NEEDS",
    "METRIC_SPECS",
    "THRESHOLDS",
    "TRACKERS",
    "schema_version",
]

#: Every tracker of metrics.json, in the order of the paper's table.
TRACKERS: tuple[type[Tracker], ...] = (
    EpisodeMetric,
    FindMetric,
    NavMetric,
    InteractMetric,
    CollisionMetric,
    DisturbanceMetric,
    JerkMetric,
    MotionAnomalyMetric,
    UsageMetric,
)

_SCHEMA_PREFIX = "humanclaw_metrics_v"
_SCHEMA_TAG = re.compile(re.escape(_SCHEMA_PREFIX) + r"([1-9][0-9]*)")


def _check_trackers(trackers: Sequence[type[Tracker]]) -> None:
    names: dict[str, str] = {}
    for cls in trackers:
        where = getattr(cls, "__qualname__", repr(cls))
        for attr in ("spec", "needs", "thresholds", "on_reset", "on_decision", "on_frame"):
            if not hasattr(cls, attr):
                raise TypeError(f"metric tracker {where} has no {attr!r} (see metrics.tracker)")
        if not isinstance(cls.spec, MetricSpec):
            raise TypeError(f"metric tracker {where}: spec must be a MetricSpec")
        unknown = set(cls.needs) - TRACKER_NEEDS
        if unknown:
            raise ValueError(
                f"metric tracker {where}: unknown needs {sorted(unknown)}; allowed "
                f"{sorted(TRACKER_NEEDS)}"
            )
        for item in cls.spec.fields:
            if item.name in names:
                raise ValueError(
                    f"metric field {item.name!r} is declared by {names[item.name]} and {where}"
                )
            names[item.name] = where


_check_trackers(TRACKERS)

#: The layout version written: the highest ``since`` of any declared field.
METRICS_VERSION: int = max(f.since for cls in TRACKERS for f in cls.spec.fields)

#: Schema tag of every per-episode metrics.json we write.
METRICS_SCHEMA = f"{_SCHEMA_PREFIX}{METRICS_VERSION}"

#: Schema tags of our layout that are read (every version up to the one written; a file of
#: an older version is read with the ``legacy`` values of the fields it lacks).
METRICS_SCHEMAS: tuple[str, ...] = tuple(
    f"{_SCHEMA_PREFIX}{v}" for v in range(1, METRICS_VERSION + 1)
)


def schema_version(schema: Any) -> int | None:
    """The version number of a ``humanclaw_metrics_v<N>`` tag (None for anything else)."""
    match = _SCHEMA_TAG.fullmatch(schema) if isinstance(schema, str) else None
    return None if match is None else int(match.group(1))


#: The layout tag, first in every file.
SCHEMA_SPEC = MetricSpec(
    name="schema",
    fields=(MetricField("schema", "str", "layout version", choices=METRICS_SCHEMAS),),
)

#: The constants the trackers scored with, last in every file.
THRESHOLDS_SPEC = MetricSpec(
    name="thresholds",
    fields=(MetricField("thresholds", "object", "the constants used", imported=False),),
)

#: Every declared part of metrics.json: the layout tag, the trackers' specs, the thresholds.
METRIC_SPECS: tuple[MetricSpec, ...] = (
    SCHEMA_SPEC,
    *(cls.spec for cls in TRACKERS),
    THRESHOLDS_SPEC,
)

#: Observer needs of the metrics (what the env must compute for them).
METRIC_NEEDS: frozenset[str] = frozenset().union(*(cls.needs for cls in TRACKERS))


def _thresholds(trackers: Sequence[type[Tracker]]) -> Mapping[str, float | int]:
    out: dict[str, float | int] = {}
    for cls in trackers:
        for name, value in cls.thresholds.items():
            if name in out:
                raise ValueError(f"threshold {name!r} is declared by two metric trackers")
            out[name] = value
    return out


#: The ``thresholds`` object of every file, in tracker order.
THRESHOLDS: Mapping[str, float | int] = _thresholds(TRACKERS)


def _layout(specs: Sequence[MetricSpec]) -> tuple[str, ...]:
    """Top-level keys of a file in order: the specs' fields in order, except that a run of
    fields starting at one with ``after=X`` sits right after field ``X``."""
    order: list[str] = []
    anchored: list[tuple[str, list[str]]] = []
    for spec in specs:
        run: list[str] = order
        for item in spec.fields:
            top = item.name.split(".")[0]
            if item.after is not None:
                run = []
                anchored.append((item.after, run))
            if top not in order and top not in run:
                run.append(top)
    for anchor, run in anchored:
        if anchor not in order:
            raise ValueError(f"metric field {run[0]!r}: after={anchor!r} names no field before it")
        at = order.index(anchor) + 1
        order[at:at] = run
    return tuple(order)


#: The top-level keys of a metrics.json we write, in file order.
LAYOUT: tuple[str, ...] = _layout(METRIC_SPECS)
