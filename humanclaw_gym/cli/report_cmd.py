"""``humanclaw report``: a self-contained HTML page per rollout."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from humanclaw_gym.backends import registry


@dataclass
class ReportArgs:
    """Write report.html for a rollout directory (or every rollout below a run directory)."""

    rollout_dir: Path
    """a rollout directory (with replay_manifest.json) or a run directory containing many"""
    output: Path | None = None
    """output file for a single rollout (default: <rollout-dir>/report.html)"""
    renderer: Annotated[
        str, tyro.conf.arg(help=f"render backend: {' | '.join(registry.render_choices())}")
    ] = "auto"
    """render backend used to re-render the ego views"""
    image_size: int = 224
    """size of the ego thumbnails in pixels"""


#: Largest ``--image-size``: the renderers' camera bound, pixels.
MAX_IMAGE_SIZE_PX = 4096


def main(argv: list[str]) -> int:
    """Write the reports. A mistake in what the command is given (a missing folder, no
    rollout below it, a bad flag, a single rollout whose files cannot be read) is one line
    with exit code 2 and nothing written; below a run directory, a rollout that fails is
    listed and makes the exit code 1 while the others are written."""
    args = tyro.cli(ReportArgs, args=argv, prog="humanclaw report")
    from humanclaw_gym.evaluation.report import write_rollout_report

    def error(message: str) -> int:
        print(f"humanclaw report: error: {message}", file=sys.stderr)
        return 2

    try:
        registry.check_renderer_name(args.renderer)
    except registry.BackendCapabilityError as exc:
        return error(str(exc))
    if not 1 <= args.image_size <= MAX_IMAGE_SIZE_PX:
        return error(
            f"--image-size {args.image_size} is invalid: allowed 1..{MAX_IMAGE_SIZE_PX} pixels"
        )
    root = args.rollout_dir
    if not root.exists():
        return error(f"{root} does not exist (give a rollout folder or a folder above some)")
    single = (root / "replay_manifest.json").is_file()
    if single:
        dirs = [root]
    else:
        dirs = sorted(p.parent for p in root.rglob("replay_manifest.json"))
        if args.output is not None and len(dirs) != 1:
            return error(f"--output needs exactly one rollout; {root} holds {len(dirs)}")
    if not dirs:
        return error(
            f"no replay_manifest.json under {root} (give a rollout folder of humanclaw run "
            "or rollout, or a folder above some)"
        )
    if len(dirs) == 1:  # the one rollout the user named: its mistakes are input mistakes
        from humanclaw_gym.cli.errors import is_user_error, one_line

        try:
            print(
                write_rollout_report(
                    dirs[0], args.output, renderer=args.renderer, image_size=args.image_size
                )
            )
        except Exception as exc:
            if not (is_user_error(exc) or isinstance(exc, ValueError)):
                raise  # a bug: its traceback
            return error(f"{dirs[0]}: {one_line(exc)}")
        return 0
    failures = 0
    for d in dirs:
        try:
            out = write_rollout_report(
                d, args.output, renderer=args.renderer, image_size=args.image_size
            )
            print(out)
        except Exception as exc:  # one bad rollout does not stop the others
            failures += 1
            print(f"humanclaw report: {d}: {exc}", file=sys.stderr)
    return 1 if failures else 0
