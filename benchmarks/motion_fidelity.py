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

Gates of issue #11 (printed as pass/fail, exit status 1 if any fails with ``--check``):
no wrist above the head outside Sit/Climb, locomotion wrist offset p95 <= 0.10 m and
max <= 0.30 m, no frame over the anomaly bound, no Sit pelvis above standing height, every
last Sit seated.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from humanclaw_gym.body.skeleton import JOINT_NAMES, STANDING_PELVIS_HEIGHT_M, forward_kinematics
from humanclaw_gym.fileio import write_json_atomic
from humanclaw_gym.metrics.thresholds import MOTION_ANOMALY_BOUND_DEG
from humanclaw_gym.metrics.tracking import (
    HEAD,
    WRISTS,
    head_roll_rad,
    joint_tracking_error_rad,
    pelvis_frame_positions,
)
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


def load_bundle(directory: Path) -> Bundle:
    manifest = json.loads((directory / "replay_manifest.json").read_text(encoding="utf-8"))
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
    floor_y = float(start[1]) if start else float(seed[-1, 1] - STANDING_PELVIS_HEIGHT_M)
    return Bundle(
        name=str(manifest.get("episode_id", directory.name)),
        generated=generated[:n],
        realized=realized,
        skill=skill[:n],
        step_start=step_start,
        step_skill=step_skill,
        step_text=step_text,
        floor_y=floor_y,
    )


def _dist_stats(values: np.ndarray) -> dict:
    if values.size == 0:
        return {"frames": 0, "median": None, "p95": None, "max": None}
    return {
        "frames": int(values.size),
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
    step_roll_deg: list[float] = []
    roll_after_two: list[dict] = []
    anomaly_by_episode: dict[str, int] = {}
    bound = math.radians(MOTION_ANOMALY_BOUND_DEG)
    for b in bundles:
        if len(b.realized) == 0:
            continue
        lg = pelvis_frame_positions(b.generated)
        lr = pelvis_frame_positions(b.realized)
        offset = np.linalg.norm(lg[:, WRISTS] - lr[:, WRISTS], axis=-1).max(axis=1)  # (F,)
        loco = np.isin(b.skill, [int(s) for s in LOCOMOTION])
        loco_offsets.append(offset[loco])
        all_offsets.append(offset)
        world, _ = forward_kinematics(b.realized)
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
    loco_all = np.concatenate(loco_offsets) if loco_offsets else np.zeros(0)
    all_all = np.concatenate(all_offsets) if all_offsets else np.zeros(0)
    err_all = np.degrees(np.concatenate(errors)) if errors else np.zeros((0, len(JOINT_NAMES) - 1))
    worst_joint = err_all.max(axis=0) if len(err_all) else np.zeros(len(JOINT_NAMES) - 1)
    order = np.argsort(-worst_joint)[:6]
    sit_over = [
        s
        for s in sits
        if s["pelvis_peak_above_floor_m"] > STANDING_PELVIS_HEIGHT_M + SIT_RISE_TOLERANCE_M
    ]
    last_sits = [s for s in sits if s["last_sit"]]
    unseated = [
        s for s in last_sits
        if s["end_pelvis_above_floor_m"] > STANDING_PELVIS_HEIGHT_M - SEATED_DROP_M
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
    loco = report["wrist_offset_locomotion_m"]
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
    return report


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
        f"above the floor (standing {STANDING_PELVIS_HEIGHT_M:.3f} m); last Sits not seated "
        f"{len(report['last_sits_not_seated'])} of {report['last_sits']}",
        f"head roll at step ends: median {_fmt(report['head_roll_step_end_deg']['median'], digits=1)}"
        f" deg, max {_fmt(report['head_roll_step_end_deg']['max'], digits=1)}; two decisions after "
        f"a step: max {_fmt(report['head_roll_two_decisions_after_deg']['max'], digits=1)} deg, "
        f"{report['head_roll_two_decisions_after_over_5deg']} over 5 deg",
        "gates: " + ", ".join(f"{k}={'PASS' if v else 'FAIL'}" for k, v in report["gates"].items()),
    ]
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
