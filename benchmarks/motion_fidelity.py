"""Realized-vs-generated motion of a run, measured from its replay bundles.

    python benchmarks/motion_fidelity.py RUN_DIR                 # table on stdout
    python benchmarks/motion_fidelity.py RUN_DIR --out-json motion_fidelity.json

``RUN_DIR`` is any directory holding replay bundles (``replay_manifest.json`` +
``trajectory_before.npz`` + ``trajectory_after.npz``) at any depth, e.g. the output of
``humanclaw run --episodes val100 --agent oracle --output RUN_DIR``. Nothing is simulated:
every number comes from the generated and realized frames the bundles store.

Measured (all positions from forward kinematics of the 75-D frames):

* **wrist offset**: distance between the realized and the generated wrist, both in the
  pelvis frame (so where the body stands does not matter), over the frames of the
  locomotion skills (Walk, Turn, Side step, Step back; Stop has no frames) and over all
  frames: median, 95th percentile, maximum;
* **wrists above the head**: realized frames with a wrist centre above the head joint
  centre, outside Sit and Climb (and inside them, reported separately);
* **joint tracking error**: per-joint angle between generated and realized local rotations
  (:func:`humanclaw_gym.metrics.tracking.joint_tracking_error_rad`): percentiles, the
  worst joints, and the frames over the ``motion_anomaly`` bound;
* **Sit**: for every Sit down step, the highest realized pelvis above the episode floor
  against the standing height (0.95 m), and whether the episode's last Sit ends seated
  (pelvis at least 0.15 m below standing height on its last frame);
* **head roll**: the ego camera's sideways roll at the end of every motion step, and, after
  every step outside Sit, the smaller roll at the end of the next two decisions (the check
  "back within 5 degrees of upright within two decisions").

Measured as the motion-generation literature measures it (issue 28), on the realized
frames, per skill (the frames of each skill's steps) and over all frames:

* **foot skate ratio**: the share of frame pairs (consecutive frames) in which a foot
  joint (ankle or toe joint, each side) in contact with its support (the joint under 5 cm
  above the support in both frames; on a body asset 5 cm moved by as much as the joint sits
  lower or higher above the sole at rest than on the built-in body) slides more than
  2.5 cm horizontally; the same on the
  generated frames beside it, and the share of the skating frames that lie within a frame
  of where a motion step (one chunk) begins;
* **floating** and **ground penetration**: the lowest point of the two feet against the
  support under it (the highest scene surface under the foot that is not above it: floor,
  rug, stair, platform), per frame: the share of frames over 5 cm above it and the mean and
  maximum depth below it;
* **bone-length consistency**: the largest deviation of any bone (parent-child joint
  distance from forward kinematics) from its rest length;
* **joint-limit violations**: frames with a joint outside its range (``JOINT_RANGE_DEG``:
  the total rotation from the rest pose, plus no knee or elbow bent backwards by more than
  10 degrees);
* **generated vs realized pose**: for every joint, the distance between its generated and
  realized position in the pelvis frame (median, p95, max per joint), and the root's world
  distance;
* **seated pose** at the last frame of every Sit down: the heels' height above the floor
  (both within ``SEATED_HEEL_MAX_M``) and the wrists' drop below the shoulders (both at
  least ``SEATED_WRIST_DROP_MIN_M``); a Sit that misses either is a bad Sit.

The scene of every bundle is loaded (``episodes.load_scene``) and checked against the
content hash the bundle recorded. A bundle recorded with a body asset (``--body-asset``:
its manifest's ``backends.body_asset``) is measured on that body's own links: the folder is
read again (its SHA-256 must match the recorded one) and every position above comes from
its joint offsets and its foot boxes (the bounding boxes of its ankle and foot collision
meshes, :class:`~humanclaw_gym.motion.bodyfit.MotionBody`), standing heights from its own
standing pelvis height.

Gates (printed as pass/fail, exit status 1 if any fails with ``--check``): issue #11's (no
wrist above the head outside Sit/Climb, locomotion wrist offset p95 <= 0.10 m and
max <= 0.30 m, no frame over the anomaly bound, no Sit pelvis above standing height, every
last Sit seated) and issue 28's (``FIELD_GATES``: foot skate ratio, floating share and
penetration depth of the locomotion frames, bone lengths, joint limits, the per-joint gap's
p95, no bad Sit).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from humanclaw_gym.body.skeleton import (
    JOINT_INDEX,
    JOINT_NAMES,
    PARENTS,
    STANDING_PELVIS_HEIGHT_M,
)
from humanclaw_gym.fileio import write_json_atomic
from humanclaw_gym.metrics.thresholds import MOTION_ANOMALY_BOUND_DEG
from humanclaw_gym.metrics.tracking import (
    HEAD,
    WRISTS,
    head_roll_rad,
    joint_tracking_error_rad,
    pelvis_frame_positions,
)
from humanclaw_gym.motion.bodyfit import MotionBody
from humanclaw_gym.skills import Skill

#: Skills whose frames the locomotion wrist gate covers (Stop has no frames).
LOCOMOTION = (Skill.WALK, Skill.TURN, Skill.SIDE_STEP, Skill.STEP_BACK)
#: Skills during which a wrist above the head is allowed (reaching, climbing).
RAISED_ARMS_ALLOWED = (Skill.SIT, Skill.CLIMB_UP)
#: A Sit ends seated when its last realized pelvis is at least this far below standing (m).
SEATED_DROP_M = 0.15
#: Tolerance on "the pelvis never rises above standing height during a Sit" (m).
SIT_RISE_TOLERANCE_M = 0.02
#: Gates of issue #11.
WRIST_P95_MAX_M = 0.10
WRIST_MAX_M = 0.30
HEAD_ROLL_MAX_DEG = 5.0

#: Field metrics (issue 28): contact and slide thresholds of the foot skate ratio (m), the
#: height over the support that counts as floating (m), the seated checks (m).
CONTACT_HEIGHT_M = 0.05
SKATE_SLIDE_M = 0.025
FLOAT_HEIGHT_M = 0.05
SEATED_HEEL_MAX_M = 0.04
SEATED_WRIST_DROP_MIN_M = 0.30
#: Range of each joint: the largest total rotation from the rest (T-) pose, degrees
#: (anatomical ranges of motion, generous; the shoulders' rest is the arm held out).
JOINT_RANGE_DEG: dict[str, float] = {
    "left_hip": 135.0, "right_hip": 135.0, "spine1": 45.0, "left_knee": 155.0,
    "right_knee": 155.0, "spine2": 45.0, "left_ankle": 60.0, "right_ankle": 60.0,
    "spine3": 45.0, "left_foot": 70.0, "right_foot": 70.0, "neck": 60.0,
    "left_collar": 40.0, "right_collar": 40.0, "head": 60.0, "left_shoulder": 180.0,
    "right_shoulder": 180.0, "left_elbow": 155.0, "right_elbow": 155.0, "left_wrist": 90.0,
    "right_wrist": 90.0, "left_hand": 60.0, "right_hand": 60.0,
}  # fmt: skip
#: Knees and elbows bend one way: a bend backwards past this counts as a violation (deg).
HYPEREXTENSION_DEG = 10.0
#: Gates of issue 28 on the field metrics.
FIELD_GATES = {
    "foot_skate_ratio_max": 0.10,
    "locomotion_floating_share_max": 0.01,
    "locomotion_penetration_max_m": 0.03,
    "bone_length_deviation_max_m": 0.001,
    "joint_limit_violation_frames_max": 0,
    "joint_gap_p95_max_m": 0.10,
    "bad_sits_max": 0,
}
_SKILL_NAMES = {int(s): s.spec.display_name for s in Skill}
_FEET = (
    (JOINT_INDEX["left_ankle"], JOINT_INDEX["left_foot"]),
    (JOINT_INDEX["right_ankle"], JOINT_INDEX["right_foot"]),
)
_SHOULDERS = (JOINT_INDEX["left_shoulder"], JOINT_INDEX["right_shoulder"])


@dataclass
class Args:
    run_dir: tyro.conf.Positional[Path]
    """directory with replay bundles at any depth"""
    out_json: Path | None = None
    """write the full report here (atomically)"""
    check: bool = False
    """exit with status 1 when a gate fails"""


@dataclass
class Bundle:
    name: str
    generated: np.ndarray  # (F, 75), trimmed to the realized frames
    realized: np.ndarray  # (F, 75)
    skill: np.ndarray  # (F,) skill id of every frame
    step_start: np.ndarray  # (N,) first frame of every motion step
    step_skill: np.ndarray  # (N,)
    step_text: list[str]
    floor_y: float
    scene_id: str = ""
    scene_hash: str = ""
    body: MotionBody = MotionBody.builtin()

    def fk(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint positions and rotations of ``frames`` on this bundle's body."""
        return self.body.forward_kinematics(frames)

    def pelvis_frame_positions(self, frames: np.ndarray) -> np.ndarray:
        """Joint centres relative to the pelvis in its own frame (this bundle's body)."""
        if self.body.is_builtin:
            return pelvis_frame_positions(frames)
        pos, rot = self.fk(frames)
        rel = pos - pos[..., 0:1, :]
        return np.einsum("...ba,...jb->...ja", rot[..., 0, :, :], rel)


def find_bundles(root: Path) -> list[Path]:
    """Directories under ``root`` (any depth) that hold a complete replay bundle."""
    if not root.is_dir():
        raise FileNotFoundError(f"run directory does not exist: {root}")
    out = []
    for manifest in sorted(root.rglob("replay_manifest.json")):
        d = manifest.parent
        if (d / "trajectory_before.npz").is_file() and (d / "trajectory_after.npz").is_file():
            out.append(d)
    return out


_BODIES: dict[tuple[str, str], MotionBody] = {}


def _bundle_body(manifest: dict, directory: Path) -> MotionBody:
    """The body a bundle was recorded with: the built-in one, or its body asset re-read
    (the recorded SHA-256 must match)."""
    record = (manifest.get("backends") or {}).get("body_asset")
    if not record:
        return MotionBody.builtin()
    key = (str(record.get("path")), str(record.get("sha256")))
    if key not in _BODIES:
        from humanclaw_gym.body.asset import BodyAssetError, load_body_asset

        try:
            asset = load_body_asset(key[0])
        except BodyAssetError as exc:
            raise SystemExit(f"{directory}: the run's body asset cannot be read: {exc}") from None
        if asset.sha256 != key[1]:
            raise SystemExit(
                f"{directory}: body asset {key[0]} differs from the one the run used (SHA-256)"
            )
        _BODIES[key] = MotionBody.from_asset(asset)
    return _BODIES[key]


def load_bundle(directory: Path) -> Bundle:
    manifest = json.loads((directory / "replay_manifest.json").read_text(encoding="utf-8"))
    body = _bundle_body(manifest, directory)
    with np.load(directory / "trajectory_before.npz", allow_pickle=False) as before:
        generated = np.asarray(before["generated"], dtype=np.float64)
        step_start = np.asarray(before["step_start_frame"], dtype=np.int64)
        step_skill = np.asarray(before["skill_id"], dtype=np.int64)
        step_text = [str(t) for t in before["skill_text"]]
        seed = np.asarray(before["seed_history"], dtype=np.float64)
    with np.load(directory / "trajectory_after.npz", allow_pickle=False) as after:
        realized = np.asarray(after["realized"], dtype=np.float64)
    n = len(realized)
    skill = np.empty(len(generated), dtype=np.int64)
    bounds = list(step_start) + [len(generated)]
    for k, sid in enumerate(step_skill):
        skill[bounds[k] : bounds[k + 1]] = sid
    episode = manifest.get("episode") or {}
    start = episode.get("start_position")
    floor_y = float(start[1]) if start else float(seed[-1, 1] - body.standing_pelvis_height_m)
    return Bundle(
        name=str(manifest.get("episode_id", directory.name)),
        generated=generated[:n],
        realized=realized,
        skill=skill[:n],
        step_start=step_start,
        step_skill=step_skill,
        step_text=step_text,
        floor_y=floor_y,
        scene_id=str(manifest.get("scene_id", "")),
        scene_hash=str(manifest.get("scene_content_hash", "")),
        body=body,
    )


def _scene_supports(bundles: list[Bundle]) -> dict[str, object]:
    """The static scene parts of every bundle's scene (hash-checked), by scene id."""
    from humanclaw_gym.episodes import load_scene
    from humanclaw_gym.scenes.solids import Solids

    out: dict[str, object] = {}
    for b in bundles:
        if b.scene_id in out or not b.scene_id:
            continue
        scene = load_scene(b.scene_id)
        if b.scene_hash and scene.content_hash() != b.scene_hash:
            raise SystemExit(
                f"scene {b.scene_id} differs from the one the bundle {b.name} was recorded in "
                "(content hash); rerun the episodes with this version"
            )
        out[b.scene_id] = Solids.from_scene(scene, keep=lambda o: not o.dynamic)
    return out


def _support_y(solids, xz: np.ndarray, below_y: np.ndarray, floor_y: float) -> np.ndarray:
    """Height of the highest surface under each x/z point that is not more than 10 cm above
    ``below_y`` (the point's own height): floors, rugs, stair treads, platforms, seats."""
    out = np.full(len(xz), float(floor_y))
    if solids is None or len(solids) == 0:
        return out
    for start in range(0, len(xz), 2048):
        sl = slice(start, start + 2048)
        inside = solids.footprint_distance(xz[sl]) <= 0.0  # (N, M)
        tops = np.where(
            inside & (solids.y1[None, :] <= below_y[sl, None] + 0.1), solids.y1, -np.inf
        )
        best = tops.max(axis=1)
        out[sl] = np.where(np.isfinite(best), best, float(floor_y))
    return out


def _foot_points(
    pos: np.ndarray, rot: np.ndarray, body: MotionBody
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per frame and foot: the lowest point's height (F, 2), the heel's back edge (F, 2, 3)
    and the ball (toe joint, F, 2, 3), from the foot boxes of ``body``."""
    ankle_c, toe_c = body.ankle_corners, body.toe_corners
    lowest = np.empty(pos.shape[:1] + (2,))
    heel = np.empty(pos.shape[:1] + (2, 3))
    ball = np.empty(pos.shape[:1] + (2, 3))
    for side, (ankle, toe) in enumerate(_FEET):
        a = pos[:, ankle, None, :] + np.einsum("fab,kb->fka", rot[:, ankle], ankle_c[side])
        t = pos[:, toe, None, :] + np.einsum("fab,kb->fka", rot[:, toe], toe_c[side])
        lowest[:, side] = np.minimum(a[..., 1].min(axis=1), t[..., 1].min(axis=1))
        heel[:, side] = a[:, [0, 4]].mean(axis=1)  # the back-bottom edge's midpoint
        ball[:, side] = pos[:, toe]
    return lowest, heel, ball


def _joint_limit_violations(frames: np.ndarray) -> np.ndarray:
    """``bool (F, 23)``: joints outside ``JOINT_RANGE_DEG`` or bent backwards."""
    aa = frames[:, 6:].reshape(len(frames), 23, 3)
    angle = np.degrees(np.linalg.norm(aa, axis=-1))
    limit = np.array([JOINT_RANGE_DEG[n] for n in JOINT_NAMES[1:]])
    bad = angle > limit
    for name, axis, sign in (
        ("left_knee", 0, 1.0), ("right_knee", 0, 1.0),
        ("left_elbow", 1, -1.0), ("right_elbow", 1, 1.0),
    ):  # fmt: skip
        j = JOINT_INDEX[name] - 1
        bad[:, j] |= np.degrees(sign * aa[:, j, axis]) < -HYPEREXTENSION_DEG
    return bad


def _bone_deviation(pos: np.ndarray, body: MotionBody) -> np.ndarray:
    """``(F,)`` largest |bone length - rest length| of each frame (m)."""
    joints = body.rest_joints_m
    rest = np.linalg.norm(joints[1:] - joints[list(PARENTS[1:])], axis=-1)
    bones = np.linalg.norm(pos[:, 1:] - pos[:, list(PARENTS[1:])], axis=-1)
    return np.abs(bones - rest).max(axis=1)


def _contact_heights(body: MotionBody) -> np.ndarray | float:
    """The height under which each foot joint (ankle, toe of each side) counts as on its
    support: ``CONTACT_HEIGHT_M`` on the built-in body, moved by as much as the joint sits
    lower or higher above the sole at rest on another body (the release's ankle and toe
    joints sit 1.2-2.2 cm lower in the foot: a swinging foot would count as planted)."""
    if body.is_builtin:
        return CONTACT_HEIGHT_M
    builtin = MotionBody.builtin()

    def rest_above_sole(b: MotionBody) -> np.ndarray:
        joints = [j for foot in _FEET for j in foot]
        return b.rest_joints_m[joints, 1] + b.standing_pelvis_height_m

    return CONTACT_HEIGHT_M + (rest_above_sole(body) - rest_above_sole(builtin))


def field_frames(b: Bundle, solids) -> dict[str, np.ndarray]:
    """Per-frame field measurements of one bundle (see the module docstring)."""
    real = b.realized
    pos, rot = b.fk(real)
    lowest, heel, ball = _foot_points(pos, rot, b.body)
    xz = np.stack([0.5 * (heel[..., [0, 2]] + ball[..., [0, 2]])[:, s] for s in (0, 1)], 1)
    support = _support_y(solids, xz.reshape(-1, 2), lowest.reshape(-1), b.floor_y).reshape(-1, 2)
    above = lowest - support  # (F, 2)
    joints = [j for foot in _FEET for j in foot]  # ankle, toe of each side
    height = pos[:, joints, 1] - np.repeat(support, 2, axis=1)  # (F, 4)
    contact_height = _contact_heights(b.body)
    contact = height < contact_height
    slide = np.linalg.norm(np.diff(pos[:, joints][..., [0, 2]], axis=0), axis=-1)  # (F-1, 4)
    skate = np.zeros(len(real), dtype=bool)  # frame t: the pair (t-1, t)
    skate[1:] = np.any(contact[1:] & contact[:-1] & (slide > SKATE_SLIDE_M), axis=1)
    pair = np.zeros(len(real), dtype=bool)
    pair[1:] = True  # every pair of consecutive frames of the episode
    gen_rel = b.pelvis_frame_positions(b.generated)
    real_rel = b.pelvis_frame_positions(real)
    gap = np.linalg.norm(gen_rel - real_rel, axis=-1)  # (F, 24): 0 is the pelvis itself
    gap[:, 0] = np.linalg.norm(b.generated[:, :3] - real[:, :3], axis=-1)  # root, world
    gen_pos, _ = b.fk(b.generated)
    gen_height = gen_pos[:, joints, 1] - np.repeat(support, 2, axis=1)
    gen_contact = gen_height < contact_height
    gen_slide = np.linalg.norm(np.diff(gen_pos[:, joints][..., [0, 2]], axis=0), axis=-1)
    gen_skate = np.zeros(len(real), dtype=bool)
    gen_skate[1:] = np.any(gen_contact[1:] & gen_contact[:-1] & (gen_slide > SKATE_SLIDE_M), axis=1)
    starts = np.asarray(b.step_start, dtype=np.int64)
    edge = np.zeros(len(real), dtype=bool)  # within a frame of where a motion step begins
    for d in (-1, 0, 1):
        k = starts + d
        edge[k[(k >= 0) & (k < len(real))]] = True
    return {
        "skate": skate,
        "skate_generated": gen_skate,
        "skate_at_step_edge": skate & edge,
        "contact_pair": pair,
        "lowest_above": above.min(axis=1),
        "bone_dev": _bone_deviation(pos, b.body),
        "limits": _joint_limit_violations(real),
        "gap": gap,
    }


def seated_checks(b: Bundle, solids) -> list[dict]:
    """The seated pose at the last frame of every Sit down step of a bundle."""
    out = []
    for k, sid in enumerate(b.step_skill):
        if sid != Skill.SIT:
            continue
        e = min(int(b.step_start[k]) + 14, len(b.realized) - 1)
        if e < int(b.step_start[k]):
            continue
        pos, rot = b.fk(b.realized[e : e + 1])
        _, heel, _ = _foot_points(pos, rot, b.body)
        support = _support_y(solids, heel[0][:, [0, 2]], heel[0][:, 1], b.floor_y)
        heels = heel[0][:, 1] - support
        drops = [float(pos[0, sh, 1] - pos[0, sh + 4, 1]) for sh in _SHOULDERS]  # wrist
        out.append(
            {
                "episode": b.name,
                "step": k,
                "text": b.step_text[k],
                "heel_above_floor_m": float(heels.max()),
                "wrist_below_shoulder_m": float(min(drops)),
                "bad": bool(
                    heels.max() > SEATED_HEEL_MAX_M or min(drops) < SEATED_WRIST_DROP_MIN_M
                ),
            }
        )
    return out


def field_report(bundles: list[Bundle]) -> dict:
    """The field metrics, per skill and over all frames, and the seated checks."""
    supports = _scene_supports(bundles)
    per: dict[str, list] = {}
    skills: list[np.ndarray] = []
    sits: list[dict] = []
    for b in bundles:
        if len(b.realized) == 0:
            continue
        solids = supports.get(b.scene_id)
        f = field_frames(b, solids)
        for key, value in f.items():
            per.setdefault(key, []).append(value)
        skills.append(b.skill)
        sits += seated_checks(b, solids)
    if not skills:
        return {}
    cat = {k: np.concatenate(v) for k, v in per.items()}
    skill = np.concatenate(skills)

    def summary(mask: np.ndarray) -> dict:
        pairs = int(cat["contact_pair"][mask].sum())
        above = cat["lowest_above"][mask]
        below = np.maximum(-above, 0.0)
        gap = cat["gap"][mask]
        return {
            "frames": int(mask.sum()),
            "foot_skate_ratio": float(cat["skate"][mask].sum() / pairs) if pairs else None,
            "foot_skate_ratio_generated": (
                float(cat["skate_generated"][mask].sum() / pairs) if pairs else None
            ),
            "skate_at_step_edge_share": (
                float(cat["skate_at_step_edge"][mask].sum() / cat["skate"][mask].sum())
                if cat["skate"][mask].any()
                else None
            ),
            "frame_pairs": pairs,
            "floating_share": float((above > FLOAT_HEIGHT_M).mean()) if len(above) else None,
            "floating_max_m": float(above.max()) if len(above) else None,
            "penetration_mean_m": float(below[below > 0].mean()) if (below > 0).any() else 0.0,
            "penetration_max_m": float(below.max()) if len(below) else None,
            "bone_length_deviation_max_m": float(cat["bone_dev"][mask].max()) if mask.any() else None,
            "joint_limit_violation_frames": int(cat["limits"][mask].any(axis=1).sum()),
            "joint_gap_m": {
                "p95": float(np.percentile(gap[:, 1:], 95)) if len(gap) else None,
                "max": float(gap[:, 1:].max()) if len(gap) else None,
                "root_p95": float(np.percentile(gap[:, 0], 95)) if len(gap) else None,
                "per_joint_p95": {
                    JOINT_NAMES[j]: float(np.percentile(gap[:, j], 95)) for j in range(1, 24)
                } if len(gap) else {},
            },
        }  # fmt: skip

    per_skill = {
        _SKILL_NAMES.get(sid, str(sid)): summary(skill == sid)
        for sid in sorted(set(skill.tolist()))
    }
    loco = np.isin(skill, [int(s) for s in LOCOMOTION])
    violations = cat["limits"].sum(axis=0)
    bad = [s for s in sits if s["bad"]]
    return {
        "all": summary(np.ones(len(skill), dtype=bool)),
        "locomotion": summary(loco),
        "per_skill": per_skill,
        "joint_limit_violations_by_joint": {
            JOINT_NAMES[1 + j]: int(n) for j, n in enumerate(violations) if n
        },
        "sits": len(sits),
        "bad_sits": len(bad),
        "sits_heels_up": sum(s["heel_above_floor_m"] > SEATED_HEEL_MAX_M for s in sits),
        "sits_hands_held_out": sum(
            s["wrist_below_shoulder_m"] < SEATED_WRIST_DROP_MIN_M for s in sits
        ),
        "sit_heel_above_floor_m": _dist_stats(np.array([s["heel_above_floor_m"] for s in sits])),
        "sit_wrist_below_shoulder_m": _dist_stats(
            np.array([s["wrist_below_shoulder_m"] for s in sits])
        ),
        "bad_sit_examples": bad[:10],
        "thresholds": {
            "contact_height_m": CONTACT_HEIGHT_M,
            "skate_slide_m": SKATE_SLIDE_M,
            "float_height_m": FLOAT_HEIGHT_M,
            "seated_heel_max_m": SEATED_HEEL_MAX_M,
            "seated_wrist_drop_min_m": SEATED_WRIST_DROP_MIN_M,
            "joint_range_deg": JOINT_RANGE_DEG,
            "hyperextension_deg": HYPEREXTENSION_DEG,
            "gates": FIELD_GATES,
        },
    }


def _dist_stats(values: np.ndarray) -> dict:
    if values.size == 0:
        return {"frames": 0, "min": None, "median": None, "p95": None, "max": None}
    return {
        "frames": int(values.size),
        "min": float(values.min()),
        "median": float(np.median(values)),
        "p95": float(np.percentile(values, 95)),
        "max": float(values.max()),
    }


def analyse(bundles: list[Bundle]) -> dict:
    """The report over all bundles (see the module docstring)."""
    loco_offsets, all_offsets, errors = [], [], []
    above_outside: list[dict] = []
    above_inside = 0
    sits: list[dict] = []
    sit_standing: list[float] = []  # the standing pelvis height of each Sit's body
    step_roll_deg: list[float] = []
    roll_after_two: list[dict] = []
    anomaly_by_episode: dict[str, int] = {}
    bound = math.radians(MOTION_ANOMALY_BOUND_DEG)
    for b in bundles:
        if len(b.realized) == 0:
            continue
        lg = b.pelvis_frame_positions(b.generated)
        lr = b.pelvis_frame_positions(b.realized)
        offset = np.linalg.norm(lg[:, WRISTS] - lr[:, WRISTS], axis=-1).max(axis=1)  # (F,)
        loco = np.isin(b.skill, [int(s) for s in LOCOMOTION])
        loco_offsets.append(offset[loco])
        all_offsets.append(offset)
        world, _ = b.fk(b.realized)
        above = (world[:, WRISTS, 1] > world[:, HEAD, None, 1]).any(axis=1)
        allowed = np.isin(b.skill, [int(s) for s in RAISED_ARMS_ALLOWED])
        above_inside += int((above & allowed).sum())
        for i in np.flatnonzero(above & ~allowed):
            above_outside.append({"episode": b.name, "frame": int(i), "skill": int(b.skill[i])})
        err = joint_tracking_error_rad(b.generated, b.realized)  # (F, 23)
        errors.append(err)
        anomaly_by_episode[b.name] = int((err.max(axis=1) > bound).sum())
        roll = np.degrees(head_roll_rad(b.realized))
        ends = [min(s + 14, len(b.realized) - 1) for s in b.step_start if s < len(b.realized)]
        step_roll_deg += [float(abs(roll[e])) for e in ends]
        for k in range(len(ends) - 2):
            if Skill.SIT in (int(b.step_skill[j]) for j in (k, k + 1, k + 2)):
                continue  # a seated head may tilt with the body
            # back within the bound at the end of one of the next two decisions
            back = min(abs(roll[ends[k + 1]]), abs(roll[ends[k + 2]]))
            roll_after_two.append(
                {"episode": b.name, "step": k, "after": b.step_text[k], "roll_deg": float(back)}
            )
        sit_steps = [k for k, s in enumerate(b.step_skill) if s == Skill.SIT]
        for k in sit_steps:
            s0 = int(b.step_start[k])
            s1 = min(s0 + 15, len(b.realized))
            if s0 >= s1:
                continue
            peak = float(b.realized[s0:s1, 1].max() - b.floor_y)
            sits.append(
                {"episode": b.name, "step": k, "text": b.step_text[k],
                 "pelvis_peak_above_floor_m": peak,
                 "end_pelvis_above_floor_m": float(b.realized[s1 - 1, 1] - b.floor_y),
                 "last_sit": k == sit_steps[-1]}
            )  # fmt: skip
            sit_standing.append(b.body.standing_pelvis_height_m)
    loco_all = np.concatenate(loco_offsets) if loco_offsets else np.zeros(0)
    all_all = np.concatenate(all_offsets) if all_offsets else np.zeros(0)
    err_all = np.degrees(np.concatenate(errors)) if errors else np.zeros((0, len(JOINT_NAMES) - 1))
    worst_joint = err_all.max(axis=0) if len(err_all) else np.zeros(len(JOINT_NAMES) - 1)
    order = np.argsort(-worst_joint)[:6]
    sit_over = [
        s
        for s, standing in zip(sits, sit_standing, strict=True)
        if s["pelvis_peak_above_floor_m"] > standing + SIT_RISE_TOLERANCE_M
    ]
    last_sits = [s for s in sits if s["last_sit"]]
    unseated = [
        s for s, standing in zip(sits, sit_standing, strict=True)
        if s["last_sit"] and s["end_pelvis_above_floor_m"] > standing - SEATED_DROP_M
    ]  # fmt: skip
    rolls = np.array([r["roll_deg"] for r in roll_after_two])
    report = {
        "episodes": len(bundles),
        "frames": int(len(all_all)),
        "wrist_offset_locomotion_m": _dist_stats(loco_all),
        "wrist_offset_all_m": _dist_stats(all_all),
        "wrist_above_head_frames_outside_sit_climb": len(above_outside),
        "wrist_above_head_frames_in_sit_climb": above_inside,
        "wrist_above_head_examples": above_outside[:10],
        "joint_error_deg": {
            "median": float(np.median(err_all)) if err_all.size else None,
            "p95": float(np.percentile(err_all, 95)) if err_all.size else None,
            "p99": float(np.percentile(err_all, 99)) if err_all.size else None,
            "max": float(err_all.max()) if err_all.size else None,
            "worst_joints": {JOINT_NAMES[1 + j]: float(worst_joint[j]) for j in order},
        },
        "motion_anomaly_bound_deg": MOTION_ANOMALY_BOUND_DEG,
        "motion_anomaly_frames": int(sum(anomaly_by_episode.values())),
        "episodes_with_motion_anomaly": sorted(k for k, v in anomaly_by_episode.items() if v),
        "sit_steps": len(sits),
        "sit_pelvis_peak_max_m": max((s["pelvis_peak_above_floor_m"] for s in sits), default=None),
        "sit_steps_above_standing": sit_over[:10],
        "last_sits": len(last_sits),
        "last_sits_not_seated": unseated[:10],
        "head_roll_step_end_deg": _dist_stats(np.asarray(step_roll_deg)),
        "head_roll_two_decisions_after_deg": _dist_stats(rolls),
        "head_roll_two_decisions_after_over_5deg": int((rolls > HEAD_ROLL_MAX_DEG).sum()),
    }
    bodies = {b.body.name: b.body.standing_pelvis_height_m for b in bundles}
    if set(bodies) != {"builtin"}:
        report["bodies_standing_pelvis_height_m"] = bodies
    loco = report["wrist_offset_locomotion_m"]
    field = field_report(bundles)
    report["field"] = field
    report["gates"] = {
        "no_wrist_above_head_outside_sit_climb": not above_outside,
        "wrist_offset_locomotion_p95_le_0.10m": loco["p95"] is None or loco["p95"] <= WRIST_P95_MAX_M,
        "wrist_offset_locomotion_max_le_0.30m": loco["max"] is None or loco["max"] <= WRIST_MAX_M,
        "motion_anomaly_zero": report["motion_anomaly_frames"] == 0,
        "sit_pelvis_never_above_standing": not sit_over,
        "every_last_sit_seated": not unseated,
        "head_roll_within_5deg_after_two_decisions": report[
            "head_roll_two_decisions_after_over_5deg"
        ] == 0,
    }  # fmt: skip
    if field:
        g, al, lo = FIELD_GATES, field["all"], field["locomotion"]
        report["gates"].update({
            "foot_skate_ratio_le_0.10": (al["foot_skate_ratio"] or 0.0) <= g["foot_skate_ratio_max"],
            "locomotion_floating_share_le_0.01": (lo["floating_share"] or 0.0) <= g["locomotion_floating_share_max"],
            "locomotion_penetration_le_0.03m": (lo["penetration_max_m"] or 0.0) <= g["locomotion_penetration_max_m"],
            "bone_lengths_within_1mm": al["bone_length_deviation_max_m"] <= g["bone_length_deviation_max_m"],
            "no_joint_limit_violation": al["joint_limit_violation_frames"] <= g["joint_limit_violation_frames_max"],
            "joint_gap_p95_le_0.10m": al["joint_gap_m"]["p95"] <= g["joint_gap_p95_max_m"],
            "no_bad_sit": field["bad_sits"] <= g["bad_sits_max"],
        })  # fmt: skip
    return report


def _standing(report: dict) -> str:
    bodies = report.get("bodies_standing_pelvis_height_m") or {"": STANDING_PELVIS_HEIGHT_M}
    return ", ".join(f"{name + ' ' if name else ''}{h:.3f} m" for name, h in bodies.items())


def _fmt(v: float | None, scale: float = 1.0, digits: int = 3) -> str:
    return "-" if v is None else f"{scale * v:.{digits}f}"


def text(report: dict) -> str:
    lo, al = report["wrist_offset_locomotion_m"], report["wrist_offset_all_m"]
    je = report["joint_error_deg"]
    lines = [
        f"episodes {report['episodes']}, realized frames {report['frames']}",
        f"wrist offset (pelvis frame), locomotion: median {_fmt(lo['median'])} m, "
        f"p95 {_fmt(lo['p95'])} m, max {_fmt(lo['max'])} m ({lo['frames']} frames)",
        f"wrist offset (pelvis frame), all skills: median {_fmt(al['median'])} m, "
        f"p95 {_fmt(al['p95'])} m, max {_fmt(al['max'])} m",
        f"frames with a wrist above the head: outside Sit/Climb "
        f"{report['wrist_above_head_frames_outside_sit_climb']}, in Sit/Climb "
        f"{report['wrist_above_head_frames_in_sit_climb']}",
        f"joint tracking error: median {_fmt(je['median'], digits=1)} deg, p95 "
        f"{_fmt(je['p95'], digits=1)}, p99 {_fmt(je['p99'], digits=1)}, max "
        f"{_fmt(je['max'], digits=1)}; worst joints "
        + ", ".join(f"{k} {v:.1f}" for k, v in je["worst_joints"].items()),
        f"motion_anomaly frames (> {report['motion_anomaly_bound_deg']:.0f} deg): "
        f"{report['motion_anomaly_frames']} in "
        f"{len(report['episodes_with_motion_anomaly'])} episodes",
        f"Sit steps {report['sit_steps']}: highest pelvis {_fmt(report['sit_pelvis_peak_max_m'])} m "
        f"above the floor (standing {_standing(report)}); last Sits not seated "
        f"{len(report['last_sits_not_seated'])} of {report['last_sits']}",
        f"head roll at step ends: median {_fmt(report['head_roll_step_end_deg']['median'], digits=1)}"
        f" deg, max {_fmt(report['head_roll_step_end_deg']['max'], digits=1)}; two decisions after "
        f"a step: max {_fmt(report['head_roll_two_decisions_after_deg']['max'], digits=1)} deg, "
        f"{report['head_roll_two_decisions_after_over_5deg']} over 5 deg",
    ]
    field = report.get("field") or {}
    if field:
        lines.append(
            "field metrics per skill (realized): skill | frames | foot skate ratio (generated)"
            " | floating share | penetration max (cm) | joint-limit frames | joint gap p95 /"
            " max (cm)"
        )
        for name, row in [("all", field["all"]), *field["per_skill"].items()]:
            skate, gen = row["foot_skate_ratio"], row["foot_skate_ratio_generated"]
            lines.append(
                f"  {name:16s} {row['frames']:6d}  "
                f"{'-' if skate is None else f'{100 * skate:.1f} %':>7s} "
                f"({'-' if gen is None else f'{100 * gen:.1f} %'})  "
                f"{100 * (row['floating_share'] or 0.0):5.1f} %  "
                f"{100 * (row['penetration_max_m'] or 0.0):5.1f}  "
                f"{row['joint_limit_violation_frames']:5d}  "
                f"{100 * row['joint_gap_m']['p95']:5.1f} / {100 * row['joint_gap_m']['max']:5.1f}"
            )
        lines.append(
            f"bone lengths: largest deviation {1000 * field['all']['bone_length_deviation_max_m']:.3f} mm; "
            f"Sits {field['sits']}: heels over {100 * SEATED_HEEL_MAX_M:.0f} cm "
            f"{field['sits_heels_up']}, hands held out (wrists under "
            f"{100 * SEATED_WRIST_DROP_MIN_M:.0f} cm below the shoulders) "
            f"{field['sits_hands_held_out']}, bad {field['bad_sits']}; heel height median "
            f"{_fmt(field['sit_heel_above_floor_m']['median'], 100, 1)} cm, max "
            f"{_fmt(field['sit_heel_above_floor_m']['max'], 100, 1)} cm; wrists below the "
            f"shoulders min {_fmt(field['sit_wrist_below_shoulder_m']['min'], 100, 1)} cm, "
            f"median {_fmt(field['sit_wrist_below_shoulder_m']['median'], 100, 1)} cm"
        )
    lines.append(
        "gates: " + ", ".join(f"{k}={'PASS' if v else 'FAIL'}" for k, v in report["gates"].items())
    )
    return "\n".join(lines) + "\n"


def main(args: Args) -> int:
    dirs = find_bundles(args.run_dir)
    if not dirs:
        raise SystemExit(f"no replay bundle under {args.run_dir}")
    report = analyse([load_bundle(d) for d in dirs])
    report["run_dir"] = str(args.run_dir)
    sys.stdout.write(text(report))
    if args.out_json is not None:
        write_json_atomic(args.out_json, report)
    return 1 if args.check and not all(report["gates"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main(tyro.cli(Args)))
