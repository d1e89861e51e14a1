"""Motion quality of the learned (flow) and the procedural generator, side by side.

    python benchmarks/motion_quality.py                         # shipped checkpoint
    python benchmarks/motion_quality.py --checkpoint runs/flow_motion --seeds 5

Every case plays one skill call repeatedly from the standing seed pose through the real
pybullet half-physics (:class:`~humanclaw_gym.physics.pybullet_backend.PybulletHalfPhysics`)
on an open floor (a box seat behind the body for Sit down), for several seeds, and
measures:

* **request vs result** per chunk, on the generated (pre-physics) frames and on the
  realized (post-physics) poses: forward distance (Walk), heading change (Turn), lateral
  distance (Side step, left positive), backward distance (Step back), measured in the start
  pose's heading frame and averaged over the chunks of a trial; for Sit down the final
  pelvis height against the seated height the procedural geometry asks for
  (``seated_pelvis_height``) and whether the pelvis touches the seat on the last physics
  frame of the chunk (the GeoInteractSR rule);
* **foot sliding**: horizontal speed of a foot's lowest sole point while that point is
  within 2 cm of the floor in two consecutive frames (cm/s of contact time), on generated
  and on realized frames;
* **Motion Jerk** (:func:`humanclaw_gym.metrics.motion_jerk`) of the generated frames
  (seed pose + chunks);
* **speed** of the learned generator: one chunk at batch 1, and 8 chunks in one batch
  (one skill for all, and 8 different calls);
* the learned Sit down once more **without seat guidance** (the network's sample alone),
  so the effect of the guidance stays visible;
* **realized-motion checks** (issue #11) of every case, on the open floor and, for the
  walks, turns and step backs, once more *next to furniture* (a bed 0.25 m to the right of the path,
  a tall cabinet 0.37 m to the left): the largest per-joint tracking error after physics
  (bound: ``MOTION_ANOMALY_BOUND_DEG``) and the frames over it, frames with a wrist above
  the head, and the head's roll at the end of the trial (flat floor: it must be back within
  5 degrees). Climb upstairs and Walk downstairs are played on the flat floor for these
  checks only; side steps are not played next to furniture (they would walk into it).

Writes JSON and a markdown table (``--out-json`` / ``--out-md``).
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("LP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import tyro  # noqa: E402

from humanclaw_gym.body.skeleton import forward_kinematics, heading_yaw  # noqa: E402
from humanclaw_gym.fileio import write_json_atomic, write_text_atomic  # noqa: E402
from humanclaw_gym.metrics import (  # noqa: E402
    MOTION_ANOMALY_BOUND_DEG,
    head_roll_rad,
    joint_tracking_error_rad,
    motion_jerk,
)
from humanclaw_gym.metrics.interact import pelvis_target_contact  # noqa: E402
from humanclaw_gym.metrics.tracking import HEAD, WRISTS  # noqa: E402
from humanclaw_gym.motion.canonical import foot_corner_offsets  # noqa: E402
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator, seated_pelvis_height  # noqa: E402
from humanclaw_gym.scenes.navgrid import APPROACH_OFFSET_M  # noqa: E402
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec  # noqa: E402

_FLOOR_ID, _SEAT_ID, _BED_ID, _CABINET_ID = 1, 2, 3, 4
_CONTACT_M = 0.02
_FPS = 30.0
_FOOT_JOINTS = ((7, 10), (8, 11))  # (ankle, toe) of the left and the right foot


@dataclass
class Args:
    checkpoint: str | None = None
    """flow checkpoint directory (default: the shipped one)"""
    seeds: int = 3
    """trials per case (style/noise seeds 0..seeds-1)"""
    chunks: int = 3
    """chunks per trial for the locomotion skills"""
    steps: int = 30
    """midpoint iterations of the learned generator"""
    out_json: str = "runs/motion_quality.json"
    out_md: str = "runs/motion_quality.md"
    timing_repeats: int = 5
    furniture: bool = True
    """also play the locomotion cases next to furniture (realized-motion checks)"""


@dataclass(frozen=True)
class Case:
    name: str
    call: str
    quantity: str  # forward_m | yaw_rad | lateral_m | backward_m | sit | checks
    request: float


CASES = (
    Case("walk slow", "Walk<forward><slow>", "forward_m", 0.2),
    Case("walk normal", "Walk<forward><normal>", "forward_m", 0.4),
    Case("walk fast", "Walk<forward><fast>", "forward_m", 0.6),
    Case("turn left 30", "Turn<left><30>", "yaw_rad", np.radians(30.0)),
    Case("turn right 90", "Turn<right><90>", "yaw_rad", -np.radians(90.0)),
    Case("side step left 0.25", "Side step<left><0.25>", "lateral_m", 0.25),
    Case("side step right 0.4", "Side step<right><0.4>", "lateral_m", -0.4),
    Case("step back 0.3", "Step back<0.3>", "backward_m", 0.3),
    Case("step back 0.5", "Step back<0.5>", "backward_m", 0.5),
    Case("sit 0.3", "Sit down<0.3>", "sit", 0.3),
    Case("sit 0.45", "Sit down<0.45>", "sit", 0.45),
    Case("sit 0.6", "Sit down<0.6>", "sit", 0.6),
    Case("climb up, flat floor", "Climb upstairs<normal>", "checks", 0.0),
    Case("walk down, flat floor", "Walk downstairs<normal>", "checks", 0.0),
)
#: Locomotion cases (their wrists must stay below the head) ...
_LOCOMOTION_QUANTITIES = ("forward_m", "yaw_rad", "lateral_m", "backward_m")
#: ... and those played next to furniture too: the ones that move along it (side steps
#: would walk into the bed or the cabinet, a collision by construction).
_FURNITURE_QUANTITIES = ("forward_m", "yaw_rad", "backward_m")


def _floor() -> SceneObject:
    return SceneObject(
        _FLOOR_ID, "floor", "floor", (0.0, -0.05, 0.0), 0.0, (Part("box", (8.0, 0.05, 8.0)),)
    )


def scene(seat_height_m: float | None = None) -> SceneSpec:
    """Open floor; with a seat: a 0.6 x 0.6 m box whose front edge is
    ``APPROACH_OFFSET_M`` behind the pelvis of a body at the origin facing +Z (where the
    env's approach pose puts a body that is about to sit)."""
    objects = [_floor()]
    if seat_height_m is not None:
        h = seat_height_m / 2.0
        objects.append(
            SceneObject(
                _SEAT_ID,
                "seat",
                "couch",
                (0.0, 0.0, -(APPROACH_OFFSET_M + 0.3)),
                0.0,
                (Part("box", (0.3, h, 0.3), (0.0, h, 0.0)),),
            )
        )
    return SceneSpec(
        "motion_quality", (Room(0, "living_room", (-8.0, -8.0), (8.0, 8.0)),), tuple(objects)
    )


def furniture_scene() -> SceneSpec:
    """Open floor with a bed (0.55 m high) whose side is 0.25 m to the right of a body at the
    origin facing +Z (the navigation clearance) and a tall cabinet 0.37 m to its left (just
    clear of the swinging hand), both along the first 2 m of the path."""
    bed = SceneObject(
        _BED_ID, "bed", "bed", (-0.75, 0.0, 1.0), 0.0,
        (Part("box", (0.5, 0.275, 1.0), (0.0, 0.275, 0.0)),),
    )  # fmt: skip
    cabinet = SceneObject(
        _CABINET_ID, "cabinet", "cabinet", (0.62, 0.0, 0.6), 0.0,
        (Part("box", (0.25, 1.0, 0.3), (0.0, 1.0, 0.0)),),
    )  # fmt: skip
    return SceneSpec(
        "motion_quality_furniture",
        (Room(0, "bedroom", (-8.0, -8.0), (8.0, 8.0)),),
        (_floor(), bed, cabinet),
    )


def realized_checks(generated: np.ndarray, realized: np.ndarray, locomotion: bool) -> dict:
    """Issue #11's realized-motion checks of one trial (frames include the seed pose)."""
    err = np.degrees(joint_tracking_error_rad(generated, realized))
    pos, _ = forward_kinematics(realized)
    raised = (pos[:, list(WRISTS), 1] > pos[:, HEAD, None, 1]).any(axis=1)
    roll = np.degrees(np.abs(head_roll_rad(realized)))
    return {
        "max_joint_error_deg": float(err.max()),
        "frames_over_bound": int((err.max(axis=1) > MOTION_ANOMALY_BOUND_DEG).sum()),
        "wrist_above_head_frames": int(raised.sum()) if locomotion else None,
        "head_roll_end_deg": float(roll[-1]),
        "head_roll_max_deg": float(roll.max()),
    }


def _checks_summary(trials: list[dict]) -> dict:
    """Worst case over the trials of a case."""
    out: dict = {}
    for key in trials[0]:
        values = [t[key] for t in trials if t[key] is not None]
        out[key] = (max(values) if key != "frames_over_bound" else sum(values)) if values else None
    return out


def _soles(frames: np.ndarray) -> np.ndarray:
    """World corner points of both feet, ``(T, 2, 16, 3)``."""
    pos, rot = forward_kinematics(frames)
    ankle_c, toe_c = foot_corner_offsets()
    out = []
    for side, (ankle, toe) in enumerate(_FOOT_JOINTS):
        a = pos[:, ankle, None] + np.einsum("tab,kb->tka", rot[:, ankle], ankle_c[side])
        b = pos[:, toe, None] + np.einsum("tab,kb->tka", rot[:, toe], toe_c[side])
        out.append(np.concatenate([a, b], axis=1))
    return np.stack(out, axis=1)


def foot_slide_cm_per_s(frames: np.ndarray, floor_y: float = 0.0) -> float:
    """Mean horizontal speed (cm/s) of each foot's lowest sole point while it stays within
    2 cm of the floor over a frame step (the same body-fixed point is followed)."""
    pts = _soles(frames)
    slide, contact_frames = 0.0, 0
    for side in (0, 1):
        p = pts[:, side]
        low = np.argmin(p[:, :, 1], axis=1)
        for t in range(len(frames) - 1):
            k = low[t]
            if p[t, k, 1] - floor_y <= _CONTACT_M and p[t + 1, k, 1] - floor_y <= _CONTACT_M:
                slide += float(np.hypot(*(p[t + 1, k, [0, 2]] - p[t, k, [0, 2]])))
                contact_frames += 1
    if contact_frames == 0:
        return 0.0
    return 100.0 * slide / (contact_frames / _FPS)


def _measure(frames: np.ndarray, quantity: str, n_chunks: int) -> float:
    """Per-chunk mean of the requested quantity, in the start pose's heading frame."""
    start = frames[0]
    yaw0 = float(heading_yaw(start[3:6]))
    fwd = np.array([np.sin(yaw0), 0.0, np.cos(yaw0)])
    left = np.cross([0.0, 1.0, 0.0], fwd)
    delta = frames[-1, :3] - start[:3]
    if quantity == "forward_m":
        value = delta @ fwd
    elif quantity == "backward_m":
        value = -(delta @ fwd)
    elif quantity == "lateral_m":
        value = delta @ left
    elif quantity == "yaw_rad":
        yaws = np.unwrap(heading_yaw(frames[:, 3:6]))
        value = yaws[-1] - yaws[0]
    else:  # pragma: no cover
        raise ValueError(quantity)
    return float(value) / n_chunks


def run_trial(gen, physics, call: str, n_chunks: int, seed: int, seat_id: int | None) -> dict:
    """Play ``n_chunks`` calls from the standing seed at the origin (facing +Z)."""
    history = gen.reset(np.zeros(3), 0.0, seed=seed)
    physics.reset(history[-1])
    generated = [history[-1:]]
    realized = [physics.realized_frame()[None]]
    contact_last = []
    for _ in range(n_chunks):
        chunk = gen.generate(call)
        for frame in chunk:
            physics.step_frame(frame)
            realized.append(physics.realized_frame()[None])
        if seat_id is not None:
            contact_last.append(pelvis_target_contact(physics.contacts(), [seat_id]))
        generated.append(chunk)
    gen_frames = np.concatenate(generated)
    real_frames = np.concatenate(realized)
    return {
        "generated": gen_frames,
        "realized": real_frames,
        "jerk": motion_jerk(np.concatenate([history[:-1], gen_frames])),
        "seat_contact_last_frame": contact_last,
    }


def _stats(values: list[float]) -> dict:
    arr = np.asarray(values, dtype=float)
    return {"mean": float(arr.mean()), "std": float(arr.std()), "values": [float(v) for v in arr]}


def evaluate(gen, args: Args, cases: tuple[Case, ...] | None = None) -> dict:
    """All cases (or the given ones) for one generator."""
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics

    results: dict[str, dict] = {}
    physics_by_seat: dict[float | str | None, PybulletHalfPhysics] = {}

    def backend(key: float | str | None) -> PybulletHalfPhysics:
        if key not in physics_by_seat:
            physics = PybulletHalfPhysics()
            physics.build(furniture_scene() if key == "furniture" else scene(key))
            physics_by_seat[key] = physics
        return physics_by_seat[key]

    try:
        for case in CASES if cases is None else cases:
            seat = case.request if case.quantity == "sit" else None
            physics = backend(seat)
            n = 2 if case.quantity == "sit" else args.chunks  # sit: the sit, then a hold
            locomotion = case.quantity in _LOCOMOTION_QUANTITIES
            along_furniture = case.quantity in _FURNITURE_QUANTITIES
            checks: list[dict] = []
            near: list[dict] = []
            if case.quantity == "checks":
                for seed in range(args.seeds):
                    trial = run_trial(gen, physics, case.call, n, seed, None)
                    checks.append(realized_checks(trial["generated"], trial["realized"], False))
                results[case.name] = {
                    "call": case.call,
                    "quantity": "checks",
                    "realized_checks": _checks_summary(checks),
                }
                continue
            keys = (
                "gen",
                "real",
                "slide_gen",
                "slide_real",
                "jerk",
                "contact",
                "contact2",
                "real2",
            )
            per: dict[str, list] = {k: [] for k in keys}
            for seed in range(args.seeds):
                trial = run_trial(gen, physics, case.call, n, seed, _SEAT_ID if seat else None)
                g, r = trial["generated"], trial["realized"]
                if case.quantity == "sit":  # pelvis height at the end of the sit chunk
                    per["gen"].append(float(g[15, 1]))
                    per["real"].append(float(r[15, 1]))
                    per["contact"].append(bool(trial["seat_contact_last_frame"][0]))
                    per["contact2"].append(bool(trial["seat_contact_last_frame"][1]))
                    per["real2"].append(float(r[30, 1]))
                else:
                    per["gen"].append(_measure(g, case.quantity, n))
                    per["real"].append(_measure(r, case.quantity, n))
                    per["slide_gen"].append(foot_slide_cm_per_s(g))
                    per["slide_real"].append(foot_slide_cm_per_s(r))
                if trial["jerk"] is not None:
                    per["jerk"].append(float(trial["jerk"]))
                checks.append(realized_checks(g, r, locomotion))
                if along_furniture and args.furniture:
                    t2 = run_trial(gen, backend("furniture"), case.call, n, seed, None)
                    near.append(realized_checks(t2["generated"], t2["realized"], True))
            target = seated_pelvis_height(case.request) if case.quantity == "sit" else case.request
            entry = {
                "call": case.call,
                "quantity": "pelvis_height_m" if case.quantity == "sit" else case.quantity,
                "request": float(case.request),
                "target": float(target),
                "generated": _stats(per["gen"]),
                "realized": _stats(per["real"]),
                "realized_error_pct": _stats(
                    [100.0 * abs(v - target) / abs(target) for v in per["real"]]
                ),
                "generated_error_pct": _stats(
                    [100.0 * abs(v - target) / abs(target) for v in per["gen"]]
                ),
            }
            if per["jerk"]:
                entry["motion_jerk"] = _stats(per["jerk"])
            entry["realized_checks"] = _checks_summary(checks)
            if near:
                entry["realized_checks_next_to_furniture"] = _checks_summary(near)
            if case.quantity == "sit":
                entry["pelvis_seat_contact_rate"] = float(np.mean(per["contact"]))
                entry["pelvis_seat_contact_rate_after_hold"] = float(np.mean(per["contact2"]))
                entry["realized_after_hold"] = _stats(per["real2"])
            else:
                entry["foot_slide_generated_cm_s"] = _stats(per["slide_gen"])
                entry["foot_slide_realized_cm_s"] = _stats(per["slide_real"])
            results[case.name] = entry
    finally:
        for physics in physics_by_seat.values():
            physics.close()
    return results


def timing(checkpoint: str | None, steps: int, repeats: int) -> dict:
    """Wall time of one chunk (batch 1) and of 8 chunks in one batch (same / mixed calls)."""
    import torch

    from humanclaw_gym.motion.flow.generator import FlowMotionGenerator, generate_many

    torch.set_num_threads(1)
    gens = [FlowMotionGenerator(checkpoint, steps=steps) for _ in range(8)]
    for i, g in enumerate(gens):
        g.reset(np.zeros(3), 0.0, seed=i)
    mixed = [c.call for c in CASES[:8]]

    def best(fn) -> float:
        fn()
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        return 1000.0 * statistics.median(samples)

    for g in gens:
        g.reset(np.zeros(3), 0.0, seed=0)
    b1 = best(lambda: gens[0].generate("Turn<left><10>"))
    b8_same = best(lambda: generate_many([(g, "Turn<left><10>") for g in gens]))
    b8_mixed = best(lambda: generate_many(list(zip(gens, mixed, strict=True))))
    return {
        "threads": 1,
        "steps": steps,
        "batch1_ms": b1,
        "batch8_same_skill_ms": b8_same,
        "batch8_mixed_skills_ms": b8_mixed,
        "batch8_same_over_batch1": b8_same / b1,
        "batch8_mixed_over_batch1": b8_mixed / b1,
    }


def _fmt(entry: dict, key: str, scale: float, digits: int) -> str:
    s = entry[key]
    return f"{scale * s['mean']:.{digits}f}"


def checks_markdown(flow: dict, proc: dict) -> list[str]:
    """The realized-motion checks table (worst over the seeds; flow / procedural)."""

    def cell(entry: dict, key: str, what: str) -> str:
        block = entry.get(key)
        if block is None or block.get(what) is None:
            return "-"
        value = block[what]
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    lines = [
        f"Realized-motion checks (worst over the seeds, flow / procedural; bound "
        f"{MOTION_ANOMALY_BOUND_DEG:.0f} deg):",
        "",
        "| case | max joint error deg | frames over the bound | wrist above head (frames) "
        "| head roll at the end deg | next to furniture: max joint error deg "
        "| next to furniture: wrist above head |",
        "|---|---|---|---|---|---|---|",
    ]
    columns = (
        ("realized_checks", "max_joint_error_deg"),
        ("realized_checks", "frames_over_bound"),
        ("realized_checks", "wrist_above_head_frames"),
        ("realized_checks", "head_roll_end_deg"),
        ("realized_checks_next_to_furniture", "max_joint_error_deg"),
        ("realized_checks_next_to_furniture", "wrist_above_head_frames"),
    )
    for name, f in flow.items():
        p = proc[name]
        cells = [f"{cell(f, key, what)} / {cell(p, key, what)}" for key, what in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown(report: dict) -> str:
    """The side-by-side table (and the timing lines)."""
    lines = [
        "| case | target | flow: generated | flow: realized | flow err % "
        "| procedural: generated | procedural: realized | procedural err % "
        "| foot slide cm/s, generated (flow / proc.) | foot slide cm/s, realized (flow / proc.) "
        "| Motion Jerk m/s^3 (flow / proc.) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    flow, proc = report["generators"]["flow"], report["generators"]["procedural"]
    for name, f in flow.items():
        p = proc[name]
        if f["quantity"] == "checks":
            continue
        angle = f["quantity"] == "yaw_rad"
        scale, unit, digits = (np.degrees(1.0), " deg", 1) if angle else (1.0, " m", 3)
        target = f"{scale * f['target']:.{digits}f}{unit}"
        if f["quantity"] == "pelvis_height_m":
            target = f"pelvis {target}"
            slide_g = slide_r = "-"
            extra_f, extra_p = (
                f"<br>contact {100 * e['pelvis_seat_contact_rate']:.0f} %, after a 2nd Sit "
                f"{100 * e['pelvis_seat_contact_rate_after_hold']:.0f} %"
                for e in (f, p)
            )
        else:
            slide_g = (
                f"{f['foot_slide_generated_cm_s']['mean']:.1f} / "
                f"{p['foot_slide_generated_cm_s']['mean']:.1f}"
            )
            slide_r = (
                f"{f['foot_slide_realized_cm_s']['mean']:.1f} / "
                f"{p['foot_slide_realized_cm_s']['mean']:.1f}"
            )
            extra_f = extra_p = ""
        jerk = (
            f"{f['motion_jerk']['mean']:.1f} / {p['motion_jerk']['mean']:.1f}"
            if "motion_jerk" in f and "motion_jerk" in p
            else "-"
        )
        lines.append(
            f"| {name} | {target} | {_fmt(f, 'generated', scale, digits)} | "
            f"{_fmt(f, 'realized', scale, digits)}{extra_f} | "
            f"{f['realized_error_pct']['mean']:.1f} | {_fmt(p, 'generated', scale, digits)} | "
            f"{_fmt(p, 'realized', scale, digits)}{extra_p} | "
            f"{p['realized_error_pct']['mean']:.1f} | {slide_g} | {slide_r} | {jerk} |"
        )
    lines += ["", *checks_markdown(flow, proc)]
    raw = report["generators"].get("flow_without_seat_guidance")
    if raw:
        parts = [
            f"{name}: contact {100 * e['pelvis_seat_contact_rate']:.0f} %, after a 2nd Sit "
            f"{100 * e['pelvis_seat_contact_rate_after_hold']:.0f} %, pelvis "
            f"{e['generated']['mean']:.3f} m generated / {e['realized']['mean']:.3f} m realized"
            for name, e in raw.items()
        ]
        lines += [
            "",
            "Flow Sit down without seat guidance (the network alone): " + "; ".join(parts) + ".",
        ]
    t = report.get("timing")
    if t:
        lines += [
            "",
            f"Learned generator speed ({t['steps']} midpoint iterations, {t['threads']} thread): "
            f"one chunk {t['batch1_ms']:.0f} ms; 8 chunks in one batch {t['batch8_same_skill_ms']:.0f} ms "
            f"(one skill, {t['batch8_same_over_batch1']:.1f}x) / {t['batch8_mixed_skills_ms']:.0f} ms "
            f"(8 different calls, {t['batch8_mixed_over_batch1']:.1f}x).",
        ]
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict:
    import torch

    from humanclaw_gym.motion.flow.generator import FlowMotionGenerator

    torch.set_num_threads(1)
    t0 = time.time()
    flow = FlowMotionGenerator(args.checkpoint, steps=args.steps)
    report = {
        "args": asdict(args),
        "checkpoint": str(flow.checkpoint_path),
        "checkpoint_manifest_sha256": flow.checkpoint_sha256,
        "machine": {
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
        },
        "generators": {
            "flow": evaluate(flow, args),
            "procedural": evaluate(ProceduralMotionGenerator(), args),
            "flow_without_seat_guidance": evaluate(
                FlowMotionGenerator(args.checkpoint, steps=args.steps, seat_guidance=False),
                args,
                tuple(c for c in CASES if c.quantity == "sit"),
            ),
        },
        "timing": timing(args.checkpoint, args.steps, args.timing_repeats),
    }
    report["seconds"] = round(time.time() - t0, 1)
    for path in (args.out_json, args.out_md):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out_json, report)
    md = markdown(report)
    write_text_atomic(args.out_md, md)
    print(md)
    return report


if __name__ == "__main__":
    main(tyro.cli(Args))
