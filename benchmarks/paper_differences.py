"""Measure what differs between this package's paper configuration and the reference release.

    python benchmarks/paper_differences.py --release PATH [--out docs/results/paper_differences.json]

``PATH`` is a checkout of the reference release (its bodies, profile and seed state are
read; nothing of it is copied). Written (JSON, the figures ``docs/paper.md`` quotes):

* ``bodies.<name>``: each release body as this package reads it: links, mass as URDF
  readers simulate it, links without ``<inertial>``, rest height, pelvis height above the
  lowest point, how far finger link origins reach past the wrist (Nav points), and the
  largest offset of its 22 body joint centres from this package's skeleton;
* ``skeleton``: the built-in body's hand joint reach past the wrist, for comparison;
* ``root_placement``: where the release's arithmetic puts its root link relative to its
  motion's pelvis at spawn (its ``shift.npy`` row 0 through its Z-up-to-Habitat rotation,
  against the SMPL rest pelvis of its seed state), Habitat axes, metres: what switching
  ``release_arithmetic`` moves the spawn by;
* ``spawn_height.<split>``: over the release's episodes, the body's lowest point at the
  release's spawn (its seed state placed at the episode's ``init_offset``, height included)
  relative to the episode's ``start_position`` height: median, 5th / 95th percentile,
  extremes, and how many start more than 0.5 m below it or more than 5 cm above it (this
  package's own arithmetic puts the lowest point on the start point's floor);
* ``first_frame``: the translation the release gives the first frame of every chunk (none)
  against the generated one, for this package's procedural ``Walk<forward><normal>``;
* ``physics.<backend>.<options>``: the release body on an open floor through a scripted
  sequence (procedural motion), with the paper profile's options and the release's
  arithmetic (``release_arithmetic``, the profile's default), with the same options and this
  package's arithmetic (``our_arithmetic``), and with the backends' defaults: realized vs
  generated pelvis at the end (horizontal, metres), largest vertical difference, the driven
  joints' angle to their generated rotation (mean, 95th percentile and largest over every
  frame, degrees), and the CPU time per decision.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from humanclaw_gym.body.asset import load_body_asset
from humanclaw_gym.body.skeleton import JOINT_INDEX, REST_JOINTS_M
from humanclaw_gym.fileio import write_json_atomic

_BODIES = ("neutral_beta0_handmerged", "neutral_beta0_finger_separated")
_SEQUENCE = (
    "Walk<forward><normal>",
    "Walk<forward><normal>",
    "Walk<forward><fast>",
    "Turn<left><60>",
    "Walk<forward><normal>",
    "Side step<right><0.3>",
    "Step back<0.3>",
)


@dataclass
class Args:
    release: Path
    """a checkout of the reference release"""
    out: Path = Path("docs/results/paper_differences.json")
    """where to write the figures"""


def _fingers_past_wrist(body) -> float:
    rest = body.rest_link_origins_m
    reach = 0.0
    for side in ("left", "right"):
        wrist = rest[body.link_index(f"{side}_wrist")]
        for j, name in enumerate(body.links):
            if name.startswith(f"{side}_") and name[-1] in "123" and "eye" not in name:
                reach = max(reach, float(np.linalg.norm(rest[j] - wrist)))
    return reach


def _bodies(release: Path) -> dict:
    out = {}
    for name in _BODIES:
        body = load_body_asset(release / "resources/agent" / name)
        rest = body.rest_link_origins_m
        joint_offset = max(
            float(np.linalg.norm(rest[body.link_index(n)] - REST_JOINTS_M[JOINT_INDEX[n]]))
            for n in body.links
            if n in JOINT_INDEX
        )
        out[name] = {
            "links": body.num_links,
            "mass_simulated_kg": round(body.total_mass_kg, 6),
            "links_without_inertial": len(body.default_inertial_links),
            "height_m": round(body.height_m, 4),
            "standing_pelvis_m": round(body.standing_pelvis_height_m, 4),
            "fingers_past_wrist_m": round(_fingers_past_wrist(body), 4),
            "max_joint_offset_from_skeleton_m": round(joint_offset, 4),
            "sha256": body.sha256,
        }
    return out


def _root_placement(release: Path) -> dict:
    import torch

    body = load_body_asset(release / "resources/agent" / _BODIES[0])
    seed = torch.load(
        release / "resources/seeds/natural_beta0_fk_seed.pt", map_location="cpu", weights_only=True
    )
    state = seed["state"] if isinstance(seed, dict) else seed
    state = state.double().numpy()
    rest_pelvis = state[0, 75:78] - state[0, 0:3]  # SMPL: joint 0 minus the translation
    # the release: root = W(shift0) + W(Rx90 transl); W = [[-1,0,0],[0,0,1],[0,1,0]]
    w = np.array([[-1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    root_offset = w @ body.shift_m[0]
    half_turn = np.diag([-1.0, 1.0, -1.0])  # the motion world's pelvis in Habitat axes
    delta = root_offset - half_turn @ rest_pelvis
    return {
        "root_minus_motion_pelvis_m": [round(float(v), 4) for v in delta],
        "vertical_m": round(float(delta[1]), 4),
        "horizontal_m": round(float(math.hypot(delta[0], delta[2])), 4),
    }


def _spawn_height(release: Path) -> dict:
    """The release body's lowest point at the release's spawn, relative to each episode's
    start height (see the module docstring)."""
    import torch

    from humanclaw_gym.episodes.io import load_split
    from humanclaw_gym.physics.release import release_spawn_frame

    body = load_body_asset(release / "resources/agent" / _BODIES[0])
    seed = torch.load(
        release / "resources/seeds/natural_beta0_fk_seed.pt", map_location="cpu", weights_only=True
    )
    state = (seed["state"] if isinstance(seed, dict) else seed).double().numpy()
    start = state[0, :75].copy()  # placed at init_offset 0, yaw 0 (a yaw turns no height)
    frame = release_spawn_frame(start, body.shift_m[0])
    lowest = float(body.posed_vertices(body.link_poses_from_frame(frame))[:, 1].min())
    root_to_lowest = lowest - float(frame[1])
    out = {"root_to_lowest_m": round(root_to_lowest, 4)}
    for split, rel in (("val100", "resources/benchmark/val100.json"),
                       ("val", "resources/benchmark/episodes/val")):  # fmt: skip
        gaps = []
        for ep in load_split(release / rel):
            offset = ep.reference.init_offset  # (x, z, y)
            root_y = float(frame[1]) + float(offset[2])
            gaps.append(root_y + root_to_lowest - float(ep.start_position[1]))
        g = np.array(gaps)
        out[split] = {
            "episodes": len(g),
            "lowest_minus_start_median_m": round(float(np.median(g)), 4),
            "p5_m": round(float(np.percentile(g, 5)), 4),
            "p95_m": round(float(np.percentile(g, 95)), 4),
            "min_m": round(float(g.min()), 4),
            "max_m": round(float(g.max()), 4),
            "below_0_5_m": int((g < -0.5).sum()),
            "above_0_05_m": int((g > 0.05).sum()),
        }
    return out


def _first_frame() -> dict:
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
    from humanclaw_gym.skills import SkillCall

    motion = ProceduralMotionGenerator()
    history = motion.reset(np.zeros(3), 0.0, seed=0)
    last = history[-1]
    steps = []
    for _ in range(3):
        chunk = motion.generate(SkillCall.parse("Walk<forward><normal>"))
        first = float(np.linalg.norm(chunk[0, [0, 2]] - last[[0, 2]]))
        total = float(np.linalg.norm(chunk[-1, [0, 2]] - last[[0, 2]]))
        steps.append((first, total))
        last = chunk[-1]
    first, total = steps[-1]  # a chunk of a steady walk
    return {
        "dropped_m": round(first, 4),
        "chunk_m": round(total, 4),
        "dropped_fraction": round(first / total, 4),
    }


def _physics(release: Path) -> dict:
    from humanclaw_gym.backends import registry
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
    from humanclaw_gym.profiles import paper_physics
    from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec
    from humanclaw_gym.skills import SkillCall

    body, profile = paper_physics(release)
    _, ours = paper_physics(release, release_arithmetic=False)
    floor = SceneObject(1, "floor", "floor", (0.0, -0.05, 0.0), 0.0, (Part("box", (20, 0.05, 20)),))
    scene = SceneSpec("open", (Room(0, "living_room", (-20, -20), (20, 20)),), (floor,))
    out: dict = {}
    for name in ("pybullet", "mujoco"):
        cls = registry.entry("physics", name).load()
        out[name] = {}
        runs = (("release_arithmetic", profile), ("our_arithmetic", ours), ("defaults", {}))
        for label, options in runs:
            physics = cls(body_asset=str(body.path), **options)
            physics.build(scene)
            motion = ProceduralMotionGenerator()
            history = motion.reset(np.zeros(3), 0.0, seed=0)
            start = history[-1].copy()
            start[1] += body.standing_pelvis_height_m - start[1] + 0.002
            physics.reset(start)
            lift = start[1] - history[-1][1]
            worst_y, spent = 0.0, 0.0
            driven = [k for k in np.unique(physics._drive_map) if k > 0]
            joint_deg: list[np.ndarray] = []
            for text in _SEQUENCE:
                frames = motion.generate(SkillCall.parse(text))
                t0 = time.process_time()
                for frame in frames:
                    physics.step_frame(frame)
                    real = physics.realized_frame()
                    y = real[1] - (frame[1] + lift)
                    worst_y = max(worst_y, abs(float(y)))
                    joint_deg.append(_joint_errors_deg(frame, real, driven))
                spent += time.process_time() - t0
            end = physics.realized_frame()
            errors = np.concatenate(joint_deg)
            out[name][label] = {
                "pelvis_end_error_m": round(
                    float(np.linalg.norm(end[[0, 2]] - frames[-1][[0, 2]])), 4
                ),
                "pelvis_height_error_max_m": round(worst_y, 4),
                "joint_error_mean_deg": round(float(errors.mean()), 2),
                "joint_error_p95_deg": round(float(np.percentile(errors, 95)), 2),
                "joint_error_max_deg": round(float(errors.max()), 2),
                "cpu_ms_per_decision": round(1000.0 * spent / len(_SEQUENCE), 1),
            }
            physics.close()
    return out


def _joint_errors_deg(frame: np.ndarray, real: np.ndarray, joints: list[int]) -> np.ndarray:
    """Angle of each driven joint's realized rotation to the generated one, degrees (neck
    and head, which the release's arithmetic zeroes, are not counted)."""
    from humanclaw_gym.physics.release import NECK_HEAD_JOINTS
    from humanclaw_gym.rotations import quat_conj, quat_exp, quat_log, quat_mul

    kept = [k for k in joints if k not in {JOINT_INDEX[n] for n in NECK_HEAD_JOINTS}]
    cols = np.array([[3 + 3 * k, 4 + 3 * k, 5 + 3 * k] for k in kept])
    gen, got = quat_exp(frame[cols]), quat_exp(real[cols])
    return np.degrees(np.linalg.norm(quat_log(quat_mul(quat_conj(got), gen)), axis=-1))


def main(args: Args) -> int:
    release = args.release.expanduser()
    record = {
        "schema": "humanclaw_paper_differences_v2",
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "load_average_1min_at_start": round(os.getloadavg()[0], 2),
        },
        "sequence": list(_SEQUENCE),
        "bodies": _bodies(release),
        "skeleton": {
            "hand_past_wrist_m": round(
                float(
                    np.linalg.norm(
                        REST_JOINTS_M[JOINT_INDEX["left_hand"]]
                        - REST_JOINTS_M[JOINT_INDEX["left_wrist"]]
                    )
                ),
                4,
            )
        },
        "root_placement": _root_placement(release),
        "spawn_height": _spawn_height(release),
        "first_frame": _first_frame(),
        "physics": _physics(release),
    }
    write_json_atomic(args.out, record)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(tyro.cli(Args)))
