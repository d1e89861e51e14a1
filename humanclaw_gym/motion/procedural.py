"""The procedural skill motion synthesizer (the default :class:`MotionGenerator`).

It turns each :class:`~humanclaw_gym.skills.SkillCall` into 15 world frames at 30 Hz with
no learned weights. Every chunk is built the same way, in the canonical frame of the last
history frame (:mod:`humanclaw_gym.motion.canonical`: pelvis above the origin, floor at
``y = 0``, facing ``+Z``):

1. **Read the state** from the history: pelvis position and velocity, yaw rate, each foot's
   pose from forward kinematics (flat-ankle position, yaw, heel raise, planted or in the
   air) and whether the body is seated (mean hip flexion above 35 degrees).
2. **Plan** the skill: a pelvis path (``x``, ``z``, yaw, a nominal height, a forward pitch)
   and a list of foot steps (which foot, lift and landing frame, landing pose). Paths are
   quintic Hermite curves that start with the history's velocity and zero acceleration, so
   chunk boundaries are smooth; an axis the skill does not ask for keeps the incoming
   momentum and lets it decay within 0.25 s.
3. **Fit the pelvis height to the legs**: the nominal height is lowered wherever a planted
   foot could not be reached (heel raise allowed for feet behind the hip), then smoothed
   with an acceleration-limited lower envelope. The legs therefore always carry the pelvis:
   the physics does not drive the root's vertical velocity.
4. **Pose every frame**: planted feet stay where they are (rolling onto the toes when the
   hip gets too far), swing feet follow lift/carry/land curves with toe-off and heel-strike
   pitch, and analytic two-bone IK gives hip, knee and ankle rotations. Spine, arms and head
   follow simple rules (arm swing opposite to the feet, forward lean with speed and during
   sit/stand transitions, hands moving to the thighs when seated).
5. **Blend** any mismatch between the first frame and the last history frame out over
   8 frames (zero for histories this generator wrote), map back to the world and roll the
   last 5 frames into the history.

Skill specifics (``d``, ``a``, ``s``, ``h`` from :attr:`SkillCall.condition`):

* Walk: the pelvis moves exactly ``d`` along the heading and ends at the cruise speed
  ``d / 0.5 s``; one step per chunk, or two when starting from (near) standstill would
  overstretch the stance leg. Pelvis a little lower for longer steps.
* Turn: yaw follows an ease-in-out (minimum-jerk) curve to exactly ``a``; two small
  re-orienting steps (three above 60 degrees), the foot on the turning side first; the
  pelvis stays put (apart from momentum carried from a preceding walk).
* Side step / Step back: exact lateral / backward displacement, heading kept, two steps.
* Climb upstairs / Walk downstairs: the pelvis moves one stair run forward and one rise
  up/down; step-to gait (the rear foot onto the next tread, then the other foot beside it).
* Sit down: the pelvis moves back 0.32 m and down to ``h + SEATED_PELVIS_ABOVE_SURFACE_M``
  (the pelvis capsule then sinks 1 cm into a surface at height ``h``) with a 10 degree
  forward pelvis tilt that the spine takes back; hips and knees flex by IK with the feet
  planted, the torso leans forward and comes back upright. On seats too high for the feet
  they hang; seats near standing height are climbed on tiptoe first. Sitting while seated
  holds the pose.
* Any other motion skill while seated first stands up: that whole chunk is the stand-up
  (pelvis forward 0.32 m and up to standing height); the requested skill is not executed.
* Stop/Stand produces no chunk: :meth:`generate` raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from humanclaw_gym.backends.protocols import MotionCapabilities
from humanclaw_gym.body.skeleton import (
    FRAME_DIM,
    JOINT_INDEX,
    NUM_JOINTS,
    STANDING_PELVIS_HEIGHT_M,
    forward_kinematics,
    heading_yaw,
    link_shapes,
)
from humanclaw_gym.motion import _arms, _legs
from humanclaw_gym.motion.canonical import (
    CanonicalFrame,
    canonicalize,
    decanonicalize,
    sole_heights,
)
from humanclaw_gym.rotations import (
    matrix_from_rotvec,
    rot_x,
    rot_y,
    rotvec_from_matrix,
    wrap_angle,
    yaw_of_matrix,
)
from humanclaw_gym.scenes.spec import STAIR_RISE_M, STAIR_RUN_M
from humanclaw_gym.skills import Skill, SkillCall

__all__ = [
    "SEATED_MAX_HEEL_RAISE_RAD",
    "SEATED_PELVIS_ABOVE_SURFACE_M",
    "SEATED_PELVIS_TILT_RAD",
    "SEAT_EDGE_AHEAD_M",
    "SEAT_SINK_M",
    "SIT_BACK_DISTANCE_M",
    "SIT_BACK_MIN_M",
    "SIT_START_TO_EDGE_M",
    "THIGH_SEAT_CLEARANCE_M",
    "ArmMotion",
    "Plan",
    "Planner",
    "ProceduralMotionGenerator",
    "StartState",
    "Step",
    "generate_detached",
    "register_planner",
    "seated_pelvis_height",
    "sit_back_distance",
    "unregister_planner",
]

_J = JOINT_INDEX

# ---- seat geometry --------------------------------------------------------------------
#: How far the seated pelvis target sinks into the seat (m). The legs are solved for that
#: height, so when the seat stops the pelvis the planted feet stand at most this far above
#: the floor, and the pelvis (not the feet) carries the body onto the seat.
SEAT_SINK_M = 0.01
#: Forward (anterior) tilt of the seated pelvis; the spine takes it back so the torso is
#: upright. It brings the hips to about 80 degrees of flexion on a 0.45 m seat.
SEATED_PELVIS_TILT_RAD: float = float(np.radians(10.0))


def _pelvis_bottom_below_joint_m(tilt_rad: float) -> float:
    shape = link_shapes()[0]
    if shape.kind != "capsule":
        raise ValueError("the pelvis link is expected to be a capsule")
    # The pelvis capsule lies along the body's X axis, so its lowest point is one radius
    # below its centre for any pitch about X; the centre itself moves with the pitch.
    _, cy, cz = shape.offset_m
    centre_y = cy * np.cos(tilt_rad) - cz * np.sin(tilt_rad)
    return float(shape.radius - centre_y)


#: Seated pelvis joint height above the seat surface (m): the lowest point of the (tilted)
#: pelvis capsule below the joint, minus a 3.5 cm sink so that the pelvis really presses on the seat.
SEATED_PELVIS_ABOVE_SURFACE_M: float = (
    _pelvis_bottom_below_joint_m(SEATED_PELVIS_TILT_RAD) - SEAT_SINK_M
)

#: How far the pelvis moves backwards (away from the facing direction) while sitting down,
#: at most (low seats) and at least (seats above knee height, where the body sits nearer
#: the seat's front edge so that its thighs clear it with the feet flat on the floor).
SIT_BACK_DISTANCE_M = 0.32
SIT_BACK_MIN_M = 0.18
#: A body about to sit stands this far in front of the seat's front edge: the episodes'
#: approach offset (``scenes.navgrid.APPROACH_OFFSET_M``). The edge then lies
#: ``back - SIT_START_TO_EDGE_M`` in front of the seated pelvis joint.
SIT_START_TO_EDGE_M = 0.17


def seated_pelvis_height(surface_height_m: float, floor_y: float = 0.0) -> float:
    """World pelvis joint height of a body seated on a surface ``surface_height_m`` above the
    floor at ``floor_y``."""
    return float(floor_y + surface_height_m + SEATED_PELVIS_ABOVE_SURFACE_M)


# ---- tuning constants -----------------------------------------------------------------
_MOMENTUM_DECAY_S = 0.25  # unrequested velocity decays to zero within this time
_BLEND_S = 8.0 / 30.0  # a mismatch with the last history frame is blended out over this time
_Y_ACCEL_MPS2 = 4.5  # curvature limit of the pelvis-lowering envelope
_WALK_MAX_DROP_M = 0.04  # pelvis lowering at the fast walk (scaled by step length squared)
# One step per walk chunk while the stance foot ends at most max(0.6 d + 0.05, 0.25) m behind
# the pelvis (always true in steady walking); otherwise (e.g. from standstill) two steps.
_WALK_SINGLE_STEP_SLACK_M = 0.05
_WALK_SINGLE_STEP_MIN_M = 0.25
_PLANTED_TOL_M = 0.03  # a foot whose sole is within this of the ground counts as planted
_SEATED_HIP_FLEX_RAD = np.radians(35.0)
_TURN_TWO_STEP_MAX_RAD = np.radians(60.0)  # larger turns take three steps
_STAGGERED_M = 0.2  # feet farther apart than this along the heading count as staggered
_TIPTOE_BEHIND_RAD = np.radians(30.0)
#: Largest heel raise of a seated body's planted feet (rad).
SEATED_MAX_HEEL_RAISE_RAD = float(_TIPTOE_BEHIND_RAD)
_TIPTOE_AHEAD_RAD = np.radians(8.0)
_HEEL_RISE_S = 5.0 / 30.0  # after a landing, the allowed heel raise grows over this time
_PRE_SWING_S = 3.0 / 30.0  # the heel rises to the toe-off angle over this time before a lift
_HANG_DROP_M = 0.62  # seated feet stay on the floor while the ankle is this close below the hip
_HANG_BELOW_HIP_M = 0.42  # hanging feet: ankle below and ahead of the hip (knee bent, shin
_HANG_FORWARD_M = 0.30  # about vertical)
_HANG_PITCH_RAD = np.radians(15.0)
#: Seats above knee height: the thighs of a seated body with planted feet slope down to the
#: knees, so at the seat's front edge they would sink into the seat deeper than the pelvis
#: and carry the body there (the pelvis then hovers and never touches the seat). After the
#: full SIT_BACK_DISTANCE_M the edge is this far ahead of the seated pelvis joint (m).
SEAT_EDGE_AHEAD_M = SIT_BACK_DISTANCE_M - SIT_START_TO_EDGE_M
#: At the edge the thigh must stay this much shallower in the seat than the pelvis (m). The
#: body sits back less (down to SIT_BACK_MIN_M, the edge nearer the hips) as far as that
#: needs with its feet flat; only beyond that do the feet roll onto their toes, up to
#: SEATED_MAX_HEEL_RAISE_RAD, and hang when even that is not enough.
THIGH_SEAT_CLEARANCE_M = 0.0

_ARM_DOWN_DEG = (80.0, 84.0)  # style range: shoulder lowered from the T-pose
_ELBOW_DEG = (8.0, 16.0)  # style range: relaxed elbow flexion
_ARM_SWING_RAD_PER_M = np.radians(40.0) / 0.6  # shoulder flexion per metre of foot offset
_ARM_SWING_MAX_RAD = np.radians(32.0)
#: Seated: the torso slouches forward a little so that the hands reach the thighs.
_SEATED_SLOUCH_RAD = np.radians(8.0)
# hip flexion below which the arms keep their standing carriage
_ARMS_STANDING_FLEX_RAD = np.radians(10.0)


# Backward-difference weights for the derivative at the last of k samples (oldest first).
_BACKWARD_DIFF = {
    2: np.array([-1.0, 1.0]),
    3: np.array([0.5, -2.0, 1.5]),
    4: np.array([-2.0, 9.0, -18.0, 11.0]) / 6.0,
}


def _mj(u: np.ndarray | float) -> np.ndarray | float:
    """Minimum-jerk ease-in-out 0 -> 1 on ``[0, 1]`` (clipped outside). A single float
    gives a float, computed with the operations numpy runs on a scalar (bit-identical)."""
    if isinstance(u, float):
        u = _legs.clip_float(float(u), 0.0, 1.0)
        return u**3 * (10.0 - 15.0 * u + 6.0 * u * u)
    u = np.clip(np.asarray(u, dtype=np.float64), 0.0, 1.0)
    return u**3 * (10.0 - 15.0 * u + 6.0 * u * u)


def _mj_window(s: np.ndarray | float, a: float, b: float) -> np.ndarray | float:
    if isinstance(s, float):
        return _mj((float(s) - a) / (b - a))
    return _mj((np.asarray(s) - a) / (b - a))


def _bump(u: np.ndarray | float) -> np.ndarray | float:
    """Smooth bump on ``[0, 1]`` peaking at 1 for ``u = 0.5``, zero (with zero slope) outside.
    A single float gives a float (bit-identical to numpy on a scalar)."""
    if isinstance(u, float):
        u = float(u)
        if u > 0.0 and u < 1.0:
            return 64.0 * u**3 * (1.0 - u) ** 3
        return 0.0
    u = np.asarray(u, dtype=np.float64)
    inside = (u > 0.0) & (u < 1.0)
    uc = np.clip(u, 0.0, 1.0)
    return np.where(inside, 64.0 * uc**3 * (1.0 - uc) ** 3, 0.0)


def _bump_window(s: np.ndarray, a: float, b: float) -> np.ndarray:
    return _bump((np.asarray(s) - a) / (b - a))


def _hermite5(s: np.ndarray, p1: float, v0: float, v1: float) -> np.ndarray:
    """Quintic Hermite from 0 to ``p1`` over ``s`` in [0, 1] with end slopes ``v0``/``v1``
    (per unit ``s``) and zero end accelerations."""
    s = np.asarray(s, dtype=np.float64)
    h1 = s - 6.0 * s**3 + 8.0 * s**4 - 3.0 * s**5
    h3 = 10.0 * s**3 - 15.0 * s**4 + 6.0 * s**5
    h4 = -4.0 * s**3 + 7.0 * s**4 - 3.0 * s**5
    return v0 * h1 + p1 * h3 + v1 * h4


def _decay(s: np.ndarray, v0: float, tau: float) -> tuple[np.ndarray, float]:
    """Displacement of a velocity ``v0`` (per unit ``s``) that fades smoothly to zero within
    ``tau``; returns the curve and its total drift ``v0 * tau / 2``."""
    u = np.clip(np.asarray(s, dtype=np.float64) / tau, 0.0, 1.0)
    return v0 * tau * (u - u**3 + 0.5 * u**4), 0.5 * v0 * tau


def _largest_back(clearance) -> float:
    """Largest sit-back distance in ``[SIT_BACK_MIN_M, SIT_BACK_DISTANCE_M]`` whose thigh
    ``clearance(back)`` (which shrinks as the body sits deeper) is >= 0: sampled every
    centimetre, the crossing interpolated linearly between the samples around it (so the
    result moves continuously with the seat height); ``SIT_BACK_MIN_M`` if none is."""
    backs = np.linspace(SIT_BACK_DISTANCE_M, SIT_BACK_MIN_M, 15)
    prev_b, prev_v = None, None
    for b in backs:
        value = float(clearance(float(b)))
        if value >= 0.0:
            if prev_b is None:
                return float(b)
            return float(b + (prev_b - b) * value / (value - prev_v))
        prev_b, prev_v = float(b), value
    return SIT_BACK_MIN_M


# --------------------------------------------------------------------------------------
# Plan records
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArmMotion:
    """One arm over a chunk, for :attr:`Plan.arms` (the same convention for either arm).

    Each value is a number or ``frames_per_chunk + 1`` values (frame 0 = the last history
    frame), in radians:

    Attributes:
        lowered_rad: the upper arm's lowering from the T-pose in the body's frontal plane
            (0: straight out to the side, about 1.3 hanging by the thigh, negative: raised
            above the shoulder).
        forward_rad: the shoulder's forward swing about the body's left axis (after the
            lowering; with the arm straight out to the side it rolls the arm about its own
            axis, so a bent forearm points up at ``pi / 2``).
        elbow_rad: the elbow's flexion, the forearm swinging forward from the upper arm.
        weight: how much of this pose replaces the generator's own carriage, 0..1 (a
            number or per frame).

    Any jump from the last history frame is blended out over the chunk's first 8 frames
    (as for every channel), so a plan need not start at the current pose.
    """

    lowered_rad: Any
    forward_rad: Any
    elbow_rad: Any
    weight: Any = 1.0

    def _apply(
        self, down: np.ndarray, flex: np.ndarray, bend: np.ndarray, side: int, n1: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The generator's ``(down, flex, bend)`` of arm ``side`` blended with this pose."""
        sign = 1.0 if side == 0 else -1.0
        values = []
        for name in ("lowered_rad", "forward_rad", "elbow_rad", "weight"):
            arr = np.broadcast_to(np.asarray(getattr(self, name), dtype=np.float64), (n1,))
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"ArmMotion.{name} must be finite, got {getattr(self, name)!r}")
            values.append(arr)
        lowered, forward, elbow, w = values
        if np.any((w < 0.0) | (w > 1.0)):
            raise ValueError(f"ArmMotion.weight must be in [0, 1], got {self.weight!r}")
        return (
            (1.0 - w) * down + w * (-sign * lowered),
            (1.0 - w) * flex + w * forward,
            (1.0 - w) * bend + w * elbow,
        )


#: Joints a plan's ``joint_offsets`` may not turn: the pelvis follows the path, the legs
#: are solved from the steps.
_LEG_JOINTS = frozenset(
    n for n in JOINT_INDEX if n == "pelvis" or n.split("_")[-1] in ("hip", "knee", "ankle", "foot")
)


@dataclass
class _Step:
    side: int  # 0 left, 1 right
    t_lift: int
    t_land: int
    target: np.ndarray  # flat ankle position at landing (canonical)
    target_yaw: float
    kind: str = "walk"  # walk | shuffle | up | down | hang | land
    clearance_m: float = 0.04
    toe_off_rad: float = 0.0
    strike_rad: float = 0.0
    target_pitch_rad: float = 0.0
    ground_from: float = 0.0
    ground_to: float = 0.0


@dataclass
class _Plan:
    """What a planner returns for one chunk (public as :data:`Plan`); every array has
    ``frames_per_chunk + 1`` values, frame 0 being the last history frame, in the canonical
    frame (pelvis above the origin, floor at ``y = 0``, facing ``+Z``, ``+X`` the left).

    Whole-body channels: the pelvis path (``x``, ``z`` metres, ``yaw`` rad, the nominal
    pelvis height ``y_nominal`` m, fitted to the legs afterwards, ``pitch`` rad forward),
    the spine's forward ``spine_lean`` (rad, the spine takes it over three joints), the legs
    (``steps``: which foot lifts and lands where; planted feet stay put), the arms
    (``arms``: per side an :class:`ArmMotion` replacing the generator's own carriage, or
    None for that carriage: swing with the steps, hands to the thighs when seated) and any
    other upper-body joint (``joint_offsets``: joint name -> rotation vector(s), rad, an
    extra rotation after the joint's own; not the pelvis and legs, which the path and the
    steps pose). Start from :meth:`ProceduralMotionGenerator.base_plan` and change parts.
    """

    x: np.ndarray
    z: np.ndarray
    yaw: np.ndarray
    y_nominal: np.ndarray
    pitch: np.ndarray
    spine_lean: np.ndarray
    steps: list[_Step] = field(default_factory=list)
    tiptoe_max: float | None = None  # override of the per-foot heel-raise limit
    # per foot: (final heel raise in rad, window start, window end as chunk fractions) of a
    # planted foot that rolls onto its toes while sitting (None: no such raise)
    heel_raise: tuple[tuple[float, float, float] | None, ...] = (None, None)
    ground_change_m: float = 0.0
    hold: bool = False
    arms: tuple[ArmMotion | None, ArmMotion | None] = (None, None)
    joint_offsets: dict[str, Any] = field(default_factory=dict)


@dataclass
class _FootState:
    ankle: np.ndarray  # actual ankle position
    flat: np.ndarray  # flat ankle position
    yaw: float
    pitch: float
    toe: float
    planted: bool


@dataclass
class _StartState:
    pos: np.ndarray  # pelvis position (canonical)
    vel: np.ndarray  # pelvis velocity (m/s)
    yaw_rate: float  # rad/s
    local_rot: np.ndarray  # (24, 3, 3) local rotations (root first)
    feet: tuple[_FootState, _FootState]
    seated: bool


@dataclass(frozen=True)
class _Style:
    arm_down_rad: float
    elbow_rad: float
    arm_swing_gain: float
    step_height_gain: float


# --------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------
class ProceduralMotionGenerator:
    """Procedural whole-body motion for the eight HumanClaw skills (see the module docstring).

    Args:
        fps: frame rate (Hz) of the generated frames.
        frames_per_chunk: frames per skill call (15 = 0.5 s at 30 Hz).
        history_frames: frames kept as the autoregressive history (>= 2).

    Deterministic: the same ``reset`` arguments (including ``seed``) and the same calls give
    identical arrays. ``seed`` only varies a small style vector (arm carriage, arm swing,
    step height); distances, angles and heights never depend on it.
    """

    capabilities: MotionCapabilities  # set below the class, from the planner table (_PLANNERS)
    #: Style range of the shoulder's lowering from the T-pose (degrees); a subclass may
    #: keep another carriage (the flow model's training data do, see motion.flow.dataset).
    arm_down_range_deg: tuple[float, float] = _ARM_DOWN_DEG

    def __init__(self, fps: float = 30, frames_per_chunk: int = 15, history_frames: int = 5):
        if (
            isinstance(fps, bool)
            or not isinstance(fps, (int, float))
            or not (np.isfinite(fps) and fps > 0)
        ):
            raise ValueError(f"fps={fps!r} is invalid: allowed a finite number > 0")
        for name, value, low in (
            ("frames_per_chunk", frames_per_chunk, 4),
            ("history_frames", history_frames, 2),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name}={value!r} is invalid: allowed an int >= {low}")
        self.fps = float(fps)
        self.frames_per_chunk = int(frames_per_chunk)
        self.history_frames = int(history_frames)
        self._history: np.ndarray | None = None
        self._ground_y = 0.0
        self._style = _Style(np.radians(74.0), np.radians(12.0), 1.0, 1.0)
        self._legs = _legs.leg_geometry()
        # a chunk computed elsewhere (motion.pool) for the next call: (call, state version,
        # pending result); used by generate() only while the state is unchanged
        self._staged: tuple[SkillCall, int, Any] | None = None
        self._state_version = 0

    # ---- protocol -------------------------------------------------------------------
    def reset(self, start_position: np.ndarray, start_yaw_rad: float, seed: int = 0) -> np.ndarray:
        """Start an episode standing at ``start_position`` (pelvis x/z, floor y), facing
        ``start_yaw_rad``.

        Returns:
            ``float64 (history_frames, 75)``: identical standing frames (a copy).
        """
        pos = np.asarray(start_position, dtype=np.float64)
        if pos.shape != (3,) or not np.all(np.isfinite(pos)):
            raise ValueError(
                f"start_position={start_position!r} is invalid: allowed 3 finite numbers "
                "(pelvis x, floor y, pelvis z) in metres"
            )
        if isinstance(start_yaw_rad, bool) or not np.isfinite(start_yaw_rad):
            raise ValueError(f"start_yaw_rad={start_yaw_rad!r} is invalid: allowed a finite angle")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed={seed!r} is invalid: allowed an int >= 0")
        rng = np.random.default_rng(int(seed))
        self._style = _Style(
            arm_down_rad=np.radians(rng.uniform(*self.arm_down_range_deg)),
            elbow_rad=np.radians(rng.uniform(*_ELBOW_DEG)),
            arm_swing_gain=float(rng.uniform(0.85, 1.15)),
            step_height_gain=float(rng.uniform(0.9, 1.1)),
        )
        self._ground_y = float(pos[1])
        self._staged = None
        self._state_version += 1
        frame_c = self._standing_frame()
        ref = CanonicalFrame((pos[0], pos[1], pos[2]), float(start_yaw_rad))
        frame = decanonicalize(frame_c, ref)
        self._history = np.repeat(frame[None], self.history_frames, axis=0)
        return self._history.copy()

    def generate(self, call: SkillCall | Any) -> np.ndarray:
        """Generate the next chunk for a motion skill.

        Args:
            call: a :class:`SkillCall` (or any form :meth:`SkillCall.coerce` accepts).

        Returns:
            ``float64 (frames_per_chunk, 75)`` world frames continuing the history.

        Raises:
            RuntimeError: before :meth:`reset`.
            ValueError: for Stop/Stand (it produces no motion; the environment ends the
                episode itself).
        """
        if self._history is None:
            raise RuntimeError("ProceduralMotionGenerator.generate called before reset()")
        call = SkillCall.coerce(call)
        if call.skill.spec.terminal:
            moving = ", ".join(s.text_name for s in Skill if not s.spec.terminal)
            raise ValueError(
                f"SkillCall.skill={call.skill.text_name} produces no motion chunk: allowed the "
                f"motion skills {moving}"
            )
        staged, self._staged = self._staged, None
        if staged is not None and staged[1] == self._state_version and staged[0] == call:
            chunk, (self._history, self._ground_y) = staged[2].result()
            self._state_version += 1
            return chunk
        ref = CanonicalFrame(
            (self._history[-1, 0], self._ground_y, self._history[-1, 2]),
            float(heading_yaw(self._history[-1, 3:6])),
        )
        hist_c = canonicalize(self._history, ref)
        start = self._read_state(hist_c)
        plan = self._plan(call, start)
        if plan.hold:  # exactly the last frame, without a canonical round trip
            chunk = np.repeat(self._history[-1:], self.frames_per_chunk, axis=0)
        else:
            chunk = decanonicalize(self._pose_chunk(plan, start)[1:], ref)
        self._ground_y += plan.ground_change_m
        self._history = np.concatenate([self._history, chunk])[-self.history_frames :].copy()
        self._state_version += 1
        return chunk

    # ---- computing a chunk in another process (humanclaw_gym.motion.pool) -------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_staged"] = None  # a pending result stays with its owner
        return state

    def stage(self, call: SkillCall, result: Any) -> None:
        """Park the pending result of this generator's next chunk, computed from its current
        state by :func:`generate_detached` elsewhere (``result.result()`` returns it, e.g.
        a ``concurrent.futures.Future``). The next :meth:`generate` with an equal call, while
        the state is still the one staged from, waits for it and adopts it (the same chunk
        and state as computing it here); any other call or a reset discards it."""
        self._staged = (SkillCall.coerce(call), self._state_version, result)

    def history(self) -> np.ndarray:
        """Copy of the current ``(history_frames, 75)`` history."""
        if self._history is None:
            raise RuntimeError("ProceduralMotionGenerator.history called before reset()")
        return self._history.copy()

    @property
    def ground_y(self) -> float:
        """Current estimate of the support height under the feet (world y, m): the reset
        floor plus one stair rise per climbed step."""
        return self._ground_y

    # ---- state ----------------------------------------------------------------------
    def _read_state(self, hist_c: np.ndarray) -> _StartState:
        last = hist_c[-1]
        # Velocities at the last frame from a backward difference of the highest order the
        # history allows (third order with 4+ frames: exact for constant velocity and for
        # the smooth, zero-acceleration stops the skills end with).
        k = min(len(hist_c), 4)
        weights = _BACKWARD_DIFF[k]
        pos = hist_c[-k:, :3]
        yaw = np.unwrap(heading_yaw(hist_c[-k:, 3:6]))
        vel = (weights @ pos) * self.fps
        yaw_rate = float(weights @ yaw) * self.fps
        local = matrix_from_rotvec(np.concatenate([last[3:6], last[6:]]).reshape(NUM_JOINTS, 3))
        pos, rot = forward_kinematics(last)
        soles = sole_heights(last)
        feet = []
        for side in (0, 1):
            leg = self._legs[side]
            g_ankle = rot[_legs.ANKLE[side]]
            yaw = float(yaw_of_matrix(g_ankle))
            fwd = rot_y(-yaw) @ g_ankle[:, 2]
            pitch = float(np.arctan2(-fwd[1], fwd[2]))
            toe_local = local[_legs.TOE[side]]
            toe = float(np.arctan2(toe_local[2, 1], toe_local[1, 1]))
            flat = pos[_legs.TOE[side]] - rot_y(yaw) @ leg.toe
            planted = bool(soles[side] <= _PLANTED_TOL_M)
            feet.append(_FootState(pos[_legs.ANKLE[side]].copy(), flat, yaw, pitch, toe, planted))
        r_root = local[0]
        flex = []
        for side in (0, 1):
            thigh = r_root.T @ (pos[_legs.KNEE[side]] - pos[_legs.HIP[side]])
            flex.append(np.arctan2(thigh[2], -thigh[1]))
        seated = bool(np.mean(flex) > _SEATED_HIP_FLEX_RAD)
        return _StartState(last[:3].copy(), vel, yaw_rate, local, (feet[0], feet[1]), seated)

    # ---- planning -------------------------------------------------------------------
    def _s(self) -> np.ndarray:
        return np.arange(self.frames_per_chunk + 1) / self.frames_per_chunk

    def _chunk_s(self) -> float:
        return self.frames_per_chunk / self.fps

    def _frame_at(self, frac: float) -> int:
        return int(round(frac * self.frames_per_chunk))

    def _nominal_foot(
        self, side: int, px: float, pz: float, yaw: float, ground: float
    ) -> np.ndarray:
        leg = self._legs[side]
        rest = _legs.REST_JOINTS_M[_legs.ANKLE[side]]
        off = rot_y(yaw) @ np.array([rest[0], 0.0, rest[2]])
        return np.array([px + off[0], ground + leg.flat_height, pz + off[2]])

    def _plan(self, call: SkillCall, start: _StartState) -> _Plan:
        skill = call.skill
        cond = call.condition
        if start.seated:
            if skill is Skill.SIT:
                s = self._s()
                zeros = np.zeros_like(s)
                return _Plan(zeros, zeros, zeros, zeros, zeros, zeros, hold=True)
            return self._plan_stand_up(start)
        planner = _PLANNERS.get(skill.spec.motion_key or "")
        if planner is None:  # the env refuses such a call before it gets here
            self.capabilities.check_call(call)
        plan = planner(self, start, cond)
        if not isinstance(plan, _Plan):
            raise TypeError(
                f"the planner of motion_key {skill.spec.motion_key!r} returned "
                f"{type(plan).__name__}, not a Plan (start from generator.base_plan(start))"
            )
        return plan

    # ---- the planner interface (see register_planner) ---------------------------------
    def base_plan(self, start: _StartState) -> _Plan:
        """A plan that keeps the body standing where it is (the pelvis coasting on its
        momentum and settling at the standing height, feet planted, arms in their
        carriage): a user planner starts from it and changes the channels it moves."""
        return self._base_plan(start)

    def chunk_phase(self) -> np.ndarray:
        """``float64 (frames_per_chunk + 1,)``: each plan frame's place in the chunk, 0 (the
        last history frame) to 1 (its last frame)."""
        return self._s()

    def _momentum(self, start: _StartState) -> tuple[np.ndarray, float]:
        """Start velocity per chunk (canonical x, y, z) and yaw change per chunk."""
        t = self._chunk_s()
        return start.vel * t, start.yaw_rate * t

    def _base_plan(self, start: _StartState) -> _Plan:
        """A plan whose pelvis only coasts on the incoming momentum (fading within
        ``_MOMENTUM_DECAY_S``) and returns to the standing height; skills override parts."""
        s = self._s()
        v, w = self._momentum(start)
        tau = _MOMENTUM_DECAY_S / self._chunk_s()
        x, _ = _decay(s, v[0], tau)
        z, _ = _decay(s, v[2], tau)
        yaw, _ = _decay(s, w, tau)
        y = start.pos[1] + _hermite5(s, STANDING_PELVIS_HEIGHT_M - start.pos[1], v[1], 0.0)
        zeros = np.zeros_like(s)
        return _Plan(x, z, yaw, y, zeros.copy(), zeros.copy())

    def _feet_order(self, start: _StartState, forward: bool, tie_side: int) -> tuple[int, int]:
        """(first, second) foot to step: airborne first, then the rearmost (or foremost)."""
        f = start.feet
        if f[0].planted != f[1].planted:
            first = 0 if not f[0].planted else 1
            return first, 1 - first
        rel = [f[side].flat[2] - _legs.REST_JOINTS_M[_legs.ANKLE[side]][2] for side in (0, 1)]
        if abs(rel[0] - rel[1]) < 0.02:
            first = tie_side
        elif forward:
            first = 0 if rel[0] < rel[1] else 1
        else:
            first = 0 if rel[0] > rel[1] else 1
        return first, 1 - first

    def _plan_walk(self, start: _StartState, distance_m: float) -> _Plan:
        s = self._s()
        plan = self._base_plan(start)
        v, _ = self._momentum(start)
        plan.z = _hermite5(s, distance_m, v[2], distance_m)
        drop = _WALK_MAX_DROP_M * (distance_m / 0.6) ** 2
        target_y = STANDING_PELVIS_HEIGHT_M - drop
        plan.y_nominal = start.pos[1] + _hermite5(s, target_y - start.pos[1], v[1], 0.0)
        trailing, lead = self._feet_order(start, forward=True, tie_side=1)
        yaw_end = float(plan.yaw[-1])
        fwd = rot_y(yaw_end) @ np.array([0.0, 0.0, 1.0])
        x_end, z_end = plan.x[-1], plan.z[-1]
        lead_rel = start.feet[lead].flat[2] - _legs.REST_JOINTS_M[_legs.ANKLE[lead]][2]
        half = 0.4 * distance_m
        reach = max(0.6 * distance_m + _WALK_SINGLE_STEP_SLACK_M, _WALK_SINGLE_STEP_MIN_M)
        if z_end - lead_rel <= reach and start.feet[lead].planted:
            target = self._nominal_foot(trailing, x_end, z_end, yaw_end, 0.0) + half * fwd
            plan.steps.append(
                self._walk_step(start, trailing, 0, self._frame_at(0.8), target, yaw_end)
            )
        else:
            t_mid = self._frame_at(0.47)
            zm = plan.z[t_mid] + 0.5 * (z_end - plan.z[t_mid])
            target1 = self._nominal_foot(trailing, plan.x[t_mid], zm, yaw_end, 0.0)
            target2 = self._nominal_foot(lead, x_end, z_end, yaw_end, 0.0) + half * fwd
            plan.steps.append(self._walk_step(start, trailing, 0, t_mid, target1, yaw_end))
            plan.steps.append(
                self._walk_step(start, lead, t_mid, self._frame_at(0.93), target2, yaw_end)
            )
        return plan

    def _walk_step(
        self, start: _StartState, side: int, t0: int, t1: int, target: np.ndarray, yaw: float
    ) -> _Step:
        stride = float(np.hypot(*(target - start.feet[side].flat)[[0, 2]]))
        k = float(np.clip(stride / 0.9, 0.0, 1.0))
        return _Step(
            side,
            t0,
            t1,
            target,
            yaw,
            kind="walk",
            clearance_m=(0.03 + 0.05 * k) * self._style.step_height_gain,
            toe_off_rad=np.radians(22.0) * k,
            strike_rad=np.radians(10.0) * k,
        )

    def _square_steps(
        self,
        plan: _Plan,
        start: _StartState,
        schedule: tuple[tuple[int, float, float], ...],
        kind: str,
        clearance_m: float,
        toe_off_rad: float,
    ) -> None:
        """Steps ``(side, lift, land)`` (chunk fractions) that end in the nominal stance at the
        plan's end pose. A foot's intermediate landings take the pelvis yaw at the middle of
        its next stance, so no foot is ever turned far from the pelvis."""
        yaw_end = float(plan.yaw[-1])
        last = {side: i for i, (side, _, _) in enumerate(schedule)}
        for i, (side, a, b) in enumerate(schedule):
            if last[side] == i:
                yaw = yaw_end
            else:
                nxt = next(j for j in range(i + 1, len(schedule)) if schedule[j][0] == side)
                mid = 0.5 * (b + schedule[nxt][1])
                yaw = float(plan.yaw[self._frame_at(mid)])
            target = self._nominal_foot(side, plan.x[-1], plan.z[-1], yaw, 0.0)
            foot = start.feet[side]
            moved = np.linalg.norm(target - foot.flat)
            turned = abs(float(wrap_angle(yaw - foot.yaw)))
            if (
                foot.planted
                and moved < 0.015
                and turned < np.radians(3.0)
                and abs(foot.pitch) < 0.02
                and all(s != side for s, _, _ in schedule[:i])
            ):
                continue
            plan.steps.append(
                _Step(
                    side,
                    self._frame_at(a),
                    self._frame_at(b),
                    target,
                    yaw,
                    kind=kind,
                    clearance_m=clearance_m * self._style.step_height_gain,
                    toe_off_rad=toe_off_rad,
                )
            )

    def _first_foot(self, start: _StartState, plan: _Plan, preferred: int) -> int:
        """The foot that steps first when re-squaring the stance: ``preferred`` when the feet
        stand roughly side by side, else the airborne one or the one farther from its final
        place (so the stance foot is never left far behind the pelvis)."""
        f = start.feet
        if f[0].planted != f[1].planted:
            return 0 if not f[0].planted else 1
        rel = [f[side].flat[2] - _legs.REST_JOINTS_M[_legs.ANKLE[side]][2] for side in (0, 1)]
        if abs(rel[0] - rel[1]) <= _STAGGERED_M:
            return preferred
        yaw_end = float(plan.yaw[-1])
        dist = [
            np.linalg.norm(
                self._nominal_foot(side, plan.x[-1], plan.z[-1], yaw_end, 0.0) - f[side].flat
            )
            for side in (0, 1)
        ]
        return int(np.argmax(dist))

    def _plan_turn(self, start: _StartState, angle_rad: float) -> _Plan:
        s = self._s()
        plan = self._base_plan(start)
        _, w = self._momentum(start)
        plan.yaw = _hermite5(s, angle_rad, w, 0.0)
        # the foot on the turning side leads (unless the feet are far apart after a walk)
        a = self._first_foot(start, plan, 0 if angle_rad > 0 else 1)
        b = 1 - a
        if abs(angle_rad) > _TURN_TWO_STEP_MAX_RAD:
            schedule = ((a, 0.0, 1 / 3), (b, 1 / 3, 2 / 3), (a, 2 / 3, 1.0))
        else:
            schedule = ((a, 0.0, 0.47), (b, 0.47, 0.93))
        self._square_steps(plan, start, schedule, "shuffle", 0.035, np.radians(6.0))
        return plan

    def _plan_shift(self, start: _StartState, lateral_m: float, forward_m: float) -> _Plan:
        """Side step (``lateral_m``, left positive) or step back (``forward_m < 0``)."""
        s = self._s()
        plan = self._base_plan(start)
        v, _ = self._momentum(start)
        if lateral_m != 0.0:
            plan.x = _hermite5(s, lateral_m, v[0], 0.0)
            first = self._first_foot(start, plan, 0 if lateral_m > 0 else 1)
            amount = abs(lateral_m) / 0.5
        else:
            plan.z = _hermite5(s, forward_m, v[2], 0.0)
            first = self._first_foot(start, plan, self._feet_order(start, False, 1)[0])
            amount = abs(forward_m) / 0.6
        order = (first, 1 - first)
        drop = 0.015 * amount
        plan.y_nominal = start.pos[1] + _hermite5(
            s, STANDING_PELVIS_HEIGHT_M - drop - start.pos[1], v[1], 0.0
        )
        schedule = ((order[0], 0.0, 0.5), (order[1], 0.5, 1.0))
        self._square_steps(plan, start, schedule, "shuffle", 0.04, np.radians(8.0))
        return plan

    def _plan_stairs(self, start: _StartState, direction: int) -> _Plan:
        s = self._s()
        plan = self._base_plan(start)
        v, _ = self._momentum(start)
        rise = STAIR_RISE_M * direction
        plan.z = _hermite5(s, STAIR_RUN_M, v[2], STAIR_RUN_M)
        y0 = start.pos[1]
        tau = _MOMENTUM_DECAY_S / self._chunk_s()
        y_decay, y_drift = _decay(s, v[1], tau)
        target = STANDING_PELVIS_HEIGHT_M + rise
        window = (0.2, 1.0) if direction > 0 else (0.0, 0.6)
        plan.y_nominal = y0 + y_decay + (target - y0 - y_drift) * _mj_window(s, *window)
        lead, trailing = self._feet_order(start, forward=True, tie_side=1)  # rear foot first
        base = max(
            start.feet[side].flat[2] - _legs.REST_JOINTS_M[_legs.ANKLE[side]][2] for side in (0, 1)
        )
        base = max(base, 0.0)
        yaw_end = float(plan.yaw[-1])
        kind = "up" if direction > 0 else "down"
        for side, (a, b) in zip((lead, trailing), ((0.0, 0.53), (0.53, 1.0)), strict=True):
            foot = self._nominal_foot(side, plan.x[-1], 0.0, yaw_end, rise)
            foot[2] += base + STAIR_RUN_M
            plan.steps.append(
                _Step(
                    side,
                    self._frame_at(a),
                    self._frame_at(b),
                    foot,
                    yaw_end,
                    kind=kind,
                    clearance_m=(0.05 if direction > 0 else 0.035) * self._style.step_height_gain,
                    toe_off_rad=np.radians(20.0),
                    ground_from=0.0,
                    ground_to=rise,
                )
            )
        plan.ground_change_m = rise
        return plan

    def _lean_amplitude(self, pelvis_drop_m: float) -> float:
        depth = float(np.clip(pelvis_drop_m / 0.8, 0.0, 1.0))
        return np.radians(12.0 + 22.0 * depth)

    def _plan_sit(self, start: _StartState, height_m: float) -> _Plan:
        s = self._s()
        plan = self._base_plan(start)
        v, _ = self._momentum(start)
        tau = _MOMENTUM_DECAY_S / self._chunk_s()
        y0 = start.pos[1]
        y_seat = height_m + SEATED_PELVIS_ABOVE_SURFACE_M
        z_decay, z_drift = _decay(s, v[2], tau)
        y_decay, y_drift = _decay(s, v[1], tau)
        lean = self._lean_amplitude(y0 - y_seat)
        tilt = SEATED_PELVIS_TILT_RAD * _mj(s)
        plan.pitch = lean * _bump_window(s, 0.0, 0.9) + tilt
        plan.spine_lean = 0.35 * lean * _bump_window(s, 0.0, 0.9) - tilt
        # Feet: stay planted, or (both) hang when the seat is too high for them to reach the
        # floor comfortably. Planted feet stay flat: the body sits back less on a high seat
        # (its thighs then cross the seat's edge nearer the hips); only where that is not
        # enough do they roll onto their toes, and where even that is not, they hang.
        yaw_end, x_end = float(plan.yaw[-1]), float(plan.x[-1])
        back, raises, hang = self._sit_back(start, height_m, x_end, yaw_end, float(tilt[-1]))
        if raises is not None:
            plan.heel_raise = tuple((float(r), 0.05, 1.0) if r > 0.0 else None for r in raises)
        high = y_seat > y0 - 0.03
        if high:
            y_peak = y_seat + 0.015
            plan.z = z_decay + (-back - z_drift) * _mj_window(s, 0.2, 0.9)
            plan.y_nominal = (
                y0
                + y_decay
                + (y_peak - y0 - y_drift) * _mj_window(s, 0.0, 0.5)
                + (y_seat - y_peak) * _mj_window(s, 0.6, 1.0)
            )
            plan.tiptoe_max = _TIPTOE_BEHIND_RAD
        else:
            plan.z = z_decay + (-back - z_drift) * _mj_window(s, 0.0, 0.85)
            plan.y_nominal = y0 + y_decay + (y_seat - y0 - y_drift) * _mj_window(s, 0.05, 1.0)
        for side in (0, 1):
            foot = start.feet[side]
            if hang or not foot.planted:
                hip = np.array([plan.x[-1], y_seat, plan.z[-1]]) + rot_y(yaw_end) @ (
                    self._legs[side].hip_offset
                )
                target = hip + rot_y(yaw_end) @ np.array([0.02 * (1 - 2 * side), 0.0, 0.0])
                target[1] = max(hip[1] - _HANG_BELOW_HIP_M, foot.flat[1] + 0.02)
                target += rot_y(yaw_end) @ np.array([0.0, 0.0, _HANG_FORWARD_M])
                plan.steps.append(
                    _Step(
                        side,
                        self._frame_at(0.5),
                        self.frames_per_chunk,
                        target,
                        yaw_end,
                        kind="hang",
                        clearance_m=0.0,
                        target_pitch_rad=_HANG_PITCH_RAD,
                    )
                )
        return plan

    def _sit_back(
        self, start: _StartState, height_m: float, x_end: float, yaw_end: float, tilt_end: float
    ) -> tuple[float, tuple[float, float] | None, bool]:
        """How far a Sit down moves the pelvis back, the final heel raise (rad) of each
        planted foot (None: not both feet planted, or they hang) and whether both feet hang
        (see ``_plan_sit``)."""
        y_seat = height_m + SEATED_PELVIS_ABOVE_SURFACE_M
        hip_y = [y_seat + (rot_y(yaw_end) @ leg.hip_offset)[1] for leg in self._legs]
        drop = np.mean([hip_y[side] - start.feet[side].flat[1] for side in (0, 1)])
        if drop > _HANG_DROP_M:
            return SIT_BACK_DISTANCE_M, None, True
        if not all(f.planted for f in start.feet):
            return SIT_BACK_DISTANCE_M, None, False
        bottom = height_m - SEAT_SINK_M  # the seated pelvis's lowest point

        def clearance(b: float, theta: float, side: int) -> float:
            pose = (np.array([x_end, y_seat, -b]), yaw_end, tilt_end)
            edge = b - SIT_START_TO_EDGE_M
            return self._thigh_clearance(start.feet[side], side, pose, bottom, edge, theta)

        back = _largest_back(lambda b: min(clearance(b, 0.0, 0), clearance(b, 0.0, 1)))
        raises = [
            _legs.smallest_raise(
                lambda th, side=side: clearance(back, th, side), SEATED_MAX_HEEL_RAISE_RAD
            )
            for side in (0, 1)
        ]
        if raises[0] is None or raises[1] is None:
            # even on tiptoe the thighs would land on the seat edge first: the feet hang
            return SIT_BACK_DISTANCE_M, None, True
        return back, (float(raises[0]), float(raises[1])), False

    def _thigh_clearance(
        self,
        foot: _FootState,
        side: int,
        end_pose: tuple[np.ndarray, float, float],
        pelvis_bottom_y: float,
        edge_ahead_m: float,
        theta: float,
    ) -> float:
        """How far the underside of the seated thigh, ``edge_ahead_m`` in front of the pelvis
        joint (the seat's front edge), stays above the pelvis's lowest point
        ``pelvis_bottom_y`` plus ``THIGH_SEAT_CLEARANCE_M`` (m; negative: it would land on
        the edge first), for a planted foot raised onto its toes by ``theta`` (rad)."""
        pelvis, yaw, pitch = end_pose
        leg = self._legs[side]
        root = rot_y(yaw) @ rot_x(pitch)
        hip = pelvis + root @ leg.hip_offset
        hinge = rot_y(yaw + 0.5 * float(wrap_angle(foot.yaw - yaw))) @ np.array([1.0, 0, 0])
        ankle = _legs.tiptoe_ankle(leg, foot.flat, foot.yaw, np.array([theta]))[0]
        foot_rot = rot_y(foot.yaw) @ rot_x(theta)
        r_hip, _, _ = _legs.solve_leg(leg, hip, root, ankle, foot_rot, hinge)
        knee = hip + root @ r_hip @ leg.thigh
        bottom = _legs.thigh_bottom_y(hip, knee, pelvis, yaw, edge_ahead_m)
        return bottom - (pelvis_bottom_y + THIGH_SEAT_CLEARANCE_M)

    def _plan_stand_up(self, start: _StartState) -> _Plan:
        s = self._s()
        plan = self._base_plan(start)
        v, _ = self._momentum(start)
        tau = _MOMENTUM_DECAY_S / self._chunk_s()
        y0 = start.pos[1]
        z_decay, z_drift = _decay(s, v[2], tau)
        y_decay, y_drift = _decay(s, v[1], tau)
        hanging = [not f.planted for f in start.feet]
        window = (0.2, 0.9) if any(hanging) else (0.0, 0.75)
        # rise over the feet: forward by as much as the body sat back (hanging feet land
        # where a standing body's feet would be after the full sit-back distance)
        forward = SIT_BACK_DISTANCE_M
        if not any(hanging):
            ahead = [
                (rot_y(-float(yaw_of_matrix(start.local_rot[0]))) @ (f.flat - start.pos))[2]
                - _legs.REST_JOINTS_M[_legs.ANKLE[side]][2]
                for side, f in enumerate(start.feet)
            ]
            forward = float(np.clip(np.mean(ahead), 0.0, SIT_BACK_DISTANCE_M))
        plan.z = z_decay + (forward - z_drift) * _mj_window(s, *window)
        plan.y_nominal = (
            y0 + y_decay + (STANDING_PELVIS_HEIGHT_M - y0 - y_drift) * _mj_window(s, 0.05, 1.0)
        )
        lean = self._lean_amplitude(STANDING_PELVIS_HEIGHT_M - y0)
        fwd = start.local_rot[0][:, 2]
        tilt = float(np.arcsin(np.clip(-fwd[1], -1.0, 1.0))) * (1.0 - _mj(s))
        plan.pitch = lean * _bump_window(s, 0.0, 0.9) + tilt
        plan.spine_lean = 0.35 * lean * _bump_window(s, 0.0, 0.9) - tilt
        yaw_end = float(plan.yaw[-1])
        for side in (0, 1):
            if hanging[side]:
                target = self._nominal_foot(side, plan.x[-1], plan.z[-1], yaw_end, 0.0)
                plan.steps.append(_Step(side, 0, self._frame_at(0.6), target, yaw_end, kind="land"))
        plan.tiptoe_max = _TIPTOE_BEHIND_RAD if any(hanging) else None
        return plan

    # ---- posing ---------------------------------------------------------------------
    def _root_rotations(self, plan: _Plan, start: _StartState) -> np.ndarray:
        n1 = self.frames_per_chunk + 1
        gen = rot_y(plan.yaw) @ rot_x(plan.pitch)
        # residual of the history's root orientation w.r.t. the plan's first frame, in the
        # heading frame, blended out over the first frames
        resid = rotvec_from_matrix(start.local_rot[0] @ gen[0].T)
        w = 1.0 - _mj(np.arange(n1) / (_BLEND_S * self.fps))
        corr = matrix_from_rotvec(w[:, None] * resid[None])
        return rot_y(plan.yaw) @ corr @ rot_x(plan.pitch)

    def _planted_schedule(self, plan: _Plan, start: _StartState) -> list[list[tuple]]:
        """Per frame and foot: ``("planted", flat_ankle, yaw, landing_frame_or_None)``,
        ``("swing", step)`` or ``("hold", step_or_None)`` (a foot held in the air)."""
        n1 = self.frames_per_chunk + 1
        sched: list[list[tuple]] = [[None, None] for _ in range(n1)]
        for side in (0, 1):
            foot = start.feet[side]
            steps = sorted((st for st in plan.steps if st.side == side), key=lambda st: st.t_lift)
            cur: tuple = ("planted", foot.flat, foot.yaw, None) if foot.planted else ("hold", None)
            t = 0
            for st in steps:
                while t <= st.t_lift:
                    sched[t][side] = cur
                    t += 1
                while t < st.t_land:
                    sched[t][side] = ("swing", st)
                    t += 1
                if st.kind == "hang":
                    cur = ("hold", st)
                else:
                    cur = ("planted", st.target, st.target_yaw, st.t_land)
            while t < n1:
                sched[t][side] = cur
                t += 1
        return sched

    def _tiptoe_limit(
        self, plan: _Plan, flat: np.ndarray, hip: np.ndarray, yaw: float, since_land: int | None
    ) -> float:
        """Largest heel raise allowed for a planted foot; it grows smoothly after a landing
        (feet land flat, the heel rises afterwards)."""
        if plan.tiptoe_max is not None:
            limit = plan.tiptoe_max
        else:
            ahead = (rot_y(-yaw) @ (flat - hip))[2]
            limit = _TIPTOE_BEHIND_RAD if ahead < -0.05 else _TIPTOE_AHEAD_RAD
        if since_land is not None:
            limit *= float(_mj(since_land / (_HEEL_RISE_S * self.fps)))
        return limit

    def _pelvis_heights(
        self, plan: _Plan, start: _StartState, root_rot: np.ndarray, sched: list
    ) -> np.ndarray:
        n1 = self.frames_per_chunk + 1
        y_nom = plan.y_nominal.copy()
        bound = np.full(n1, np.inf)
        for t in range(1, n1):
            for side in (0, 1):
                entry = sched[t][side]
                if entry[0] != "planted":
                    continue
                _, flat, yaw, t_land = entry
                leg = self._legs[side]
                hip_off = root_rot[t] @ leg.hip_offset
                hip_xz = np.array([plan.x[t] + hip_off[0], plan.z[t] + hip_off[2]])
                since = None if t_land is None else t - t_land
                hip_pt = np.array([hip_xz[0], 0.0, hip_xz[1]])
                limit = self._tiptoe_limit(plan, flat, hip_pt, yaw, since)
                h = _legs.max_hip_height(leg, flat, yaw, hip_xz, limit)
                bound[t] = min(bound[t], h - hip_off[1] - 0.002)
        # Lower the nominal height by a smooth deficit: the upper envelope of downward
        # parabolas (bounded curvature) over the frames where a leg could not reach.
        deficit = np.maximum(y_nom - bound, 0.0)
        deficit[0] = 0.0
        smooth = deficit.copy()
        t_idx = np.arange(n1)
        curvature = 0.5 * _Y_ACCEL_MPS2 / self.fps**2  # m per frame^2
        for t in range(1, n1):
            smooth[t] = max(0.0, np.max(deficit[1:] - curvature * (t_idx[1:] - t) ** 2))
            # ramp in from the history's height instead of jumping at the first frame (the
            # stance foot may lift a little for a frame or two rather than the pelvis drop)
            smooth[t] = min(smooth[t], 2.0 * curvature * t * t)
        out = y_nom - smooth
        out[0] = start.pos[1]
        return out

    def _pre_swing_heel_raise(self, plan: _Plan, side: int, t: int) -> float:
        """Heel raise of a planted foot just before it lifts (pre-swing: the heel rises and
        the knee starts to bend), ramping up to the step's toe-off angle."""
        frames = max(1.0, _PRE_SWING_S * self.fps)
        best = 0.0
        for st in plan.steps:
            if st.side != side or st.kind in ("hang", "land") or not 0 <= st.t_lift - t < frames:
                continue
            if st.t_lift < frames:  # no room after frame 0 (the history's pose) for a ramp
                continue
            best = max(best, st.toe_off_rad * float(_mj(1.0 - (st.t_lift - t) / frames)))
        return best

    def _swing_pose(
        self, st: _Step, t: int, begin: tuple[np.ndarray, float, float, float]
    ) -> tuple[np.ndarray, float, float, float]:
        """Ankle position, yaw, pitch and toe angle of a swing foot at frame ``t``."""
        a0, yaw0, pitch0, toe0 = begin
        u = (t - st.t_lift) / max(st.t_land - st.t_lift, 1)
        if st.kind == "up":
            sig_h = float(_mj((u - 0.25) / 0.75))
            sig_v = float(_mj(u / 0.6))
        elif st.kind == "down":
            sig_h = float(_mj(u / 0.7))
            sig_v = float(_mj((u - 0.3) / 0.7))
        else:
            sig_h = sig_v = float(_mj(u))
        a1 = st.target
        pos = a0 + (a1 - a0) * sig_h
        pos[1] = a0[1] + (a1[1] - a0[1]) * sig_v + st.clearance_m * float(_bump(u))
        yaw = yaw0 + float(wrap_angle(st.target_yaw - yaw0)) * float(_mj(u))
        pitch = (
            pitch0 * (1.0 - float(_mj(u / 0.6)))
            + st.target_pitch_rad * float(_mj(u))
            + max(st.toe_off_rad - pitch0, 0.0) * float(_bump(u / 0.45))
            - st.strike_rad * float(_bump((u - 0.5) / 0.5))
        )
        toe = toe0 * (1.0 - float(_mj(u / 0.6)))
        if st.kind not in ("hang", "land"):
            if st.kind == "up":
                ground = st.ground_to if sig_h >= 0.5 else st.ground_from
            elif st.kind == "down":
                ground = st.ground_from if sig_h < 0.5 else st.ground_to
            else:
                ground = st.ground_to
            low = float(_legs.lowest_offset(st.side, np.array([pitch]), np.array([toe]))[0])
            pos[1] = max(pos[1], ground - low + 0.002)
        return pos, yaw, pitch, toe

    def _pose_chunk(self, plan: _Plan, start: _StartState, blend: bool = True) -> np.ndarray:
        """Pose frames ``0..n`` of a plan (frame 0 = the last history frame), canonical."""
        n = self.frames_per_chunk
        n1 = n + 1
        root_rot = self._root_rotations(plan, start)
        sched = self._planted_schedule(plan, start)
        y = self._pelvis_heights(plan, start, root_rot, sched)
        pelvis = np.stack([plan.x, y, plan.z], axis=1)
        pelvis[0] = start.pos
        local = np.repeat(np.eye(3)[None, None], n1, axis=0).repeat(NUM_JOINTS, axis=1)
        local[:, 0] = root_rot
        # per-foot running pose (ankle, yaw, pitch, toe) used to start swings
        running = [(f.ankle.copy(), f.yaw, f.pitch, f.toe) for f in start.feet]
        swing_begin: dict[int, tuple] = {}
        ankles = np.zeros((n1, 2, 3))
        thighs = np.zeros((n1, 2, 2, 3))  # (hip, knee) per frame and side
        hip_flex = np.zeros((n1, 2))
        theta0 = [f.pitch if f.planted else 0.0 for f in start.feet]
        for t in range(n1):
            for side in (0, 1):
                leg = self._legs[side]
                hip = pelvis[t] + root_rot[t] @ leg.hip_offset
                entry = sched[t][side]
                if entry[0] == "planted":
                    _, flat, yaw_f, t_land = entry
                    if t_land is None:  # initial stance: release the history's heel raise
                        release = float(_mj(t / (_BLEND_S * self.fps)))
                        th_min = max(theta0[side] * (1.0 - release), 0.0)
                        since = None
                    else:
                        th_min, since = 0.0, t - t_land
                    th_min = max(th_min, self._pre_swing_heel_raise(plan, side, t))
                    raise_plan = plan.heel_raise[side]
                    if raise_plan is not None:
                        theta_end, a, b = raise_plan
                        th_min = max(th_min, theta_end * float(_mj_window(t / n, a, b)))
                    limit = self._tiptoe_limit(plan, flat, hip, yaw_f, since)
                    theta = _legs.solve_tiptoe(leg, hip, flat, yaw_f, th_min, limit)
                    ankle = _legs.tiptoe_ankle(leg, flat, yaw_f, np.array([theta]))[0]
                    pose = (ankle, yaw_f, theta, -theta)
                elif entry[0] == "swing":
                    st = entry[1]
                    key = id(st)
                    if key not in swing_begin:
                        swing_begin[key] = running[side]
                    pose = self._swing_pose(st, t, swing_begin[key])
                else:  # hold in the air (hanging)
                    pose = running[side]
                    if entry[1] is not None:
                        st = entry[1]
                        pose = (st.target.copy(), st.target_yaw, st.target_pitch_rad, 0.0)
                running[side] = (pose[0].copy(), pose[1], pose[2], pose[3])
                ankle, yaw_f, pitch_f, toe_f = pose
                foot_rot = rot_y(yaw_f) @ rot_x(pitch_f)
                pelvis_yaw = float(yaw_of_matrix(root_rot[t]))
                hinge_yaw = pelvis_yaw + 0.5 * float(wrap_angle(yaw_f - pelvis_yaw))
                hinge = rot_y(hinge_yaw) @ np.array([1.0, 0.0, 0.0])
                r_hip, r_knee, r_ankle = _legs.solve_leg(
                    leg, hip, root_rot[t], ankle, foot_rot, hinge
                )
                local[t, _legs.HIP[side]] = r_hip
                local[t, _legs.KNEE[side]] = r_knee
                local[t, _legs.ANKLE[side]] = r_ankle
                local[t, _legs.TOE[side]] = rot_x(toe_f)
                ankles[t, side] = ankle
                thigh = r_hip @ leg.thigh
                hip_flex[t, side] = np.arctan2(thigh[2], -thigh[1])
                thighs[t, side] = (hip, hip + root_rot[t] @ thigh)
        self._pose_upper_body(local, plan, pelvis, root_rot, ankles, thighs, hip_flex, start)
        for name, offset in plan.joint_offsets.items():
            if name not in JOINT_INDEX or name in _LEG_JOINTS:
                allowed = sorted(set(JOINT_INDEX) - _LEG_JOINTS)
                raise ValueError(f"plan joint_offsets {name!r} is invalid: allowed {allowed}")
            rotvec = np.broadcast_to(np.asarray(offset, dtype=np.float64), (n1, 3))
            if not np.all(np.isfinite(rotvec)):
                raise ValueError(f"plan joint_offsets {name!r} must be finite rotation vectors")
            local[:, JOINT_INDEX[name]] = local[:, JOINT_INDEX[name]] @ matrix_from_rotvec(rotvec)
        # blend out any mismatch with the last history frame (joints 1..23)
        w = 1.0 - _mj(np.arange(n1) / (_BLEND_S * self.fps))
        resid = rotvec_from_matrix(start.local_rot[1:] @ np.swapaxes(local[0, 1:], -1, -2))
        if blend and np.max(np.linalg.norm(resid, axis=-1)) > 1e-9:
            corr = matrix_from_rotvec(w[:, None, None] * resid[None])
            local[:, 1:] = corr @ local[:, 1:]
        frames = np.empty((n1, FRAME_DIM))
        frames[:, 0:3] = pelvis
        frames[:, 3:] = rotvec_from_matrix(local).reshape(n1, 3 * NUM_JOINTS)
        return frames

    def _pose_upper_body(
        self,
        local: np.ndarray,
        plan: _Plan,
        pelvis: np.ndarray,
        root_rot: np.ndarray,
        ankles: np.ndarray,
        thighs: np.ndarray,
        hip_flex: np.ndarray,
        start: _StartState,
    ) -> None:
        n1 = self.frames_per_chunk + 1
        style = self._style
        vel = np.zeros((n1, 3))
        vel[0] = start.vel
        vel[1:] = (pelvis[1:] - pelvis[:-1]) * self.fps
        pelvis_yaw = yaw_of_matrix(root_rot)
        fwd_speed = np.einsum("tab,tb->ta", rot_y(-pelvis_yaw), vel)[:, 2]
        walk_lean = np.radians(4.0) * np.clip(fwd_speed / 1.2, -0.5, 1.0)
        mean_flex = np.mean(hip_flex, axis=1)
        # where the hands rest on the thighs: the seated end of the chunk (its last frame
        # when sitting down, its first, the history's pose, when standing up); the arms and
        # the slouch follow the hips' flexion from standing to that frame's
        t_seat = n1 - 1 if mean_flex[-1] >= mean_flex[0] else 0
        seated = np.zeros(n1)
        if mean_flex[t_seat] > _SEATED_HIP_FLEX_RAD:
            span = mean_flex[t_seat] - _ARMS_STANDING_FLEX_RAD
            seated = _mj((mean_flex - _ARMS_STANDING_FLEX_RAD) / span)
        lean = walk_lean + plan.spine_lean + _SEATED_SLOUCH_RAD * seated
        # while the hips flex (deep strides, stairs, the way down to a seat) the arms reach
        # forward a little; a seated body's arms rest on its thighs instead
        sit = np.clip((mean_flex - np.radians(20.0)) / np.radians(55.0), 0.0, 1.0)
        sit = sit * sit * (3.0 - 2.0 * sit) * (1.0 - seated)
        for name, share in (("spine1", 0.4), ("spine2", 0.3), ("spine3", 0.3)):
            local[:, _J[name]] = rot_x(share * lean)
        torso = lean + plan.pitch
        local[:, _J["neck"]] = rot_x(-0.35 * torso)
        local[:, _J["head"]] = rot_x(-0.25 * torso)
        # arm swing from how far each foot is ahead of the other in the pelvis heading frame
        rel = np.einsum("tab,tsb->tsa", rot_y(-pelvis_yaw), ankles - pelvis[:, None, :])
        delta = rel[:, 1, 2] - rel[:, 0, 2]  # right foot ahead of left (m)
        swing = np.clip(
            style.arm_swing_gain * _ARM_SWING_RAD_PER_M * delta,
            -_ARM_SWING_MAX_RAD,
            _ARM_SWING_MAX_RAD,
        )
        reach = 0.6 * plan.pitch + np.radians(25.0) * sit
        for side, sign in ((0, 1.0), (1, -1.0)):
            flex = sign * swing + reach  # left arm forward when the right foot is ahead
            shoulder, elbow = _arms.SHOULDER[side], _arms.ELBOW[side]
            down = np.full(n1, -sign * style.arm_down_rad)
            bend = style.elbow_rad + 0.35 * np.maximum(flex, 0.0) + np.radians(25.0) * sit
            if seated[t_seat] > 0.0:  # 1 there
                rest = _arms.hand_on_thigh(
                    local[t_seat], pelvis[t_seat], side, thighs[t_seat, side],
                    (float(down[t_seat]), float(flex[t_seat]), float(bend[t_seat])),
                )  # fmt: skip
                down = (1.0 - seated) * down + seated * rest[0]
                flex = (1.0 - seated) * flex + seated * rest[1]
                bend = (1.0 - seated) * bend + seated * rest[2]
            if plan.arms[side] is not None:
                down, flex, bend = plan.arms[side]._apply(down, flex, bend, side, n1)
            local[:, shoulder], local[:, elbow] = _arms.arm_rotations(down, flex, bend, side)

    def _standing_frame(self) -> np.ndarray:
        """The canonical standing frame: pelvis at standing height above ``y = 0``."""
        feet = []
        for side in (0, 1):
            flat = self._nominal_foot(side, 0.0, 0.0, 0.0, 0.0)
            feet.append(_FootState(flat.copy(), flat, 0.0, 0.0, 0.0, True))
        pos = np.array([0.0, STANDING_PELVIS_HEIGHT_M, 0.0])
        local = np.repeat(np.eye(3)[None], NUM_JOINTS, axis=0)
        start = _StartState(pos, np.zeros(3), 0.0, local, (feet[0], feet[1]), False)
        s = self._s()
        zeros = np.zeros_like(s)
        plan = _Plan(zeros, zeros, zeros, np.full_like(s, STANDING_PELVIS_HEIGHT_M), zeros, zeros)
        return self._pose_chunk(plan, start, blend=False)[0]


def sit_back_distance(height_m: float) -> float:
    """How far :class:`ProceduralMotionGenerator` moves the pelvis back when a body standing
    still on a flat floor sits down on a seat ``height_m`` above it (m): the full
    ``SIT_BACK_DISTANCE_M`` on seats up to knee height, less on higher ones (the thighs then
    cross the seat's front edge nearer the hips with the feet flat), at least
    ``SIT_BACK_MIN_M``; the full distance where the feet hang."""
    h = float(height_m)
    if not np.isfinite(h):
        raise ValueError(f"height_m={height_m!r} is invalid: allowed a finite number")
    gen = ProceduralMotionGenerator()
    start = gen._read_state(np.repeat(gen._standing_frame()[None], 2, axis=0))
    return gen._sit_back(start, h, 0.0, 0.0, SEATED_PELVIS_TILT_RAD)[0]


# Motion planner per skill, keyed by the skill table's ``motion_key``: a skill whose key is
# here can be generated (the capability record below is derived from this table).
def generate_detached(
    generator: ProceduralMotionGenerator, call: SkillCall
) -> tuple[np.ndarray, tuple[np.ndarray, float]]:
    """Generate ``generator``'s next chunk on a copy (e.g. unpickled in a worker process):
    ``(chunk, (history, ground_y))``, the result :meth:`ProceduralMotionGenerator.stage`
    expects."""
    chunk = generator.generate(call)
    return chunk, (generator._history, generator._ground_y)


_PLANNERS: dict[str, Any] = {
    "walk_forward": lambda g, start, c: g._plan_walk(start, c["distance_m"]),
    "turn": lambda g, start, c: g._plan_turn(start, c["angle_rad"]),
    "side_walk": lambda g, start, c: g._plan_shift(start, lateral_m=c["lateral_m"], forward_m=0.0),
    "step_back": lambda g, start, c: g._plan_shift(
        start, lateral_m=0.0, forward_m=-c["distance_m"]
    ),
    "step_climb_up": lambda g, start, c: g._plan_stairs(start, int(round(c["stair_steps"]))),
    "step_climb_down": lambda g, start, c: g._plan_stairs(start, int(round(c["stair_steps"]))),
    "sit": lambda g, start, c: g._plan_sit(start, c["height_m"]),
}

#: The public names of the planner interface's records.
Plan = _Plan
StartState = _StartState
Step = _Step

#: ``planner(generator, start, condition) -> Plan``: the plan of one chunk from the body's
#: state at its start and the call's :attr:`SkillCall.condition` (SI units).
Planner = Callable[[ProceduralMotionGenerator, _StartState, Mapping[str, float]], _Plan]


def _declare_capabilities() -> None:
    ProceduralMotionGenerator.capabilities = MotionCapabilities(
        name="procedural", motion_keys=frozenset(_PLANNERS), batched=False
    )


def register_planner(motion_key: str, planner: Planner | None = None, *, replace: bool = False):
    """Add a motion planner for the skills whose ``motion_key`` is ``motion_key``.

    ``register_planner("wave", plan_wave)``, or ``@register_planner("wave")`` above the
    function. The generator's capability record is derived from the planner table, so the
    env executes the skill with ``motion="procedural"`` from then on. Register in every
    process that generates (the module defining the skill, imported by each worker).

    Args:
        motion_key: the skill table's ``motion_key`` (an identifier-like string).
        planner: ``planner(generator, start, condition) -> Plan`` (see :data:`Planner`):
            ``start`` is the body's state (:data:`StartState`: pelvis position and
            velocity, feet, whether seated), ``condition`` the call's condition.
        replace: replace an existing planner of that key (the built-ins included).

    Raises:
        ValueError: an invalid key, or a key taken without ``replace``.
        TypeError: ``planner`` is not callable.
    """
    if not isinstance(motion_key, str) or not motion_key.isidentifier():
        raise ValueError(f"motion_key={motion_key!r} is invalid: allowed an identifier string")

    def add(fn: Planner) -> Planner:
        if not callable(fn):
            raise TypeError(f"planner for {motion_key!r} must be callable, got {fn!r}")
        if motion_key in _PLANNERS and not replace and _PLANNERS[motion_key] is not fn:
            raise ValueError(
                f"motion_key={motion_key!r} already has a planner; pass replace=True to replace it"
            )
        _PLANNERS[motion_key] = fn
        _declare_capabilities()
        return fn

    return add if planner is None else add(planner)


def unregister_planner(motion_key: str) -> None:
    """Remove a planner (tests, undoing a registration); an unknown key is ignored."""
    _PLANNERS.pop(motion_key, None)
    _declare_capabilities()


_declare_capabilities()
