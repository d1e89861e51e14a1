"""Interact metrics: did the humanoid end up sitting on the exact target object?

Only contact counts, never proximity: a humanoid contact row whose link is the pelvis
(joint 0, the body's root link: what the reference release calls ``pelvis`` or ``base``)
and whose other body is one of the target instances. Only the *last* frame of a motion
chunk is looked at (the landed pose); a contact earlier in the chunk that is gone by its
last frame does not count.

Which bodies are the target depends on the metric rules. ``strict``: the resolved target
instances, by object id. ``paper``: as the reference release matches them, also every
object whose Habitat instance handle (``"<template>_:<nnnn>"``, see
:func:`scene_object_handles`) is a target's handle or contains a target's template name
(the handle's part before ``":"``, trailing ``"_"`` removed): another instance of the
target's template counts, and so does an object whose template name merely contains it.
Objects of scenes that are not imported from a scene dataset (no template) are matched by
id under both rules.

* GeoInteract: the last frame of at least one Sit chunk has pelvis-target contact.
* Interact: at least one Sit chunk was executed, the policy stopped actively, and the last
  frame of the last motion chunk before the Stop has pelvis-target contact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from humanclaw_gym.metrics._checks import as_contacts, as_id_set, as_int, as_skill
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, check_rules
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord
from humanclaw_gym.physics.types import HUMAN_ID
from humanclaw_gym.skills import Skill

__all__ = [
    "INTERACT_SPEC",
    "InteractMetric",
    "InteractTracker",
    "interact_target_ids",
    "pelvis_target_contact",
    "scene_object_handles",
]

_PELVIS_LINK = 0


def pelvis_target_contact(contacts: np.ndarray, target_ids: Iterable[int]) -> bool:
    """Whether any row is a humanoid-pelvis contact with one of ``target_ids``."""
    rows = as_contacts(contacts)
    targets = np.fromiter(as_id_set(target_ids, "target_ids"), dtype=np.int64)
    hit = (rows["a"] == HUMAN_ID) & (rows["link_a"] == _PELVIS_LINK) & np.isin(rows["b"], targets)
    return bool(np.any(hit))


def scene_object_handles(objects: Iterable[Any]) -> dict[int, str]:
    """Habitat instance handles of a scene's dataset objects: ``{object_id:
    "<template>_:<nnnn>"}``, ``<template>`` the base name of the object's source template
    and ``<nnnn>`` the count of earlier objects of the same template (as Habitat numbers
    instances). Objects without a source template, and the stage, have no handle.

    Args:
        objects: scene objects (``object_id`` and ``source``, as
            :class:`~humanclaw_gym.scenes.spec.SceneObject`), in scene order.
    """
    handles: dict[int, str] = {}
    counts: dict[str, int] = {}
    for obj in objects:
        source = getattr(obj, "source", None)
        if source is None or getattr(source, "index", None) is None:
            continue
        template = str(source.template).rsplit("/", 1)[-1]
        handles[int(obj.object_id)] = f"{template}_:{counts.get(template, 0):04d}"
        counts[template] = counts.get(template, 0) + 1
    return handles


def _template_name(handle: str) -> str:
    return handle.split(":", 1)[0].rstrip("_")


def interact_target_ids(
    target_ids: Iterable[int],
    object_handles: Mapping[int, str] | None = None,
    rules: str = DEFAULT_METRIC_RULES,
) -> frozenset[int]:
    """The bodies Interact counts as the target (see the module docstring).

    Args:
        target_ids: the resolved target instances (object ids >= 1).
        object_handles: ``{object_id: handle}`` of the scene's objects
            (:func:`scene_object_handles`); ``None`` or empty: ids only.
        rules: ``"paper"`` adds every object matching a target's handle or template name;
            ``"strict"`` keeps the ids.

    Returns:
        The object ids whose contact with the pelvis counts.
    """
    rules = check_rules(rules)
    targets = as_id_set(target_ids, "target_ids")
    if rules != "paper" or not object_handles:
        return targets
    target_handles = {object_handles[t] for t in targets if t in object_handles}
    templates = {_template_name(h) for h in target_handles} - {""}
    twins = {
        int(oid)
        for oid, handle in object_handles.items()
        if handle in target_handles or any(t in handle for t in templates)
    }
    return targets | twins


class InteractTracker:
    """Online Sit/contact state of one episode.

    Args:
        target_ids: scene object ids of the resolved target instances (>= 1).
        object_handles: Habitat instance handles of the scene's objects
            (:func:`scene_object_handles`), for the ``paper`` rule's template matching.
        rules: the metric rules (see :func:`interact_target_ids`).
    """

    def __init__(
        self,
        target_ids: Iterable[int],
        object_handles: Mapping[int, str] | None = None,
        rules: str = DEFAULT_METRIC_RULES,
    ) -> None:
        ids = as_id_set(target_ids, "target_ids")
        if not ids:
            raise ValueError("target_ids must contain at least one object id")
        self._targets = interact_target_ids(ids, object_handles, rules)
        self.sit_chunks = 0
        self.sit_chunks_with_contact = 0
        self.chunks = 0
        self.last_chunk_contact = False

    def record_frame(
        self, step: int, skill: Skill | int, contacts: np.ndarray, last_in_chunk: bool
    ) -> None:
        """Record one realized frame; only frames with ``last_in_chunk`` matter."""
        as_int(step, "step", 0)
        skill = as_skill(skill)
        rows = as_contacts(contacts)
        if not last_in_chunk:
            return
        contact = pelvis_target_contact(rows, self._targets)
        self.chunks += 1
        self.last_chunk_contact = contact
        if skill == Skill.SIT:
            self.sit_chunks += 1
            self.sit_chunks_with_contact += int(contact)

    @property
    def geo_interact_success(self) -> bool:
        return self.sit_chunks_with_contact > 0

    def interact_success(self, active_stop: bool) -> bool:
        """InteractSR given whether the episode ended with an active Stop."""
        return bool(active_stop and self.sit_chunks > 0 and self.last_chunk_contact)

    def summary(self, active_stop: bool, interact_episode: bool) -> dict[str, Any]:
        """JSON-ready fields; success flags are ``None`` for non-interact episodes."""
        return {
            "interact_success": self.interact_success(active_stop) if interact_episode else None,
            "geo_interact_success": self.geo_interact_success if interact_episode else None,
            "sit_chunks": self.sit_chunks,
            "sit_chunks_with_target_contact": self.sit_chunks_with_contact,
            "last_chunk_pelvis_target_contact": self.last_chunk_contact,
        }


#: Declared output of the Interact metrics (see :mod:`humanclaw_gym.metrics.fields`).
INTERACT_SPEC = MetricSpec(
    name="interact",
    fields=(
        MetricField(
            "interact_success",
            "bool",
            "InteractSR: a Sit ran, active Stop, pelvis on the target at the last chunk's end",
            null_unless="interact",
            aggregate="InteractSR: share of the interact episodes",
            upstream="success.interact_sr",
        ),
        MetricField(
            "geo_interact_success",
            "bool",
            "GeoInteractSR: some Sit chunk ended with the pelvis on the target",
            null_unless="interact",
            aggregate="GeoInteractSR: share of the interact episodes",
            upstream="success.geo_interact_sr",
        ),
        MetricField(
            "sit_chunks", "int", "Sit chunks executed", minimum=0, upstream="success.n_sit"
        ),
        MetricField(
            "sit_chunks_with_target_contact",
            "int",
            "Sit chunks whose last frame had pelvis-target contact",
            minimum=0,
            at_most="sit_chunks",
        ),
        MetricField(
            "last_chunk_pelvis_target_contact",
            "bool",
            "the last motion chunk ended with pelvis-target contact",
        ),
    ),
    columns=(
        Column(
            "InteractSR",
            "interact_sr_pct",
            "main",
            ".1f",
            Reduce("share_interact", "interact_success", scale=100.0),
            2,
            True,
        ),
        Column(
            "GeoInteractSR",
            "geo_interact_sr_pct",
            "variants",
            ".1f",
            Reduce("share_interact", "geo_interact_success", scale=100.0),
            3,
            True,
        ),
    ),
)


class InteractMetric:
    """Tracker of InteractSR / GeoInteractSR (:data:`INTERACT_SPEC`): the pelvis-target
    contact of every chunk's last frame (the ``"contacts"`` need)."""

    spec: ClassVar[MetricSpec] = INTERACT_SPEC
    needs: ClassVar[frozenset[str]] = frozenset({"contacts"})
    thresholds: ClassVar[dict[str, float | int]] = {}

    def on_reset(self, start: EpisodeStart) -> None:
        self._tracker = InteractTracker(start.target_ids, start.object_handles, start.rules)
        self._interact = start.interact

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        if frame.last_in_chunk:
            self._tracker.record_frame(frame.step, frame.skill, frame.contacts, True)

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        return self._tracker.summary(end.active_stop, self._interact)
