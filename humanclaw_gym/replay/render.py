"""Delayed render: turn a saved rollout into ego/exo MP4 videos without any physics.

:func:`render_saved_trajectory` loads a verified replay bundle, loads the scene (checking
its content hash against the manifest), builds *only* a render backend, and for the reset
state plus every realized physics frame: computes the humanoid's link poses from the
realized 75-D pose by forward kinematics, places the dynamic objects at their recorded
poses, renders the ego (448x448) and exo (512x512) views and streams them into MP4 files.
No physics engine, motion generator, policy or metric is created. The videos have
``1 + F`` frames, like the live :class:`~humanclaw_gym.wrappers.VideoWrapper` ones.

:func:`render_saved_batch` renders many rollouts, each in its own subprocess (isolated GL
contexts, a crash affects one job), ``workers`` at a time, with a progress bar.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX
from humanclaw_gym.replay.bundle import (
    MANIFEST_FILE,
    ReplayBundle,
    ReplayBundleError,
    load_bundle,
    write_json_atomic,
)
from humanclaw_gym.replay.layout import safe_name
from humanclaw_gym.replay.mp4 import Mp4Stream

__all__ = [
    "BatchJobResult",
    "RenderReport",
    "find_rollout_dirs",
    "link_poses_from_frames",
    "load_scene_checked",
    "make_renderer",
    "render_saved_batch",
    "render_saved_trajectory",
]

REPORT_FILE = "render_report.json"


@dataclass(frozen=True)
class RenderReport:
    """What a delayed render did (also written as ``render_report.json``).

    Attributes:
        rollout_dir: the bundle rendered.
        output_dir: where the videos went.
        frames: frames per video (reset state + every realized frame).
        seconds: wall time of the render loop (building the renderer excluded).
        ms_per_frame: ``seconds / frames`` in milliseconds (both views together).
        renderer: render backend used; ``renderer_reason`` says why.
        videos: written files by view (``"ego"``, ``"exo"``).
        setup_seconds: wall time to load the bundle and scene and build the renderer.
        body_model: the SMPL-X model file drawn instead of the capsule body, if any.
    """

    rollout_dir: str
    output_dir: str
    frames: int
    seconds: float
    ms_per_frame: float
    renderer: str
    renderer_reason: str
    videos: dict[str, str]
    setup_seconds: float
    scene_id: str
    episode_id: str
    complete: bool
    body_model: str | None = None


def link_poses_from_frames(frames: np.ndarray) -> np.ndarray:
    """Link-frame world poses of the humanoid for 75-D frames, by forward kinematics.

    The link frame of joint ``j`` has its origin at the joint centre and the joint's global
    rotation (the :func:`~humanclaw_gym.body.skeleton.link_shapes` convention), so these
    are the poses the physics backend's ``link_poses()`` reports for the same pose.

    Args:
        frames: ``(75,)`` or ``(T, 75)`` frames.

    Returns:
        ``float64 (24, 7)`` or ``(T, 24, 7)`` rows ``[x, y, z, qx, qy, qz, qw]`` (``qw >= 0``).
    """
    from humanclaw_gym.body.skeleton import forward_kinematics
    from humanclaw_gym.rotations import matrix_to_quat_xyzw

    positions, rotations = forward_kinematics(np.asarray(frames, dtype=np.float64))
    quats = matrix_to_quat_xyzw(rotations)
    return np.concatenate([positions, quats], axis=-1)


def _bundle_body_asset(bundle: ReplayBundle, override: str | os.PathLike[str] | None) -> Any:
    """The body asset a rollout was made with (its physics contract's ``body_asset`` and
    ``body``), its files checked against the recorded SHA-256; None for the built-in body."""
    physics = bundle.manifest.get("physics") or {}
    recorded = physics.get("body") if isinstance(physics, dict) else None
    if not isinstance(recorded, dict):
        if override is not None:
            raise ValueError("body_asset: this rollout was made with the built-in body")
        return None
    from humanclaw_gym.body.asset import load_body_asset

    path = override if override is not None else physics.get("body_asset")
    asset = load_body_asset(path)
    if asset.sha256 != recorded.get("sha256"):
        raise ReplayBundleError(
            f"body asset {asset.path} has SHA-256 {asset.sha256} but the rollout in "
            f"{bundle.directory} was made with {recorded.get('sha256')}: its files changed"
        )
    return asset


def make_renderer(name: str = "auto") -> tuple[Any, str, str]:
    """Build a render backend from the registry (``"auto"``: the first that can start).

    Returns:
        ``(renderer, name, reason)``.

    Raises:
        ValueError: an unregistered name (the registered ones listed).
        RuntimeError: no backend could be created (the message lists every reason).
    """
    from humanclaw_gym.backends import registry

    registry.check_renderer_name(name)
    return registry.create_renderer(name)


def load_scene_checked(bundle: ReplayBundle, scene: Any = None) -> Any:
    """The bundle's scene (``episodes.load_scene`` unless given), its content hash verified.

    Raises:
        ReplayBundleError: the scene's content hash differs from the manifest's.
    """
    if scene is None:
        from humanclaw_gym.episodes import load_scene

        scene = load_scene(bundle.scene_id)
    actual = scene.content_hash()
    if actual != bundle.scene_content_hash:
        raise ReplayBundleError(
            f"scene {bundle.scene_id!r} has content hash {actual} but the replay bundle in"
            f" {bundle.directory} was recorded with {bundle.scene_content_hash}: the scene changed"
            " since the rollout, its replay would not match"
        )
    return scene


def render_saved_trajectory(
    rollout_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str] | None = None,
    renderer: str = "auto",
    ego: bool = True,
    exo: bool = True,
    crf: int = 20,
    preset: str = "veryfast",
    scene: Any = None,
    body_model_dir: str | os.PathLike[str] | None = None,
    body_model_gender: str = "neutral",
    body_asset: str | os.PathLike[str] | None = None,
) -> RenderReport:
    """Render the saved poses of a rollout into ``ego.mp4`` / ``exo.mp4`` (no physics).

    A rollout of a body asset (its physics contract names one) is drawn from that body's
    meshes, with its ego camera, after checking that the folder still holds the files the
    rollout was made with (SHA-256).

    Args:
        rollout_dir: directory of a replay bundle.
        output_dir: where to write the videos and ``render_report.json`` (default:
            ``rollout_dir``; an existing ``ego.mp4``/``exo.mp4`` there is replaced).
        renderer: ``"auto"``, ``"moderngl"`` or ``"tiny"``.
        ego, exo: which views to render.
        crf, preset: x264 settings.
        scene: the SceneSpec to use instead of ``episodes.load_scene(scene_id)`` (its
            content hash must still match the manifest).
        body_model_dir: the user's SMPL-X files: draw the skinned SMPL-X body of every
            saved frame instead of the capsule links (as the env's ``body_model_dir``);
            needs the ``smplx`` and ``torch`` extras and a renderer with ``body_mesh``.
        body_model_gender: ``"neutral"``, ``"male"`` or ``"female"``.
        body_asset: where the rollout's body asset lies now (default: the path its
            manifest recorded).

    Returns:
        The render report.

    Raises:
        ReplayBundleError: the body asset's files differ from the rollout's.
    """
    from humanclaw_gym.render.cameras import body_asset_ego_camera, ego_camera, exo_camera

    if not (ego or exo):
        raise ValueError("render_saved_trajectory needs ego=True or exo=True (both are False)")
    t0 = time.perf_counter()
    out = Path(rollout_dir if output_dir is None else output_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(
            f"output_dir {str(out)!r} is a file, not a directory; allowed: a directory "
            "(created if missing)"
        )
    bundle = load_bundle(rollout_dir)
    scene_spec = load_scene_checked(bundle, scene)

    frames = np.concatenate([bundle.initial_realized[None, :], bundle.realized], axis=0)
    object_poses = np.concatenate([bundle.initial_object_poses[None], bundle.object_poses], axis=0)
    ids = [int(i) for i in bundle.object_ids]
    fps = bundle.fps

    asset = _bundle_body_asset(bundle, body_asset)
    if asset is not None and body_model_dir is not None:
        raise ValueError("this rollout was made with a body asset: body_model_dir cannot draw it")
    body = None
    if body_model_dir is not None:
        from humanclaw_gym.body.smplx_model import SmplxBody, smplx_vertices

        body = SmplxBody(body_model_dir, gender=body_model_gender)
    backend, backend_name, reason = make_renderer(renderer)
    if (body is not None or asset is not None) and not getattr(
        backend.capabilities, "body_mesh", False
    ):
        backend.close()
        raise ValueError(f"renderer {backend_name!r} cannot draw a body mesh (body_mesh=False)")
    out.mkdir(parents=True, exist_ok=True)  # only once every input has been read
    streams: dict[str, Mp4Stream] = {}
    try:
        backend.build(scene_spec)
        setup_s = time.perf_counter() - t0
        if ego:
            streams["ego"] = Mp4Stream(out / "ego.mp4", fps=fps, crf=crf, preset=preset)
        if exo:
            streams["exo"] = Mp4Stream(out / "exo.mp4", fps=fps, crf=crf, preset=preset)
        t1 = time.perf_counter()
        for i in range(frames.shape[0]):
            if asset is not None:
                asset_poses = asset.link_poses_from_frame(frames[i])
                link_poses = asset.skeleton_link_poses(asset_poses)
            else:
                link_poses = link_poses_from_frames(frames[i])
            backend.set_body_pose(link_poses)
            if body is not None:
                vertices, faces = smplx_vertices(frames[i], body)
                backend.set_body_mesh(vertices.astype(np.float32), faces if i == 0 else None)
            elif asset is not None:
                vertices = asset.posed_vertices(asset_poses).astype(np.float32)
                backend.set_body_mesh(vertices, asset.visual_mesh[1] if i == 0 else None)
            if ids:
                backend.set_object_poses(ids, object_poses[i])
            if ego and asset is not None:
                cam = body_asset_ego_camera(
                    asset, asset_poses, width=EGO_SIZE_PX, height=EGO_SIZE_PX
                )
                streams["ego"].write(backend.render(cam).rgb)
            elif ego:
                cam = ego_camera(link_poses, width=EGO_SIZE_PX, height=EGO_SIZE_PX)
                streams["ego"].write(backend.render(cam).rgb)
            if exo:
                cam = exo_camera(
                    link_poses, width=EXO_SIZE_PX, height=EXO_SIZE_PX, scene=scene_spec
                )
                streams["exo"].write(backend.render(cam).rgb)
        videos = {}
        for view, stream in streams.items():
            path = stream.close()
            if path is not None:
                videos[view] = str(path)
        seconds = time.perf_counter() - t1
    except BaseException:
        for stream in streams.values():
            stream.abort()
        raise
    finally:
        backend.close()

    n = int(frames.shape[0])
    report = RenderReport(
        rollout_dir=str(Path(rollout_dir)),
        output_dir=str(out),
        frames=n,
        seconds=round(seconds, 6),
        ms_per_frame=round(1000.0 * seconds / max(n, 1), 3),
        renderer=backend_name,
        renderer_reason=reason,
        videos=videos,
        setup_seconds=round(setup_s, 6),
        scene_id=bundle.scene_id,
        episode_id=bundle.episode_id,
        complete=bundle.complete,
        body_model=None if body is None else str(body.file),
    )
    write_json_atomic(out / REPORT_FILE, asdict(report))
    return report


# ----------------------------------------------------------------------------------------
# batch
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchJobResult:
    """One job of :func:`render_saved_batch`.

    Attributes:
        rollout_dir / output_dir: the job's input and output directories.
        ok: the subprocess exited with 0 and wrote its report.
        returncode: exit code of the subprocess.
        report: the parsed ``render_report.json`` when ``ok``.
        error: the tail of the subprocess's stderr when not ``ok``.
    """

    rollout_dir: str
    output_dir: str
    ok: bool
    returncode: int
    report: dict[str, Any] | None
    error: str | None


def find_rollout_dirs(root: str | os.PathLike[str]) -> list[Path]:
    """Every directory under ``root`` (inclusive, any depth) holding a replay manifest, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"rollout root {root} is not a directory")
    return sorted(p.parent for p in root.rglob(MANIFEST_FILE))


def _output_dirs(dirs: Sequence[Path], output_root: Path) -> list[Path]:
    """One output directory per rollout, named after the rollout (deduplicated)."""
    try:
        common = Path(os.path.commonpath([str(d.resolve()) for d in dirs])) if dirs else None
    except ValueError:
        common = None
    outs: list[Path] = []
    seen: set[Path] = set()
    for d in dirs:
        rel: Path | None = None
        if common is not None and len(dirs) > 1:
            rel = d.resolve().relative_to(common)
        name = (
            Path(*[safe_name(p) for p in rel.parts])
            if rel and rel.parts
            else Path(safe_name(d.name))
        )
        out = output_root / name
        k = 1
        while out in seen:
            out = output_root / f"{name}_{k}"
            k += 1
        seen.add(out)
        outs.append(out)
    return outs


def _run_job(
    rollout_dir: Path,
    output_dir: Path,
    renderer: str,
    ego: bool,
    exo: bool,
    crf: int,
    timeout_s: float | None,
    body_model_dir: str | os.PathLike[str] | None = None,
    body_model_gender: str = "neutral",
) -> BatchJobResult:
    cmd = [
        sys.executable,
        "-m",
        "humanclaw_gym",
        "render",
        "--rollout-dir",
        str(rollout_dir),
        "--output-dir",
        str(output_dir),
        "--renderer",
        renderer,
        "--ego" if ego else "--no-ego",
        "--exo" if exo else "--no-exo",
        "--crf",
        str(crf),
    ]
    if body_model_dir is not None:
        cmd += ["--body-model-dir", str(body_model_dir), "--body-model-gender", body_model_gender]
    env = dict(os.environ)
    env.setdefault("LP_NUM_THREADS", "1")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return BatchJobResult(
            str(rollout_dir), str(output_dir), False, -1, None, f"timed out after {timeout_s} s"
        )
    report_path = output_dir / REPORT_FILE
    report = None
    if proc.returncode == 0 and report_path.is_file():
        report = json.loads(report_path.read_text(encoding="utf-8"))
    ok = report is not None
    error = None if ok else (proc.stderr.strip()[-2000:] or f"exit code {proc.returncode}")
    return BatchJobResult(str(rollout_dir), str(output_dir), ok, proc.returncode, report, error)


def render_saved_batch(
    dirs: Iterable[str | os.PathLike[str]],
    output_root: str | os.PathLike[str],
    workers: int = 2,
    renderer: str = "auto",
    ego: bool = True,
    exo: bool = True,
    crf: int = 20,
    progress: bool = True,
    timeout_s: float | None = None,
    body_model_dir: str | os.PathLike[str] | None = None,
    body_model_gender: str = "neutral",
) -> list[BatchJobResult]:
    """Delayed-render many rollouts, each in an isolated ``humanclaw render`` subprocess.

    Args:
        dirs: rollout directories (each holding a replay bundle).
        output_root: parent of the per-rollout output directories (named after each
            rollout's path relative to the rollouts' common parent).
        workers: subprocesses running at the same time (>= 1).
        renderer, ego, exo, crf: as in :func:`render_saved_trajectory`.
        progress: show a tqdm progress bar on stderr.
        timeout_s: kill a job that runs longer (None: no limit).
        body_model_dir, body_model_gender: draw the SMPL-X body (see
            :func:`render_saved_trajectory`).

    Returns:
        One result per rollout, in the order of ``dirs``. Failed jobs do not stop the
        others; check ``ok``.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    rollouts = [Path(d) for d in dirs]
    outputs = _output_dirs(rollouts, Path(output_root))
    results: list[BatchJobResult | None] = [None] * len(rollouts)
    from tqdm.auto import tqdm

    with (
        ThreadPoolExecutor(max_workers=workers) as pool,
        tqdm(total=len(rollouts), desc="render", unit="rollout", disable=not progress) as bar,
    ):
        futures = {
            pool.submit(
                _run_job,
                r,
                o,
                renderer,
                ego,
                exo,
                crf,
                timeout_s,
                body_model_dir,
                body_model_gender,
            ): i
            for i, (r, o) in enumerate(zip(rollouts, outputs, strict=True))
        }
        failed = 0
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            failed += not result.ok
            bar.set_postfix(failed=failed)
            bar.update(1)
    return [r for r in results if r is not None]
