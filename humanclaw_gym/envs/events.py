"""The observer API: how wrappers see inside an episode without widening ``info``.

Wrappers (metrics, video, trajectory, recorders) register an :class:`EnvObserver` on
``env.unwrapped`` *before* ``reset`` and declare what they need. The env computes an
optional quantity only when at least one registered observer asked for it:

=====================  ================================================================
need                   what the env then computes
=====================  ================================================================
``"instance"``         instance-id render of the decision's ego view (metrics: Find)
``"contacts"``         one shared contact query per physics frame + at reset; spawn floor
                       ray (the object ``link`` fields of the rows read -1)
``"contact_parts"``    ``"contacts"`` with the objects' part indices filled in (costly in
                       pybullet: a nearest-part search per row); implies ``"contacts"``
``"frame_ego"``        an ego RGB render of every physics frame (video)
``"frame_exo"``        an exo (third-person) RGB render at reset and every frame (video)
=====================  ================================================================

The frame events of a motion decision are emitted in frame order. Without a
``"frame_ego"`` / ``"frame_exo"`` need they may come after physics ran the whole chunk
(the backend reads each frame's state as it goes, which is cheaper than stopping after
every frame), so an ``on_frame`` observer reads the frame's state from its event, never
from the env.

Events are plain frozen dataclasses holding numpy arrays that the observer may keep (the env
never mutates an array after handing it out; the state arrays are the simulation
snapshot's or the frame states physics read, shared by all observers and read-only).
``on_chunk``, ``on_frame`` and ``on_step`` events are built only when some observer defines
that method. Observer callbacks run synchronously inside ``reset``/``step``; an exception
in an observer propagates to the caller.

Events carry hidden simulator state (target ids, object poses, contacts). Observers are
trusted in-process code; none of this reaches the observation or ``info`` the policy sees.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.episodes import Episode
    from humanclaw_gym.policy import Decision
    from humanclaw_gym.scenes.spec import SceneSpec
    from humanclaw_gym.skills import SkillCall

__all__ = [
    "NEEDS",
    "ChunkEvent",
    "DecisionEvent",
    "EndEvent",
    "EnvObserver",
    "FrameEvent",
    "ObserverSet",
    "ResetEvent",
    "StepEvent",
    "check_needs",
]

NEEDS = frozenset({"instance", "contacts", "contact_parts", "frame_ego", "frame_exo"})


@dataclass(frozen=True)
class ResetEvent:
    """After ``reset`` placed the humanoid and rendered the first ego view.

    Attributes:
        episode: the episode record (targets included).
        scene: the scene spec of the episode.
        seed_history: ``(5, 75)`` generated standing seed (world frame).
        realized_frame: ``(75,)`` realized pose right after placement.
        object_ids: dynamic object ids, row order of ``object_poses``.
        object_poses: ``(M, 7)`` initial dynamic object poses.
        link_origins: ``(P, 3)`` body points (pelvis, root, link origins).
        ego_rgb: the first observation, ``uint8 (448, 448, 3)``.
        contacts: contact rows before the first physics frame ("contacts" need) or None.
        spawn_floor_y: spawn floor height by the downward ray rule ("contacts") or None.
        body_lowest_y: lowest point of the standing body at spawn (metres) or None.
        exo_rgb: exo view ("frame_exo") or None.
        physics_contract: the physics backend's contract description (for manifests).
        body_links: the humanoid's link names, the order of contact rows' ``link_a`` (a
            body asset's links); None for the built-in skeleton body (``JOINT_NAMES``).
        reset_frame: ``(75,)`` the frame the physics was reset to when it is not
            ``seed_history[-1]`` (a body asset lifted onto the floor, the reference
            release's spawn), else None.
    """

    episode: Episode
    scene: SceneSpec
    seed_history: np.ndarray
    realized_frame: np.ndarray
    object_ids: tuple[int, ...]
    object_poses: np.ndarray
    link_origins: np.ndarray
    ego_rgb: np.ndarray
    contacts: np.ndarray | None = None
    spawn_floor_y: float | None = None
    body_lowest_y: float | None = None
    exo_rgb: np.ndarray | None = None
    physics_contract: dict[str, Any] | None = None
    physics_state: Any = None
    body_links: tuple[str, ...] | None = None
    reset_frame: np.ndarray | None = None


@dataclass(frozen=True)
class DecisionEvent:
    """At the start of ``step``: the validated action for the current (pre-step) view.

    ``instance`` is the instance-id image of the same ego camera transform as the image the
    policy decided on ("instance" need), else None. ``decision`` is the Decision passed to
    ``step`` (or None when a bare SkillCall / text / dict was passed).
    """

    step: int
    call: SkillCall
    decision: Decision | None
    instance: np.ndarray | None = None


@dataclass(frozen=True)
class ChunkEvent:
    """The generated (pre-physics) motion of one motion decision: ``frames`` ``(15, 75)``."""

    step: int
    call: SkillCall
    frames: np.ndarray


@dataclass(frozen=True)
class FrameEvent:
    """After one generated frame was executed by physics (30 Hz)."""

    step: int
    frame_index: int
    last_in_chunk: bool
    call: SkillCall
    generated: np.ndarray
    realized: np.ndarray
    object_poses: np.ndarray
    contacts: np.ndarray | None = None
    ego_rgb: np.ndarray | None = None
    exo_rgb: np.ndarray | None = None


@dataclass(frozen=True)
class StepEvent:
    """At the end of ``step`` (after the final ego render)."""

    step: int
    call: SkillCall
    observation: np.ndarray
    terminated: bool
    truncated: bool
    link_origins: np.ndarray


@dataclass(frozen=True)
class EndEvent:
    """The episode ended. ``reason``: ``"stop"`` (active stop), ``"truncated"`` (step limit),
    ``"error"`` (an exception escaped ``step``), ``"abandoned"`` (reset/close mid-episode)."""

    reason: str
    steps: int
    link_origins: np.ndarray | None
    error: str | None = None


class EnvObserver(Protocol):
    """Receives episode events. Every method is optional (define only what you need)."""

    def on_reset(self, event: ResetEvent) -> None: ...

    def on_decision(self, event: DecisionEvent) -> None: ...

    def on_chunk(self, event: ChunkEvent) -> None: ...

    def on_frame(self, event: FrameEvent) -> None: ...

    def on_step(self, event: StepEvent) -> None: ...

    def on_episode_end(self, event: EndEvent) -> None: ...


def check_needs(needs: Iterable[str]) -> frozenset[str]:
    """``needs`` as a set, checked against :data:`NEEDS` (``"contact_parts"`` adds
    ``"contacts"``).

    Raises:
        ValueError: naming the unknown needs and the allowed ones.
    """
    out = frozenset(needs)
    unknown = out - NEEDS
    if unknown:
        raise ValueError(f"unknown observer needs {sorted(unknown)}; allowed {sorted(NEEDS)}")
    return out | {"contacts"} if "contact_parts" in out else out


class ObserverSet:
    """The observers registered on one env, with the union of their needs.

    Observers are called in registration order; a method an observer does not define is
    skipped.
    """

    def __init__(self) -> None:
        self._items: dict[int, tuple[Any, frozenset[str]]] = {}
        self._next_handle = 1
        self.needs: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, observer: EnvObserver, needs: frozenset[str]) -> int:
        """Register ``observer`` with checked ``needs``; returns its handle."""
        handle = self._next_handle
        self._next_handle += 1
        self._items[handle] = (observer, needs)
        self.needs = self.needs | needs
        return handle

    def remove(self, handle: int) -> None:
        """Unregister an observer (unknown handles are ignored)."""
        if self._items.pop(handle, None) is not None:
            self.needs = frozenset().union(*(n for _, n in self._items.values()))

    def wants(self, method: str) -> bool:
        """Whether some observer defines ``method`` (events nobody reads are not built)."""
        return any(getattr(o, method, None) is not None for o, _ in self._items.values())

    def emit(self, method: str, event: Any) -> None:
        """Call ``method(event)`` on every observer that defines it."""
        for observer, _ in list(self._items.values()):
            fn = getattr(observer, method, None)
            if fn is not None:
                fn(event)
