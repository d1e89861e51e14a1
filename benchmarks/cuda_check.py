"""The paper motion and the renderer on a GPU: one short check, a JSON report, an exit code.

    python benchmarks/cuda_check.py --out cuda_check.json            # on a machine with CUDA
    python benchmarks/cuda_check.py --dry-run --arch small --out /tmp/cuda_dry.json

What it does (``device="cuda"`` of :class:`humanclaw_gym.motion.paper.PaperMotion` has
never run before this script):

1. **weights**: random weights of the release's architecture (``--arch full``: MotionDiT
   512 wide, 10 layers, 8 heads, eight control branches, about 1.1 GB) written in the
   release's layout into a temporary directory (``--tmp``), or a real download
   (``--release DIR``, optionally ``--weights DIR``);
2. **CUDA against CPU**: one generator on the CPU and one on the device, the same start;
   every skill of the eight, twice in a row (autoregressive), each chunk computed on both
   from the *same* noise (drawn on the CPU and handed to both requests); the largest
   difference of the chunks (world frames and the release's own chunk) must stay within
   ``--tolerance`` (default 1e-3 m / rad: CUDA kernels reduce in other orders than the
   CPU's and the difference grows over the 60 network evaluations of a chunk; batched and
   single CPU calls differ by about 1e-5 here, see docs/motion.md);
3. **timing** on the device: one decision (``generate``, median of ``--repeats`` after two
   warm-up calls) and a batch of 8 generators of mixed skills in one call
   (``generate_many``); target: the batch costs at most 3 one-decision times;
4. **ego view through EGL on the GPU**: every EGL device the moderngl renderer can open
   is listed with its ``GL_RENDERER``; on the first that is not a software rasteriser
   (llvmpipe, softpipe, swrast, SwiftShader) the first val100 episode's ego view (448 x 448,
   RGB and instance ids, the built-in body placed by pybullet) is rendered and timed; it
   must show the scene (objects' instance ids, a non-flat image); with a software device
   too, the two images' mean difference is reported.

Writes ``--out`` (schema ``humanclaw_cuda_check_v1``) and exits 0 when every check passed,
1 when one failed (named in ``failures``), 2 without CUDA (one line; nothing written).
``--dry-run`` runs everything with the CPU standing in for the device (the comparison is then
CPU against CPU, the render on whatever EGL device exists), to check the script itself on a
machine without a GPU; its targets are reported, not enforced.

A run with the full architecture takes a few minutes on a GPU machine (writing and hashing
the 1.1 GB of random weights, loading them twice, 16 CPU chunks); ``--arch small`` takes
seconds.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import tyro

SCHEMA = "humanclaw_cuda_check_v1"
CALLS = (
    "Walk<forward><normal>",
    "Stop/Stand",
    "Turn<left><30>",
    "Climb upstairs<normal>",
    "Sit down<0.45>",
    "Step back<0.3>",
    "Side step<right><0.25>",
    "Walk downstairs<normal>",
)
BATCH = 8
BATCH_TARGET = 3.0
_SOFTWARE_GL = ("llvmpipe", "softpipe", "swrast", "swiftshader")
_EGO_PX = 448


@dataclass
class Args:
    out: Path = Path("cuda_check.json")
    """the JSON report"""
    device: str = "cuda"
    """the torch device to check (cuda or cuda:N)"""
    dry_run: bool = False
    """no CUDA needed: the CPU stands in for the device (checks the script itself)"""
    arch: Literal["full", "small"] = "full"
    """random weights of the release's architecture (full) or a small one (seconds)"""
    release: Path | None = None
    """a release checkout with the real weights instead of random ones"""
    weights: Path | None = None
    """the downloaded weights (default inside --release)"""
    tmp: Path | None = None
    """where the random weights are written (default: a temporary directory)"""
    tolerance: float = 1e-3
    """largest allowed CUDA-vs-CPU difference of a chunk (m, rad)"""
    repeats: int = 5
    """timed decisions and batches"""
    threads: int | None = None
    """torch CPU threads (default: torch's); 1 on a shared machine"""


def _log(text: str) -> None:
    print(f"[cuda_check] {text}", flush=True)


def _ms(samples: list[float]) -> float:
    return round(1000.0 * statistics.median(samples), 2)


# ----------------------------------------------------------------------------------------
# weights
# ----------------------------------------------------------------------------------------
def _weights(args: Args, workdir: Path) -> dict[str, Any]:
    """Keyword arguments of ``PaperMotion`` naming the weights to load."""
    if args.release is not None:
        options: dict[str, Any] = {"release_dir": str(args.release), "num_threads": args.threads}
        if args.weights is not None:
            options["weights_dir"] = str(args.weights)
        return options
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    sizes = {} if args.arch == "full" else {"hidden_dim": 64, "num_layers": 2, "num_heads": 4}
    t0 = time.perf_counter()
    write_synthetic_release(workdir / "release", seed=0, **sizes)
    _log(f"random weights ({args.arch}) written in {time.perf_counter() - t0:.1f} s")
    return {"release_dir": str(workdir / "release"), "num_threads": args.threads}


# ----------------------------------------------------------------------------------------
# CUDA against CPU
# ----------------------------------------------------------------------------------------
def _chunk_with_noise(gen: Any, call: str, noise: Any) -> tuple[np.ndarray, np.ndarray]:
    """``gen``'s next chunk of ``call`` computed from ``noise`` (moved to its device)
    instead of the noise its generator would draw; committed like ``generate``."""
    from humanclaw_gym.motion.paper import generator as paper
    from humanclaw_gym.skills import SkillCall

    request = gen._prepare(SkillCall.parse(call))
    request.noise = noise.to(gen.device)
    frames = paper._run([request], commit=True)[0]
    return frames, np.asarray(gen.release_chunk, dtype=np.float64)


def compare_devices(options: dict[str, Any], device: str, tolerance: float) -> dict[str, Any]:
    import torch

    from humanclaw_gym.motion.paper import PaperMotion

    cpu = PaperMotion(device="cpu", **options)
    dev = PaperMotion(device=device, **options)
    start, yaw = np.array([1.5, 0.0, -2.0]), 0.8
    worst_frames = worst_release = 0.0
    rows = []
    for gen in (cpu, dev):
        gen.reset(start, yaw, seed=0)
    noise_rng = torch.Generator().manual_seed(1234)
    for call in CALLS:
        for step in range(2):
            noise = torch.randn((1, 15, 219), generator=noise_rng, dtype=torch.float32)
            a, ra = _chunk_with_noise(cpu, call, noise)
            b, rb = _chunk_with_noise(dev, call, noise)
            d_frames = float(np.abs(a - b).max())
            d_release = float(np.abs(ra - rb).max())
            worst_frames, worst_release = max(worst_frames, d_frames), max(worst_release, d_release)
            rows.append(
                {"call": call, "step": step, "frames": d_frames, "release_chunk": d_release}
            )
    ok = math.isfinite(worst_frames) and max(worst_frames, worst_release) <= tolerance
    return {
        "chunks": len(rows),
        "max_abs_difference_frames": worst_frames,
        "max_abs_difference_release_chunk": worst_release,
        "tolerance": tolerance,
        "per_chunk": rows,
        "ok": bool(ok),
    }


# ----------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------
def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def time_decisions(options: dict[str, Any], device: str, repeats: int) -> dict[str, Any]:
    from humanclaw_gym.motion.paper import PaperMotion, generate_many

    gens = [PaperMotion(device=device, **options) for _ in range(BATCH)]
    for k, gen in enumerate(gens):
        gen.reset(np.array([0.5 * k, 0.0, 0.0]), 0.3 * k, seed=k)
    one = gens[0]
    for _ in range(2):  # warm-up: kernels, caches, allocator
        one.generate(CALLS[0])
        generate_many(list(zip(gens, CALLS, strict=True)))
    singles, batches = [], []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        one.generate(CALLS[0])
        _sync(device)
        singles.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        generate_many(list(zip(gens, CALLS, strict=True)))
        _sync(device)
        batches.append(time.perf_counter() - t0)
    ratio = statistics.median(batches) / statistics.median(singles)
    return {
        "one_decision_ms": _ms(singles),
        "batch_of_8_ms": _ms(batches),
        "batch_over_one": round(ratio, 3),
        "target_batch_over_one": BATCH_TARGET,
        "repeats": repeats,
        "ok": bool(ratio <= BATCH_TARGET),
    }


# ----------------------------------------------------------------------------------------
# the ego view through EGL
# ----------------------------------------------------------------------------------------
def _egl_devices(limit: int = 8) -> list[dict[str, Any]]:
    from humanclaw_gym.render.moderngl_backend import ModernglRenderer

    found = []
    for index in range(limit):
        try:
            renderer = ModernglRenderer(width_hint=64, device_index=index)
        except Exception as exc:  # no such device (or no EGL at all)
            if index == 0:
                found.append({"index": 0, "error": f"{type(exc).__name__}: {exc}"[:300]})
            break
        name = renderer.device
        renderer.close()
        software = any(s in name.lower() for s in _SOFTWARE_GL)
        found.append({"index": index, "gl_renderer": name, "software": software})
    return found


def _scene_and_poses() -> tuple[Any, np.ndarray, tuple[int, ...], np.ndarray]:
    """The first val100 episode's scene and the built-in body standing at its start."""
    from humanclaw_gym.backends import registry
    from humanclaw_gym.episodes import load_scene, load_split
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator

    episode = load_split("val100")[0]
    scene = load_scene(episode.scene_id)
    physics = registry.create("physics", "pybullet")
    physics.build(scene)
    try:
        history = ProceduralMotionGenerator().reset(
            np.asarray(episode.start_position, dtype=np.float64), episode.start_yaw_rad, seed=0
        )
        physics.reset(history[-1])
        return scene, physics.link_poses(), physics.dynamic_object_ids, physics.object_poses()
    finally:
        physics.close()


def _render(
    index: int, scene: Any, poses: np.ndarray, ids: tuple, objects: np.ndarray, repeats: int
):
    from humanclaw_gym.render.cameras import ego_camera
    from humanclaw_gym.render.moderngl_backend import ModernglRenderer

    renderer = ModernglRenderer(width_hint=_EGO_PX, device_index=index)
    try:
        renderer.build(scene)
        renderer.set_body_pose(poses)
        if ids:
            renderer.set_object_poses(ids, objects)
        camera = ego_camera(poses, width=_EGO_PX, height=_EGO_PX)
        modes = frozenset({"rgb", "instance"})
        result = renderer.render(camera, modes)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            renderer.render(camera, modes)
            times.append(time.perf_counter() - t0)
        return np.array(result.rgb), np.array(result.instance), _ms(times), renderer.device
    finally:
        renderer.close()


def render_ego(repeats: int, need_gpu: bool) -> dict[str, Any]:
    devices = _egl_devices()
    usable = [d for d in devices if "gl_renderer" in d]
    gpu = next((d for d in usable if not d["software"]), None)
    software = next((d for d in usable if d["software"]), None)
    chosen = gpu if gpu is not None else software
    out: dict[str, Any] = {
        "egl_devices": devices,
        "gpu_device": None if gpu is None else gpu["index"],
    }
    if chosen is None:
        out.update(ok=False, reason="no EGL device could be opened")
        return out
    scene, poses, ids, objects = _scene_and_poses()
    rgb, instance, ms, name = _render(chosen["index"], scene, poses, ids, objects, repeats)
    scene_pixels = int((instance > 0).sum())
    out.update(
        rendered_on=name,
        ego_px=_EGO_PX,
        ego_render_ms=ms,
        instance_ids=int(len(np.unique(instance))),
        scene_pixels=scene_pixels,
        rgb_std=round(float(rgb.std()), 2),
    )
    if gpu is not None and software is not None:
        soft_rgb, _, soft_ms, _ = _render(software["index"], scene, poses, ids, objects, repeats)
        out["software_render_ms"] = soft_ms
        out["mean_abs_rgb_difference_to_software"] = round(
            float(np.abs(rgb.astype(float) - soft_rgb.astype(float)).mean()), 3
        )
    drawn = scene_pixels > 1000 and float(rgb.std()) > 1.0
    out["ok"] = bool(drawn and (gpu is not None or not need_gpu))
    if gpu is None:
        out["reason"] = "no GPU EGL device (only a software rasteriser)"
    return out


# ----------------------------------------------------------------------------------------
def main(args: Args) -> int:
    import torch

    cuda = torch.cuda.is_available()
    if not args.dry_run and not cuda:
        print(
            f"cuda_check: no CUDA device: torch {torch.__version__} (CUDA build: "
            f"{torch.version.cuda or 'none'}) reports torch.cuda.is_available() False; "
            "run with --dry-run to check the script on the CPU",
            file=sys.stderr,
        )
        return 2
    device = "cpu" if args.dry_run else args.device
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "dry_run": args.dry_run,
        "device": device,
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(device) if device.startswith("cuda") else None,
            "cpus": os.cpu_count(),
            "load_average_1min": round(os.getloadavg()[0], 2),
        },
        "arch": "release weights" if args.release is not None else args.arch,
    }
    failures: list[str] = []
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="humanclaw_cuda_check_") as tmp:
        options = _weights(args, Path(tmp))
        steps = (
            ("cuda_vs_cpu", lambda: compare_devices(options, device, args.tolerance)),
            ("timing", lambda: time_decisions(options, device, args.repeats)),
            ("ego_render", lambda: render_ego(args.repeats, need_gpu=not args.dry_run)),
        )
        for name, step in steps:
            _log(f"{name} ...")
            t0 = time.perf_counter()
            try:
                result = step()
            except Exception as exc:  # a check that cannot run is a failed check
                result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
            result["seconds"] = round(time.perf_counter() - t0, 1)
            report[name] = result
            _log(f"{name}: ok={result.get('ok')} ({result['seconds']} s)")
            if not result.get("ok"):
                enforced = not args.dry_run or "error" in result
                if enforced:
                    failures.append(name)
    report["failures"] = failures
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    from humanclaw_gym.fileio import write_json_atomic

    write_json_atomic(args.out, report)
    _log(f"written {args.out}; failures: {failures or 'none'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(tyro.cli(Args)))
