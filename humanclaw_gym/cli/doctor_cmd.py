"""``humanclaw doctor``: report installed backends and extras, and whether the defaults run.

Exit status 0 when the default configuration can run (pybullet, some renderer, a working
ffmpeg binary), a ``--scene-dataset`` given has all its files and paper motion weights
given (``--motion-weights`` / ``--release``) are present and verified, 1 otherwise (the
missing pieces are named), 2 for bad arguments (a path given that does not exist
included: one line, no report). The checks
that could crash (loading pybullet, creating an EGL context, running ffmpeg) run in child
processes, so this command itself imports no simulator, renderer or torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import tyro

__all__ = ["doctor", "main"]


def doctor(
    as_json: Annotated[bool, tyro.conf.arg(name="json")] = False,
    hide: tuple[str, ...] = (),
    probe: bool = True,
    timeout_s: float = 30.0,
    scene_dataset: Path | None = None,
    motion_weights: Path | None = None,
    release: Path | None = None,
) -> int:
    """Report installed backends and optional extras; exit 1 if the defaults cannot run.

    Args:
        as_json: print the report as JSON instead of a table.
        hide: treat these packages (or 'egl', 'ffmpeg') as unavailable, to see what the
            defaults would fall back to; also read from $HUMANCLAW_DOCTOR_HIDE.
        probe: run the subprocess checks (pybullet client, EGL context, ffmpeg binary);
            --no-probe reports package metadata only.
        timeout_s: timeout of each subprocess check, in seconds.
        scene_dataset: also check this scene dataset (its *.scene_dataset_config.json or
            folder): scenes found, object configs and mesh assets missing.
        motion_weights: also check the paper motion's downloaded weights: every file
            present with the size and SHA-256 its manifest pins.
        release: a checkout of the reference release (the weight manifest; its
            weights/paper_fullval_v1 when --motion-weights is not given).
    """
    from humanclaw_gym.doctor import format_report, installation_report

    for flag, path in (
        ("--scene-dataset", scene_dataset),
        ("--motion-weights", motion_weights),
        ("--release", release),
    ):
        if path is not None and not Path(path).exists():
            print(
                f"humanclaw doctor: error: {flag} {path} does not exist: allowed an existing "
                "file or folder to check",
                file=sys.stderr,
            )
            return 2
    try:
        report = installation_report(
            hide,
            probe=probe,
            timeout_s=timeout_s,
            scene_dataset=scene_dataset,
            motion_weights=motion_weights,
            release_dir=release,
        )
    except ValueError as exc:
        print(f"humanclaw doctor: error: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(format_report(report))
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanclaw doctor``."""
    return int(
        tyro.cli(doctor, args=sys.argv[1:] if argv is None else argv, prog="humanclaw doctor")
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
