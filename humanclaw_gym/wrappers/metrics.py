"""MetricsWrapper: the metrics of every episode, computed while it runs.

The trackers are those the env's task names (``TaskSpec.trackers``, resolved through the
registry into a :class:`~humanclaw_gym.metrics.trackers.MetricSuite`; for the benchmark's
task the paper's). Attaching the wrapper asks the env (through the observer API) for what
they declare they need: for the paper's trackers the instance-id image of each decision's
ego view (Find; rendered in the same pass as the observation) and the contact rows of
every physics frame plus the spawn-floor ray (Collision, Interact, Disturbance, initial
penetration), read once per frame from the simulation's snapshot. Without this wrapper
neither is computed. The contacts and the spawn floor are always asked for: every task's
start record is made from the same facts (:class:`~humanclaw_gym.metrics.tracker.
EpisodeFacts`), whose floor and initial penetration come from them.

Where the policy's text comes from: pass a :class:`~humanclaw_gym.policy.Decision` to
``env.step``. Its ``visible_state`` feeds the FindSR sentence rule and its ``usage`` records
feed the cost metrics. A bare SkillCall means "no visibility claim, no model call".

At the end of an episode (Stop or step limit) the metrics dict is put into the final
step's ``info["metrics"]`` and, with ``output_dir``, written to ``metrics.json`` in that
episode's own directory (atomically), chosen by ``episode_dir_fn`` like the other recording
wrappers (:mod:`humanclaw_gym.replay.layout`): by default
``<output_dir>/<index:04d>_<scene_id>_<episode_id>/metrics.json``, so every episode keeps
its file; :func:`~humanclaw_gym.replay.layout.flat_dir` writes ``<output_dir>/metrics.json``
for callers that make one directory per rollout. An episode that ends by an exception gets
no metrics (it is not a finished rollout); an episode abandoned by ``reset`` neither.

Each result records the metric ``rules`` (``"paper"`` by default, see
:mod:`humanclaw_gym.metrics.rules`) and a ``rollout_index``: how many episodes with the same
id this wrapper finished before (0 for the first), so that running an episode again gives a
second rollout rather than a duplicate.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from humanclaw_gym.envs.events import (
    ChunkEvent,
    DecisionEvent,
    EndEvent,
    FrameEvent,
    ResetEvent,
)
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, check_rules
from humanclaw_gym.metrics.trackers import suite_for_spec
from humanclaw_gym.replay.layout import EpisodeDirFn, resolve_episode_dir

__all__ = ["MetricsWrapper"]


class _MetricsObserver:
    def __init__(self, owner: MetricsWrapper) -> None:
        self._owner = owner

    def on_reset(self, event: ResetEvent) -> None:
        self._owner._on_reset(event)

    def on_decision(self, event: DecisionEvent) -> None:
        self._owner._on_decision(event)

    def on_chunk(self, event: ChunkEvent) -> None:
        rec = self._owner._recorder
        if rec is not None:
            rec.record_generated_chunk(event.step, event.frames)

    def on_frame(self, event: FrameEvent) -> None:
        self._owner._on_frame(event)

    def on_episode_end(self, event: EndEvent) -> None:
        self._owner._on_end(event)


class MetricsWrapper(gym.Wrapper):
    """Compute the task's metrics per episode (see module docstring).

    Args:
        env: a ``HumanClaw-v0`` / ``HumanClawFindNavInteract-v0`` env (possibly wrapped).
        output_dir: root of the per-episode ``metrics.json`` files (None: info only).
            Change it between episodes with :meth:`set_output_dir`.
        rules: the metric rules, ``"paper"`` (default) or ``"strict"``.
        episode_dir_fn: ``(episode, index) -> dir`` relative to ``output_dir`` (see
            :mod:`humanclaw_gym.replay.layout`); default one subdirectory per episode.

    Attributes:
        suite: the trackers of the env's task
            (:class:`~humanclaw_gym.metrics.trackers.MetricSuite`).
        last_metrics: the metrics of the last finished episode.
        last_metrics_path: where they were written (None without ``output_dir``).

    Raises:
        ValueError: the task names a tracker that is not registered.
    """

    def __init__(
        self,
        env: gym.Env,
        output_dir: str | os.PathLike[str] | None = None,
        rules: str = DEFAULT_METRIC_RULES,
        episode_dir_fn: EpisodeDirFn | None = None,
    ) -> None:
        super().__init__(env)
        self.rules = check_rules(rules)
        self.suite = suite_for_spec(env.unwrapped.task.spec)
        self.episode_dir_fn = episode_dir_fn
        self._episode_index = 0
        self._episode_dir: Path | None = None
        self._rollouts: dict[str, int] = {}
        self.last_metrics_path: Path | None = None
        self._output_dir = None if output_dir is None else Path(output_dir)
        self._recorder: Any = None
        self._targets: tuple[int, ...] = ()
        self._object_ids: tuple[int, ...] = ()
        self._pending: dict[str, Any] | None = None
        self._frames: list[FrameEvent] = []  # the current chunk's frames, recorded together
        self.last_metrics: dict[str, Any] | None = None
        self._handle: int | None = env.unwrapped.add_observer(
            _MetricsObserver(self), needs=sorted(self.suite.needs | {"contacts"})
        )

    # -- lifecycle ---------------------------------------------------------------------
    def set_output_dir(self, output_dir: str | os.PathLike[str] | None) -> None:
        """The root of the next episodes' ``metrics.json`` files."""
        self._output_dir = None if output_dir is None else Path(output_dir)

    def detach(self) -> None:
        """Stop observing the env without closing it (idempotent)."""
        if self._handle is not None:
            self.env.unwrapped.remove_observer(self._handle)
            self._handle = None

    def close(self) -> None:
        self.detach()
        super().close()

    def step(self, action: Any):
        self._pending = None
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._pending is not None:
            info = dict(info)
            info["metrics"] = self._pending
            self._pending = None
        return obs, reward, terminated, truncated, info

    # -- observer callbacks ------------------------------------------------------------
    def _on_reset(self, event: ResetEvent) -> None:
        from humanclaw_gym.metrics import EpisodeMetricRecorder, episode_floor, initial_penetration
        from humanclaw_gym.metrics.interact import scene_object_handles
        from humanclaw_gym.metrics.tracker import EpisodeFacts

        self._recorder = None  # an abandoned episode's recorder never sees the next one
        self._frames = []
        episode, scene = event.episode, event.scene
        if event.contacts is None or event.body_lowest_y is None:
            raise RuntimeError("MetricsWrapper did not receive contacts/spawn floor at reset")
        try:
            floor, floor_source = episode_floor(
                event.spawn_floor_y, event.body_lowest_y, self.rules
            )
        except ValueError as exc:
            raise ValueError(f"episode {episode.episode_id!r}: {exc}") from None
        self._episode_dir = (
            None
            if self._output_dir is None
            else resolve_episode_dir(
                self._output_dir, self.episode_dir_fn, episode, self._episode_index
            )
        )
        self._episode_index += 1
        self._object_ids = tuple(event.object_ids)
        facts = EpisodeFacts(
            episode_id=episode.episode_id,
            scene_id=episode.scene_id,
            episode=episode,
            scene=scene,
            dynamic_ids=tuple(event.object_ids),
            floor_height_m=float(floor),
            floor_source=floor_source,
            initial_penetration_m=float(initial_penetration(event.contacts)),
            rules=self.rules,
            rollout_index=self._rollouts.get(episode.episode_id, 0),
            object_handles=scene_object_handles(getattr(scene, "objects", ())),
            link_names=event.body_links,
        )
        start = self.env.unwrapped.task.metric_start(facts)
        self._targets = tuple(sorted(set(getattr(start, "target_ids", ()))))
        self._recorder = EpisodeMetricRecorder(start, self.suite)

    def _on_decision(self, event: DecisionEvent) -> None:
        if self._recorder is None:
            return
        self._record_frames()
        pixels = 0
        if event.instance is not None:  # the targets are distinct ids: their pixels add up
            pixels = sum(int(np.count_nonzero(event.instance == t)) for t in self._targets)
        decision = event.decision
        self._recorder.record_decision(
            event.step,
            pixels,
            None if decision is None else decision.visible_state,
            int(event.call.skill),
            () if decision is None else decision.usage,
        )

    def _on_frame(self, event: FrameEvent) -> None:
        if self._recorder is None:
            return
        self._frames.append(event)
        if event.last_in_chunk:
            self._record_frames()

    def _record_frames(self) -> None:
        """Hand the frames of the chunk so far to the recorder, all at once (a chunk's
        frames are checked together; the trackers still see them one by one)."""
        frames, self._frames = self._frames, []
        if not frames:
            return
        first, k = frames[0], len(frames)
        if self._object_ids:
            positions = np.array([e.object_poses[:, :3] for e in frames])
        else:
            positions = np.zeros((k, 0, 3))
        self._recorder.record_frames(
            first.step,
            int(first.call.skill),
            first.frame_index,
            frames[-1].last_in_chunk,
            [e.contacts for e in frames],
            self._object_ids,
            positions,
            np.array([e.realized for e in frames]),
        )

    def _on_end(self, event: EndEvent) -> None:
        if event.reason in ("stop", "truncated") and self._recorder is not None:
            self._record_frames()
        self._frames = []
        rec, self._recorder = self._recorder, None
        if rec is None or event.reason not in ("stop", "truncated"):
            return
        metrics = rec.finalize(event.link_origins, event.reason)
        self._rollouts[rec.episode_id] = rec.rollout_index + 1
        self.last_metrics = metrics
        self._pending = metrics
        self.last_metrics_path = None
        if self._episode_dir is not None:
            from humanclaw_gym.metrics import write_metrics_json

            self.last_metrics_path = write_metrics_json(self._episode_dir / "metrics.json", metrics)
