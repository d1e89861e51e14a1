"""``VideoWrapper``: stream ego and exo RGB of every physics frame into two MP4 files.

The wrapper registers an observer on ``env.unwrapped`` with the needs ``"frame_ego"`` and/or
``"frame_exo"``, so the env renders those views at reset and after every 30 Hz physics frame
(15 per motion step; a Stop step adds none). Each frame goes straight into an ffmpeg H.264
encoder (:class:`~humanclaw_gym.replay.mp4.Mp4Stream`): no frame files, bounded memory.

Per episode it writes ``ego.mp4`` and/or ``exo.mp4`` (``1 + 15 * motion_steps`` frames,
``yuv420p``) into the episode directory chosen by ``episode_dir_fn`` (see
:mod:`humanclaw_gym.replay.layout`; default ``<output_dir>/<index>_<scene>_<episode>``).
Files are encoded under a temporary name and renamed when the encoder closed cleanly.
The encoders are closed when the episode ends (Stop, step limit, an exception escaping
``step`` -- the env's ``EndEvent(reason="error")`` -- a new ``reset`` or ``close``), so a
failed episode still leaves playable videos of what happened. :meth:`VideoWrapper.flush`
and :meth:`VideoWrapper.close` are idempotent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from humanclaw_gym.envs.events import EndEvent, FrameEvent, ResetEvent
from humanclaw_gym.replay.layout import EpisodeDirFn, resolve_episode_dir
from humanclaw_gym.replay.mp4 import Mp4Stream

__all__ = ["VideoWrapper"]

_VIEWS = ("ego", "exo")


class _VideoSink:
    """The observer: opens two streams at reset, appends per frame, closes at episode end."""

    def __init__(
        self,
        output_dir: Path,
        views: tuple[str, ...],
        fps: float,
        crf: int,
        preset: str,
        episode_dir_fn: EpisodeDirFn | None,
    ) -> None:
        self.output_dir = output_dir
        self.views = views
        self.fps = fps
        self.crf = crf
        self.preset = preset
        self.episode_dir_fn = episode_dir_fn
        self.streams: dict[str, Mp4Stream] = {}
        self.episode_index = 0
        self.episode_dir: Path | None = None
        self.last_paths: dict[str, Path] = {}

    # -- observer callbacks ---------------------------------------------------------------
    def on_reset(self, event: ResetEvent) -> None:
        self.finish()  # a still-open episode (no end event seen) is closed first
        directory = resolve_episode_dir(
            self.output_dir, self.episode_dir_fn, event.episode, self.episode_index
        )
        self.episode_index += 1
        self.episode_dir = directory
        self.last_paths = {}
        self.streams = {
            view: Mp4Stream(
                directory / f"{view}.mp4", fps=self.fps, crf=self.crf, preset=self.preset
            )
            for view in self.views
        }
        self._append(event.ego_rgb, event.exo_rgb, where="reset")

    def on_frame(self, event: FrameEvent) -> None:
        if not self.streams:
            return  # registered mid-episode: wait for the next reset
        self._append(
            event.ego_rgb, event.exo_rgb, where=f"step {event.step} frame {event.frame_index}"
        )

    def on_episode_end(self, event: EndEvent) -> None:
        if event.reason == "error":
            # Keep the env's original exception: close what we can, never raise from here.
            try:
                self.finish()
            except Exception as exc:  # pragma: no cover - depends on ffmpeg failing
                gym.logger.warn(f"VideoWrapper: closing the videos after an error failed: {exc!r}")
            return
        self.finish()

    # -- helpers --------------------------------------------------------------------------
    def _append(self, ego: Any, exo: Any, where: str) -> None:
        images = {"ego": ego, "exo": exo}
        for view, stream in self.streams.items():
            image = images[view]
            if image is None:
                raise RuntimeError(
                    f"VideoWrapper: the env delivered no {view} image at {where} although the"
                    f" observer asked for 'frame_{view}'"
                )
            stream.write(image)

    def finish(self) -> dict[str, Path]:
        """Close every open stream (all of them, even if one fails); return the written paths."""
        streams, self.streams = self.streams, {}
        first_error: BaseException | None = None
        for view, stream in streams.items():
            try:
                path = stream.close()
            except BaseException as exc:
                first_error = first_error or exc
                continue
            if path is not None:
                self.last_paths[view] = path
        if first_error is not None:
            raise first_error
        return dict(self.last_paths)


class VideoWrapper(gym.Wrapper):
    """Record ego/exo MP4 videos of every episode (every physics frame, 30 fps).

    Args:
        env: a HumanClaw env (anything whose ``unwrapped`` has ``add_observer``).
        output_dir: root directory of the videos.
        fps: frame rate written into the MP4 files (the physics rate, 30).
        ego: record the 448x448 egocentric view into ``ego.mp4``.
        exo: record the 512x512 third-person view into ``exo.mp4``.
        crf: x264 constant rate factor, 0..51 (lower = better quality, larger files).
        preset: x264 speed preset.
        episode_dir_fn: ``(episode, index) -> dir`` choosing each episode's directory
            (relative results are under ``output_dir``); default one subdirectory per
            episode, :func:`humanclaw_gym.replay.layout.flat_dir` writes into ``output_dir``.

    Attributes:
        last_video_paths: ``{"ego": Path, "exo": Path}`` of the last finished episode.
        episode_dir: directory of the current (or last) episode.
    """

    def __init__(
        self,
        env: gym.Env,
        output_dir: str | os.PathLike[str],
        fps: float = 30.0,
        ego: bool = True,
        exo: bool = True,
        crf: int = 20,
        preset: str = "veryfast",
        episode_dir_fn: EpisodeDirFn | None = None,
    ) -> None:
        super().__init__(env)
        if not (ego or exo):
            raise ValueError("VideoWrapper needs ego=True or exo=True (both are False)")
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
            raise ValueError(f"fps must be a number > 0, got {fps!r}")
        if isinstance(crf, bool) or not isinstance(crf, int) or not 0 <= crf <= 51:
            raise ValueError(f"crf must be an int in 0..51, got {crf!r}")
        base = env.unwrapped
        if not hasattr(base, "add_observer"):
            raise TypeError(
                f"VideoWrapper needs an env with the observer API (add_observer); got {type(base).__name__}"
            )
        views = tuple(v for v, on in zip(_VIEWS, (ego, exo), strict=True) if on)
        self._sink = _VideoSink(Path(output_dir), views, float(fps), crf, preset, episode_dir_fn)
        self._handle = base.add_observer(self._sink, needs=[f"frame_{v}" for v in views])
        self._closed = False

    @property
    def last_video_paths(self) -> dict[str, Path]:
        return dict(self._sink.last_paths)

    @property
    def episode_dir(self) -> Path | None:
        return self._sink.episode_dir

    def flush(self) -> dict[str, Path]:
        """Close the current episode's videos now (e.g. from a ``finally`` block); idempotent.

        Frames of the rest of the episode (if it continues) are not recorded.

        Returns:
            The paths written for the last episode.
        """
        return self._sink.finish()

    def detach(self) -> None:
        """Finish the current episode's output and stop observing the env, without closing
        it (lets a long-lived env be re-wrapped per episode); idempotent."""
        if not self._closed:
            self._closed = True
            try:
                self._sink.finish()
            finally:
                self.env.unwrapped.remove_observer(self._handle)

    def close(self) -> None:
        """Close the videos, unregister the observer and close the wrapped env; idempotent."""
        try:
            self.detach()
        finally:
            super().close()
