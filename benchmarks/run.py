"""Performance harness of humanclaw-gym: measures and writes a JSON report.

    python benchmarks/run.py --out benchmarks/report.json            # full run (~3-5 min)
    python benchmarks/run.py --out /tmp/r.json --steps 10 --quick    # smoke run
    python benchmarks/run.py --only metrics_overhead                 # one section, merged

Measured side by side in one run, on one scene of val100:

* ``decision_step``: median wall time of ``env.step`` (no wrappers), and its parts:
  motion generation, physics (15 frames), ego render;
* ``direct_backends``: the same work driven directly on the backend objects (motion ->
  physics -> renderer, no env): the floor the env's own overhead is compared with;
* ``raw_pybullet``: the bare pybullet calls of one decision on the same scene (60 substeps
  with the humanoid, its motor and base-velocity writes, one TinyRenderer-free frame):
  what half-physics costs with zero Python structure around it;
* ``render``: ego 448x448 rgb, rgb+instance, exo 512x512;
* ``obs_render``: one observation of each ``obs_mode`` (rgb, rgbd, rgb+instance) at each
  ``obs_size`` (64, 84, 128, 224, 448): the one render pass with the modes its sensors need
  plus reading the sensors, as the env does it;
* ``reset``: reset to a new episode of an already-built scene;
* ``wrappers``: step time with the metrics / video / trajectory wrappers on and off;
* ``metrics_overhead``: ``MetricsWrapper`` against the bare env, measured alternately
  (the same decision in a bare and in a wrapped env, which one first alternating; whole
  episodes to the step limit, the finalize included), for both backends, in wall time and
  in the process's CPU time: pybullet's median per-decision CPU-time ratio is the target
  (<= 1.15x; CPU time counts the work whatever else the shared machine runs); the ratios
  of the medians and of the means are reported too;
* ``physics_backends``: pybullet and MuJoCo side by side, measured interleaved (one
  decision of one backend, then one of the other): the decision step and its parts, the same
  work on the backends directly, the raw floor (the bare simulator calls of one decision:
  60 substeps with the contract's velocity and drive writes), and their MuJoCo/pybullet
  ratios; the top-level ``decision_step``, ``direct_backends`` and ``raw_pybullet`` are
  pybullet's (the default backend);
* ``vector``: env steps/s for 1, 2, 4 and 8 sub-envs in sync, async and batched vector envs
  over both backends (each configuration measured for both backends one after the other,
  the sweep twice in opposite orders; the better of the two runs is kept), the ratios, and
  a check that the batched env's observations equal the sync env's;
* ``flow_batch``: the learned motion generator (``motion="flow"``): one decision against
  a batch of 8 sub-envs' decisions in one model call, with torch on one thread and on
  every CPU (the batched vector env's setting); the target uses the same thread count on
  both sides;
* ``paper_motion``: the paper's motion model (``motion="paper"``) on random weights of the
  release's architecture, written by the harness (``benchmarks/paper_motion.py``, which
  also runs alone): one decision and its parts, a batch of 8 against one, 1 thread and
  every CPU, the weights' memory; with ``--paper-release DIR`` (a checkout of the
  reference release) also the release's own runner on the same weights;
* ``memory``: peak RSS of this process (one env) and of async workers;
* ``scene_dataset``: the synthetic HSSD-format dataset (``humanclaw_gym.scenes.hssd.
  synthetic``, written to a temp dir): scene load cold (GLBs parsed, disk cache empty),
  from the disk cache and from memory; physics and renderer build; decision step, ego
  render and same-scene reset in it, side by side with the procedural figures above;
  the same loads and renders for a crowded variant (``--hssd-objects`` extra instances
  plus 12 textured 81,920-triangle assets: about 1 M triangles, HSSD-like).

Targets (see docs/performance.md) are reported as pass/fail flags, never asserted. The
machine may be shared: the report records the load average before and after. The
``vlm_throughput`` section is written by ``benchmarks/vlm_throughput.py``; a run of this
harness keeps it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from humanclaw_gym.fileio import write_json_atomic  # noqa: E402
from humanclaw_gym.render.moderngl_backend import apply_mesa_defaults  # noqa: E402

apply_mesa_defaults()  # the renderer's own defaults (no Mesa threads), before any context

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import humanclaw_gym  # noqa: E402,F401
from humanclaw_gym import SkillCall  # noqa: E402
from humanclaw_gym.envs import ENV_ID  # noqa: E402

_OTHER_SECTIONS = ("vlm_throughput",)
"""Report sections written by other harnesses (``benchmarks/vlm_throughput.py``): kept."""

ACTIONS = [
    SkillCall.walk("normal"),
    SkillCall.turn("left", 30),
    SkillCall.walk("fast"),
    SkillCall.side_step("right", 0.3),
    SkillCall.turn("right", 45),
    SkillCall.step_back(0.2),
    SkillCall.walk("slow"),
]


def _ms(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": 1000.0 * statistics.median(samples),
        "p90_ms": 1000.0 * float(np.percentile(samples, 90)),
        "n": len(samples),
    }


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _episode_ids(n: int) -> list[str]:
    from humanclaw_gym.episodes import load_split

    eps = load_split("val100")
    first_scene = eps[0].scene_id
    return [e.episode_id for e in eps if e.scene_id == first_scene][:n]


class _Instrumented:
    """One env (no wrappers) whose motion, physics and render calls are timed."""

    def __init__(self, physics: str) -> None:
        self.env = gym.make(ENV_ID, split="val100", physics=physics)
        self.base = self.env.unwrapped
        self.ids = _episode_ids(3)
        t0 = time.perf_counter()
        self.env.reset(options={"episode_id": self.ids[0]})
        self.first_reset = time.perf_counter() - t0
        self.parts: dict[str, list[float]] = {"motion": [], "physics": [], "render": []}
        self.samples: list[float] = []
        self._acc = 0.0
        motion, physics_be, renderer = self.base._motion, self.base._physics, self.base._renderer
        chunk = getattr(physics_be, "step_frames", None)  # the env's path for whole chunks
        self._orig = (motion.generate, physics_be.step_frame, renderer.render, chunk)
        self.instrument()

    def instrument(self) -> None:
        og, osf, orr, osfs = self._orig

        def gen(call):
            t = time.perf_counter()
            out = og(call)
            self.parts["motion"].append(time.perf_counter() - t)
            return out

        def step_frame(frame):
            t = time.perf_counter()
            osf(frame)
            self._acc += time.perf_counter() - t

        def step_frames(frames):
            t = time.perf_counter()
            osfs(frames)
            self._acc += time.perf_counter() - t

        def render(camera, *args, **kwargs):  # whatever the renderer's signature takes
            t = time.perf_counter()
            out = orr(camera, *args, **kwargs)
            self.parts["render"].append(time.perf_counter() - t)
            return out

        b = self.base
        b._motion.generate, b._physics.step_frame, b._renderer.render = gen, step_frame, render
        if osfs is not None:
            b._physics.step_frames = step_frames

    def step(self, i: int) -> None:
        self._acc = 0.0
        t = time.perf_counter()
        _, _, term, trunc, _ = self.env.step(ACTIONS[i % len(ACTIONS)])
        self.samples.append(time.perf_counter() - t)
        self.parts["physics"].append(self._acc)
        if term or trunc:
            self.env.reset(options={"episode_id": self.ids[0]})

    def restore(self) -> None:
        b = self.base
        b._motion.generate, b._physics.step_frame, b._renderer.render = self._orig[:3]
        if self._orig[3] is not None:
            b._physics.step_frames = self._orig[3]

    def report(self) -> dict:
        return {
            "decision_step": _ms(self.samples),
            "parts": {k: _ms(v) for k, v in self.parts.items() if v},
            "first_reset_s": self.first_reset,
            "renderer": self.base.backend_info,
        }


def bench_backends(steps: int) -> tuple[dict, dict]:
    """pybullet and MuJoCo envs stepped alternately (decision by decision), then the same
    work on their backends directly and their raw floors, alternately as well."""
    runs = {name: _Instrumented(name) for name in ("pybullet", "mujoco")}
    direct: dict[str, list[float]] = {name: [] for name in runs}
    raw: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(steps):  # env step and direct step of each backend, in turn
        for run in runs.values():
            run.step(i)
        for name, run in runs.items():
            run.restore()
            direct[name].append(_direct_once(run.env, i))
            run.instrument()
    for run in runs.values():
        run.restore()
    out: dict = {name: run.report() for name, run in runs.items()}
    for _ in range(steps):
        raw["pybullet"].append(_raw_pybullet_once(runs["pybullet"].env))
        raw["mujoco"].append(_raw_mujoco_once(runs["mujoco"].env))
    for name in runs:
        out[name]["direct_backends"] = _ms(direct[name])
        out[name]["raw_floor"] = _ms(raw[name])
        out[name]["overhead_vs_direct"] = (
            out[name]["decision_step"]["median_ms"] / out[name]["direct_backends"]["median_ms"]
        )
    med = {
        key: {n: fn(out[n]) for n in runs}
        for key, fn in (
            ("raw_floor", lambda r: r["raw_floor"]["median_ms"]),
            ("physics_part", lambda r: r["parts"]["physics"]["median_ms"]),
            ("decision_step", lambda r: r["decision_step"]["median_ms"]),
            ("direct_backends", lambda r: r["direct_backends"]["median_ms"]),
        )
    }
    out["mujoco_over_pybullet"] = {k: v["mujoco"] / v["pybullet"] for k, v in med.items()}
    out["measured"] = (
        "interleaved: per round one env step of each backend, then one direct step of each; "
        "the raw floors alternate afterwards"
    )
    return out, runs


def _direct_once(env, i: int) -> float:
    from humanclaw_gym.render.cameras import ego_camera

    base = env.unwrapped
    motion, physics, renderer = base._motion, base._physics, base._renderer
    t = time.perf_counter()
    frames = motion.generate(ACTIONS[i % len(ACTIONS)])
    if hasattr(physics, "step_frames"):  # as the env runs a chunk
        physics.step_frames(frames)
    else:
        for f in frames:
            physics.step_frame(f)
    poses = physics.link_poses()
    renderer.set_body_pose(poses)
    ids = physics.dynamic_object_ids
    if ids:
        renderer.set_object_poses(ids, physics.object_poses())
    renderer.render(ego_camera(poses))
    return time.perf_counter() - t


def _raw_pybullet_once(env) -> float:
    import pybullet as p

    physics = env.unwrapped._physics
    cid = physics._client
    body = physics._human
    n = p.getNumJoints(body, physicsClientId=cid)
    joints = list(range(n))
    targets = [[0.0, 0.0, 0.0, 1.0]] * n
    t = time.perf_counter()
    for _frame in range(15):
        p.setJointMotorControlMultiDofArray(
            body, joints, p.POSITION_CONTROL, targetPositions=targets, physicsClientId=cid
        )
        for sub in range(4):
            if sub in (0, 2):
                p.resetBaseVelocity(body, [0.8, 0.0, 0.0], [0.0, 0.0, 0.0], physicsClientId=cid)
            p.stepSimulation(physicsClientId=cid)
        p.getJointStatesMultiDof(body, joints, physicsClientId=cid)
        p.getBasePositionAndOrientation(body, physicsClientId=cid)
    return time.perf_counter() - t


def _raw_mujoco_once(env) -> float:
    """The same loop in MuJoCo: targets, root velocity before substeps 0 and 2, 60 steps,
    the state read back per frame (no drive maths)."""
    import mujoco

    physics = env.unwrapped._physics
    m, d = physics._model, physics._data
    root = int(physics._dof_adr[0])
    t = time.perf_counter()
    for _frame in range(15):
        d.ctrl[:] = 0.0
        for sub in range(4):
            if sub in (0, 2):
                d.qvel[root] = 0.8
                d.qvel[root + 2] = 0.0
            mujoco.mj_step(m, d)
        d.qpos.copy()
    return time.perf_counter() - t


def bench_render(env, n: int) -> dict:
    from humanclaw_gym.render.cameras import ego_camera, exo_camera

    base = env.unwrapped
    renderer, physics = base._renderer, base._physics
    poses = physics.link_poses()
    renderer.set_body_pose(poses)
    out = {}
    for name, cam, modes in (
        ("ego_rgb_448", ego_camera(poses), {"rgb"}),
        ("ego_rgb_instance_448", ego_camera(poses), {"rgb", "instance"}),
        ("exo_rgb_512", exo_camera(poses), {"rgb"}),
    ):
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            renderer.render(cam, modes)
            samples.append(time.perf_counter() - t)
        out[name] = _ms(samples)
    return out


OBS_SIZES = (64, 84, 128, 224, 448)


def bench_obs_render(env, n: int) -> dict:
    """Median time of one observation per obs_mode and obs_size (render pass + sensor read)."""
    from humanclaw_gym.render.cameras import ego_camera
    from humanclaw_gym.sensors import OBS_MODES, read_sensors, sensors_for

    base = env.unwrapped
    renderer, physics = base._renderer, base._physics
    poses = physics.link_poses()
    renderer.set_body_pose(poses)
    episode = next(e for e in base.episodes if e.episode_id == base.current_episode_id)

    def render(view: str, size: int, modes: frozenset[str]):
        return renderer.render(ego_camera(poses, width=size, height=size), modes)

    out: dict = {}
    for mode in OBS_MODES:
        for size in OBS_SIZES:
            sensors = sensors_for(mode, size)
            read_sensors(sensors, render, episode)  # warm-up (framebuffer of this size)
            samples = []
            for _ in range(n):
                t = time.perf_counter()
                read_sensors(sensors, render, episode)
                samples.append(time.perf_counter() - t)
            out[f"{mode}_{size}"] = {"obs_mode": mode, "obs_size": size, **_ms(samples)}
    return out


def bench_wrappers(steps: int) -> dict:
    from humanclaw_gym.wrappers import MetricsWrapper, TrajectoryWrapper, VideoWrapper

    ids = _episode_ids(1)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        configs = {
            "none": lambda e: e,
            "metrics": lambda e: MetricsWrapper(e, None),
            "trajectory": lambda e: TrajectoryWrapper(e, Path(tmp) / "traj"),
            "video": lambda e: VideoWrapper(e, Path(tmp) / "video"),
        }
        for name, wrap in configs.items():
            env = wrap(gym.make(ENV_ID, split="val100", max_steps=steps + 1))
            env.reset(options={"episode_id": ids[0]})
            env.step(ACTIONS[0])  # warm-up
            samples = []
            for i in range(steps - 1):
                t = time.perf_counter()
                env.step(ACTIONS[(i + 1) % len(ACTIONS)])
                samples.append(time.perf_counter() - t)
            env.close()
            out[name] = _ms(samples)
    return out


def bench_metrics_overhead(steps: int, episode_steps: int = 20, physics: str = "pybullet") -> dict:
    """``MetricsWrapper`` against the bare env, measured alternately: the same decision is
    stepped in a bare env and in a wrapped one (which comes first alternates), on the same
    episode, so both see the same motion, contacts and load. Episodes run to the step
    limit (``episode_steps``), so the wrapped side includes each episode's finalize; resets
    are not timed. Each step is timed in wall time and in this process's CPU time (the
    work itself, whatever else the shared machine runs; rendering and physics run in this
    thread). Reports both distributions and, for each clock, the ratio of the medians, the
    median of the per-decision ratios and the ratio of the means."""
    from humanclaw_gym.wrappers import MetricsWrapper

    ids = _episode_ids(1)
    kwargs = {"split": "val100", "max_steps": episode_steps, "physics": physics}
    envs = {
        "bare": gym.make(ENV_ID, **kwargs),
        "metrics": MetricsWrapper(gym.make(ENV_ID, **kwargs)),
    }
    clocks = {"wall": time.perf_counter, "cpu": time.process_time}
    samples = {c: {name: [] for name in envs} for c in clocks}
    done = True
    k = 0
    try:
        for i in range(steps):
            if done:
                for env in envs.values():
                    env.reset(options={"episode_id": ids[0]})
                k = 0
            action = ACTIONS[k % len(ACTIONS)]
            k += 1
            order = list(envs.items()) if i % 2 == 0 else list(envs.items())[::-1]
            for name, env in order:
                wall, cpu = time.perf_counter(), time.process_time()
                *_, terminated, truncated, _ = env.step(action)
                samples["cpu"][name].append(time.process_time() - cpu)
                samples["wall"][name].append(time.perf_counter() - wall)
            done = terminated or truncated
    finally:
        for env in envs.values():
            env.close()
    out: dict = {"physics": physics, "episode_steps": episode_steps}
    for clock, by_env in samples.items():
        bare, wrapped = by_env["bare"], by_env["metrics"]
        out[clock] = {
            "bare": _ms(bare),
            "metrics": _ms(wrapped),
            "ratio_of_medians": statistics.median(wrapped) / statistics.median(bare),
            "median_paired_ratio": statistics.median(
                w / b for w, b in zip(wrapped, bare, strict=True)
            ),
            "ratio_of_means": statistics.fmean(wrapped) / statistics.fmean(bare),
        }
    return out


def bench_metrics_section(steps: int) -> dict:
    """The ``metrics_overhead`` section: :func:`bench_metrics_overhead` for both backends
    (the target holds for both: the median per-decision CPU-time ratio), with the load
    average around it."""
    out: dict = {"load_average_start": list(os.getloadavg())}
    for physics in ("pybullet", "mujoco"):
        out[physics] = bench_metrics_overhead(steps, physics=physics)
    out["load_average_end"] = list(os.getloadavg())
    out["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out


def _metrics_target(section: dict) -> bool:
    return all(
        section[physics]["cpu"]["median_paired_ratio"] <= 1.15 for physics in ("pybullet", "mujoco")
    )


def _vector_rate(
    num_envs: int, mode: str, steps: int, physics: str = "pybullet", keep_obs: bool = False
) -> dict:
    envs = gym.make_vec(
        ENV_ID, num_envs=num_envs, split="val100", mode=mode, max_steps=100, physics=physics
    )
    envs.reset(seed=0)
    batched = [
        {k: np.stack([np.asarray(v)] * num_envs) for k, v in a.to_action().items()} for a in ACTIONS
    ]
    obs, *_ = envs.step(batched[0])  # warm-up
    t = time.perf_counter()
    for i in range(steps):
        obs, *_ = envs.step(batched[(i + 1) % len(batched)])
    dt = time.perf_counter() - t
    envs.close()
    out = {
        "env_steps_per_s": num_envs * steps / dt,
        "num_envs": num_envs,
        "mode": mode,
        "physics": physics,
    }
    if keep_obs:
        out["_obs"] = np.array(obs)
    return out


VECTOR_SIZES = (1, 2, 4, 8)
VECTOR_MODES = ("sync", "async", "batched")


def bench_vector(steps: int, sizes: tuple[int, ...] = VECTOR_SIZES) -> dict:
    """Env steps/s of every (mode, size) for both backends; the sweep runs twice (the
    second time in reverse order, each configuration for both backends back to back) and
    each configuration keeps its better run (the machine may be shared)."""
    configs = [(m, n) for m in VECTOR_MODES for n in sizes]
    runs: dict[str, list[float]] = {}
    final_obs: dict[str, np.ndarray] = {}
    for sweep in (configs, configs[::-1]):
        for mode, n in sweep:
            for physics in ("pybullet", "mujoco") if sweep is configs else ("mujoco", "pybullet"):
                keep = physics == "mujoco" and n == max(sizes) and mode in ("sync", "batched")
                r = _vector_rate(n, mode, steps, physics, keep_obs=keep)
                if keep:
                    final_obs[mode] = r.pop("_obs")
                key = f"{physics}_{mode}_{n}"
                runs.setdefault(key, []).append(r["env_steps_per_s"])
    out: dict = {key: {"env_steps_per_s": max(v), "runs": v} for key, v in sorted(runs.items())}
    ratios = {}
    for mode, n in configs:
        ratios[f"{mode}_{n}_mujoco_over_pybullet"] = (
            out[f"mujoco_{mode}_{n}"]["env_steps_per_s"]
            / out[f"pybullet_{mode}_{n}"]["env_steps_per_s"]
        )
    big = max(sizes)
    ratios[f"mujoco_batched_{big}_over_pybullet_async_{big}"] = (
        out[f"mujoco_batched_{big}"]["env_steps_per_s"]
        / out[f"pybullet_async_{big}"]["env_steps_per_s"]
    )
    if 1 in sizes and 2 in sizes:
        ratios["pybullet_async_2_over_1"] = (
            out["pybullet_async_2"]["env_steps_per_s"] / out["pybullet_async_1"]["env_steps_per_s"]
        )
    out["ratios"] = ratios
    if "sync" in final_obs and "batched" in final_obs:
        out[f"batched_{big}_obs_equal_sync_{big}"] = bool(
            np.array_equal(final_obs["sync"], final_obs["batched"])
        )
    out["measured"] = (
        f"{steps} steps after one warm-up step per configuration; both sweeps' runs listed"
    )
    return out


def bench_flow_batch(repeats: int = 5, batch: int = 8) -> dict:
    """The flow generator: one decision against ``batch`` generators' decisions staged in
    one model call (BatchedMotionService), alternately; with torch on one thread (the
    generator's default) and on every CPU (what the batched vector env gives the batched
    model call)."""
    try:
        import torch

        from humanclaw_gym.motion.flow.generator import BatchedMotionService, FlowMotionGenerator
    except ImportError as exc:  # pragma: no cover - torch missing
        return {"skipped": str(exc)}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    out: dict = {"cpus": cpus}
    for threads in sorted({1, cpus}):
        try:
            gens = [FlowMotionGenerator(num_threads=threads) for _ in range(batch)]
        except ImportError as exc:
            return {"skipped": str(exc)}
        for k, g in enumerate(gens):
            g.reset(np.array([0.0, 0.0, 0.0]), 0.1 * k, seed=k)
        service = BatchedMotionService(num_threads=threads)
        one, many = [], []
        for i in range(repeats + 1):
            call = ACTIONS[i % len(ACTIONS)]
            t = time.perf_counter()
            gens[0].generate(call)
            dt_one = time.perf_counter() - t
            calls = [ACTIONS[(i + k) % len(ACTIONS)] for k in range(batch)]
            t = time.perf_counter()
            service.generate_many(list(zip(gens, calls, strict=True)))
            dt_many = time.perf_counter() - t
            if i > 0:  # the first round warms the model up
                one.append(dt_one)
                many.append(dt_many)
        out[f"threads_{threads}"] = {
            "one_decision": _ms(one),
            f"batch_of_{batch}": _ms(many),
            f"batch_{batch}_over_one": statistics.median(many) / statistics.median(one),
            "torch_threads": int(torch.get_num_threads()),
        }
    torch.set_num_threads(1)
    same = out[f"threads_{cpus}"]
    # the target's ratio: both on the same threads, as the batched env runs the batch
    out[f"batch_{batch}_over_one"] = same[f"batch_{batch}_over_one"]
    # a batched env's model call (every CPU) against a single env's decision (one thread)
    out[f"batch_{batch}_all_cpus_over_one_decision_one_thread"] = (
        same[f"batch_of_{batch}"]["median_ms"] / out["threads_1"]["one_decision"]["median_ms"]
    )
    return out


def bench_async_worker_rss() -> float:
    """Peak RSS (MiB) of one async worker process after some steps."""
    import psutil  # type: ignore[import-not-found]

    envs = gym.make_vec(ENV_ID, num_envs=1, split="val100", mode="async")
    envs.reset(seed=0)
    act = {k: np.asarray(v)[None] for k, v in ACTIONS[0].to_action().items()}
    for _ in range(5):
        envs.step(act)
    rss = max(psutil.Process(proc.pid).memory_info().rss for proc in envs.processes) / 2**20
    envs.close()
    return rss


_DENSE_INSTANCES = 12


def _dense_asset(root: Path) -> str:
    """A textured 81,920-triangle sphere asset (+ its config): HSSD-like triangle counts."""
    import trimesh
    from PIL import Image

    objdir = root / "objects" / "humanclaw"
    mesh = trimesh.creation.icosphere(subdivisions=6, radius=0.3)
    mesh.apply_translation([0.0, 0.3, 0.0])
    rng = np.random.default_rng(0)
    image = Image.fromarray((rng.random((512, 512, 3)) * 255).astype(np.uint8))
    v = mesh.vertices
    uv = np.stack([0.5 + np.arctan2(v[:, 0], v[:, 2]) / (2 * np.pi), v[:, 1] / 0.6], axis=1)
    mesh.visual = trimesh.visual.TextureVisuals(
        uv=uv, material=trimesh.visual.material.PBRMaterial(baseColorTexture=image)
    )
    (objdir / "bench_dense.glb").write_bytes(trimesh.Scene(mesh).export(file_type="glb"))
    template = "bench_dense_sphere"
    (objdir / f"{template}.object_config.json").write_text(
        json.dumps({"render_asset": "bench_dense.glb", "semantic_id": 7, "mass": 1.0})
    )
    return template


def _crowded_scene(root: Path, n: int) -> str:
    """Add a scene instance to the synthetic dataset: its own objects plus ``n`` more
    instances of its assets on a 0.45 m grid over both ground-floor rooms and 12 textured
    81,920-triangle spheres (for load and render cost at HSSD-like object and triangle
    counts; not for walking)."""
    from humanclaw_gym.scenes.hssd.synthetic import SCENE_ID

    path = root / "scenes" / f"{SCENE_ID}.scene_instance.json"
    doc = json.loads(path.read_text())
    templates = [
        o["template_name"] for o in doc["object_instances"] if "crate" not in o["template_name"]
    ]
    dense = _dense_asset(root)
    extra = [
        {
            "template_name": dense,
            "translation": [0.8 + 0.8 * k, 0.0, 5.5],
            "rotation": [1.0, 0.0, 0.0, 0.0],
            "non_uniform_scale": [1.0, 1.0, 1.0],
            "motion_type": "STATIC",
        }
        for k in range(_DENSE_INSTANCES)
    ]
    for k in range(n):
        x, z = 0.4 + 0.45 * (k % 21), 0.4 + 0.45 * ((k // 21) % 12)
        extra.append(
            {
                "template_name": templates[k % len(templates)],
                "translation": [x, 0.0, z],
                "rotation": [1.0, 0.0, 0.0, 0.0],
                "non_uniform_scale": [0.4, 0.4, 0.4],
                "motion_type": "STATIC",
            }
        )
    doc["object_instances"] = doc["object_instances"] + extra
    name = f"{SCENE_ID}_crowded"
    (root / "scenes" / f"{name}.scene_instance.json").write_text(json.dumps(doc))
    return name


def bench_scene_dataset(steps: int, extra_objects: int) -> dict:
    """Scene load (cold / disk cache / memory), build, step, render and reset in the
    synthetic HSSD-format dataset."""
    from humanclaw_gym.scenes import meshes
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    tmp = Path(tempfile.mkdtemp(prefix="humanclaw_bench_hssd_"))
    old_cache = os.environ.get("HUMANCLAW_CACHE_DIR")
    os.environ["HUMANCLAW_CACHE_DIR"] = str(tmp / "cache")
    out: dict = {}
    try:
        synth = write_synthetic_dataset(tmp / "dataset")
        crowded = _crowded_scene(synth.root, extra_objects)
        import shutil

        for label, scene_id in (("synthetic", synth.scene_id), ("crowded", crowded)):
            meshes.clear_memory_cache()
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            loads = {}
            for mode in ("cold", "disk_cache", "memory"):
                if mode != "memory":
                    meshes.clear_memory_cache()
                t = time.perf_counter()
                scene = SceneDataset(synth.root).load_scene(scene_id)
                loads[f"load_{mode}_s"] = time.perf_counter() - t
            tris = 0
            for obj in scene.objects:
                for part in obj.parts:
                    ref = part.mesh
                    tris += meshes.load_mesh(ref.asset, ref.up, ref.front).num_triangles
            entry = {
                "objects": len(scene.objects),
                "render_triangles": tris,
                **loads,
                "mesh_cache_bytes": meshes.cache_size_bytes()[1],
            }
            entry.update(_scene_build_and_render(scene, steps))
            out[label] = entry
        env = gym.make(
            ENV_ID,
            scene_dataset=str(synth.root),
            episodes=str(synth.episodes_dir),
        )
        ids = [e.episode_id for e in env.unwrapped.episodes]
        t = time.perf_counter()
        env.reset(options={"episode_id": ids[0]})
        first_reset = time.perf_counter() - t
        samples = []
        for i in range(steps):
            t = time.perf_counter()
            _, _, term, trunc, _ = env.step(ACTIONS[i % len(ACTIONS)])
            samples.append(time.perf_counter() - t)
            if term or trunc:
                env.reset(options={"episode_id": ids[0]})
        resets = []
        for eid in ids[1:4]:
            t = time.perf_counter()
            env.reset(options={"episode_id": eid})
            resets.append(time.perf_counter() - t)
        out["synthetic"].update(
            {
                "first_reset_s": first_reset,
                "decision_step": _ms(samples),
                "reset_same_scene": _ms(resets),
                "renderer": env.unwrapped.backend_info,
            }
        )
        env.close()
    finally:
        if old_cache is None:
            os.environ.pop("HUMANCLAW_CACHE_DIR", None)
        else:
            os.environ["HUMANCLAW_CACHE_DIR"] = old_cache
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _scene_build_and_render(scene, n: int) -> dict:
    """Physics and renderer build of a mesh scene and ego-size renders from a fixed camera
    over the ground floor."""
    from humanclaw_gym.backends.protocols import Camera
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics
    from humanclaw_gym.render.moderngl_backend import ModernglRenderer

    physics = PybulletHalfPhysics()
    t = time.perf_counter()
    physics.build(scene)
    build_physics = time.perf_counter() - t
    physics.close()
    renderer = ModernglRenderer()
    try:
        t = time.perf_counter()
        renderer.build(scene)
        build_render = time.perf_counter() - t
        cam = Camera(position=(2.5, 1.6, 5.5), forward=(0.6, -0.45, -1.0), width=448, height=448)
        renderer.render(cam)
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            renderer.render(cam, {"rgb", "instance"})
            samples.append(time.perf_counter() - t)
    finally:
        renderer.close()
    return {
        "physics_build_s": build_physics,
        "renderer_build_s": build_render,
        "render_rgb_instance_448": _ms(samples),
    }


def _model_repeats(steps: int) -> int:
    """Rounds of the motion-model sections (flow batch, paper motion): 5 at the default
    ``--steps 40``, fewer for a short smoke run (each round is seconds of model calls)."""
    return max(1, min(5, steps // 8))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/report.json"))
    parser.add_argument(
        "--steps",
        type=int,
        default=40,
        help="decision steps per measurement (and, divided by 8, 1..5 rounds of the motion "
        "model sections)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="skip vector, flow, paper motion and wrapper benchmarks",
    )
    parser.add_argument(
        "--vector-steps", type=int, default=8, help="vector-env steps per configuration"
    )
    parser.add_argument(
        "--paper-release",
        type=Path,
        default=None,
        help="a reference release checkout: time its motion runner beside the paper motion",
    )
    parser.add_argument(
        "--hssd-objects",
        type=int,
        default=250,
        help="extra object instances of the crowded synthetic scene (0 skips the section)",
    )
    parser.add_argument(
        "--only",
        choices=("metrics_overhead",),
        help="run only this section and update it (and its target) in --out, keeping the rest",
    )
    args = parser.parse_args()
    if args.only == "metrics_overhead":
        report = json.loads(args.out.read_text()) if args.out.exists() else {}
        report["metrics_overhead"] = bench_metrics_section(4 * args.steps)
        ok = _metrics_target(report["metrics_overhead"])
        report.setdefault("targets", {})["metrics_wrapper_le_1.15x"] = ok
        write_json_atomic(args.out, report, sort_keys=True)
        print(json.dumps(report["metrics_overhead"], indent=2))
        return 0

    report: dict = {
        "schema": "humanclaw_benchmark_v1",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "LP_NUM_THREADS": os.environ.get("LP_NUM_THREADS"),
            "MESA_SHADER_CACHE_DISABLE": os.environ.get("MESA_SHADER_CACHE_DISABLE"),
        },
    }
    report["machine"]["load_average_start"] = list(os.getloadavg())
    print("env step, pybullet and MuJoCo interleaved ...", flush=True)
    backends, runs = bench_backends(args.steps)
    report["physics_backends"] = backends
    pyb = backends["pybullet"]
    report["decision_step"] = pyb["decision_step"]
    report["parts"] = pyb["parts"]
    report["first_reset_s"] = pyb["first_reset_s"]
    report["renderer"] = pyb["renderer"]
    report["direct_backends"] = pyb["direct_backends"]
    report["raw_pybullet"] = pyb["raw_floor"]
    env = runs["pybullet"].env
    resets = []
    for eid in runs["pybullet"].ids[1:] * 3:
        t = time.perf_counter()
        env.reset(options={"episode_id": eid})
        resets.append(time.perf_counter() - t)
    report["reset_same_scene"] = _ms(resets)
    print("render ...", flush=True)
    report["render"] = bench_render(env, 3 * args.steps)
    print("observation modes and sizes ...", flush=True)
    report["obs_render"] = bench_obs_render(env, args.steps)
    for run in runs.values():
        run.env.close()
    report["memory"] = {"peak_rss_one_env_mib": _peak_rss_mib()}
    print("metrics wrapper against the bare env, interleaved ...", flush=True)
    report["metrics_overhead"] = bench_metrics_section(4 * args.steps)
    if not args.quick:
        print("wrappers ...", flush=True)
        report["wrappers"] = bench_wrappers(min(args.steps, 20))
        print("vector (both backends; several minutes) ...", flush=True)
        report["vector"] = bench_vector(args.vector_steps)
        repeats = _model_repeats(args.steps)
        print("flow batch ...", flush=True)
        report["flow_batch"] = bench_flow_batch(repeats)
        print("paper motion (writes 1.1 GB of random weights to a temp dir) ...", flush=True)
        import paper_motion  # benchmarks/paper_motion.py, beside this script

        report["paper_motion"] = paper_motion.bench(release=args.paper_release, repeats=repeats)
        try:
            report["memory"]["async_worker_rss_mib"] = bench_async_worker_rss()
        except ImportError:
            report["memory"]["async_worker_rss_mib"] = None
    if args.hssd_objects > 0:
        print("scene dataset ...", flush=True)
        try:
            ds = bench_scene_dataset(args.steps, args.hssd_objects)
        except ImportError as exc:  # trimesh missing: the section says why
            ds = {"skipped": str(exc)}
        if "synthetic" in ds:
            ds["step_vs_procedural"] = (
                ds["synthetic"]["decision_step"]["median_ms"] / report["decision_step"]["median_ms"]
            )
        report["scene_dataset"] = ds
    step = report["decision_step"]["median_ms"]
    direct = report["direct_backends"]["median_ms"]
    report["overhead_vs_direct"] = step / direct
    targets = {
        "decision_step_le_30ms": step <= 30.0,
        "ego_render_le_6ms": report["render"]["ego_rgb_448"]["median_ms"] <= 6.0,
        "overhead_le_1.3x": report["overhead_vs_direct"] <= 1.3,
        "reset_same_scene_le_100ms": report["reset_same_scene"]["median_ms"] <= 100.0,
        "peak_rss_le_1.5GiB": report["memory"]["peak_rss_one_env_mib"] <= 1536.0,
    }
    targets["metrics_wrapper_le_1.15x"] = _metrics_target(report["metrics_overhead"])
    mj = report["physics_backends"]["mujoco"]
    targets["mujoco_decision_step_le_20ms"] = mj["decision_step"]["median_ms"] <= 20.0
    targets["mujoco_physics_part_le_8ms"] = mj["parts"]["physics"]["median_ms"] <= 8.0
    targets["mujoco_overhead_le_1.2x"] = mj["overhead_vs_direct"] <= 1.2
    if "vector" in report:
        ratios = report["vector"]["ratios"]
        targets["async2_ge_1.6x_async1"] = ratios["pybullet_async_2_over_1"] >= 1.6
        targets["mujoco_batched8_ge_1.8x_pybullet_async8"] = (
            ratios["mujoco_batched_8_over_pybullet_async_8"] >= 1.8
        )
        targets["batched8_obs_equal_sync8"] = report["vector"].get("batched_8_obs_equal_sync_8")
    if "flow_batch" in report and "batch_8_over_one" in report["flow_batch"]:
        targets["flow_batch8_le_3x_one"] = report["flow_batch"]["batch_8_over_one"] <= 3.0
    for name, passed in report.get("paper_motion", {}).get("targets", {}).items():
        targets[f"paper_motion_{name}"] = passed
    report["targets"] = targets
    report["machine"]["load_average_end"] = list(os.getloadavg())
    if args.out.is_file():  # sections other harnesses write into the same report stay
        previous = json.loads(args.out.read_text())
        report.update({k: previous[k] for k in _OTHER_SECTIONS if k in previous})
    write_json_atomic(args.out, report, sort_keys=True)
    print(
        json.dumps(
            {
                "decision_step": report["decision_step"],
                "overhead_vs_direct": report["overhead_vs_direct"],
                "mujoco_over_pybullet": report["physics_backends"]["mujoco_over_pybullet"],
                "targets": report["targets"],
            },
            indent=2,
        )
    )
    print(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
