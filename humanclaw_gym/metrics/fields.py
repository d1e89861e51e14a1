"""Declared metric fields: what each tracker writes into ``metrics.json`` and how it is summed up.

Every part of the metrics (Find, Nav, Interact, Collision, Disturbance, Motion Jerk, cost,
...) declares a :class:`MetricSpec`: its output fields (:class:`MetricField`: name, type,
range or choices, nullability, unit, meaning, how it aggregates) and the summary columns it
contributes (:class:`Column`, each with a :class:`Reduce` saying how the column is
computed from the per-episode rows). :func:`~humanclaw_gym.metrics.episode.validate_metrics`
checks a file against the declared fields, and :mod:`~humanclaw_gym.metrics.aggregate`
builds its table columns from the declared columns; each tracker of
:data:`~humanclaw_gym.metrics.trackers.TRACKERS` declares its spec.

Field names are paths into the JSON object: ``"tokens.input_tokens"`` is
``metrics["tokens"]["input_tokens"]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FIELD_KINDS",
    "REDUCE_KINDS",
    "TABLES",
    "Column",
    "MetricField",
    "MetricSpec",
    "Reduce",
    "check_field",
    "field_value",
]

#: Value types a field can declare.
FIELD_KINDS: tuple[str, ...] = (
    "bool",  # true / false
    "int",  # an integer (never a bool)
    "number",  # a finite int or float
    "str",  # a string
    "int_list",  # a list of integers
    "number_map",  # an object whose values are numbers (or null when nullable)
    "int_map",  # an object whose values are integers
    "object",  # any JSON object (checked by its own sub-fields)
)

#: How a summary column is computed from the per-episode rows (see :class:`Reduce`).
REDUCE_KINDS: tuple[str, ...] = (
    "share",  # share of rows whose bool field is true, over every row
    "share_interact",  # the same, over the interact rows only
    "mean",  # mean of the field over the rows where it is not null
    "pooled",  # sum of the field / sum of the denominator field (None when that is 0)
    "collision",  # mean of a per-episode rate under the rules' no-motion rule
)

#: Tables of the summary a column can belong to.
TABLES: tuple[str, ...] = ("main", "variants", "extra")

_UPSTREAM_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


@dataclass(frozen=True)
class MetricField:
    """One output field of a metric.

    Attributes:
        name: path in metrics.json (``"collision_rate"``, ``"tokens.input_tokens"``).
        kind: one of :data:`FIELD_KINDS`.
        meaning: one line for the docs.
        unit: unit of the value (``"m"``, ``"m/s^3"``, ``"steps"``, ...), empty if none.
        minimum / maximum: inclusive range of a number, an int, or every value of a map.
        nullable: ``null`` is allowed.
        null_unless: name of a bool field: the value is ``null`` exactly when that field is
            false (e.g. InteractSR flags exist only on interact episodes).
        choices: allowed values of a string field.
        at_most: name of another numeric field this one may not exceed.
        aggregate: how the field enters the summary, one line for the docs.
        upstream: where the reference release's layout (``humanclaw_paper_metrics_v1``)
            keeps the field: a dotted key path (``"success.find_sr"``), or None when it has
            no such key (a file we write keeps the value in its extra ``"humanclaw_gym"``
            object; a row read from a reference file of someone else has it ``null``).
            :mod:`~humanclaw_gym.metrics.formats` reads and writes that layout from these
            declarations alone.
        upstream_labels: ``(ours, reference)`` pairs renaming the values of a string field
            (``("provider", "provider_exact")``) or the keys of a map field
            (``("arm/hand", "hand_arm")``) in the reference layout; a reference value not
            listed is refused. Empty: the values are the same.
        imported: whether rows read from the reference layout have the field: None
            (default) exactly when it declares ``upstream``; ``True`` for a field the reader
            derives without a key of its own (``ended_by`` from ``active_stop``), ``False``
            for one it never has. A field those rows lack may be ``null`` in them.
        since: the first ``humanclaw_metrics_v<N>`` layout that has the field. A file of
            an older layout is read with ``legacy`` in its place, so adding a field never
            makes older files fail validation; the layout written is the highest ``since``
            of all declared fields.
        legacy: what a file older than ``since`` stands for (``None``: unknown; the field
            may then be ``null`` in such files whatever ``nullable`` says).
        after: place this field (and the fields of its spec that follow it) right after
            that top-level field in metrics.json instead of after the previous tracker's
            fields; keeps the key order of an existing layout when a tracker's fields are
            not contiguous in it.
    """

    name: str
    kind: str
    meaning: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False
    null_unless: str | None = None
    choices: tuple[str, ...] | None = None
    at_most: str | None = None
    aggregate: str = "not aggregated"
    imported: bool | None = None
    since: int = 1
    legacy: Any = None
    after: str | None = None
    upstream: str | None = None
    upstream_labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in FIELD_KINDS:
            raise ValueError(f"MetricField {self.name!r}: kind must be one of {FIELD_KINDS}")
        if isinstance(self.since, bool) or not isinstance(self.since, int) or self.since < 1:
            raise ValueError(f"MetricField {self.name!r}: since must be an int >= 1")
        if self.upstream is not None and not _UPSTREAM_KEY.fullmatch(self.upstream):
            raise ValueError(
                f"MetricField {self.name!r}: upstream={self.upstream!r} must be a dotted key "
                "path of the reference layout, 'section.key' (e.g. 'success.find_sr')"
            )
        labels = self.upstream_labels
        if labels and (
            self.upstream is None
            or self.kind not in ("str", "number_map", "int_map")
            or any(len(pair) != 2 or not all(isinstance(v, str) for v in pair) for pair in labels)
            or len({a for a, _ in labels}) != len(labels)
            or len({b for _, b in labels}) != len(labels)
        ):
            raise ValueError(
                f"MetricField {self.name!r}: upstream_labels must be distinct (ours, reference) "
                "string pairs, on a str or map field with an upstream key"
            )
        if self.imported is False and self.upstream is not None:
            raise ValueError(
                f"MetricField {self.name!r}: imported=False contradicts upstream={self.upstream!r}"
            )

    @property
    def in_reference_layout(self) -> bool:
        """Whether rows read from the reference layout have the field (see ``imported``)."""
        return self.upstream is not None if self.imported is None else self.imported


@dataclass(frozen=True)
class Reduce:
    """How one summary value is computed from the per-episode rows.

    Attributes:
        kind: one of :data:`REDUCE_KINDS`.
        field: the per-episode field it reads.
        denominator: for ``"pooled"``: the field whose sum divides.
        scale: multiplies the result (100 for percentages).
    """

    kind: str
    field: str
    denominator: str | None = None
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in REDUCE_KINDS:
            raise ValueError(f"Reduce kind must be one of {REDUCE_KINDS}, got {self.kind!r}")
        if (self.kind == "pooled") != (self.denominator is not None):
            raise ValueError("Reduce: a denominator is given exactly for kind 'pooled'")

    def apply(self, rows: Sequence[Mapping[str, Any]], rules: str) -> float | None:
        """The value over ``rows`` (``None`` without a denominator)."""
        if self.kind in ("share", "share_interact"):
            pool = rows if self.kind == "share" else [r for r in rows if r["interact"]]
            if not pool:
                return None
            return self.scale * sum(bool(field_value(r, self.field)) for r in pool) / len(pool)
        if self.kind == "mean":
            values = [field_value(r, self.field) for r in rows]
            present = [float(v) for v in values if v is not None]
            # scale * mean, in this order: the reference release's arithmetic
            return self.scale * (math.fsum(present) / len(present)) if present else None
        if self.kind == "pooled":
            assert self.denominator is not None
            den = sum(field_value(r, self.denominator) for r in rows)
            if not den:
                return None
            # a plain left-to-right sum, as the reference release adds path lengths
            num = sum(field_value(r, self.field) or 0 for r in rows)
            return self.scale * num / den
        # "collision": paper scores an episode without motion as 0 and keeps it in the mean;
        # strict leaves it out.
        values = []
        for row in rows:
            if row["motion_steps"] == 0:
                if rules == "strict":
                    continue
                values.append(0.0)
            else:
                values.append(float(field_value(row, self.field)))
        if not values:
            return None
        if rules == "strict":  # the arithmetic of this library's figures before the rules
            return math.fsum(self.scale * v for v in values) / len(values)
        return self.scale * (math.fsum(values) / len(values))


@dataclass(frozen=True)
class Column:
    """One column of the summary tables.

    Attributes:
        label: the header (``"FindSR"``).
        key: key of the value in ``summary[table]`` (``"find_sr_pct"``).
        table: ``"main"`` (the paper's table), ``"variants"`` or ``"extra"`` (anything a
            new tracker adds; printed after the paper tables).
        fmt: number format of the text table (``".1f"``).
        reduce: how the value is computed.
        order: position within its table (ascending).
        breakdown: also shown per category and per difficulty.
    """

    label: str
    key: str
    table: str
    fmt: str
    reduce: Reduce
    order: int
    breakdown: bool = False

    def __post_init__(self) -> None:
        if self.table not in TABLES:
            raise ValueError(f"Column {self.label!r}: table must be one of {TABLES}")


@dataclass(frozen=True)
class MetricSpec:
    """The declared output of one metric part (usually one tracker).

    Attributes:
        name: short name (``"find"``, ``"collision"``).
        fields: the fields it writes into metrics.json.
        columns: the summary columns it contributes.
    """

    name: str
    fields: tuple[MetricField, ...]
    columns: tuple[Column, ...] = ()


def field_value(metrics: Mapping[str, Any], name: str, default: Any = KeyError) -> Any:
    """The value at a dotted ``name`` (``KeyError`` naming it when absent, unless ``default``)."""
    node: Any = metrics
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            if default is KeyError:
                raise KeyError(name)
            return default
        node = node[part]
    return node


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _in_range(spec: MetricField, value: float) -> str | None:
    if spec.minimum is not None and value < spec.minimum:
        return f">= {spec.minimum}"
    if spec.maximum is not None and value > spec.maximum:
        return f"<= {spec.maximum}"
    return None


def _describe(spec: MetricField) -> str:
    what = {
        "bool": "a boolean",
        "int": "an integer",
        "number": "a finite number",
        "str": "a string",
        "int_list": "a list of integers",
        "number_map": "an object of numbers",
        "int_map": "an object of integers",
        "object": "an object",
    }[spec.kind]
    lo, hi = spec.minimum, spec.maximum
    if lo is not None and hi is not None:
        what += f" in [{lo:g}, {hi:g}]"
    elif lo is not None:
        what += f" >= {lo:g}"
    elif hi is not None:
        what += f" <= {hi:g}"
    if spec.choices is not None:
        what = f"one of {spec.choices}"
    return what


def check_field(
    spec: MetricField, metrics: Mapping[str, Any], allow_null: bool = False
) -> str | None:
    """Check one declared field of a metrics dict; return the problem or ``None``.

    Args:
        spec: the declaration.
        metrics: the whole metrics dict (``null_unless`` and ``at_most`` read other fields).
        allow_null: accept ``null`` whatever the declaration says (fields the reference
            layout does not record, in rows read from it).
    """
    try:
        value = field_value(metrics, spec.name)
    except KeyError:
        return f"{spec.name} is missing (expected {_describe(spec)})"
    if spec.null_unless is not None:
        present = bool(field_value(metrics, spec.null_unless, False))
        if not present:
            if value is not None:
                return f"{spec.name} must be null when {spec.null_unless} is false, got {value!r}"
            return None
        if value is None and not allow_null:
            return (
                f"{spec.name} must be {_describe(spec)} when {spec.null_unless} is true, got null"
            )
    if value is None:
        if spec.nullable or allow_null:
            return None
        return f"{spec.name} must be {_describe(spec)}, got null"
    bad = f"{spec.name} must be {_describe(spec)}" + (" or null" if spec.nullable else "")
    kind = spec.kind
    if kind == "bool":
        return None if isinstance(value, bool) else f"{bad}, got {value!r}"
    if kind == "str":
        if not isinstance(value, str):
            return f"{bad}, got {value!r}"
        if spec.choices is not None and value not in spec.choices:
            return f"{bad}, got {value!r}"
        return None
    if kind in ("int", "number"):
        ok = _is_int(value) if kind == "int" else _is_number(value)
        if not ok or _in_range(spec, float(value)) is not None:
            return f"{bad}, got {value!r}"
        if spec.at_most is not None:
            limit = field_value(metrics, spec.at_most, None)
            if _is_number(limit) and value > limit:
                return f"{spec.name} ({value!r}) must not exceed {spec.at_most} ({limit!r})"
        return None
    if kind == "int_list":
        if not isinstance(value, list) or not all(_is_int(v) for v in value):
            return f"{bad}, got {value!r}"
        return None
    if not isinstance(value, dict):
        return f"{bad}, got {value!r}"
    if kind == "object":
        return None
    for key, item in value.items():
        if item is None and spec.nullable:
            continue
        ok = _is_int(item) if kind == "int_map" else _is_number(item)
        if not ok or _in_range(spec, float(item)) is not None:
            return f"{spec.name}[{key!r}] must be {_describe(spec)}, got {item!r}"
    return None
