"""What the observers of an env see: events built from the simulation's snapshots and renders.

:class:`ObserverFeed` turns the env's progress into the events of :mod:`humanclaw_gym.envs.
events` and emits them to the registered observers, computing an optional quantity
(contacts, the decision's instance image, per-frame ego/exo images) only when some
observer asked for it. Every piece of simulator state it hands out is read once and shared
by every observer: from :meth:`Simulation.snapshot <humanclaw_gym.envs.simulation.
Simulation.snapshot>`, or, for the frames of a chunk when no observer asked for an image
of each frame, from the states the physics backend read after each frame while it ran the
chunk at once (``record_frames``; the frame events then follow the chunk, in order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.envs.events import (
    ChunkEvent,
    DecisionEvent,
    EndEvent,
    FrameEvent,
    ObserverSet,
    ResetEvent,
    StepEvent,
)
from humanclaw_gym.envs.simulation import FRAMES_PER_CHUNK, Simulation
from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.episodes import Episode
    from humanclaw_gym.physics.types import FrameStates
    from humanclaw_gym.policy import Decision
    from humanclaw_gym.skills import SkillCall

__all__ = ["ObserverFeed", "copy_observation"]

#: Needs that render an image of every physics frame (the chunk then runs frame by frame).
_FRAME_IMAGES = frozenset({"frame_ego", "frame_exo"})


def copy_observation(obs: Any) -> Any:
    """A copy of an observation (array or dict of arrays) the caller may keep."""
    if isinstance(obs, dict):
        return {k: v.copy() for k, v in obs.items()}
    return obs.copy()


class ObserverFeed:
    """Builds and emits the observer events of one env.

    Args:
        simulation: the env's simulation layer (read only: snapshots and renders).
        observers: the env's registered observers.
    """

    def __init__(self, simulation: Simulation, observers: ObserverSet) -> None:
        self._sim = simulation
        self._observers = observers

    def reset(
        self, episode: Episode, history: np.ndarray, start: np.ndarray, ego: np.ndarray | None
    ) -> None:
        """``on_reset`` after the humanoid was placed; ``ego`` is the first observation
        when it is the paper's 448 ego RGB image (else rendered here if needed)."""
        sim, needs = self._sim, self._observers.needs
        snap = sim.snapshot()
        contacts = floor_y = lowest = None
        if "contacts" in needs:
            contacts = snap.contacts
            floor_y, lowest = sim.spawn_floor_y(float(start[0]), float(start[2]))
        if ego is None and "frame_ego" in needs:
            ego = sim.render("ego", EGO_SIZE_PX).rgb
        event = ResetEvent(
            episode=episode,
            scene=sim.scene,
            seed_history=history.copy(),
            realized_frame=snap.realized_frame,
            object_ids=snap.object_ids,
            object_poses=snap.object_poses,
            link_origins=snap.link_origins,
            ego_rgb=None if ego is None else ego.copy(),
            contacts=contacts,
            spawn_floor_y=floor_y,
            body_lowest_y=lowest,
            exo_rgb=sim.render("exo", EXO_SIZE_PX).rgb if "frame_exo" in needs else None,
            physics_contract=sim.physics_contract(),
            physics_state=None,
            body_links=sim.body_links,
            reset_frame=_reset_frame(sim.reset_frame, history),
        )
        self._observers.emit("on_reset", event)

    def decision(self, step: int, call: SkillCall, decision: Decision | None) -> None:
        """``on_decision``, with the instance image of the view the decision was made on."""
        instance = None
        if "instance" in self._observers.needs:
            instance = self._sim.render("ego", EGO_SIZE_PX, ("rgb", "instance")).instance
        self._observers.emit("on_decision", DecisionEvent(step, call, decision, instance))

    def execute(self, step: int, call: SkillCall) -> None:
        """Execute one motion skill in the simulation with ``on_chunk`` and ``on_frame``."""
        sim, needs, emit = self._sim, self._observers.needs, self._observers.emit

        def on_chunk(frames: np.ndarray) -> None:
            emit("on_chunk", ChunkEvent(step, call, frames.copy()))

        wants_frames = self._observers.wants("on_frame")
        wants_chunk = self._observers.wants("on_chunk")
        if wants_frames and not needs & _FRAME_IMAGES and sim.records_frames:
            # no image of each frame is asked for: physics runs the chunk at once and reads
            # the state after each frame itself; the frame events follow in order

            def on_frames(generated: np.ndarray, states: FrameStates) -> None:
                generated = generated.copy()
                contacts = states.contacts if "contacts" in needs else None
                for i in range(len(states)):
                    event = FrameEvent(
                        step=step,
                        frame_index=i,
                        last_in_chunk=i == FRAMES_PER_CHUNK - 1,
                        call=call,
                        generated=generated[i],
                        realized=states.realized[i],
                        object_poses=states.object_poses[i],
                        contacts=None if contacts is None else contacts[i],
                    )
                    emit("on_frame", event)

            sim.execute(
                call,
                on_chunk=on_chunk if wants_chunk else None,
                on_frames=on_frames,
                contacts="contacts" in needs,
            )
            return

        def on_frame(i: int, generated: np.ndarray) -> None:
            snap = sim.snapshot()
            ego = sim.render("ego", EGO_SIZE_PX).rgb if "frame_ego" in needs else None
            exo = sim.render("exo", EXO_SIZE_PX).rgb if "frame_exo" in needs else None
            event = FrameEvent(
                step=step,
                frame_index=i,
                last_in_chunk=i == FRAMES_PER_CHUNK - 1,
                call=call,
                generated=generated.copy(),
                realized=snap.realized_frame,
                object_poses=snap.object_poses,
                contacts=snap.contacts if "contacts" in needs else None,
                ego_rgb=ego,
                exo_rgb=exo,
            )
            emit("on_frame", event)

        sim.execute(
            call,
            on_chunk=on_chunk if wants_chunk else None,
            on_frame=on_frame if wants_frames else None,
        )

    def step(
        self, step: int, call: SkillCall, observation: Any, terminated: bool, truncated: bool
    ) -> np.ndarray:
        """``on_step`` after the final render (observers get a copy of ``observation``);
        returns the body points of the state."""
        origins = self._sim.snapshot().link_origins
        if self._observers.wants("on_step"):
            obs = copy_observation(observation)
            event = StepEvent(step, call, obs, terminated, truncated, origins)
            self._observers.emit("on_step", event)
        return origins

    def end(self, reason: str, steps: int, origins: Any, error: str | None = None) -> None:
        """``on_episode_end``; ``origins`` None when the body cannot be read any more."""
        self._observers.emit("on_episode_end", EndEvent(reason, steps, origins, error=error))


def _reset_frame(frame: np.ndarray | None, history: np.ndarray) -> np.ndarray | None:
    """The physics' reset frame when it is not the seed history's last frame, else None."""
    if frame is None or np.array_equal(frame, history[-1]):
        return None
    return np.array(frame, dtype=np.float64)
