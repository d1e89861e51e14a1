"""``humanclaw scenes``: inspect procedural homes.

Subcommands:

* ``render-map --scene ID --out map.png [--episode EPID] [--split val]``: top-down map
  (rooms labelled, walls, furniture coloured by category with a legend; with an episode:
  target instances outlined, start pose arrow, shortest path).
* ``show --scene ID [--json]``: rooms, doors and objects by category.

Scene ids are the shipped ``hc_val_###`` homes or generated ``hc_train_###`` homes.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import tyro

from humanclaw_gym.cli.episodes_cmd import format_table
from humanclaw_gym.episodes import EpisodeFormatError, get_episode, load_scene
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES, SceneSpec

__all__ = ["RenderMap", "Show", "main", "scene_summary"]


@dataclass
class RenderMap:
    """Draw a top-down map of a scene (optionally with an episode) into a PNG."""

    scene: str | None = None
    """Scene id (optional when --episode is given)."""
    out: Path = Path("map.png")
    """Output PNG path."""
    episode: str | None = None
    """Episode id: outline its targets, draw its start pose and shortest path."""
    split: str = "val"
    """Split to look the episode up in."""
    px_per_m: float = 60.0
    """Scale, pixels per metre."""
    clearance: bool = True
    """Tint the body-clearance margin of the navigation grid."""


@dataclass
class Show:
    """Print a summary of a scene: rooms, doors, objects by category."""

    scene: str
    """Scene id."""
    as_json: Annotated[bool, tyro.conf.arg(name="json")] = False
    """Print JSON instead of tables."""


def scene_summary(scene: SceneSpec) -> dict[str, Any]:
    """JSON-ready summary of a scene."""
    rooms = []
    for room in scene.rooms:
        w = room.max_xz[0] - room.min_xz[0]
        d = room.max_xz[1] - room.min_xz[1]
        cats = Counter(
            o.category
            for o in scene.objects
            if o.room_id == room.room_id and o.category not in ("floor", "wall")
        )
        rooms.append(
            {
                "room_id": room.room_id,
                "room_type": room.room_type,
                "size_m": [round(w, 3), round(d, 3)],
                "area_m2": round(w * d, 2),
                "objects": dict(sorted(cats.items())),
            }
        )
    cats = Counter(o.category for o in scene.objects)
    targets = {
        c: [
            {
                "object_id": o.object_id,
                "name": o.name,
                "room_id": o.room_id,
                "seat_height_m": o.seat_height_m,
            }
            for o in scene.objects_of(c)
        ]
        for c in TARGET_CATEGORIES
    }
    return {
        "scene_id": scene.scene_id,
        "seed": scene.seed,
        "generator": scene.generator,
        "content_sha256": scene.content_hash(),
        "num_objects": len(scene.objects),
        "num_dynamic": len(scene.dynamic_objects),
        "has_platform": bool(scene.metadata.get("has_platform", False)),
        "doors": list(scene.metadata.get("doors", [])),
        "rooms": rooms,
        "objects_by_category": dict(sorted(cats.items())),
        "targets": targets,
    }


def _print_show(s: dict[str, Any]) -> None:
    print(f"scene {s['scene_id']}  (seed {s['seed']}, {s['generator']})")
    print(
        f"{s['num_objects']} objects ({s['num_dynamic']} dynamic), platform: {'yes' if s['has_platform'] else 'no'}, sha256 {s['content_sha256'][:16]}"
    )
    print()
    rows = [
        [
            r["room_id"],
            r["room_type"],
            f"{r['size_m'][0]:.2f} x {r['size_m'][1]:.2f}",
            f"{r['area_m2']:.1f}",
            sum(r["objects"].values()),
        ]
        for r in s["rooms"]
    ]
    total = [
        "total",
        "",
        "",
        f"{sum(r['area_m2'] for r in s['rooms']):.1f}",
        sum(sum(r["objects"].values()) for r in s["rooms"]),
    ]
    print(format_table(["room", "type", "size (m)", "area (m2)", "objects"], rows, total))
    if s["doors"]:
        rows = [
            [
                f"{d['rooms'][0]}-{d['rooms'][1]}",
                f"({d['center_xz'][0]:.2f}, {d['center_xz'][1]:.2f})",
                f"{d['width_m']:.2f}",
            ]
            for d in s["doors"]
        ]
        print(format_table(["door", "centre x, z", "width (m)"], rows))
    rows = []
    for cat, n in s["objects_by_category"].items():
        target = "target" if cat in s["targets"] else ""
        rows.append([cat, n, target])
    print(format_table(["category", "count", "role"], rows, ["total", s["num_objects"], ""]))
    rows = []
    for cat, insts in s["targets"].items():
        for inst in insts:
            seat = "" if inst["seat_height_m"] is None else f"{inst['seat_height_m']:.3f}"
            rows.append([cat, inst["name"], inst["object_id"], inst["room_id"], seat])
    print(format_table(["target", "name", "id", "room", "seat (m)"], rows), end="")


def _render(args: RenderMap) -> int:
    from humanclaw_gym.scenes.maps import render_map, save_map

    episode = None
    if args.episode is not None:
        episode = get_episode(args.split, args.episode)
        if args.scene is not None and args.scene != episode.scene_id:
            print(
                f"humanclaw scenes: error: episode {args.episode!r} is in scene {episode.scene_id!r}, not {args.scene!r}",
                file=sys.stderr,
            )
            return 2
    scene_id = args.scene or (episode.scene_id if episode is not None else None)
    if scene_id is None:
        print("humanclaw scenes: error: render-map needs --scene or --episode", file=sys.stderr)
        return 2
    scene = load_scene(scene_id)
    image = render_map(
        scene, episode=episode, px_per_m=args.px_per_m, show_clearance=args.clearance
    )
    path = save_map(image, args.out)
    print(f"wrote {path} ({image.width}x{image.height})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanclaw scenes``."""
    args = tyro.extras.subcommand_cli_from_dict(
        {"render-map": RenderMap, "show": Show},
        prog="humanclaw scenes",
        description="Inspect procedural scenes.",
        args=sys.argv[1:] if argv is None else argv,
    )
    try:
        if isinstance(args, RenderMap):
            return _render(args)
        summary = scene_summary(load_scene(args.scene))
        if args.as_json:
            print(json.dumps(summary, indent=2))
        else:
            _print_show(summary)
        return 0
    except KeyError as exc:
        print(f"humanclaw scenes: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except (EpisodeFormatError, ValueError) as exc:  # an unknown scene, a bad --px-per-m, ...
        print(f"humanclaw scenes: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
