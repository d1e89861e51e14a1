"""Realized-vs-generated motion: joint tracking error, ``motion_anomaly`` and body checks.

The motion generator asks for a pose every 30 Hz frame (the *generated* or commanded frame);
the half-physics executes it with gravity, contacts and a 30-degree-per-frame drive cap and
reports the *realized* frame. Both are 75-D frames (``humanclaw_gym.body.skeleton``).

* **Joint tracking error** of a frame: for each of the 23 non-root joints, the angle of the
  rotation between the generated and the realized *local* joint rotation (shortest arc,
  radians in ``[0, pi]``). The root is not included: its position and orientation are
  changed by contacts by design (a wall stops the body) and the collision metric scores that.
* **motion_anomaly** of an episode: the number of realized frames in which at least one
  joint's tracking error exceeds :data:`~humanclaw_gym.metrics.thresholds.MOTION_ANOMALY_BOUND_DEG`.
  A healthy body tracks its command within a few degrees; a limb that is knocked away,
  flails or lags by more than a frame's drive cap shows up here.

The helpers below (pelvis-frame joint positions, head roll) are the quantities the physics
tests and ``benchmarks/motion_fidelity.py`` check on replay bundles. Pure numpy.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from humanclaw_gym.body.skeleton import FRAME_DIM, JOINT_INDEX, NUM_JOINTS, forward_kinematics
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.thresholds import MOTION_ANOMALY_BOUND_DEG
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord

__all__ = [
    "ANOMALY_SPEC",
    "HEAD",
    "WRISTS",
    "MotionAnomalyMetric",
    "MotionAnomalyTracker",
    "head_roll_rad",
    "joint_tracking_error_rad",
    "pelvis_frame_positions",
]

#: Joint indices of the two wrists and of the head.
WRISTS: tuple[int, int] = (JOINT_INDEX["left_wrist"], JOINT_INDEX["right_wrist"])
HEAD: int = JOINT_INDEX["head"]


def _as_frames(frames: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(frames, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[-1] != FRAME_DIM:
        raise ValueError(
            f"{name} must have shape ({FRAME_DIM},) or (T, {FRAME_DIM}), got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _axis_angle_to_quat(aa: np.ndarray) -> np.ndarray:
    """``(..., 3)`` axis-angle -> ``(..., 4)`` unit quaternions ``[w, x, y, z]``."""
    angle = np.linalg.norm(aa, axis=-1, keepdims=True)
    half = 0.5 * angle
    scale = np.where(angle < 1e-12, 0.5, np.sin(half) / np.where(angle < 1e-12, 1.0, angle))
    return np.concatenate([np.cos(half), aa * scale], axis=-1)


def joint_tracking_error_rad(generated: np.ndarray, realized: np.ndarray) -> np.ndarray:
    """Per-joint angle between generated and realized local rotations.

    Args:
        generated: ``(75,)`` or ``(T, 75)`` generated (commanded) frames.
        realized: frames of the same shape, the realized poses.

    Returns:
        ``float64 (23,)`` or ``(T, 23)``: radians in ``[0, pi]``, columns in
        ``JOINT_NAMES[1:]`` order.
    """
    gen = _as_frames(generated, "generated")
    real = _as_frames(realized, "realized")
    if gen.shape != real.shape:
        raise ValueError(f"generated {gen.shape} and realized {real.shape} must have one shape")
    qg = _axis_angle_to_quat(gen[..., 6:].reshape(*gen.shape[:-1], NUM_JOINTS - 1, 3))
    qr = _axis_angle_to_quat(real[..., 6:].reshape(*real.shape[:-1], NUM_JOINTS - 1, 3))
    # angle of qg^-1 qr = 2 acos(|<qg, qr>|)
    dot = np.abs(np.sum(qg * qr, axis=-1))
    return 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))


def pelvis_frame_positions(frames: np.ndarray) -> np.ndarray:
    """Joint centres relative to the pelvis, in the pelvis's own frame (+Y up, +Z forward,
    +X left), ``float64 (..., 24, 3)`` metres. Independent of where the body stands."""
    arr = _as_frames(frames, "frames")
    pos, rot = forward_kinematics(arr)
    rel = pos - pos[..., 0:1, :]
    return np.einsum("...ba,...jb->...ja", rot[..., 0, :, :], rel)


def head_roll_rad(frames: np.ndarray) -> np.ndarray:
    """Sideways roll of the head (and of the ego camera fixed to it), radians, ``(...)``.

    The angle by which the head's left-right axis leaves the horizontal plane: 0 for an
    upright head whatever its yaw and pitch, positive when the left side is up.
    """
    arr = _as_frames(frames, "frames")
    _, rot = forward_kinematics(arr)
    left_axis_y = rot[..., HEAD, 1, 0]
    return np.arcsin(np.clip(left_axis_y, -1.0, 1.0))


class MotionAnomalyTracker:
    """Counts the frames whose joint tracking error exceeds the bound (one episode).

    Args:
        bound_deg: the per-joint bound in degrees (default
            :data:`~humanclaw_gym.metrics.thresholds.MOTION_ANOMALY_BOUND_DEG`).
    """

    def __init__(self, bound_deg: float = MOTION_ANOMALY_BOUND_DEG) -> None:
        bound = float(bound_deg)
        if not (math.isfinite(bound) and 0.0 < bound < 180.0):
            raise ValueError(f"bound_deg must be in (0, 180), got {bound_deg!r}")
        self.bound_deg = bound
        self._bound_rad = math.radians(bound)
        self._frames = 0
        self._anomalies = 0
        self._max_rad = 0.0

    def record_frame(self, generated: np.ndarray, realized: np.ndarray) -> bool:
        """Consume one frame pair; returns whether the frame is an anomaly."""
        gen = _as_frames(generated, "generated")
        real = _as_frames(realized, "realized")
        if gen.ndim != 1 or real.ndim != 1:
            raise ValueError(
                f"generated and realized must be single ({FRAME_DIM},) frames, "
                f"got {gen.shape} and {real.shape}"
            )
        worst = float(joint_tracking_error_rad(gen, real).max())
        self._frames += 1
        self._max_rad = max(self._max_rad, worst)
        anomaly = worst > self._bound_rad
        self._anomalies += int(anomaly)
        return anomaly

    def record_frames(self, generated: np.ndarray, realized: np.ndarray) -> int:
        """Consume ``(T, 75)`` frame pairs at once, as :meth:`record_frame` on each row in
        order; returns how many of them are anomalies."""
        gen = _as_frames(generated, "generated")
        real = _as_frames(realized, "realized")
        if gen.ndim != 2 or gen.shape != real.shape:
            raise ValueError(
                f"generated and realized must be (T, {FRAME_DIM}) frames of one shape, "
                f"got {gen.shape} and {real.shape}"
            )
        if not len(gen):
            return 0
        worst = joint_tracking_error_rad(gen, real).max(axis=1)
        anomalies = int(np.count_nonzero(worst > self._bound_rad))
        self._frames += len(worst)
        self._max_rad = max(self._max_rad, float(worst.max()))
        self._anomalies += anomalies
        return anomalies

    @property
    def frames(self) -> int:
        """Frames recorded so far."""
        return self._frames

    def summary(self) -> dict[str, int | float | None]:
        """``motion_anomaly`` (frames over the bound) and ``max_joint_tracking_error_deg``
        (``None`` before any frame)."""
        return {
            "motion_anomaly": self._anomalies,
            "max_joint_tracking_error_deg": math.degrees(self._max_rad) if self._frames else None,
        }


#: The fields this module adds to metrics.json (null only in ``humanclaw_metrics_v1`` files,
#: older than the field, and in rows of the reference release's layout, which has no such
#: field).
ANOMALY_SPEC = MetricSpec(
    name="motion_anomaly",
    fields=(
        MetricField(
            "motion_anomaly",
            "int",
            f"realized frames with a joint more than {MOTION_ANOMALY_BOUND_DEG:g} degrees off its "
            "command",
            unit="frames",
            minimum=0,
            aggregate="Anom./ep: mean over the episodes that report it",
            since=2,
            after="motion_jerk_m_s3",
        ),
        MetricField(
            "max_joint_tracking_error_deg",
            "number",
            "largest realized-vs-commanded joint angle of the episode (null: no frame)",
            unit="deg",
            minimum=0.0,
            maximum=180.0,
            nullable=True,
            since=2,
        ),
    ),
    columns=(
        Column(
            "Anom./ep",
            "motion_anomaly_per_episode",
            "extra",
            ".2f",
            Reduce("mean", "motion_anomaly"),
            0,
        ),
    ),
)


class MotionAnomalyMetric:
    """Tracker of ``motion_anomaly`` (:data:`ANOMALY_SPEC`): every realized frame against
    its generated frame; a chunk's frames are scored together when its last frame arrives
    (or at the summary), with the same result as frame by frame."""

    spec: ClassVar[MetricSpec] = ANOMALY_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {
        "motion_anomaly_bound_deg": MOTION_ANOMALY_BOUND_DEG
    }

    def on_reset(self, start: EpisodeStart) -> None:
        self._tracker = MotionAnomalyTracker()
        self._generated: list[np.ndarray] = []
        self._realized: list[np.ndarray] = []

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        self._generated.append(frame.generated)
        self._realized.append(frame.realized)
        if frame.last_in_chunk:
            self._flush()

    def _flush(self) -> None:
        if self._generated:
            self._tracker.record_frames(np.array(self._generated), np.array(self._realized))
            self._generated, self._realized = [], []

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        self._flush()
        return self._tracker.summary()
