"""``humanclaw render`` and ``humanclaw render-batch``: delayed video of saved rollouts.

Both read replay bundles (``trajectory_before.npz``, ``trajectory_after.npz``,
``replay_manifest.json``), verify their hashes and rasterize the saved poses into
``ego.mp4`` / ``exo.mp4`` with a renderer only: no physics stepping, motion generation,
policy or metrics. ``--check-replay`` additionally re-executes the saved motion in a fresh
physics backend and reports the deviation from the recorded trajectory.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import tyro

__all__ = ["batch_main", "main", "render", "render_batch"]

_GENDERS = ("neutral", "male", "female")


def _check_flags(renderer: str, crf: int, body_model_gender: str) -> None:
    """Refuse a bad ``--renderer``, ``--crf`` or ``--body-model-gender`` before anything
    is read or written.

    Raises:
        ValueError: naming the flag and what is allowed (a ``BackendCapabilityError``
            for an unknown renderer).
    """
    from humanclaw_gym.backends import registry

    registry.check_renderer_name(renderer)
    if isinstance(crf, bool) or not isinstance(crf, int) or not 0 <= crf <= 51:
        raise ValueError(f"--crf {crf!r} is invalid: allowed an int in 0..51")
    if body_model_gender not in _GENDERS:
        raise ValueError(
            f"--body-model-gender {body_model_gender!r} is invalid: allowed {', '.join(_GENDERS)}"
        )


def render(
    rollout_dir: Path,
    output_dir: Path | None = None,
    renderer: str = "auto",
    ego: bool = True,
    exo: bool = True,
    check_replay: bool = False,
    crf: int = 20,
    body_model_dir: Path | None = None,
    body_model_gender: str = "neutral",
) -> int:
    """Render one saved rollout into ego.mp4 / exo.mp4 (no physics).

    Args:
        rollout_dir: directory holding the replay bundle.
        output_dir: where to write the videos and render_report.json (default: rollout_dir).
        renderer: auto (moderngl, else tiny), moderngl or tiny.
        ego: render the 448x448 egocentric view.
        exo: render the 512x512 third-person view.
        check_replay: also re-run the saved motion through physics and report the deviation
            (exit code 1 unless it reproduces the recording exactly).
        crf: x264 quality, 0 (lossless) .. 51.
        body_model_dir: your SMPL-X model files: draw the skinned SMPL-X body instead of
            the capsule links (needs the smplx and torch extras).
        body_model_gender: neutral, male or female.
    """
    from humanclaw_gym.backends.registry import BackendCapabilityError
    from humanclaw_gym.replay import ReplayBundleError, forward_replay, render_saved_trajectory

    status = 0
    try:
        _check_flags(renderer, crf, body_model_gender)
        if ego or exo:
            report = render_saved_trajectory(
                rollout_dir,
                output_dir,
                renderer=renderer,
                ego=ego,
                exo=exo,
                crf=crf,
                body_model_dir=body_model_dir,
                body_model_gender=body_model_gender,
            )
            print(json.dumps(asdict(report), indent=2))
        elif not check_replay:
            print(
                "humanclaw render: error: nothing to do (--no-ego --no-exo without --check-replay)",
                file=sys.stderr,
            )
            return 2
        if check_replay:
            replay = forward_replay(rollout_dir)
            print(json.dumps({"forward_replay": asdict(replay)}, indent=2))
            if replay.max_abs_deviation != 0.0:
                print(
                    f"humanclaw render: forward replay deviates by {replay.max_abs_deviation:.3g}"
                    f" (first divergent frame {replay.first_divergent_frame})",
                    file=sys.stderr,
                )
                status = 1
    except (ReplayBundleError, BackendCapabilityError, OSError, ValueError) as exc:  # the input
        print(f"humanclaw render: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, ImportError) as exc:  # no renderer or extra in this installation
        print(f"humanclaw render: {exc}", file=sys.stderr)
        return 1
    return status


def render_batch(
    root: Path,
    output_root: Path,
    workers: int = 2,
    renderer: str = "auto",
    ego: bool = True,
    exo: bool = True,
    crf: int = 20,
    body_model_dir: Path | None = None,
    body_model_gender: str = "neutral",
) -> int:
    """Render every rollout under ROOT, each in its own subprocess.

    A mistake in the flags, or a ROOT that holds no rollout, is one line with exit code 2
    and nothing written; a rollout that fails to render is listed (``FAILED``) and makes
    the exit code 1, the others are rendered.

    Args:
        root: directory searched (any depth) for replay_manifest.json files.
        output_root: parent of the per-rollout output directories.
        workers: render subprocesses running at the same time.
        renderer: auto (moderngl, else tiny), moderngl or tiny.
        ego: render the egocentric view.
        exo: render the third-person view.
        crf: x264 quality, 0 (lossless) .. 51.
        body_model_dir: your SMPL-X model files: draw the SMPL-X body (see render).
        body_model_gender: neutral, male or female.
    """
    from humanclaw_gym.backends.registry import BackendCapabilityError
    from humanclaw_gym.replay import find_rollout_dirs, render_saved_batch

    def error(message: str) -> int:
        print(f"humanclaw render-batch: error: {message}", file=sys.stderr)
        return 2

    try:
        _check_flags(renderer, crf, body_model_gender)
    except (BackendCapabilityError, ValueError) as exc:
        return error(str(exc))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        return error(f"--workers {workers!r} is invalid: allowed an int >= 1")
    if not (ego or exo):
        return error("nothing to do (--no-ego --no-exo)")
    if body_model_dir is not None and not Path(body_model_dir).is_dir():
        return error(
            f"--body-model-dir {body_model_dir} is not a directory: allowed the folder "
            "holding your SMPL-X model files"
        )
    if not Path(root).is_dir():
        return error(
            f"--root {root} is not a directory: allowed a folder holding rollouts "
            "(replay_manifest.json at any depth)"
        )
    try:
        dirs = find_rollout_dirs(root)
    except OSError as exc:
        return error(str(exc))
    if not dirs:
        return error(
            f"no replay bundles (replay_manifest.json) under {root}: allowed a folder of "
            "humanclaw run or rollout, or a folder above some"
        )
    try:
        results = render_saved_batch(
            dirs,
            output_root,
            workers=workers,
            renderer=renderer,
            ego=ego,
            exo=exo,
            crf=crf,
            body_model_dir=body_model_dir,
            body_model_gender=body_model_gender,
        )
    except ValueError as exc:
        return error(str(exc))
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"FAILED {r.rollout_dir}: {r.error}", file=sys.stderr)
    print(
        json.dumps(
            {
                "rendered": len(results) - len(failed),
                "failed": len(failed),
                "output_root": str(output_root),
                "jobs": [asdict(r) for r in results],
            },
            indent=2,
        )
    )
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    """Entry point of ``humanclaw render``."""
    return int(tyro.cli(render, args=argv, prog="humanclaw render"))


def batch_main(argv: list[str]) -> int:
    """Entry point of ``humanclaw render-batch``."""
    return int(tyro.cli(render_batch, args=argv, prog="humanclaw render-batch"))
