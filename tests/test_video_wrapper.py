"""VideoWrapper and Mp4Stream: frame counts, atomic files, error paths, layouts.

The first part drives the wrapper with a tiny fake env that emits the observer events the
way ``FindNavInteractEnv`` documents them (no simulator needed); the last tests run the
real env when its backends are installed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from humanclaw_gym.envs.events import (
    ChunkEvent,
    DecisionEvent,
    EndEvent,
    FrameEvent,
    ResetEvent,
    StepEvent,
)
from humanclaw_gym.replay.layout import flat_dir
from humanclaw_gym.replay.mp4 import Mp4Stream, count_mp4_frames
from humanclaw_gym.skills import SkillCall
from humanclaw_gym.wrappers.video import VideoWrapper

_EGO, _EXO, _FRAMES = 448, 512, 15


@dataclass(frozen=True)
class _Episode:
    episode_id: str
    scene_id: str


class _Scene:
    scene_id = "scene_x"

    def content_hash(self) -> str:
        return "0" * 64


class FakeEventEnv(gym.Env):
    """Emits reset / decision / chunk / frame / step / end events with flat images."""

    metadata = {"render_modes": []}

    def __init__(self, max_steps: int = 3, fail_at: tuple[int, int] | None = None) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (_EGO, _EGO, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(8)
        self.max_steps = max_steps
        self.fail_at = fail_at  # (step, frame) at which step() raises
        self._observers: dict[int, tuple[Any, frozenset[str]]] = {}
        self._next = 1
        self._in_episode = False
        self._step = 0
        self._count = 0
        self.closed = False

    def add_observer(self, observer: Any, needs: Any = ()) -> int:
        handle = self._next
        self._next += 1
        self._observers[handle] = (observer, frozenset(needs))
        return handle

    def remove_observer(self, handle: int) -> None:
        self._observers.pop(handle, None)

    def _needs(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for _, needs in self._observers.values():
            out |= needs
        return out

    def _emit(self, method: str, event: Any) -> None:
        for observer, _ in list(self._observers.values()):
            fn = getattr(observer, method, None)
            if fn is not None:
                fn(event)

    def _image(self, size: int) -> np.ndarray:
        self._count += 1
        return np.full((size, size, 3), (self._count * 7) % 256, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self._in_episode:
            self._emit("on_episode_end", EndEvent("abandoned", self._step, None))
        self._step = 0
        ep = _Episode(str((options or {}).get("episode_id", "ep/1")), "scene_x")
        obs = self._image(_EGO)
        self._in_episode = True
        self._emit(
            "on_reset",
            ResetEvent(
                episode=ep,
                scene=_Scene(),
                seed_history=np.zeros((5, 75)),
                realized_frame=np.zeros(75),
                object_ids=(),
                object_poses=np.zeros((0, 7)),
                link_origins=np.zeros((25, 3)),
                ego_rgb=obs,
                exo_rgb=self._image(_EXO) if "frame_exo" in self._needs() else None,
            ),
        )
        return obs, {}

    def step(self, action: Any):
        call = SkillCall.parse(action) if isinstance(action, str) else action
        try:
            return self._do_step(call)
        except BaseException as exc:
            self._in_episode = False
            self._emit("on_episode_end", EndEvent("error", self._step, None, error=repr(exc)))
            raise

    def _do_step(self, call: SkillCall):
        needs = self._needs()
        step = self._step
        self._emit("on_decision", DecisionEvent(step, call, None))
        obs = self._image(_EGO)
        if call.is_motion:
            self._emit("on_chunk", ChunkEvent(step, call, np.zeros((_FRAMES, 75))))
            for i in range(_FRAMES):
                if self.fail_at == (step, i):
                    raise RuntimeError("simulated physics failure")
                self._emit(
                    "on_frame",
                    FrameEvent(
                        step=step,
                        frame_index=i,
                        last_in_chunk=i == _FRAMES - 1,
                        call=call,
                        generated=np.zeros(75),
                        realized=np.zeros(75),
                        object_poses=np.zeros((0, 7)),
                        ego_rgb=self._image(_EGO) if "frame_ego" in needs else None,
                        exo_rgb=self._image(_EXO) if "frame_exo" in needs else None,
                    ),
                )
        self._step += 1
        terminated = call.is_stop
        truncated = not terminated and self._step >= self.max_steps
        self._emit("on_step", StepEvent(step, call, obs, terminated, truncated, np.zeros((25, 3))))
        if terminated or truncated:
            self._in_episode = False
            self._emit(
                "on_episode_end", EndEvent("stop" if terminated else "truncated", self._step, None)
            )
        return obs, 0.0, terminated, truncated, {}

    def close(self) -> None:
        if self._in_episode:
            self._in_episode = False
            self._emit("on_episode_end", EndEvent("abandoned", self._step, None))
        self.closed = True


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------------------
# Mp4Stream
# ----------------------------------------------------------------------------------------
def test_mp4_stream_counts_frames_and_pads_odd_sizes(tmp_path: Path) -> None:
    stream = Mp4Stream(tmp_path / "odd.mp4", fps=30)
    for k in range(5):
        stream.write(np.full((33, 47, 3), 40 * k, dtype=np.uint8))
    assert stream.close() == tmp_path / "odd.mp4"
    assert stream.close() == tmp_path / "odd.mp4"  # idempotent
    assert count_mp4_frames(tmp_path / "odd.mp4") == 5
    import imageio.v3 as iio

    frame = iio.imread(tmp_path / "odd.mp4", index=0, plugin="FFMPEG")
    assert frame.shape == (34, 48, 3)
    assert _files(tmp_path) == ["odd.mp4"]
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "odd.mp4").stat().st_mode & 0o777 == 0o666 & ~umask


def test_mp4_stream_rejects_bad_frames_and_abort_leaves_nothing(tmp_path: Path) -> None:
    stream = Mp4Stream(tmp_path / "a.mp4")
    with pytest.raises(ValueError, match="uint8"):
        stream.write(np.zeros((8, 8, 3), dtype=np.float32))
    stream.write(np.zeros((8, 8, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="differs from the first frame"):
        stream.write(np.zeros((10, 8, 3), dtype=np.uint8))
    stream.abort()
    stream.abort()
    assert stream.close() is None
    assert _files(tmp_path) == []
    with pytest.raises(RuntimeError, match="already closed"):
        stream.write(np.zeros((8, 8, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="crf"):
        Mp4Stream(tmp_path / "b.mp4", crf=60)
    empty = Mp4Stream(tmp_path / "empty.mp4")
    assert empty.close() is None
    assert _files(tmp_path) == []


# ----------------------------------------------------------------------------------------
# VideoWrapper on the fake env
# ----------------------------------------------------------------------------------------
def test_video_frame_counts_and_episode_dirs(tmp_path: Path) -> None:
    env = VideoWrapper(FakeEventEnv(max_steps=3), tmp_path)
    env.reset(options={"episode_id": "a"})
    for action in ("Walk<forward><normal>", "Turn<left><30>", "Stop/Stand"):
        env.step(action)  # Stop ends the episode after 2 motion steps
    first = env.last_video_paths
    assert set(first) == {"ego", "exo"}
    assert count_mp4_frames(first["ego"]) == 1 + 2 * _FRAMES
    assert count_mp4_frames(first["exo"]) == 1 + 2 * _FRAMES
    env.reset(options={"episode_id": "b"})
    for _ in range(3):
        env.step("Walk<forward><slow>")  # truncated after 3 motion steps
    second = env.last_video_paths
    assert count_mp4_frames(second["ego"]) == 1 + 3 * _FRAMES
    env.close()
    env.close()
    assert _files(tmp_path) == [
        "0000_scene_x_a/ego.mp4",
        "0000_scene_x_a/exo.mp4",
        "0001_scene_x_b/ego.mp4",
        "0001_scene_x_b/exo.mp4",
    ]
    import imageio.v3 as iio

    assert iio.imread(first["exo"], index=0, plugin="FFMPEG").shape == (_EXO, _EXO, 3)


def test_video_only_requested_views_and_needs(tmp_path: Path) -> None:
    base = FakeEventEnv(max_steps=1)
    env = VideoWrapper(base, tmp_path, exo=False, episode_dir_fn=flat_dir)
    assert base._needs() == frozenset({"frame_ego"})
    env.reset()
    env.step("Side step<left><0.2>")
    env.close()
    assert _files(tmp_path) == ["ego.mp4"]
    assert count_mp4_frames(tmp_path / "ego.mp4") == 1 + _FRAMES
    assert base.closed
    with pytest.raises(ValueError, match="ego=True or exo=True"):
        VideoWrapper(FakeEventEnv(), tmp_path, ego=False, exo=False)
    with pytest.raises(TypeError, match="observer API"):
        VideoWrapper(gym.make("CartPole-v1"), tmp_path)


def test_video_closed_cleanly_when_step_raises(tmp_path: Path) -> None:
    env = VideoWrapper(FakeEventEnv(max_steps=5, fail_at=(1, 4)), tmp_path, episode_dir_fn=flat_dir)
    env.reset()
    env.step("Walk<forward><normal>")
    with pytest.raises(RuntimeError, match="simulated physics failure"):
        env.step("Walk<forward><normal>")
    # the env's error EndEvent closed both encoders: valid files with every frame so far
    assert count_mp4_frames(tmp_path / "ego.mp4") == 1 + _FRAMES + 4
    assert count_mp4_frames(tmp_path / "exo.mp4") == 1 + _FRAMES + 4
    assert _files(tmp_path) == ["ego.mp4", "exo.mp4"]
    env.close()


def test_video_closed_on_close_and_flush_mid_episode(tmp_path: Path) -> None:
    env = VideoWrapper(FakeEventEnv(max_steps=5), tmp_path, episode_dir_fn=flat_dir)
    env.reset()
    env.step("Walk<forward><normal>")
    env.close()  # abandoned mid-episode
    assert count_mp4_frames(tmp_path / "ego.mp4") == 1 + _FRAMES
    out2 = tmp_path / "flush"
    env2 = VideoWrapper(FakeEventEnv(max_steps=5), out2, ego=False, episode_dir_fn=flat_dir)
    env2.reset()
    env2.step("Walk<forward><normal>")
    paths = env2.flush()
    assert paths == {"exo": out2 / "exo.mp4"}
    env2.step("Walk<forward><normal>")  # frames after a flush are not recorded
    assert env2.flush() == paths
    assert count_mp4_frames(out2 / "exo.mp4") == 1 + _FRAMES
    env2.close()
    assert _files(out2) == ["exo.mp4"]


def test_video_failing_observer_leaves_closed_videos(tmp_path: Path) -> None:
    class Boom:
        def on_frame(self, event: FrameEvent) -> None:
            if event.step == 1 and event.frame_index == 2:
                raise KeyError("observer bug")

    base = FakeEventEnv(max_steps=5)
    env = VideoWrapper(base, tmp_path, episode_dir_fn=flat_dir)
    base.add_observer(Boom())
    env.reset()
    env.step("Turn<right><45>")
    with pytest.raises(KeyError, match="observer bug"):
        env.step("Turn<right><45>")
    # the wrapper's observer saw frame 2 of step 1 before the failing one
    assert count_mp4_frames(tmp_path / "ego.mp4") == 1 + _FRAMES + 3
    env.close()
    assert _files(tmp_path) == ["ego.mp4", "exo.mp4"]
