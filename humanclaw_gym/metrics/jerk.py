"""Motion Jerk: smoothness of the *generated* (pre-physics) motion at the decision timescale.

Only the root is scored. The articulation of every frame is replaced by the neutral 22-joint
body (:func:`humanclaw_gym.body.skeleton.neutral_body22_m`), rotated by the frame's global
root orientation and moved to its root translation, so the score measures how coherently
the whole body travels and turns, not joint-level noise. Joint tracks are smoothed with a
centred moving average (width 3, both ends padded with the edge frame, output as long as the
input) and differenced three times with a stride of 8 frames at 30 fps:

    J[t] = (P[t+3s] - 3 P[t+2s] + 3 P[t+s] - P[t]) / (s / fps)^3        (m/s^3)

The episode score is the mean of ``|J[t]|`` over the 22 joints and all valid ``t``
(``0 <= t <= T - 1 - 3s``). Sequences shorter than ``3s + 1`` frames have no score.

The arithmetic (the small-angle cutoff of the rotation, the running-sum moving average,
the order of every operation) is the reference release's, so the score agrees with it to
the last bit under both metric rule sets.

Because the padding repeats the edge frame, a body that is already moving at the first or
last frame gets a small end effect (the smoothed first frame lies one third of a frame's
travel ahead of the raw one); a motionless start and end give none.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from humanclaw_gym.body.skeleton import FRAME_DIM, neutral_body22_m
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.thresholds import JERK_FPS, JERK_STRIDE, JERK_WINDOW
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord

__all__ = [
    "JERK_SPEC",
    "JerkMetric",
    "motion_jerk",
    "moving_average",
    "root_rigid_joint_positions",
]


#: Rotation angles below this (radians) give the identity rotation, as in the reference.
_SMALL_ANGLE_RAD = 1e-8


def _rotation_matrices(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula for ``(T, 3)`` axis-angle vectors -> ``(T, 3, 3)``.

    Angles below :data:`_SMALL_ANGLE_RAD` give exactly the identity. The operations and
    their order are the reference release's, so the result is the same to the last bit.
    """
    theta = np.linalg.norm(rotvec, axis=1, keepdims=True)
    small = theta[:, 0] < _SMALL_ANGLE_RAD
    k = rotvec / np.where(theta < _SMALL_ANGLE_RAD, 1.0, theta)
    skew = np.zeros((rotvec.shape[0], 3, 3), dtype=np.float64)
    skew[:, 0, 1], skew[:, 0, 2] = -k[:, 2], k[:, 1]
    skew[:, 1, 0], skew[:, 1, 2] = k[:, 2], -k[:, 0]
    skew[:, 2, 0], skew[:, 2, 1] = -k[:, 1], k[:, 0]
    sin = np.sin(theta)[:, :, None]
    one_minus_cos = 1.0 - np.cos(theta)[:, :, None]
    rot = np.eye(3)[None, :, :] + sin * skew + one_minus_cos * (skew @ skew)
    rot[small] = np.eye(3)
    return rot


def _frames(xb_world_75: np.ndarray) -> np.ndarray:
    xb = np.asarray(xb_world_75, dtype=np.float64)
    if xb.ndim != 2 or xb.shape[1] != FRAME_DIM:
        raise ValueError(f"xb_world_75 must have shape (T, {FRAME_DIM}), got {xb.shape}")
    if not np.all(np.isfinite(xb[:, :6])):
        raise ValueError("xb_world_75 root translation/orientation must be finite")
    return xb


def root_rigid_joint_positions(xb_world_75: np.ndarray) -> np.ndarray:
    """World positions of the neutral 22-joint body carried by the root of each frame.

    Args:
        xb_world_75: ``(T, 75)`` generated frames (world, Y up, metres / radians); only the
            root translation ``[0:3]`` and root axis-angle ``[3:6]`` are read.

    Returns:
        ``float64 (T, 22, 3)``: ``R(root_aa[t]) @ neutral[j] + root_pos[t]``, metres.
    """
    xb = _frames(xb_world_75)
    rot = _rotation_matrices(xb[:, 3:6])
    joints = np.einsum("tab,jb->tja", rot, neutral_body22_m())
    joints += xb[:, None, 0:3]
    return joints


def moving_average(signal: np.ndarray, window: int = JERK_WINDOW) -> np.ndarray:
    """Centred moving average along axis 0 with edge padding; output as long as the input.

    Computed as differences of a running sum over the padded signal, divided by the
    width: the reference release's summation order, so Motion Jerk agrees with it to the
    last bit (a direct sum of the ``window`` neighbours differs in the last bits).

    Args:
        signal: ``(T, ...)`` array.
        window: odd width >= 1 (frames).
    """
    if isinstance(window, bool) or int(window) != window or window < 1 or window % 2 == 0:
        raise ValueError(f"window must be an odd int >= 1, got {window!r}")
    arr = np.asarray(signal, dtype=np.float64)
    width, half = int(window), int(window) // 2
    padded = np.pad(arr, [(half, half)] + [(0, 0)] * (arr.ndim - 1), mode="edge")
    running = np.concatenate(
        [np.zeros((1,) + arr.shape[1:], dtype=np.float64), np.cumsum(padded, axis=0)], axis=0
    )
    return (running[width:] - running[:-width]) / float(width)


def motion_jerk(
    xb_world_75: np.ndarray,
    fps: float = JERK_FPS,
    stride: int = JERK_STRIDE,
    window: int = JERK_WINDOW,
) -> float | None:
    """Root-rigid Motion Jerk of a generated motion (m/s^3), or ``None`` if too short.

    Args:
        xb_world_75: ``(T, 75)`` generated pre-physics frames of the whole episode, in time
            order (the chunks concatenated).
        fps: frame rate of ``xb_world_75`` (Hz), > 0.
        stride: finite-difference stride ``s`` (frames), >= 1.
        window: moving-average width (frames), odd, >= 1.

    Returns:
        Mean jerk magnitude over joints and valid frames in m/s^3; ``None`` when
        ``T < 3 * stride + 1``.
    """
    if not np.isfinite(fps) or fps <= 0:
        raise ValueError(f"fps must be a finite positive number, got {fps!r}")
    if isinstance(stride, bool) or int(stride) != stride or stride < 1:
        raise ValueError(f"stride must be an int >= 1, got {stride!r}")
    s = int(stride)
    xb = _frames(xb_world_75)
    if xb.shape[0] < 3 * s + 1:
        return None
    joints = moving_average(root_rigid_joint_positions(xb), window)
    n = joints.shape[0] - 3 * s
    third = joints[3 * s :] - 3.0 * joints[2 * s : 2 * s + n] + 3.0 * joints[s : s + n] - joints[:n]
    jerk = third / (float(s) / float(fps)) ** 3
    return float(np.linalg.norm(jerk, axis=-1).mean())


#: Declared output of Motion Jerk (see :mod:`humanclaw_gym.metrics.fields`).
JERK_SPEC = MetricSpec(
    name="jerk",
    fields=(
        MetricField(
            "motion_jerk_m_s3",
            "number",
            "root-rigid jerk of the generated motion (null: fewer than 25 frames)",
            unit="m/s^3",
            minimum=0.0,
            nullable=True,
            aggregate="Motion Jerk: mean over the episodes with a score",
            upstream="action_quality.motion_jerk_m_s3",
        ),
        MetricField(
            "generated_frames",
            "int",
            "generated frames scored",
            unit="frames",
            minimum=0,
        ),
    ),
    columns=(
        Column(
            "Motion Jerk", "motion_jerk_m_s3", "main", ".2f", Reduce("mean", "motion_jerk_m_s3"), 6
        ),
    ),
)


class JerkMetric:
    """Tracker of Motion Jerk (:data:`JERK_SPEC`): the generated frame of every executed
    frame, in time order, scored at the end."""

    spec: ClassVar[MetricSpec] = JERK_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {
        "jerk_fps": JERK_FPS,
        "jerk_stride": JERK_STRIDE,
        "jerk_window": JERK_WINDOW,
    }

    def on_reset(self, start: EpisodeStart) -> None:
        self._generated: list[np.ndarray] = []

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        self._generated.append(frame.generated)

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        n = len(self._generated)
        generated = np.array(self._generated) if n else np.zeros((0, FRAME_DIM))
        return {
            "motion_jerk_m_s3": motion_jerk(generated) if n else None,
            "generated_frames": n,
        }
