"""The two metrics.json layouts: ours (``humanclaw_metrics_v2``, flat) and the reference
release's (``humanclaw_paper_metrics_v1``, nested), read and written.

Reading: :func:`read_metrics_record` turns a parsed file of either layout into one validated
row of our layout. A reference file is scored by the ``paper`` rules by definition; the
fields it does not record (difficulty, target ids, first Find steps, per-group collision
step counts, ...) are ``null`` in the row, which carries ``"imported_from":
"humanclaw_paper_metrics_v1"``. Its episode id is the reference's per-scene number; a
purely numeric id is read as ``"<scene_id>_<n>"``, the id under which our episode
importer knows the same episode, so that one episode has one id whichever layout it came
in. Field mapping (reference -> ours):

=======================================================  =================================
``episode.episode_id`` / ``scene_id`` / ``rollout_index``  ``episode_id`` / ``scene_id`` /
                                                           ``rollout_index``
``episode.object_category``                                ``category``
``success.find_sr`` / ``geo_find_sr``                      ``find_success`` /
                                                           ``geo_find_success``
``success.max_target_pixel_count``                         ``max_target_pixels``
``success.nav_sr_20cm`` / ``geo_nav_sr_20cm`` /            ``nav_success_20cm`` /
``nav_sr_1m``                                              ``geo_nav_success_20cm`` /
                                                           ``nav_success_1m``
``success.final_body_target_aabb_distance_m``              ``final_distance_m``
``success.is_interact_episode``                            ``interact``
``success.interact_sr`` / ``geo_interact_sr`` / ``n_sit``  ``interact_success`` /
                                                           ``geo_interact_success`` /
                                                           ``sit_chunks`` (null flags
                                                           outside interact episodes)
``success.active_stop``                                    ``active_stop``; ``ended_by`` is
                                                           ``stop`` or ``truncated``
``body_scene.collision_step_fraction``                     ``collision_rate``
``body_scene.by_body_group_step_fraction``                 ``collision_rate_by_group``
                                                           (hand_arm, torso, leg, head ->
                                                           arm/hand, torso, leg/foot, head)
``body_scene.episode_floor_y`` / ``episode_floor_source``  ``floor_height_m`` /
                                                           ``floor_source``
``body_scene.affected_dynamic_object_count`` /             ``affected_object_count`` /
``direct_dynamic_object_count`` /                          ``direct_affected_object_count``
``mapped_affected_dynamic_object_count`` /                 / ``affected_objects_with_path``
``affected_object_path_length_sum_m``                      / ``affected_path_length_sum_m``
``body_scene.initial_penetration_depth_m`` / ``_detected``  ``initial_penetration_m`` /
                                                           ``initial_penetration_flag``
``action_quality.motion_jerk_m_s3``                        ``motion_jerk_m_s3``
``cost.decision_steps`` / ``vlm_calls``                    ``steps`` / ``tokens.calls``
``cost.input_tokens`` / ``visible_output_tokens`` /        ``tokens.input_tokens`` /
``reasoning_tokens``                                       ``output_tokens`` /
                                                           ``reasoning_tokens``
``cost.token_source``                                      ``tokens.source``
=======================================================  =================================

Writing: :func:`to_reference_layout` writes one row in the reference layout, with the
fields that layout has no place for kept in an extra ``"humanclaw_gym"`` object (the
reference's own aggregation ignores unknown keys), so that reading the file back gives the
same row. Only rows scored by the ``paper`` rules can be written in the reference layout.
:func:`summary_to_reference_layout` gives a summary in the reference's summary layout
(``humanclaw_paper_metrics_summary_v1``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from humanclaw_gym.metrics.episode import (
    METRICS_SCHEMA,
    METRICS_SCHEMAS,
    MetricsFileError,
    validate_metrics,
)

__all__ = [
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

# body groups: reference key -> ours
_GROUPS = {"hand_arm": "arm/hand", "torso": "torso", "leg": "leg/foot", "head": "head"}
_GROUPS_BACK = {v: k for k, v in _GROUPS.items()}
# token source labels: reference -> ours
_SOURCES = {
    "provider_exact": "provider",
    "estimated_chars_div_4": "estimated_chars_div_4",
    "mixed_exact_and_estimated": "mixed",
    "unavailable_no_calls": "none",
}
_SOURCES_BACK = {v: k for k, v in _SOURCES.items()}
_FLOORS = {"spawn_raycast": "spawn_raycast", "agent_min_y_fallback": "body_lowest_point_fallback"}
_FLOORS_BACK = {v: k for k, v in _FLOORS.items()}
_NUMERIC_ID = re.compile(r"\d+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")

# Our fields the reference layout has no place for (kept in the "humanclaw_gym" object).
_OURS_ONLY = (
    "difficulty",
    "target_ids",
    "ended_by",
    "first_find_step",
    "first_geo_find_step",
    "sit_chunks_with_target_contact",
    "last_chunk_pelvis_target_contact",
    "collision_steps_by_group",
    "affected_object_first_frame",
    "affected_object_path_length_m",
    "generated_frames",
    "motion_anomaly",
    "max_joint_tracking_error_deg",
    "thresholds",
)
_OURS_ONLY_TOKENS = (
    "failed_calls",
    "calls_by_source",
    "input_tokens_per_step",
    "output_tokens_per_step",
)


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


def _get(section: Mapping[str, Any], name: str, key: str, where: str) -> Any:
    if key not in section:
        raise MetricsFileError(f"{where}: {name}.{key} is missing")
    return section[key]


def _from_reference(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    episode = _section(data, "episode", where)
    success = _section(data, "success", where)
    body = _section(data, "body_scene", where)
    quality = _section(data, "action_quality", where)
    cost = _section(data, "cost", where)

    def ep(key: str) -> Any:
        return _get(episode, "episode", key, where)

    def su(key: str) -> Any:
        return _get(success, "success", key, where)

    def bs(key: str) -> Any:
        return _get(body, "body_scene", key, where)

    def co(key: str) -> Any:
        return _get(cost, "cost", key, where)

    if body.get("physical_metrics_eligible", True) is not True:
        raise MetricsFileError(
            f"{where}: body_scene.physical_metrics_eligible is not true; episodes excluded "
            "from the physical metrics are not supported"
        )
    scene_id, raw_id = ep("scene_id"), ep("episode_id")
    if not isinstance(scene_id, str) or not isinstance(raw_id, str):
        raise MetricsFileError(
            f"{where}: episode.scene_id and episode.episode_id must be strings, "
            f"got {scene_id!r} and {raw_id!r}"
        )
    interact = su("is_interact_episode")
    active = su("active_stop")
    groups = bs("by_body_group_step_fraction")
    if not isinstance(groups, Mapping) or set(groups) != set(_GROUPS):
        raise MetricsFileError(
            f"{where}: body_scene.by_body_group_step_fraction must map exactly "
            f"{tuple(_GROUPS)}, got {groups!r}"
        )
    source = co("token_source")
    if source not in _SOURCES:
        raise MetricsFileError(
            f"{where}: cost.token_source must be one of {tuple(_SOURCES)}, got {source!r}"
        )
    floor_source = bs("episode_floor_source")
    if floor_source not in _FLOORS:
        raise MetricsFileError(
            f"{where}: body_scene.episode_floor_source must be one of {tuple(_FLOORS)}, "
            f"got {floor_source!r}"
        )
    row: dict[str, Any] = {
        "schema": METRICS_SCHEMA,
        "imported_from": REFERENCE_SCHEMA,
        "rules": "paper",
        "episode_id": _our_episode_id(raw_id, scene_id),
        "scene_id": scene_id,
        "rollout_index": ep("rollout_index"),
        "category": ep("object_category"),
        "difficulty": None,
        "interact": interact,
        "target_ids": None,
        "ended_by": "stop" if active is True else "truncated",
        "active_stop": active,
        "steps": co("decision_steps"),
        "find_success": su("find_sr"),
        "geo_find_success": su("geo_find_sr"),
        "first_find_step": None,
        "first_geo_find_step": None,
        "max_target_pixels": su("max_target_pixel_count"),
        "find_pixel_threshold": su("find_pixel_threshold"),
        "final_distance_m": su("final_body_target_aabb_distance_m"),
        "nav_success_20cm": su("nav_sr_20cm"),
        "geo_nav_success_20cm": su("geo_nav_sr_20cm"),
        "nav_success_1m": su("nav_sr_1m"),
        "interact_success": su("interact_sr") if interact is True else None,
        "geo_interact_success": su("geo_interact_sr") if interact is True else None,
        "sit_chunks": su("n_sit"),
        "sit_chunks_with_target_contact": None,
        "last_chunk_pelvis_target_contact": None,
        "motion_steps": bs("motion_steps"),
        "collision_steps": bs("collision_steps"),
        "collision_rate": bs("collision_step_fraction"),
        "collision_steps_by_group": None,
        "collision_rate_by_group": {_GROUPS[k]: v for k, v in groups.items()},
        "floor_height_m": bs("episode_floor_y"),
        "floor_source": _FLOORS[floor_source],
        "affected_object_count": bs("affected_dynamic_object_count"),
        "direct_affected_object_count": bs("direct_dynamic_object_count"),
        "affected_object_first_frame": None,
        "affected_object_path_length_m": None,
        "affected_objects_with_path": bs("mapped_affected_dynamic_object_count"),
        "affected_path_length_sum_m": bs("affected_object_path_length_sum_m"),
        "motion_jerk_m_s3": _get(quality, "action_quality", "motion_jerk_m_s3", where),
        "generated_frames": None,
        "motion_anomaly": None,
        "max_joint_tracking_error_deg": None,
        "initial_penetration_m": bs("initial_penetration_depth_m"),
        "initial_penetration_flag": bs("initial_penetration_detected"),
        "tokens": {
            "input_tokens": co("input_tokens"),
            "output_tokens": co("visible_output_tokens"),
            "reasoning_tokens": co("reasoning_tokens"),
            "calls": co("vlm_calls"),
            "failed_calls": None,
            "source": _SOURCES[source],
        },
        "thresholds": None,
    }
    extra = data.get(_EXTRA_KEY)
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise MetricsFileError(f"{where}: {_EXTRA_KEY} must be an object, got {extra!r}")
        for key in _OURS_ONLY:
            if key in extra:
                row[key] = copy.deepcopy(extra[key])
        tokens = extra.get("tokens", {})
        for key in _OURS_ONLY_TOKENS:
            if isinstance(tokens, Mapping) and key in tokens:
                row["tokens"][key] = copy.deepcopy(tokens[key])
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
    tokens = row["tokens"]
    steps = int(row["steps"])
    interact = bool(row["interact"])
    extra: dict[str, Any] = {key: copy.deepcopy(row[key]) for key in _OURS_ONLY}
    extra["tokens"] = {k: copy.deepcopy(tokens[k]) for k in _OURS_ONLY_TOKENS if k in tokens}
    extra["imported_from"] = row.get("imported_from")
    return {
        "schema": REFERENCE_SCHEMA,
        "profile": profile,
        "episode": {
            "episode_id": reference_episode_id(row["episode_id"], row["scene_id"]),
            "scene_id": row["scene_id"],
            "object_category": row["category"],
            "rollout_index": row["rollout_index"],
        },
        "success": {
            "find_sr": row["find_success"],
            "geo_find_sr": row["geo_find_success"],
            "max_target_pixel_count": row["max_target_pixels"],
            "find_pixel_threshold": row["find_pixel_threshold"],
            "nav_sr_20cm": row["nav_success_20cm"],
            "geo_nav_sr_20cm": row["geo_nav_success_20cm"],
            "nav_sr_1m": row["nav_success_1m"],
            "final_body_target_aabb_distance_m": row["final_distance_m"],
            "active_stop": row["active_stop"],
            "is_interact_episode": interact,
            "interact_sr": bool(row["interact_success"]) if interact else False,
            "geo_interact_sr": bool(row["geo_interact_success"]) if interact else False,
            "n_sit": row["sit_chunks"],
        },
        "body_scene": {
            "physical_metrics_eligible": True,
            "initial_penetration_depth_m": row["initial_penetration_m"],
            "initial_penetration_detected": row["initial_penetration_flag"],
            "initial_penetration_excluded": False,
            "episode_floor_y": row["floor_height_m"],
            "episode_floor_source": _FLOORS_BACK[row["floor_source"]],
            "collision_contact_source": "post_physics_30hz",
            "collision_step_fraction": row["collision_rate"],
            "collision_steps": row["collision_steps"],
            "motion_steps": row["motion_steps"],
            "by_body_group_step_fraction": {
                _GROUPS_BACK[g]: v for g, v in row["collision_rate_by_group"].items()
            },
            "affected_dynamic_object_count": row["affected_object_count"],
            "direct_dynamic_object_count": row["direct_affected_object_count"],
            "indirect_dynamic_object_count": row["affected_object_count"]
            - row["direct_affected_object_count"],
            "mapped_affected_dynamic_object_count": row["affected_objects_with_path"],
            "affected_object_path_length_sum_m": row["affected_path_length_sum_m"],
        },
        "action_quality": {"motion_jerk_m_s3": row["motion_jerk_m_s3"]},
        "cost": {
            "decision_steps": steps,
            "vlm_calls": tokens["calls"],
            "token_source": _SOURCES_BACK[tokens["source"]],
            "input_tokens": tokens["input_tokens"],
            "visible_output_tokens": tokens["output_tokens"],
            "reasoning_tokens": tokens["reasoning_tokens"],
            "input_tokens_per_step": tokens["input_tokens"] / max(1, steps),
            "visible_output_tokens_per_step": tokens["output_tokens"] / max(1, steps),
        },
        _EXTRA_KEY: extra,
    }


def summary_to_reference_layout(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary of :func:`~humanclaw_gym.metrics.aggregate.aggregate` (``paper`` rules) in
    the reference release's summary layout (``humanclaw_paper_metrics_summary_v1``)."""
    if summary.get("rules") != "paper":
        raise ValueError(
            f"the reference summary layout holds paper-rules figures only, got rules "
            f"{summary.get('rules')!r}"
        )
    main, variants, counts = summary["main"], summary["variants"], summary["counts"]
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
                _GROUPS_BACK[g]: v for g, v in summary["collision_by_group_pct"].items()
            },
            "disturbed_objects_per_episode": main["disturbed_objects_per_episode"],
            "disturbed_object_path_length_mean_m": main["disturbed_path_m"],
        },
        "action_quality": {"motion_jerk_m_s3": main["motion_jerk_m_s3"]},
        "cost": {
            "average_steps": main["avg_steps"],
            "input_tokens_per_step": main["input_tokens_per_step"],
            "visible_output_tokens_per_step": main["output_tokens_per_step"],
            "token_sources": sorted(_SOURCES_BACK[s] for s in sources),
        },
    }
