"""Training chunks for the flow motion model: history/future model states, skill, condition.

A *chunk* is what the model learns from: the 5-frame history and the 15 frames that follow
it, both as 219-D model states (:func:`~humanclaw_gym.motion.canonical.joint_positions_velocities`)
in the canonical frame of the last history frame, plus the control branch that produced the
future and that branch's condition value in SI units. This module is numpy-only; the
training script turns a :class:`ChunkSet` into tensors.

Sources:

* :func:`procedural_chunks`: the procedural synthesizer run over random skill sequences with
  a different style seed per episode (arm carriage, arm swing, step height), continuous turn
  angles, side-step / step-back distances and seat heights, and runs of repeated skills so
  that histories cover standing, walking, turning, seated and on-stairs states.
* :func:`mocap_chunks`: user motion capture in the 75-D layout (30 fps) cut into sliding
  windows; each window gets a branch label from its realized root motion
  (:func:`hindsight_label`) or ``-1`` (base training only) when it matches no skill.
* :mod:`humanclaw_gym.motion.flow.smplx_io` converts SMPL-X mocap into the same chunks, with
  joint positions from the real body model.

Canonical frame of a chunk: origin at the last history frame's pelvis ``x``/``z`` projected
to the *support height* ``ground_y`` (the floor, or the current stair tread), heading of that
frame's pelvis. The generator uses the same rule at inference time
(:func:`history_state`), so training and sampling agree on what "canonical" means.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from humanclaw_gym.body.skeleton import FRAME_DIM, NUM_JOINTS, heading_yaw
from humanclaw_gym.motion.canonical import (
    STATE_DIM,
    CanonicalFrame,
    canonicalize,
    canonicalize_points,
    joint_positions_velocities,
    sole_heights,
)
from humanclaw_gym.motion.procedural import (
    SEATED_PELVIS_ABOVE_SURFACE_M,
    ProceduralMotionGenerator,
)
from humanclaw_gym.skills import (
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_HEIGHT_RANGE_M,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    Skill,
    SkillCall,
)

__all__ = [
    "BRANCHES",
    "FPS",
    "FUTURE_FRAMES",
    "HISTORY_FRAMES",
    "ChunkSet",
    "branch_of",
    "chunk_states",
    "condition_value",
    "history_state",
    "hindsight_label",
    "mocap_chunks",
    "normalized_condition",
    "procedural_chunks",
    "random_call",
    "support_frame",
    "TRAINING_ARM_DOWN_DEG",
    "TrainingStyleProcedural",
]

#: The procedural generator's arm carriage in the data the shipped checkpoint learned from
#: (shoulders lowered 74-80 degrees from the T-pose). The procedural generator itself now
#: hangs the arms closer to the body; the learned model keeps the carriage it was trained
#: on, for its training data and its seed pose alike, until it is retrained.
TRAINING_ARM_DOWN_DEG: tuple[float, float] = (74.0, 80.0)


class TrainingStyleProcedural(ProceduralMotionGenerator):
    """The procedural generator with the arm carriage of the flow model's training data."""

    arm_down_range_deg = TRAINING_ARM_DOWN_DEG


#: Frames of history the model conditions on, frames it generates, and their rate.
HISTORY_FRAMES = 5
FUTURE_FRAMES = 15
FPS = 30.0

#: One control branch per motion skill family, in branch-index order. Climb upstairs and
#: Walk downstairs share ``"stairs"`` (condition: the signed stair direction).
BRANCHES: tuple[str, ...] = ("walk", "turn", "side_step", "step_back", "sit", "stairs")

_BRANCH_OF_SKILL = {
    Skill.WALK: 0,
    Skill.TURN: 1,
    Skill.SIDE_STEP: 2,
    Skill.STEP_BACK: 3,
    Skill.SIT: 4,
    Skill.CLIMB_UP: 5,
    Skill.CLIMB_DOWN: 5,
}
_CONDITION_KEY = ("distance_m", "angle_rad", "lateral_m", "distance_m", "height_m", "stair_steps")
# (offset, scale): normalized = (value - offset) / scale, so every branch sees about [-1, 1].
_CONDITION_NORM = (
    (0.4, 0.2),
    (0.0, math.radians(120.0)),
    (0.0, 0.5),
    (0.35, 0.25),
    (0.5, 0.35),
    (0.0, 1.0),
)

# Hindsight labelling thresholds for mocap windows (canonical frame of the last history frame).
_LABEL_MIN_TURN_RAD = math.radians(TURN_ANGLE_RANGE_DEG[0])
_LABEL_MAX_TURN_RAD = math.radians(TURN_ANGLE_RANGE_DEG[1])
_LABEL_TURN_MAX_SHIFT_M = 0.15
_LABEL_WALK_RANGE_M = (0.1, 0.7)
_LABEL_SIT_DROP_M = 0.2


def branch_of(skill: Skill | int) -> int:
    """Control-branch index of a motion skill (Stop/Stand has none).

    Raises:
        ValueError: for Stop/Stand.
    """
    skill = Skill(int(skill))
    if skill not in _BRANCH_OF_SKILL:
        raise ValueError(
            f"skill={skill.text_name!r} has no control branch: allowed the motion skills"
        )
    return _BRANCH_OF_SKILL[skill]


def condition_value(call: SkillCall) -> float:
    """The branch condition of a call in SI units: walk distance (m), signed turn angle (rad,
    left positive), signed lateral distance (m, left positive), step-back distance (m), seat
    height (m) or stair direction (+1 up, -1 down)."""
    return float(call.condition[_CONDITION_KEY[branch_of(call.skill)]])


def normalized_condition(branch: int | np.ndarray, value: float | np.ndarray) -> np.ndarray:
    """Map SI condition values to the roughly unit range the network sees (per branch)."""
    b = np.asarray(branch, dtype=np.int64)
    v = np.asarray(value, dtype=np.float64)
    norm = np.asarray(_CONDITION_NORM, dtype=np.float64)
    if np.any((b < 0) | (b >= len(BRANCHES))):
        raise ValueError(f"branch={branch!r} is invalid: allowed 0..{len(BRANCHES) - 1}")
    return (v - norm[b, 0]) / norm[b, 1]


def support_frame(ref_frame: np.ndarray, ground_y: float) -> CanonicalFrame:
    """Canonical frame of a chunk: pelvis ``x``/``z`` of ``ref_frame`` on the support height
    ``ground_y``, heading of ``ref_frame``."""
    ref = np.asarray(ref_frame, dtype=np.float64)
    return CanonicalFrame(
        (float(ref[0]), float(ground_y), float(ref[2])), float(heading_yaw(ref[3:6]))
    )


def _states(
    frames_c: np.ndarray, joints_c: np.ndarray | None, prev: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray:
    """219-D states of canonical frames; ``joints_c`` (T, 24, 3) overrides forward kinematics
    (used for SMPL-X joints); ``prev`` = (previous frame, its joints or None)."""
    if joints_c is None:
        prev_frame = None if prev is None else prev[0]
        return joint_positions_velocities(frames_c, FPS, previous_frame=prev_frame)
    pos = joints_c.reshape(len(frames_c), 3 * NUM_JOINTS)
    vel = np.zeros_like(pos)
    if len(pos) > 1:
        vel[1:] = (pos[1:] - pos[:-1]) * FPS
        vel[0] = vel[1]
    if prev is not None and prev[1] is not None:
        vel[0] = (pos[0] - prev[1].reshape(-1)) * FPS
    return np.concatenate([frames_c, pos, vel], axis=1)


def history_state(history_world: np.ndarray, ground_y: float) -> tuple[np.ndarray, CanonicalFrame]:
    """The model's view of a world history: ``(5, 219)`` canonical states and their frame.

    Args:
        history_world: ``(H, 75)`` world frames, oldest first.
        ground_y: support height under the feet (world y, m).

    Returns:
        ``(states float64 (H, 219), CanonicalFrame)``.
    """
    hist = np.asarray(history_world, dtype=np.float64)
    if hist.ndim != 2 or hist.shape[1] != FRAME_DIM:
        raise ValueError(f"history_world must have shape (H, {FRAME_DIM}), got {hist.shape}")
    ref = support_frame(hist[-1], ground_y)
    return _states(canonicalize(hist, ref), None, None), ref


def chunk_states(
    history_world: np.ndarray,
    future_world: np.ndarray,
    ground_y: float,
    joints_world: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Canonical 219-D states of one training chunk.

    Args:
        history_world: ``(5, 75)`` world frames.
        future_world: ``(15, 75)`` world frames that follow them.
        ground_y: support height under the feet at the last history frame (world y, m).
        joints_world: optional ``(20, 24, 3)`` world joint positions of history + future from
            a body model (SMPL-X); default: this package's forward kinematics.

    Returns:
        ``(history (5, 219), future (15, 219))`` float64 states; the first future velocity is
        taken against the last history frame.
    """
    hist = np.asarray(history_world, dtype=np.float64)
    fut = np.asarray(future_world, dtype=np.float64)
    h, f = len(hist), len(fut)
    ref = support_frame(hist[-1], ground_y)
    hist_c = canonicalize(hist, ref)
    fut_c = canonicalize(fut, ref)
    if joints_world is None:
        return _states(hist_c, None, None), _states(fut_c, None, (hist_c[-1], None))
    joints = np.asarray(joints_world, dtype=np.float64)
    if joints.shape != (h + f, NUM_JOINTS, 3):
        raise ValueError(
            f"joints_world must have shape ({h + f}, {NUM_JOINTS}, 3), got {joints.shape}"
        )
    joints_c = canonicalize_points(joints, ref)
    hist_s = _states(hist_c, joints_c[:h], None)
    fut_s = _states(fut_c, joints_c[h:], (hist_c[-1], joints_c[h - 1]))
    return hist_s, fut_s


@dataclass
class ChunkSet:
    """A set of training chunks (rows aligned).

    Attributes:
        history: ``float32 (N, 5, 219)`` canonical history states.
        future: ``float32 (N, 15, 219)`` canonical future states.
        branch: ``int64 (N,)`` branch index (:data:`BRANCHES`), ``-1`` = unlabelled (base
            training only).
        condition: ``float32 (N,)`` condition value in SI units (NaN when unlabelled).
    """

    history: np.ndarray
    future: np.ndarray
    branch: np.ndarray
    condition: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.branch)
        shapes = {
            "history": (self.history.shape, (n, HISTORY_FRAMES, STATE_DIM)),
            "future": (self.future.shape, (n, FUTURE_FRAMES, STATE_DIM)),
            "condition": (self.condition.shape, (n,)),
        }
        for name, (got, want) in shapes.items():
            if tuple(got) != want:
                raise ValueError(f"ChunkSet.{name} has shape {tuple(got)}, expected {want}")

    def __len__(self) -> int:
        return len(self.branch)

    @staticmethod
    def concatenate(sets: Sequence[ChunkSet]) -> ChunkSet:
        """Rows of several sets, in order."""
        if not sets:
            raise ValueError("ChunkSet.concatenate needs at least one set")
        return ChunkSet(
            np.concatenate([s.history for s in sets]),
            np.concatenate([s.future for s in sets]),
            np.concatenate([s.branch for s in sets]),
            np.concatenate([s.condition for s in sets]),
        )

    def save(self, path: str) -> None:
        """Write the set to an ``.npz`` file atomically."""
        from humanclaw_gym.fileio import atomic_path

        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(
                fh,
                history=self.history,
                future=self.future,
                branch=self.branch,
                condition=self.condition,
            )

    @staticmethod
    def load(path: str) -> ChunkSet:
        """Read a set written by :meth:`save`."""
        with np.load(path) as data:
            return ChunkSet(
                data["history"].astype(np.float32),
                data["future"].astype(np.float32),
                data["branch"].astype(np.int64),
                data["condition"].astype(np.float32),
            )


def _empty_lists() -> tuple[list, list, list, list]:
    return [], [], [], []


def _pack(hs: list, fs: list, bs: list, cs: list) -> ChunkSet:
    if not bs:
        return ChunkSet(
            np.zeros((0, HISTORY_FRAMES, STATE_DIM), np.float32),
            np.zeros((0, FUTURE_FRAMES, STATE_DIM), np.float32),
            np.zeros((0,), np.int64),
            np.zeros((0,), np.float32),
        )
    return ChunkSet(
        np.stack(hs).astype(np.float32),
        np.stack(fs).astype(np.float32),
        np.asarray(bs, dtype=np.int64),
        np.asarray(cs, dtype=np.float32),
    )


# --------------------------------------------------------------------------------------
# Procedural source
# --------------------------------------------------------------------------------------
# Skill frequencies of the random sequences (roughly those of a find-navigate-sit agent),
# and the chance that a call repeats the previous skill (runs of walking, turning, stairs).
_SKILL_WEIGHTS = {
    Skill.WALK: 0.32,
    Skill.TURN: 0.22,
    Skill.SIDE_STEP: 0.1,
    Skill.STEP_BACK: 0.1,
    Skill.SIT: 0.1,
    Skill.CLIMB_UP: 0.08,
    Skill.CLIMB_DOWN: 0.08,
}
_REPEAT_PROB = 0.45


def random_call(rng: np.random.Generator, previous: Skill | None = None) -> SkillCall:
    """A random motion SkillCall with continuous parameters (never Stop).

    With probability 0.45 the previous skill is repeated (new parameters), which gives runs
    of walking, turning and stair steps as an agent produces them.
    """
    if previous is not None and previous is not Skill.STOP and rng.random() < _REPEAT_PROB:
        skill = previous
    else:
        skills = list(_SKILL_WEIGHTS)
        p = np.array([_SKILL_WEIGHTS[s] for s in skills])
        skill = skills[int(rng.choice(len(skills), p=p / p.sum()))]
    direction = "left" if rng.random() < 0.5 else "right"
    if skill is Skill.WALK:
        return SkillCall.walk(str(rng.choice(["slow", "normal", "fast"])))
    if skill is Skill.TURN:
        return SkillCall.turn(direction, round(float(rng.uniform(*TURN_ANGLE_RANGE_DEG)), 1))
    if skill is Skill.SIDE_STEP:
        return SkillCall.side_step(
            direction, round(float(rng.uniform(*SIDE_STEP_DISTANCE_RANGE_M)), 3)
        )
    if skill is Skill.STEP_BACK:
        return SkillCall.step_back(round(float(rng.uniform(*STEP_BACK_DISTANCE_RANGE_M)), 3))
    if skill is Skill.SIT:
        return SkillCall.sit(round(float(rng.uniform(*SIT_HEIGHT_RANGE_M)), 3))
    if skill is Skill.CLIMB_UP:
        return SkillCall.climb_up()
    return SkillCall.climb_down()


def procedural_chunks(
    num_episodes: int,
    calls_per_episode: int = 24,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> ChunkSet:
    """Chunks from the procedural synthesizer over random skill sequences.

    Args:
        num_episodes: independent sequences; episode ``i`` uses style seed ``seed + i`` and a
            random start pose.
        calls_per_episode: skill calls per sequence (one chunk each).
        seed: base seed (the whole set is a deterministic function of the arguments).
        progress: optional callback called with 1 after each episode (e.g. ``tqdm.update``).

    Returns:
        ``num_episodes * calls_per_episode`` chunks labelled with the requested skill.
    """
    for name, value, low in (
        ("num_episodes", num_episodes, 1),
        ("calls_per_episode", calls_per_episode, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name}={value!r} is invalid: allowed an int >= {low}")
    rng = np.random.default_rng(seed)
    gen = TrainingStyleProcedural()
    hs, fs, bs, cs = _empty_lists()
    for episode in range(int(num_episodes)):
        start = np.array([rng.uniform(-5, 5), rng.uniform(-0.5, 0.5), rng.uniform(-5, 5)])
        gen.reset(start, float(rng.uniform(-np.pi, np.pi)), seed=int(seed) + episode)
        previous: Skill | None = None
        for _ in range(int(calls_per_episode)):
            call = random_call(rng, previous)
            previous = call.skill
            ground = gen.ground_y
            hist = gen.history()
            fut = gen.generate(call)
            h, f = chunk_states(hist, fut, ground)
            hs.append(h)
            fs.append(f)
            bs.append(branch_of(call.skill))
            cs.append(condition_value(call))
        if progress is not None:
            progress(1)
    return _pack(hs, fs, bs, cs)


# --------------------------------------------------------------------------------------
# Motion capture source
# --------------------------------------------------------------------------------------
def hindsight_label(history_c: np.ndarray, future_c: np.ndarray) -> tuple[int, float]:
    """Label a canonical window by its realized root motion.

    Args:
        history_c: ``(5, 75)`` canonical frames (the last one is the canonical reference).
        future_c: ``(15, 75)`` canonical frames that follow.

    Returns:
        ``(branch, condition value in SI units)``, or ``(-1, nan)`` when the window matches
        no skill (it then trains the base only). Stairs are never inferred (that needs the
        scene).
    """
    end = future_c[-1]
    yaw = float(np.angle(np.exp(1j * (heading_yaw(end[3:6]) - heading_yaw(history_c[-1, 3:6])))))
    dx, dz = float(end[0]), float(end[2])
    drop = float(history_c[-1, 1] - end[1])
    shift = math.hypot(dx, dz)
    if drop > _LABEL_SIT_DROP_M:
        height = float(end[1]) - SEATED_PELVIS_ABOVE_SURFACE_M
        if SIT_HEIGHT_RANGE_M[0] <= height <= SIT_HEIGHT_RANGE_M[1]:
            return 4, height
        return -1, math.nan
    if abs(yaw) >= _LABEL_MIN_TURN_RAD:
        if abs(yaw) <= _LABEL_MAX_TURN_RAD and shift <= _LABEL_TURN_MAX_SHIFT_M:
            return 1, yaw
        return -1, math.nan
    if dz >= _LABEL_WALK_RANGE_M[0] and abs(dx) < 0.5 * dz:
        return (0, dz) if dz <= _LABEL_WALK_RANGE_M[1] else (-1, math.nan)
    if -dz >= STEP_BACK_DISTANCE_RANGE_M[0] and abs(dx) < 0.5 * -dz:
        return (3, -dz) if -dz <= STEP_BACK_DISTANCE_RANGE_M[1] else (-1, math.nan)
    if abs(dx) >= SIDE_STEP_DISTANCE_RANGE_M[0] and abs(dz) < 0.5 * abs(dx):
        return (2, dx) if abs(dx) <= SIDE_STEP_DISTANCE_RANGE_M[1] else (-1, math.nan)
    return -1, math.nan


def mocap_chunks(
    frames_world: np.ndarray,
    stride: int = 5,
    joints_world: np.ndarray | None = None,
    floor_y: float | None = None,
) -> ChunkSet:
    """Sliding 20-frame windows of a 30 fps mocap clip as training chunks.

    Args:
        frames_world: ``(T, 75)`` world frames (Y up, metres), ``T >= 20``.
        stride: frames between window starts (>= 1).
        joints_world: optional ``(T, 24, 3)`` joint positions from a body model.
        floor_y: floor height; default: the 2nd percentile of the clip's sole heights (the
            clip is assumed to be on a flat floor).

    Returns:
        one chunk per window, labelled by :func:`hindsight_label`.
    """
    frames = np.asarray(frames_world, dtype=np.float64)
    window = HISTORY_FRAMES + FUTURE_FRAMES
    if frames.ndim != 2 or frames.shape[1] != FRAME_DIM or len(frames) < window:
        raise ValueError(
            f"frames_world must have shape (T, {FRAME_DIM}) with T >= {window}, got {frames.shape}"
        )
    if not np.all(np.isfinite(frames)):
        raise ValueError("frames_world must be finite")
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or stride < 1:
        raise ValueError(f"stride={stride!r} is invalid: allowed an int >= 1")
    if joints_world is not None:
        joints_world = np.asarray(joints_world, dtype=np.float64)
        if joints_world.shape != (len(frames), NUM_JOINTS, 3):
            raise ValueError(
                f"joints_world must have shape ({len(frames)}, {NUM_JOINTS}, 3), "
                f"got {joints_world.shape}"
            )
    floor = float(np.percentile(sole_heights(frames), 2.0)) if floor_y is None else float(floor_y)
    hs, fs, bs, cs = _empty_lists()
    for s in range(0, len(frames) - window + 1, int(stride)):
        hist = frames[s : s + HISTORY_FRAMES]
        fut = frames[s + HISTORY_FRAMES : s + window]
        joints = None if joints_world is None else joints_world[s : s + window]
        h, f = chunk_states(hist, fut, floor, joints)
        branch, value = hindsight_label(h[:, :FRAME_DIM], f[:, :FRAME_DIM])
        hs.append(h)
        fs.append(f)
        bs.append(branch)
        cs.append(value)
    return _pack(hs, fs, bs, cs)


def load_mocap_npz(path: str) -> np.ndarray:
    """Read a user mocap clip: an ``.npz`` with ``frames (T, 75)`` at 30 fps (an optional
    ``fps`` entry must then equal 30)."""
    with np.load(path) as data:
        if "frames" not in data:
            raise ValueError(
                f"{path}: missing array 'frames' (T, {FRAME_DIM}); found {sorted(data)}"
            )
        frames = np.asarray(data["frames"], dtype=np.float64)
        if "fps" in data and abs(float(data["fps"]) - FPS) > 1e-6:
            raise ValueError(f"{path}: fps={float(data['fps'])!r} is invalid: allowed {FPS:g}")
    if frames.ndim != 2 or frames.shape[1] != FRAME_DIM:
        raise ValueError(f"{path}: frames must have shape (T, {FRAME_DIM}), got {frames.shape}")
    return frames


def iter_mocap_files(paths: Iterable[str]) -> list[np.ndarray]:
    """Load several clips (see :func:`load_mocap_npz`)."""
    return [load_mocap_npz(p) for p in paths]
