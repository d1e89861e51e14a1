"""The metric trackers, registered by name, and the metric suite of a task derived from them.

:data:`TRACKERS` lists the benchmark's :class:`~humanclaw_gym.metrics.tracker.Tracker`
classes in the order of the paper's table; each is registered in the one registry under its
spec's name (:func:`~humanclaw_gym.registry.register_tracker`, in that order), and the
``find_nav_interact`` task scores with exactly these. Any task names the trackers it
scores with (``TaskSpec.trackers``); :class:`MetricSuite` derives everything from such a
tuple: the declared fields and columns (``specs``), the layout written (``schema``: the
task's layout prefix and the highest ``since`` of any field) and those read (``schemas``),
the key order of a file (``layout``), the observer needs of the metrics wrapper
(``needs``), the ``thresholds`` object of every file and, through the specs' columns, the
summary tables of :mod:`humanclaw_gym.metrics.aggregate`. The module constants
(:data:`METRIC_SPECS`, :data:`LAYOUT`, ...) are those of the benchmark's suite
(:data:`BENCHMARK_SUITE`).

Adding a metric to the benchmark: a module with a tracker class (its ``spec``, ``needs``,
``thresholds``, ``on_reset`` / ``on_decision`` / ``on_frame`` / ``summary``), one line in
:data:`TRACKERS`, and a test. A field that older files lack declares ``since=`` the next
layout version (and the ``legacy`` value those files stand for), so they keep loading.
Adding one for your own task: register the class (``register_tracker(name, cls)``) and
name it in the task's spec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from humanclaw_gym import registry
from humanclaw_gym.metrics.collision import CollisionMetric
from humanclaw_gym.metrics.disturbance import DisturbanceMetric
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec
from humanclaw_gym.metrics.find import FindMetric
from humanclaw_gym.metrics.interact import InteractMetric
from humanclaw_gym.metrics.jerk import JerkMetric
from humanclaw_gym.metrics.nav import NavMetric
from humanclaw_gym.metrics.outcome import EpisodeMetric, OutcomeMetric
from humanclaw_gym.metrics.tracker import TRACKER_NEEDS, Tracker
from humanclaw_gym.metrics.tracking import MotionAnomalyMetric
from humanclaw_gym.metrics.usage import UsageMetric

__all__ = [
    "BENCHMARK_SUITE",
    "LAYOUT",
    "METRICS_SCHEMA",
    "METRICS_SCHEMAS",
    "METRICS_VERSION",
    "METRIC_NEEDS",
    "METRIC_SPECS",
    "THRESHOLDS",
    "TRACKERS",
    "MetricSuite",
    "benchmark_tracker_names",
    "schema_version",
    "suite_for_schema",
    "suite_for_spec",
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


#: The constants the trackers scored with, last in every file.
THRESHOLDS_SPEC = MetricSpec(
    name="thresholds",
    fields=(MetricField("thresholds", "object", "the constants used", imported=False),),
)


def _thresholds(trackers: Sequence[type[Tracker]]) -> Mapping[str, float | int]:
    out: dict[str, float | int] = {}
    for cls in trackers:
        for name, value in cls.thresholds.items():
            if name in out:
                raise ValueError(f"threshold {name!r} is declared by two metric trackers")
            out[name] = value
    return out


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


class MetricSuite:
    """The metric trackers of one task and everything derived from them.

    Args:
        trackers: the tracker classes, in the order of the task's metrics.json.
        schema_prefix: the layout tag prefix (``<prefix><N>``, ``N`` the highest ``since``
            of any field).
        task: the task id the files belong to.

    Attributes:
        trackers, task, prefix: as given.
        version: the layout version written; ``schema``: its tag (first in every file);
            ``schemas``: the tags read (every version up to the one written; an older
            file is read with the ``legacy`` values of the fields it lacks).
        specs: every declared part of a file: the layout tag, the trackers' specs, the
            thresholds.
        layout: the top-level keys of a file, in file order.
        needs: the observer needs of the trackers.
        thresholds: the ``thresholds`` object of every file, in tracker order.

    Raises:
        TypeError / ValueError: a tracker that does not follow the protocol, a field or a
            threshold declared twice.
    """

    def __init__(
        self,
        trackers: Sequence[type[Tracker]],
        schema_prefix: str = _SCHEMA_PREFIX,
        task: str = "find_nav_interact",
    ) -> None:
        trackers = tuple(trackers)
        if not trackers:
            raise ValueError(f"task {task!r}: a metric suite needs at least one tracker")
        _check_trackers(trackers)
        self.trackers = trackers
        self.task = task
        self.prefix = schema_prefix
        self._tag = re.compile(re.escape(schema_prefix) + r"([1-9][0-9]*)")
        self.version: int = max(f.since for cls in trackers for f in cls.spec.fields)
        self.schema = f"{schema_prefix}{self.version}"
        self.schemas: tuple[str, ...] = tuple(
            f"{schema_prefix}{v}" for v in range(1, self.version + 1)
        )
        schema_spec = MetricSpec(
            name="schema",
            fields=(MetricField("schema", "str", "layout version", choices=self.schemas),),
        )
        self.specs: tuple[MetricSpec, ...] = (
            schema_spec,
            *(cls.spec for cls in trackers),
            THRESHOLDS_SPEC,
        )
        self.needs: frozenset[str] = frozenset().union(*(cls.needs for cls in trackers))
        self.thresholds: Mapping[str, float | int] = _thresholds(trackers)
        self.layout: tuple[str, ...] = _layout(self.specs)

    def schema_version(self, schema: Any) -> int | None:
        """The version of a tag of this suite's layout (None for anything else)."""
        match = self._tag.fullmatch(schema) if isinstance(schema, str) else None
        return None if match is None else int(match.group(1))

    def columns(self, table: str) -> tuple[Column, ...]:
        """The declared summary columns of one table, in order."""
        cols = [c for spec in self.specs for c in spec.columns if c.table == table]
        return tuple(sorted(cols, key=lambda c: c.order))

    def __repr__(self) -> str:
        return f"MetricSuite(task={self.task!r}, schema={self.schema!r})"


#: The benchmark's suite (the ``find_nav_interact`` task): the trackers of :data:`TRACKERS`.
BENCHMARK_SUITE = MetricSuite(TRACKERS, _SCHEMA_PREFIX, "find_nav_interact")

for _cls in TRACKERS:  # registered in the order of the paper's table
    registry.register_tracker(
        _cls.spec.name, _cls, description=f"metrics.json part {_cls.spec.name!r}"
    )
registry.register_tracker(
    "outcome", OutcomeMetric, description="episode identity, rules and ending (any task)"
)


def benchmark_tracker_names() -> tuple[str, ...]:
    """The registered names of the benchmark's trackers, in the order of :data:`TRACKERS`."""
    return tuple(cls.spec.name for cls in TRACKERS)


_SUITES: dict[tuple[Any, ...], MetricSuite] = {}


def suite_for_spec(spec: Any) -> MetricSuite:
    """The metric suite of a task spec (``TaskSpec``: its ``trackers`` resolved through
    the registry, its ``metrics_schema`` and ``id``); one suite per distinct declaration.

    Raises:
        ValueError: a tracker name that is not registered (the registered ones listed).
    """
    classes = []
    for name in spec.trackers:
        try:
            classes.append(registry.load("tracker", name))
        except registry.RegistryError:
            known = ", ".join(registry.names("tracker")) or "none"
            raise ValueError(
                f"task {spec.id!r} names tracker {name!r}, which is not registered; "
                f"registered: {known}"
            ) from None
    classes_t = tuple(classes)
    if classes_t == TRACKERS and spec.metrics_schema == _SCHEMA_PREFIX:
        return BENCHMARK_SUITE
    key = (classes_t, spec.metrics_schema, spec.id)
    suite = _SUITES.get(key)
    if suite is None:
        suite = _SUITES[key] = MetricSuite(classes_t, spec.metrics_schema, spec.id)
    return suite


def suite_for_schema(schema: Any) -> MetricSuite | None:
    """The suite whose layout a metrics file's ``schema`` tag names: the benchmark's, or
    that of a registered task (tasks are loaded to read their specs); None when no
    registered task writes that layout."""
    if BENCHMARK_SUITE.schema_version(schema) is not None:
        return BENCHMARK_SUITE
    if not isinstance(schema, str):
        return None
    for entry in registry.entries("task").values():
        try:
            spec = getattr(entry.load(), "spec", None)
        except registry.RegistryError:
            continue
        prefix = getattr(spec, "metrics_schema", None)
        if isinstance(prefix, str) and schema.startswith(prefix):
            suite = suite_for_spec(spec)
            if suite.schema_version(schema) is not None:
                return suite
    return None


#: The layout version written: the highest ``since`` of any declared field.
METRICS_VERSION: int = BENCHMARK_SUITE.version

#: Schema tag of every per-episode metrics.json we write.
METRICS_SCHEMA = BENCHMARK_SUITE.schema

#: Schema tags of our layout that are read (every version up to the one written; a file of
#: an older version is read with the ``legacy`` values of the fields it lacks).
METRICS_SCHEMAS: tuple[str, ...] = BENCHMARK_SUITE.schemas


def schema_version(schema: Any) -> int | None:
    """The version number of a ``humanclaw_metrics_v<N>`` tag (None for anything else)."""
    return BENCHMARK_SUITE.schema_version(schema)


#: The layout tag, first in every file.
SCHEMA_SPEC = BENCHMARK_SUITE.specs[0]

#: Every declared part of metrics.json: the layout tag, the trackers' specs, the thresholds.
METRIC_SPECS: tuple[MetricSpec, ...] = BENCHMARK_SUITE.specs

#: Observer needs of the metrics (what the env must compute for them).
METRIC_NEEDS: frozenset[str] = BENCHMARK_SUITE.needs

#: The ``thresholds`` object of every file, in tracker order.
THRESHOLDS: Mapping[str, float | int] = BENCHMARK_SUITE.thresholds

#: The top-level keys of a metrics.json we write, in file order.
LAYOUT: tuple[str, ...] = BENCHMARK_SUITE.layout
