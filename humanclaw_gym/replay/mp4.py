"""Stream RGB frames straight into an H.264 MP4 through an ffmpeg pipe.

Used by :class:`~humanclaw_gym.wrappers.VideoWrapper` (live rollouts) and by the delayed
renderer. No frame is ever written to disk as an image and memory stays bounded: each
frame is handed to ffmpeg's stdin as soon as it arrives.

The video is encoded into a hidden temporary file next to the target
(``.<name>.<random>.tmp``) and renamed onto the target only when the encoder closed
cleanly; :meth:`Mp4Stream.abort` (or a failed close) deletes the temporary file instead.
Output is ``yuv420p`` H.264; odd image sizes are padded by one edge row/column because
yuv420p needs even sizes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Mp4Stream", "count_mp4_frames"]

_DEFAULT_CRF = 20
_DEFAULT_PRESET = "veryfast"


class Mp4Stream:
    """One H.264 MP4 file fed frame by frame.

    The encoder starts with the first frame (its size fixes the video size; every later
    frame must have the same size). :meth:`close` finalizes the file and is idempotent;
    :meth:`abort` discards it.

    Args:
        path: the final ``.mp4`` path (its directory is created).
        fps: frames per second of the video.
        crf: x264 constant rate factor, 0 (lossless) .. 51 (worst); 20 is visually clean.
        preset: x264 speed preset (``"ultrafast"`` .. ``"veryslow"``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        fps: float = 30.0,
        crf: int = _DEFAULT_CRF,
        preset: str = _DEFAULT_PRESET,
    ) -> None:
        if not (isinstance(fps, (int, float)) and not isinstance(fps, bool) and fps > 0):
            raise ValueError(f"fps must be a number > 0, got {fps!r}")
        if isinstance(crf, bool) or not isinstance(crf, int) or not 0 <= crf <= 51:
            raise ValueError(f"crf must be an int in 0..51, got {crf!r}")
        self.path = Path(path)
        self.fps = float(fps)
        self.crf = crf
        self.preset = str(preset)
        self.frames_written = 0
        self.size: tuple[int, int] | None = None  # (height, width) of the input frames
        self._writer: Any = None
        self._tmp: Path | None = None
        self._state = "new"  # new -> open -> closed | aborted

    @property
    def closed(self) -> bool:
        return self._state in ("closed", "aborted")

    def _open(self, height: int, width: int) -> None:
        import imageio_ffmpeg

        from humanclaw_gym.fileio import temp_path

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = temp_path(self.path.parent, self.path.name)
        out_w, out_h = width + (width % 2), height + (height % 2)
        writer = imageio_ffmpeg.write_frames(
            str(self._tmp),
            (out_w, out_h),
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            fps=self.fps,
            quality=None,
            codec="libx264",
            macro_block_size=1,
            ffmpeg_log_level="error",
            output_params=["-f", "mp4", "-crf", str(self.crf), "-preset", self.preset],
        )
        writer.send(None)  # start ffmpeg
        self._writer = writer
        self.size = (height, width)
        self._state = "open"

    def write(self, rgb: np.ndarray) -> None:
        """Append one ``uint8 (H, W, 3)`` RGB frame (row 0 = top)."""
        if self.closed:
            raise RuntimeError(f"cannot write to {self.path}: the stream is already closed")
        frame = np.asarray(rgb)
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(
                f"video frame must be uint8 (H, W, 3), got {frame.dtype} {frame.shape}"
            )
        height, width = frame.shape[:2]
        if self._state == "new":
            self._open(height, width)
        elif (height, width) != self.size:
            raise ValueError(
                f"video frame size {(height, width)} differs from the first frame's {self.size}"
                f" in {self.path}"
            )
        if height % 2 or width % 2:
            frame = np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")
        try:
            self._writer.send(np.ascontiguousarray(frame))
        except BaseException:
            self.abort()
            raise
        self.frames_written += 1

    def close(self) -> Path | None:
        """Finish the file and move it onto :attr:`path`; idempotent.

        Returns:
            The video path, or None when no frame was written (no file is created).
        """
        if self._state == "closed":
            return self.path if self.frames_written else None
        if self._state == "aborted":
            return None
        if self._state == "new":
            self._state = "closed"
            return None
        writer, self._writer = self._writer, None
        try:
            writer.close()
            tmp = self._tmp
            if tmp is None or not tmp.is_file() or tmp.stat().st_size == 0:
                raise OSError(f"ffmpeg produced no output for {self.path}")
            os.replace(tmp, self.path)
        except BaseException:
            self._state = "aborted"
            self._remove_tmp()
            raise
        self._state = "closed"
        self._tmp = None
        return self.path

    def abort(self) -> None:
        """Stop the encoder and delete the temporary file (no video is produced); idempotent."""
        if self.closed:
            return
        writer, self._writer = self._writer, None
        self._state = "aborted"
        if writer is not None:
            try:
                writer.close()
            except Exception:  # the encoder may already be broken; the file is discarded anyway
                pass
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None

    def __enter__(self) -> Mp4Stream:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def count_mp4_frames(path: str | os.PathLike[str]) -> int:
    """Number of video frames in a file (decodes it with ffmpeg; for tests and checks)."""
    import imageio_ffmpeg

    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(path))
    return int(frames)
