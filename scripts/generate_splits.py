"""Regenerate the shipped scenes and episode splits (byte-identical on every run).

Writes, under ``humanclaw_gym/assets/`` (or ``--out-dir``):

* ``scenes/hc_val_000.json.gz`` .. ``hc_val_040.json.gz`` and ``scenes/index.json``
* ``splits/val/<scene_id>.json.gz`` and ``splits/val/index.json`` (41 scenes, 1,218
  episodes, 597 interact)
* ``splits/val100.json`` (5 scenes x 20 episode ids)

Usage::

    python scripts/generate_splits.py            # rewrite the shipped data
    python scripts/generate_splits.py --check    # regenerate into a temp dir, compare bytes
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

from humanclaw_gym.episodes.generate import build_val_files, write_files
from humanclaw_gym.episodes.io import assets_dir


@dataclass
class Args:
    """Regenerate the shipped scenes and splits."""

    out_dir: Path | None = None
    """Root to write into (default: the package's assets directory)."""
    check: bool = False
    """Regenerate into a temporary directory and compare every byte with --out-dir."""
    quiet: bool = False
    """Print only the summary."""


def compare_trees(expected_root: Path, files: dict[str, bytes]) -> list[str]:
    """Differences between generated ``files`` and what is on disk under ``expected_root``."""
    problems = []
    for rel in sorted(files):
        path = expected_root / rel
        if not path.is_file():
            problems.append(f"missing: {rel}")
        elif path.read_bytes() != files[rel]:
            problems.append(f"differs: {rel}")
    for sub in ("scenes", "splits"):
        for path in (
            sorted((expected_root / sub).rglob("*.json*")) if (expected_root / sub).is_dir() else []
        ):
            rel = path.relative_to(expected_root).as_posix()
            if rel not in files:
                problems.append(f"unexpected: {rel}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="generate_splits.py")
    root = (args.out_dir or assets_dir()).resolve()
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, flush=True))
    t0 = time.perf_counter()
    built = build_val_files(progress=log)
    elapsed = time.perf_counter() - t0
    total_kb = sum(len(b) for b in built.files.values()) / 1024
    if args.check:
        with tempfile.TemporaryDirectory(prefix="hc_splits_") as tmp:
            write_files(built.files, tmp)
            regenerated = {rel: (Path(tmp) / rel).read_bytes() for rel in built.files}
        problems = compare_trees(root, regenerated)
        if problems:
            print(f"check FAILED against {root}: {len(problems)} problem(s)", file=sys.stderr)
            for p in problems[:50]:
                print(f"  {p}", file=sys.stderr)
            return 1
        print(f"check OK: {len(built.files)} files byte-identical under {root} ({elapsed:.1f} s)")
        return 0
    write_files(built.files, root)
    n_int = sum(e.interact for e in built.episodes)
    print(
        f"wrote {len(built.files)} files ({total_kb:.0f} KiB) under {root}: "
        f"{len(built.episodes)} episodes ({n_int} interact), val100 = {len(built.val100_ids)} ids, {elapsed:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
