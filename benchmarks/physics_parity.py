"""Physics parity of runs made with different physics backends (e.g. pybullet vs MuJoCo).

    python benchmarks/physics_parity.py RUN_A RUN_B [...] --out-json parity.json

Each ``RUN`` is the output directory of ``humanclaw run ... --metrics --physics NAME``
(replay bundles + ``metrics.json`` per episode + ``metrics_summary.json``). Printed side by
side, one column per run:

* the paper metrics and the extra counts of ``metrics_summary.json``;
* per skill, realized vs requested: the root displacement along the requested direction
  (Walk, Step back: along the heading at the start of the step; Side step: sideways) and the
  heading change (Turn), from the realized frames of the bundles, against the SkillCall's
  value; and realized vs generated (the motion the physics was asked to execute, so the
  physics' own share of the error);
* penetration: every bundle is replayed through the backend its manifest names (forward
  replay is exact, checked frame by frame) and the contacts of every frame are queried:
  the deepest humanoid penetration of each frame with a humanoid contact;
* sit contact rate: Sit chunks whose last frame has a pelvis-target contact, of all Sit
  chunks (from ``metrics.json``);
* motion anomaly: frames with a joint more than the bound off its command, and episodes.

Nothing here changes a run; ``--no-contacts`` skips the replays.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from humanclaw_gym.body.skeleton import heading_yaw
from humanclaw_gym.physics.types import HUMAN_ID
from humanclaw_gym.replay.bundle import load_bundle
from humanclaw_gym.skills import Skill, SkillCall

_SKILLS = {
    Skill.WALK: "Walk",
    Skill.TURN: "Turn",
    Skill.SIDE_STEP: "Side step",
    Skill.STEP_BACK: "Step back",
}


def _bundles(run: Path) -> list[Path]:
    return sorted(p.parent for p in run.rglob("replay_manifest.json"))


def _wrap(a: float) -> float:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def _step_motion(start: np.ndarray, end: np.ndarray, skill: Skill) -> float:
    """Displacement (m) along the skill's direction, or heading change (deg) for Turn."""
    yaw = float(heading_yaw(start[3:6]))
    if skill is Skill.TURN:
        return math.degrees(_wrap(float(heading_yaw(end[3:6])) - yaw))
    d = end[[0, 2]] - start[[0, 2]]
    fwd = np.array([math.sin(yaw), math.cos(yaw)])
    left = np.array([math.cos(yaw), -math.sin(yaw)])
    return float(d @ (left if skill is Skill.SIDE_STEP else fwd))


def _requested(call: SkillCall) -> float:
    c = call.condition
    if call.skill is Skill.TURN:
        return math.degrees(c["angle_rad"])
    if call.skill is Skill.SIDE_STEP:
        return float(c["lateral_m"])
    if call.skill is Skill.STEP_BACK:
        return -float(c["distance_m"])
    return float(c["distance_m"])


def skill_errors(run: Path) -> dict:
    """Per skill: |realized - requested| and |realized - generated| over all motion steps."""
    rows: dict[str, dict[str, list[float]]] = {}
    for d in _bundles(run):
        b = load_bundle(d)
        prev_real = b.initial_realized
        prev_gen = b.seed_history[-1]
        n = b.frames_per_step
        for k in range(len(b.step_index)):
            s0 = int(b.step_start_frame[k])
            real_end = b.realized[s0 + n - 1]
            gen_end = b.generated[s0 + n - 1]
            skill = Skill(int(b.skill_id[k]))
            if skill in _SKILLS:
                call = SkillCall.parse(str(b.skill_text[k]))
                want = _requested(call)
                got = _step_motion(prev_real, real_end, skill)
                gen = _step_motion(prev_gen, gen_end, skill)
                row = rows.setdefault(_SKILLS[skill], {"req": [], "gen": [], "rel": []})
                row["req"].append(abs(got - want))
                row["gen"].append(abs(got - gen))
                row["rel"].append(got / want if want else float("nan"))
            prev_real, prev_gen = real_end, gen_end
    out = {}
    for name, row in rows.items():
        req, gen, rel = (np.array(row[k]) for k in ("req", "gen", "rel"))
        out[name] = {
            "steps": int(req.size),
            "unit": "deg" if name == "Turn" else "m",
            "vs_requested_median": float(np.median(req)),
            "vs_requested_p95": float(np.percentile(req, 95)),
            "vs_generated_median": float(np.median(gen)),
            "vs_generated_p95": float(np.percentile(gen, 95)),
            "realized_over_requested_median": float(np.nanmedian(rel)),
        }
    return out


def _tuning(factory, contract: dict) -> dict:
    params = inspect.signature(factory).parameters
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {k: v for k, v in contract.items() if k in params and params[k].kind in kinds}


def penetration(run: Path) -> dict:
    """Replay every bundle with contacts: the deepest humanoid penetration per frame."""
    from humanclaw_gym.backends import registry
    from humanclaw_gym.replay.render import load_scene_checked

    depths: list[float] = []
    frames = contact_frames = 0
    exact = True
    backend_name = None
    for d in _bundles(run):
        b = load_bundle(d)
        contract = b.manifest.get("physics") or {}
        backend_name = str(contract.get("backend") or "pybullet")
        entry = registry.entry("physics", backend_name)
        physics = entry.load()(**_tuning(entry.load(), contract))
        try:
            physics.build(load_scene_checked(b, None))
            physics.reset(b.seed_history[-1])
            for i in range(b.num_frames):
                physics.step_frame(b.generated[i])
                exact &= bool(np.array_equal(physics.realized_frame(), b.realized[i]))
                rows = physics.contacts()
                human = rows[rows["a"] == HUMAN_ID]
                frames += 1
                if human.size:
                    contact_frames += 1
                    depths.append(max(0.0, float(-human["distance"].min())))
        finally:
            physics.close()
    arr = np.array(depths) if depths else np.zeros(1)
    return {
        "backend": backend_name,
        "replay_exact": exact,
        "frames": frames,
        "frames_with_humanoid_contact": contact_frames,
        "depth_median_m": float(np.median(arr)),
        "depth_p95_m": float(np.percentile(arr, 95)),
        "depth_p99_m": float(np.percentile(arr, 99)),
        "depth_max_m": float(arr.max()),
        "frames_deeper_than_2cm": int((arr > 0.02).sum()),
        "frames_deeper_than_5cm": int((arr > 0.05).sum()),
    }


def sit_contact(run: Path) -> dict:
    chunks = with_contact = 0
    for path in run.rglob("metrics.json"):
        m = json.loads(path.read_text())
        chunks += int(m.get("sit_chunks") or 0)
        with_contact += int(m.get("sit_chunks_with_target_contact") or 0)
    return {
        "sit_chunks": chunks,
        "with_pelvis_target_contact": with_contact,
        "rate": with_contact / chunks if chunks else None,
    }


def summarize(run: Path, contacts: bool = True) -> dict:
    summary = json.loads((run / "metrics_summary.json").read_text())
    out = {
        "run": str(run),
        "main": summary["main"],
        "variants": summary.get("variants", {}),
        "extra": summary.get("extra", {}),
        "counts": summary.get("counts", {}),
        "collision_by_group_pct": summary.get("collision_by_group_pct", {}),
        "skills": skill_errors(run),
        "sit_contact": sit_contact(run),
    }
    if contacts:
        out["penetration"] = penetration(run)
    return out


@dataclass
class Args:
    """Physics parity of several runs (see the module docstring)."""

    runs: tyro.conf.Positional[tuple[Path, ...]]
    out_json: Path | None = None
    contacts: bool = True


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(args: Args) -> int:
    results = [summarize(Path(r), args.contacts) for r in args.runs]
    names = [Path(r["run"]).name for r in results]
    metric_rows = []
    for section in ("main", "variants", "collision_by_group_pct"):
        for key in results[0][section]:
            label = f"collision {key} %" if section == "collision_by_group_pct" else key
            values = [r[section].get(key) for r in results]
            metric_rows.append([label, *("-" if v is None else f"{v:.3f}" for v in values)])
    print(_table(["metric", *names], metric_rows))
    print()
    count_keys = ["motion_anomaly_frames", "episodes_with_motion_anomaly", "affected_objects"]
    rows = [[k, *(str(r["counts"].get(k)) for r in results)] for k in count_keys]
    rates = [r["sit_contact"]["rate"] for r in results]
    rows.append(["sit contact rate", *("-" if v is None else f"{v:.3f}" for v in rates)])
    print(_table(["count", *names], rows))
    print()
    skill_rows = []
    for skill in _SKILLS.values():
        cells = []
        for r in results:
            s = r["skills"].get(skill)
            cells.append(
                "-"
                if s is None
                else f"{s['vs_requested_median']:.3f} / {s['vs_requested_p95']:.3f}; "
                f"{s['vs_generated_median']:.3f} / {s['vs_generated_p95']:.3f}"
            )
        skill_rows.append([skill, *cells])
    print("per skill: |realized - requested| median / p95; |realized - generated| median / p95")
    print(_table(["skill", *names], skill_rows))
    if args.contacts:
        print()
        keys = ["depth_median_m", "depth_p95_m", "depth_p99_m", "depth_max_m",
                "frames_deeper_than_2cm", "frames_deeper_than_5cm", "replay_exact"]  # fmt: skip
        print(
            _table(
                ["penetration", *names],
                [[k, *(str(r["penetration"][k]) for r in results)] for k in keys],
            )
        )
    if args.out_json is not None:
        tmp = args.out_json.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=2) + "\n")
        tmp.replace(args.out_json)
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
