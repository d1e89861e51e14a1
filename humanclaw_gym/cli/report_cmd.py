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


def main(argv: list[str]) -> int:
    args = tyro.cli(ReportArgs, args=argv, prog="humanclaw report")
    from humanclaw_gym.evaluation.report import write_rollout_report

    root = args.rollout_dir
    if not root.exists():
        print(f"humanclaw report: {root} does not exist", file=sys.stderr)
        return 2
    if (root / "replay_manifest.json").is_file():
        dirs = [root]
    else:
        dirs = sorted(p.parent for p in root.rglob("replay_manifest.json"))
        if args.output is not None and len(dirs) != 1:
            print("humanclaw report: --output needs exactly one rollout", file=sys.stderr)
            return 2
    if not dirs:
        print(
            f"humanclaw report: error: no replay_manifest.json under {root} (give a rollout "
            "folder of humanclaw run or rollout, or a folder above some)",
            file=sys.stderr,
        )
        return 2
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
