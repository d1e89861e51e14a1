"""The two metrics.json layouts: ours (``humanclaw_metrics_v<N>``, flat) and the reference
release's (``humanclaw_paper_metrics_v1``, nested), read and written.

Both directions are derived from the declared fields (:mod:`humanclaw_gym.metrics.fields`):
a :class:`~humanclaw_gym.metrics.fields.MetricField` names its reference key
(``upstream="success.find_sr"``) and, where the reference spells values or map keys
differently, the renaming (``upstream_labels``); a field without one has no place in the
reference layout. Nothing here lists our fields, so a tracker added with fields of its own
never breaks either direction.

Reading: :func:`read_metrics_record` turns a parsed file of either layout into one validated
row of our layout. A reference file is scored by the ``paper`` rules by definition; each
declared reference key is read (a missing one is an error naming it, unless the field may
be ``null``), ``ended_by`` is ``stop`` or ``truncated`` after ``active_stop``, a flag that
exists only when another is true (``null_unless``) is ``null`` otherwise, and every field
without a reference key is ``null`` (difficulty, target ids, first Find steps, per-group
collision step counts, a new tracker's fields, ...); the row carries ``"imported_from":
"humanclaw_paper_metrics_v1"``. Its episode id is the reference's per-scene number; a
purely numeric id is read as ``"<scene_id>_<n>"``, the id under which our episode importer
knows the same episode, so that one episode has one id whichever layout it came in.

Writing: :func:`to_reference_layout` writes one row in the reference layout, in the
reference's own key order (:data:`REFERENCE_LAYOUT`; a declared key it does not list comes
after those of its section), with the entries the reference computes from others (the
indirect object count, tokens per step, constants) and with every field that layout has no
place for kept in an extra ``"humanclaw_gym"`` object (the reference's own aggregation
ignores unknown keys), so that reading the file back gives the same row. Only rows scored
by the ``paper`` rules can be written in the reference layout.
:func:`summary_to_reference_layout` gives a summary in the reference's summary layout
(``humanclaw_paper_metrics_summary_v1``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

from humanclaw_gym.metrics.episode import (
    METRICS_SCHEMA,
    METRICS_SCHEMAS,
    MetricsFileError,
    validate_metrics,
)
from humanclaw_gym.metrics.fields import MetricField
from humanclaw_gym.metrics.trackers import LAYOUT, METRIC_SPECS

__all__ = [
    "REFERENCE_LAYOUT",
    "REFERENCE_SCHEMA",
    "REFERENCE_SUMMARY_SCHEMA",
    "read_metrics_record",
    "reference_episode_id",
    "reference_rollout_dir",
    "summary_to_reference_layout",
    "to_reference_layout",
]

#: Schema tag of the reference release's per-episode metrics.json.
REFERENCE_SCHEMA = "humanclaw_paper_metrics_v1"
#: Schema tag of the reference release's metrics_summary.json.
REFERENCE_SUMMARY_SCHEMA = "humanclaw_paper_metrics_summary_v1"
_EXTRA_KEY = "humanclaw_gym"

#: The reference layout's sections and their keys, in the order the reference release
#: writes them: where each key goes when a row is written. Which of our fields a key holds
#: is declared by the field (``MetricField.upstream``); the keys of :data:`_COMPUTED` are
#: computed from the row. A field's reference key missing here is written after the listed
#: keys of its section (a new section after the listed ones).
REFERENCE_LAYOUT: Mapping[str, tuple[str, ...]] = {
    "episode": ("episode_id", "scene_id", "object_category", "rollout_index"),
    "success": (
        "find_sr",
        "geo_find_sr",
        "max_target_pixel_count",
        "find_pixel_threshold",
        "nav_sr_20cm",
        "geo_nav_sr_20cm",
        "nav_sr_1m",
        "final_body_target_aabb_distance_m",
        "active_stop",
        "is_interact_episode",
        "interact_sr",
        "geo_interact_sr",
        "n_sit",
    ),
    "body_scene": (
        "physical_metrics_eligible",
        "initial_penetration_depth_m",
        "initial_penetration_detected",
        "initial_penetration_excluded",
        "episode_floor_y",
        "episode_floor_source",
        "collision_contact_source",
        "collision_step_fraction",
        "collision_steps",
        "motion_steps",
        "by_body_group_step_fraction",
        "affected_dynamic_object_count",
        "direct_dynamic_object_count",
        "indirect_dynamic_object_count",
        "mapped_affected_dynamic_object_count",
        "affected_object_path_length_sum_m",
    ),
    "action_quality": ("motion_jerk_m_s3",),
    "cost": (
        "decision_steps",
        "vlm_calls",
        "token_source",
        "input_tokens",
        "visible_output_tokens",
        "reasoning_tokens",
        "input_tokens_per_step",
        "visible_output_tokens_per_step",
    ),
}

#: Reference entries that are none of our fields: computed from a row when it is written
#: (constants of our runs, and sums and ratios of other entries).
_COMPUTED: Mapping[str, Callable[[Mapping[str, Any]], Any]] = {
    "body_scene.physical_metrics_eligible": lambda row: True,
    "body_scene.initial_penetration_excluded": lambda row: False,
    "body_scene.collision_contact_source": lambda row: "post_physics_30hz",
    "body_scene.indirect_dynamic_object_count": lambda row: (
        row["affected_object_count"] - row["direct_affected_object_count"]
    ),
    "cost.input_tokens_per_step": lambda row: (
        row["tokens"]["input_tokens"] / max(1, int(row["steps"]))
    ),
    "cost.visible_output_tokens_per_step": lambda row: (
        row["tokens"]["output_tokens"] / max(1, int(row["steps"]))
    ),
}
#: Fields of the layouts themselves, never kept in the extra object: the schema tag and the
#: rules (a reference file is scored by the paper rules).
_LAYOUT_FIELDS = ("schema", "rules")
_NUMERIC_ID = re.compile(r"\d+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _fields() -> list[MetricField]:
    return [item for spec in METRIC_SPECS for item in spec.fields]


def _mapped() -> list[MetricField]:
    """The declared fields with a reference key."""
    return [item for item in _fields() if item.upstream is not None]


def _unmapped_top() -> list[str]:
    """Top-level fields the reference layout has no place for, in declaration order: kept
    whole in the extra object."""
    mapped_tops = {item.name for item in _mapped() if "." not in item.name}
    containers = _containers()
    return [
        item.name
        for item in _fields()
        if "." not in item.name
        and item.name not in _LAYOUT_FIELDS
        and item.name not in mapped_tops
        and item.name not in containers
    ]


def _containers() -> dict[str, set[str]]:
    """Object fields some of whose keys are mapped (``tokens``): name -> mapped keys. The
    other keys of such an object are kept in the extra object under its name."""
    out: dict[str, set[str]] = {}
    for item in _mapped():
        parent, _, leaf = item.name.rpartition(".")
        if parent:
            out.setdefault(parent, set()).add(leaf)
    return out


def _labels(name: str) -> dict[str, str]:
    """Our value -> the reference's, as the field ``name`` declares them."""
    (item,) = [f for f in _fields() if f.name == name]
    return dict(item.upstream_labels)


def _set(row: dict[str, Any], name: str, value: Any) -> None:
    parent, _, leaf = name.rpartition(".")
    if parent:
        row[parent][leaf] = value
    else:
        row[name] = value


def reference_episode_id(episode_id: str, scene_id: str) -> str:
    """The reference's per-scene episode number of one of our ids (``"<scene>_<n>"`` ->
    ``"<n>"``); any other id is kept as it is."""
    prefix = f"{scene_id}_"
    rest = episode_id[len(prefix) :] if episode_id.startswith(prefix) else ""
    return rest if _NUMERIC_ID.fullmatch(rest) else episode_id


def _our_episode_id(episode_id: str, scene_id: str) -> str:
    return f"{scene_id}_{episode_id}" if _NUMERIC_ID.fullmatch(episode_id) else episode_id


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("_") or "unknown"


def reference_rollout_dir(row: Mapping[str, Any]) -> str:
    """The reference release's output directory of one rollout, relative to the run root:
    ``<scene>_ep<episode number>_<category>/rollout_<NN>``."""
    scene = str(row["scene_id"])
    number = reference_episode_id(str(row["episode_id"]), scene)
    return (
        f"{_safe(scene)}_ep{_safe(number)}_{_safe(str(row['category']))}/"
        f"rollout_{int(row['rollout_index']):02d}"
    )


def _section(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise MetricsFileError(f"{where}: {key} must be an object, got {value!r}")
    return value


def _read_field(item: MetricField, data: Mapping[str, Any], where: str) -> Any:
    """The value of a mapped field in a reference file, in our spelling."""
    assert item.upstream is not None
    *parents, leaf = item.upstream.split(".")
    holder: Any = data
    for part in parents:
        if not isinstance(holder.get(part), Mapping) and item.nullable:
            return None  # a section older files lack: a field that may be null
        holder = _section(holder, part, where)
    if leaf not in holder:
        if item.nullable:
            return None
        raise MetricsFileError(f"{where}: {item.upstream} is missing")
    value = holder[leaf]
    if not item.upstream_labels:
        return value
    ours = {ref: our for our, ref in item.upstream_labels}
    if item.kind == "str":
        if value not in ours:
            raise MetricsFileError(
                f"{where}: {item.upstream} must be one of {tuple(ours)}, got {value!r}"
            )
        return ours[value]
    if not isinstance(value, Mapping) or set(value) != set(ours):
        raise MetricsFileError(
            f"{where}: {item.upstream} must map exactly {tuple(ours)}, got {value!r}"
        )
    return {ours[k]: v for k, v in value.items()}


def _from_reference(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    for section in REFERENCE_LAYOUT:
        _section(data, section, where)
    if _section(data, "body_scene", where).get("physical_metrics_eligible", True) is not True:
        raise MetricsFileError(
            f"{where}: body_scene.physical_metrics_eligible is not true; episodes excluded "
            "from the physical metrics are not supported"
        )
    values = {item.name: _read_field(item, data, where) for item in _mapped()}
    scene_id, raw_id = values.get("scene_id"), values.get("episode_id")
    if not isinstance(scene_id, str) or not isinstance(raw_id, str):
        raise MetricsFileError(
            f"{where}: episode.scene_id and episode.episode_id must be strings, "
            f"got {scene_id!r} and {raw_id!r}"
        )
    values["episode_id"] = _our_episode_id(raw_id, scene_id)
    values["rules"] = "paper"
    values["ended_by"] = "stop" if values.get("active_stop") is True else "truncated"
    row: dict[str, Any] = {"schema": METRICS_SCHEMA, "imported_from": REFERENCE_SCHEMA}
    containers = _containers()
    for name in LAYOUT:
        if name != "schema":
            row[name] = {} if name in containers else values.get(name)
    for item in _fields():  # the keys of a partly mapped object, in declaration order
        parent, _, leaf = item.name.rpartition(".")
        if parent in containers:
            row[parent][leaf] = values.get(item.name)
    for item in _fields():  # a flag of an episode kind it is not: null
        if item.null_unless is not None and row.get(item.null_unless) is not True:
            _set(row, item.name, None)
    extra = data.get(_EXTRA_KEY)
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise MetricsFileError(f"{where}: {_EXTRA_KEY} must be an object, got {extra!r}")
        for key in _unmapped_top():
            if key in extra:
                row[key] = copy.deepcopy(extra[key])
        for key in containers:
            kept = extra.get(key, {})
            if isinstance(kept, Mapping):
                for leaf, value in kept.items():
                    if leaf not in containers[key]:
                        row[key][leaf] = copy.deepcopy(value)
        # a row we wrote carries every field: it is only "imported" if it was so before
        row.pop("imported_from")
        if extra.get("imported_from") is not None:
            row["imported_from"] = extra["imported_from"]
    return row


def read_metrics_record(data: Any, where: str = "metrics") -> dict[str, Any]:
    """One validated row of our layout from a parsed metrics.json of either layout.

    Raises:
        MetricsFileError: naming ``where`` and the offending field, also for an unknown
            ``schema``.
    """
    if isinstance(data, Mapping) and data.get("schema") == REFERENCE_SCHEMA:
        return validate_metrics(_from_reference(data, where), where)
    if isinstance(data, Mapping) and data.get("schema") not in METRICS_SCHEMAS:
        raise MetricsFileError(
            f"{where}: schema must be one of {(*METRICS_SCHEMAS, REFERENCE_SCHEMA)}, "
            f"got {data.get('schema')!r}"
        )
    return validate_metrics(data, where)


def _written(item: MetricField, row: Mapping[str, Any]) -> Any:
    """The reference value of a mapped field of a row."""
    if item.name == "episode_id":
        return reference_episode_id(row["episode_id"], row["scene_id"])
    parent, _, leaf = item.name.rpartition(".")
    value = row[parent][leaf] if parent else row[item.name]
    if item.null_unless is not None and not row[item.null_unless]:
        return False if item.kind == "bool" else None  # the reference writes no null flag
    if item.null_unless is not None and item.kind == "bool":
        return bool(value)
    if not item.upstream_labels or value is None:
        return value
    theirs = dict(item.upstream_labels)
    if item.kind == "str":
        return theirs[value]
    return {theirs[k]: v for k, v in value.items()}


def to_reference_layout(row: Mapping[str, Any], profile: str = "humanclaw_gym") -> dict[str, Any]:
    """One row of our layout (validated, ``paper`` rules) in the reference release's layout.

    Raises:
        ValueError: for a row scored by the ``strict`` rules.
    """
    row = validate_metrics(dict(row), f"episode {row.get('episode_id')!r}")
    if row["rules"] != "paper":
        raise ValueError(
            f"episode {row['episode_id']!r} was scored by {row['rules']!r} metric rules; the "
            "reference layout holds paper-rules scores only"
        )
    by_key = {item.upstream: item for item in _mapped()}
    sections: dict[str, list[str]] = {name: list(keys) for name, keys in REFERENCE_LAYOUT.items()}
    for path in by_key:
        section, _, key = path.partition(".")
        keys = sections.setdefault(section, [])
        if key not in keys:
            keys.append(key)
    out: dict[str, Any] = {"schema": REFERENCE_SCHEMA, "profile": profile}
    for section, keys in sections.items():
        values: dict[str, Any] = {}
        for key in keys:
            path = f"{section}.{key}"
            if path in _COMPUTED:
                values[key] = _COMPUTED[path](row)
            elif path in by_key:
                values[key] = _written(by_key[path], row)
        out[section] = values
    extra: dict[str, Any] = {key: copy.deepcopy(row[key]) for key in _unmapped_top()}
    for key, mapped in _containers().items():
        extra[key] = {k: copy.deepcopy(v) for k, v in row[key].items() if k not in mapped}
    extra["imported_from"] = row.get("imported_from")
    out[_EXTRA_KEY] = extra
    return out


def summary_to_reference_layout(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary of :func:`~humanclaw_gym.metrics.aggregate.aggregate` (``paper`` rules) in
    the reference release's summary layout (``humanclaw_paper_metrics_summary_v1``)."""
    if summary.get("rules") != "paper":
        raise ValueError(
            f"the reference summary layout holds paper-rules figures only, got rules "
            f"{summary.get('rules')!r}"
        )
    main, variants, counts = summary["main"], summary["variants"], summary["counts"]
    groups = _labels("collision_rate_by_group")
    token_sources = _labels("tokens.source")
    sources = summary["tokens"]["episodes_by_source"]
    return {
        "schema": REFERENCE_SUMMARY_SCHEMA,
        "counts": {
            "episodes": counts["episodes"],
            "interact_episodes": counts["interact_episodes"],
            "physical_metric_episodes": counts["episodes"],
            "initial_penetration_excluded": 0,
        },
        "high_level_success_percent": {
            "find_sr": main["find_sr_pct"],
            "geo_find_sr": variants["geo_find_sr_pct"],
            "nav_sr_20cm": main["nav_sr_20cm_pct"],
            "geo_nav_sr_20cm": variants["geo_nav_sr_20cm_pct"],
            "nav_sr_1m": variants["nav_sr_1m_pct"],
            "interact_sr": main["interact_sr_pct"],
            "geo_interact_sr": variants["geo_interact_sr_pct"],
        },
        "body_scene": {
            "collision_step_percent": main["collision_pct"],
            "collision_by_body_group_percent": {
                groups[g]: v for g, v in summary["collision_by_group_pct"].items()
            },
            "disturbed_objects_per_episode": main["disturbed_objects_per_episode"],
            "disturbed_object_path_length_mean_m": main["disturbed_path_m"],
        },
        "action_quality": {"motion_jerk_m_s3": main["motion_jerk_m_s3"]},
        "cost": {
            "average_steps": main["avg_steps"],
            "input_tokens_per_step": main["input_tokens_per_step"],
            "visible_output_tokens_per_step": main["output_tokens_per_step"],
            "token_sources": sorted(token_sources[s] for s in sources),
        },
    }
