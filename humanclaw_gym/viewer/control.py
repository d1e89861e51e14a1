"""Control requests and the state snapshot of the debug viewer (no viser import).

Every control (a GUI button or the programmatic API) becomes a :class:`ControlRequest`
put on a thread-safe queue together with a :class:`concurrent.futures.Future`. Only the
simulation thread takes requests off the queue and applies them to the environment;
it then completes the future with a fresh :class:`ViewerState`. No other thread ever
touches the env, the policy or the episode bookkeeping.
"""

from __future__ import annotations

import queue
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal

from humanclaw_gym.skills import SkillCall

__all__ = ["ControlQueue", "ControlRequest", "RequestKind", "ViewerClosedError", "ViewerState"]

RequestKind = Literal["step", "reset", "skill", "pause", "resume", "wake"]
_KINDS: tuple[str, ...] = ("step", "reset", "skill", "pause", "resume", "wake")


class ViewerClosedError(RuntimeError):
    """A request was made to (or was still pending in) a viewer that is closed."""


@dataclass(frozen=True)
class ControlRequest:
    """One control, applied on the simulation thread.

    Attributes:
        kind: ``"step"`` (one decision by the policy), ``"reset"`` (start an episode),
            ``"skill"`` (execute one user-chosen skill now), ``"pause"``, ``"resume"``, or
            ``"wake"`` (no-op; wakes the loop, e.g. on close).
        skill: for ``"skill"``: the SkillCall text form (parsed on the sim thread with
            :meth:`SkillCall.parse`) or an already built :class:`SkillCall`.
        episode_id: for ``"reset"``: the episode to start (``None``: the env's next one).
        source: who asked (``"api"`` or ``"gui"``), shown in the GUI.
    """

    kind: RequestKind
    skill: str | SkillCall | None = None
    episode_id: str | None = None
    source: str = "api"

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"ControlRequest.kind={self.kind!r} is not one of {_KINDS}")
        if self.kind == "skill" and not isinstance(self.skill, (str, SkillCall)):
            raise TypeError(
                "ControlRequest.skill must be SkillCall text or a SkillCall for kind 'skill',"
                f" got {type(self.skill).__name__}"
            )


class ControlQueue:
    """A FIFO of ``(request, future)`` pairs shared by any number of producer threads
    and one consumer (the simulation thread)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[ControlRequest, Future[ViewerState]]] = queue.Queue()

    def put(self, request: ControlRequest) -> Future[ViewerState]:
        """Enqueue ``request``; the returned future completes when it has been applied."""
        future: Future[ViewerState] = Future()
        self._queue.put((request, future))
        return future

    def get(self, timeout_s: float | None) -> tuple[ControlRequest, Future[ViewerState]] | None:
        """The next pair, waiting at most ``timeout_s`` (``None``: forever; ``0``: not at all)."""
        try:
            if timeout_s is not None and timeout_s <= 0.0:
                return self._queue.get_nowait()
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def fail_pending(self, error: BaseException) -> int:
        """Fail every queued future with ``error`` (used at close); returns how many."""
        count = 0
        while True:
            item = self.get(0.0)
            if item is None:
                return count
            _, future = item
            if future.set_running_or_notify_cancel():
                future.set_exception(error)
            count += 1

    def __len__(self) -> int:
        return self._queue.qsize()


@dataclass(frozen=True)
class ViewerState:
    """An immutable snapshot of the viewer, published by the simulation thread.

    Attributes:
        started: the simulation loop has run its first reset.
        paused: the loop does not step the policy by itself.
        closed: server and env are shut down.
        agent: name of the policy driving the run (``"manual"``: none).
        episode_id / scene_id / instruction: the current episode (``None`` before start).
        step: decision steps taken in the current episode.
        max_steps: the episode's step limit.
        last_skill: text form of the last executed skill (``None`` after a reset).
        last_skill_source: who chose it (the agent's name, ``"gui"`` or ``"api"``).
        episode_done: the current episode ended; the next step resets first.
        end_reason: ``"stop"`` or ``"truncated"`` when ``episode_done``.
        total_steps: env steps executed since the viewer started (all episodes).
        episodes_started: resets done since the viewer started.
        error: the last reported problem (bad skill text, unknown episode id, a step
            request without a policy), ``None`` after the next successful control.
        root_position_m: pelvis position of the realized pose (world, Y up).
        yaw_rad: heading of the realized body (0 = facing +Z).
        sim_thread_id: ``threading.get_ident()`` of the simulation thread.
        step_thread_id: thread that ran the last ``env.step`` (always the sim thread).
    """

    started: bool = False
    paused: bool = False
    closed: bool = False
    agent: str = "manual"
    episode_id: str | None = None
    scene_id: str | None = None
    instruction: str | None = None
    step: int = 0
    max_steps: int = 0
    last_skill: str | None = None
    last_skill_source: str | None = None
    episode_done: bool = False
    end_reason: str | None = None
    total_steps: int = 0
    episodes_started: int = 0
    error: str | None = None
    root_position_m: tuple[float, float, float] | None = None
    yaw_rad: float | None = None
    sim_thread_id: int | None = None
    step_thread_id: int | None = None
