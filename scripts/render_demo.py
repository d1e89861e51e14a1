"""Time the render backends on a hand-built furnished home; write example images.

``demo_scene()`` is a living/dining room plus a bedroom with about 90 primitives (walls,
floors, couch, tables, chairs, TV, plants, shelf with books, bed, lamp, ...), nine of them
dynamic objects (cups, books). It does not depend on the procedural generator, so the
renderers can be tested and timed on their own (``tests/test_render.py`` loads this file
for its scene and poses).

Run ``python scripts/render_demo.py`` to print the median time per frame of each available
backend (448 x 448, RGB and RGB + instance ids; 512 x 512 exo) and, with ``--out DIR``, to
write example ego/exo PNGs.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Sequence

import numpy as np

from humanclaw_gym.body.skeleton import STANDING_PELVIS_HEIGHT_M
from humanclaw_gym.replay.render import link_poses_from_frames
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec

__all__ = ["benchmark", "demo_scene", "main", "standing_link_poses", "standing_pose_facing"]

_WALL = (0.88, 0.86, 0.8)
_OAK = (0.62, 0.44, 0.28)
_DARK_WOOD = (0.38, 0.25, 0.16)
_LEG = (0.22, 0.2, 0.19)


def standing_link_poses(x_m: float = 0.0, z_m: float = 0.0, yaw_rad: float = 0.0) -> np.ndarray:
    """``float64 (24, 7)`` link poses of the rest-pose body standing on a floor at y = 0.

    Args:
        x_m, z_m: pelvis position on the floor plane.
        yaw_rad: heading about +Y (0 faces +Z).
    """
    frame = np.zeros(75)
    frame[0:3] = (x_m, STANDING_PELVIS_HEIGHT_M, z_m)
    frame[3:6] = (0.0, yaw_rad, 0.0)
    return link_poses_from_frames(frame)


def standing_pose_facing(scene: SceneSpec, category: str, distance_m: float = 2.6) -> np.ndarray:
    """Link poses of the rest-pose body standing ``distance_m`` in front of the first object
    of ``category`` (along its front, local +Z) and facing it.

    Raises:
        ValueError: the scene has no object of that category.
    """
    matches = scene.objects_of(category)
    if not matches:
        raise ValueError(f"scene {scene.scene_id!r} has no object of category {category!r}")
    target = matches[0]
    front = target.front_direction()
    lo, hi = target.aabb()
    centre = 0.5 * (lo + hi)
    x, z = centre[0] + distance_m * front[0], centre[2] + distance_m * front[2]
    return standing_link_poses(x, z, math.atan2(-front[0], -front[2]))


class _Builder:
    def __init__(self) -> None:
        self.objects: list[SceneObject] = []

    def add(
        self,
        name: str,
        category: str,
        position: Sequence[float],
        parts: Sequence[Part],
        yaw_rad: float = 0.0,
        room_id: int | None = 0,
        mass_kg: float = 0.0,
        seat_height_m: float | None = None,
    ) -> None:
        self.objects.append(
            SceneObject(
                object_id=len(self.objects) + 1,
                name=name,
                category=category,
                position=tuple(position),
                yaw_rad=yaw_rad,
                parts=tuple(parts),
                room_id=room_id,
                dynamic=mass_kg > 0.0,
                mass_kg=mass_kg,
                seat_height_m=seat_height_m,
            )
        )


def _legs(hx: float, hz: float, half_height: float, radius: float, color: tuple) -> list[Part]:
    return [
        Part("cylinder", (radius, half_height, 0.0), (sx * hx, half_height, sz * hz), color, "wood")
        for sx in (-1, 1)
        for sz in (-1, 1)
    ]


def demo_scene() -> SceneSpec:
    """The furnished two-room demo home (living room x 0..6 m, bedroom x 6..9.5 m, z 0..5 m,
    doorway at x 6 m, z 3.6..4.4 m)."""
    b = _Builder()
    half_pi = 0.5 * math.pi
    # Floors and walls (2.5 m high, 0.1 m thick), a doorway in the partition at z 3.6..4.4 m.
    b.add(
        "floor_living",
        "floor",
        (3.0, -0.05, 2.5),
        [Part("box", (3.0, 0.05, 2.5), color=(0.66, 0.48, 0.32), material="wood")],
    )
    b.add(
        "floor_bedroom",
        "floor",
        (7.75, -0.05, 2.5),
        [Part("box", (1.75, 0.05, 2.5), color=(0.62, 0.6, 0.56), material="carpet")],
        room_id=1,
    )
    wall = {"color": _WALL, "material": "plaster"}
    b.add(
        "wall_south",
        "wall",
        (4.75, 1.25, 0.0),
        [Part("box", (4.8, 1.25, 0.05), **wall)],
        room_id=None,
    )
    b.add(
        "wall_north",
        "wall",
        (4.75, 1.25, 5.0),
        [Part("box", (4.8, 1.25, 0.05), **wall)],
        room_id=None,
    )
    b.add(
        "wall_west",
        "wall",
        (0.0, 1.25, 2.5),
        [Part("box", (0.05, 1.25, 2.55), **wall)],
        room_id=None,
    )
    b.add(
        "wall_east",
        "wall",
        (9.5, 1.25, 2.5),
        [Part("box", (0.05, 1.25, 2.55), **wall)],
        room_id=None,
    )
    b.add(
        "wall_mid_a",
        "wall",
        (6.0, 1.25, 1.8),
        [Part("box", (0.05, 1.25, 1.8), **wall)],
        room_id=None,
    )
    b.add(
        "wall_mid_b",
        "wall",
        (6.0, 1.25, 4.7),
        [Part("box", (0.05, 1.25, 0.3), **wall)],
        room_id=None,
    )
    b.add(
        "wall_lintel",
        "wall",
        (6.0, 2.3, 4.0),
        [Part("box", (0.05, 0.2, 0.4), **wall)],
        room_id=None,
    )
    # Living room: couch facing +X, rug, coffee table, TV on a stand facing -X.
    fabric = {"color": (0.42, 0.48, 0.55), "material": "fabric"}
    b.add(
        "couch_0", "couch", (1.0, 0.0, 2.5),
        [Part("box", (1.0, 0.2, 0.45), (0.0, 0.2, 0.0), **fabric)]
        + [Part("box", (0.32, 0.06, 0.4), (dx, 0.46, 0.03), **fabric) for dx in (-0.66, 0.0, 0.66)]
        + [Part("box", (1.0, 0.3, 0.12), (0.0, 0.6, -0.35), **fabric)]
        + [Part("box", (0.1, 0.3, 0.45), (dx, 0.3, 0.0), **fabric) for dx in (-0.95, 0.95)],
        yaw_rad=half_pi, seat_height_m=0.52,
    )  # fmt: skip
    b.add(
        "rug_0",
        "rug",
        (2.2, 0.005, 2.5),
        [Part("box", (0.9, 0.005, 1.2), color=(0.62, 0.22, 0.2), material="carpet")],
    )
    b.add(
        "coffee_table_0", "table", (2.4, 0.0, 2.5),
        [Part("box", (0.3, 0.025, 0.45), (0.0, 0.42, 0.0), _OAK, "wood")] + _legs(0.25, 0.4, 0.2, 0.025, _DARK_WOOD),
    )  # fmt: skip
    b.add(
        "tv_stand_0",
        "cabinet",
        (5.65, 0.0, 2.5),
        [Part("box", (0.8, 0.25, 0.2), (0.0, 0.25, 0.0), _DARK_WOOD, "wood")],
        yaw_rad=-half_pi,
    )
    b.add(
        "tv_0", "tv", (5.7, 0.0, 2.5),
        [
            Part("box", (0.62, 0.36, 0.03), (0.0, 0.98, 0.0), (0.06, 0.06, 0.08), "screen"),
            Part("box", (0.05, 0.08, 0.02), (0.0, 0.58, 0.0), (0.2, 0.2, 0.22), "metal"),
            Part("box", (0.2, 0.01, 0.1), (0.0, 0.51, 0.0), (0.2, 0.2, 0.22), "metal"),
        ],
        yaw_rad=-half_pi,
    )  # fmt: skip
    # Dining: table and four chairs.
    b.add(
        "dining_table_0", "table", (3.8, 0.0, 4.0),
        [Part("box", (0.7, 0.03, 0.45), (0.0, 0.74, 0.0), _OAK, "wood")] + _legs(0.62, 0.38, 0.37, 0.035, _OAK),
    )  # fmt: skip
    for i, (x, z, yaw) in enumerate(
        ((3.4, 3.35, 0.0), (4.2, 3.35, 0.0), (3.4, 4.65, math.pi), (4.2, 4.65, math.pi))
    ):
        b.add(
            f"chair_{i}", "chair", (x, 0.0, z),
            [
                Part("box", (0.22, 0.03, 0.22), (0.0, 0.45, 0.0), _OAK, "wood"),
                Part("box", (0.22, 0.25, 0.025), (0.0, 0.73, -0.2), _OAK, "wood"),
            ]
            + _legs(0.19, 0.19, 0.21, 0.02, _DARK_WOOD),
            yaw_rad=yaw, seat_height_m=0.48,
        )  # fmt: skip
    # Plants.
    for i, (x, z) in enumerate(((0.45, 0.45), (5.55, 0.45))):
        b.add(
            f"potted_plant_{i}", "potted_plant", (x, 0.0, z),
            [
                Part("cylinder", (0.17, 0.2, 0.0), (0.0, 0.2, 0.0), (0.72, 0.38, 0.24), "ceramic"),
                Part("sphere", (0.3, 0.0, 0.0), (0.0, 0.68, 0.0), (0.22, 0.5, 0.2), "plant"),
                Part("sphere", (0.2, 0.0, 0.0), (0.14, 0.9, 0.05), (0.25, 0.55, 0.22), "plant"),
                Part("sphere", (0.22, 0.0, 0.0), (-0.1, 0.86, -0.1), (0.2, 0.46, 0.18), "plant"),
            ],
        )  # fmt: skip
    # Kitchen counter along the south wall with three cups.
    b.add(
        "counter_0", "cabinet", (4.0, 0.0, 0.36),
        [
            Part("box", (1.0, 0.43, 0.3), (0.0, 0.43, 0.0), (0.86, 0.86, 0.83), "plain"),
            Part("box", (1.02, 0.02, 0.31), (0.0, 0.88, 0.0), (0.32, 0.32, 0.34), "stone"),
        ],
    )  # fmt: skip
    for i, color in enumerate(((0.9, 0.9, 0.88), (0.8, 0.3, 0.25), (0.25, 0.45, 0.7))):
        b.add(
            f"cup_{i}",
            "cup",
            (3.5 + 0.3 * i, 0.95, 0.36),
            [Part("cylinder", (0.04, 0.05, 0.0), color=color, material="ceramic")],
            mass_kg=0.25,
        )
    # Shelf against the west wall (front +X) with six books.
    b.add(
        "shelf_0", "shelf", (0.2, 0.0, 4.2),
        [Part("box", (0.02, 0.9, 0.15), (dx, 0.9, 0.0), _DARK_WOOD, "wood") for dx in (-0.42, 0.42)]
        + [Part("box", (0.4, 0.015, 0.15), (0.0, 0.015 + 0.45 * k, 0.0), _DARK_WOOD, "wood") for k in range(4)],
        yaw_rad=half_pi,
    )  # fmt: skip
    book_colors = (
        (0.7, 0.15, 0.15),
        (0.15, 0.35, 0.6),
        (0.85, 0.7, 0.2),
        (0.2, 0.5, 0.3),
        (0.5, 0.2, 0.5),
        (0.9, 0.9, 0.85),
    )
    for i, color in enumerate(book_colors):
        b.add(
            f"book_{i}",
            "book",
            (0.2, 0.595, 4.5 - 0.09 * i),
            [Part("box", (0.02, 0.11, 0.08), color=color, material="leather")],
            yaw_rad=half_pi,
            mass_kg=0.4,
        )
    # Bedroom: bed (head at the east wall), nightstand with lamp, wardrobe.
    linen = {"color": (0.92, 0.92, 0.9), "material": "fabric"}
    b.add(
        "bed_0", "bed", (8.45, 0.0, 2.5),
        [
            Part("box", (0.8, 0.2, 1.0), (0.0, 0.2, 0.0), _OAK, "wood"),
            Part("box", (0.78, 0.1, 0.98), (0.0, 0.5, 0.0), **linen),
            Part("box", (0.8, 0.5, 0.04), (0.0, 0.5, -1.02), _OAK, "wood"),
            Part("box", (0.3, 0.06, 0.15), (-0.4, 0.66, -0.75), **linen),
            Part("box", (0.3, 0.06, 0.15), (0.4, 0.66, -0.75), **linen),
            Part("box", (0.79, 0.03, 0.6), (0.0, 0.62, 0.35), (0.3, 0.42, 0.68), "fabric"),
        ],
        yaw_rad=-half_pi, room_id=1, seat_height_m=0.6,
    )  # fmt: skip
    b.add(
        "nightstand_0",
        "cabinet",
        (9.2, 0.0, 3.65),
        [Part("box", (0.22, 0.25, 0.2), (0.0, 0.25, 0.0), _OAK, "wood")],
        room_id=1,
    )
    b.add(
        "lamp_0", "lamp", (9.2, 0.5, 3.65),
        [
            Part("cylinder", (0.08, 0.02, 0.0), (0.0, 0.02, 0.0), (0.2, 0.2, 0.22), "metal"),
            Part("cylinder", (0.012, 0.15, 0.0), (0.0, 0.19, 0.0), (0.2, 0.2, 0.22), "metal"),
            Part("cylinder", (0.14, 0.11, 0.0), (0.0, 0.4, 0.0), (0.95, 0.9, 0.75), "fabric"),
        ],
        room_id=1,
    )  # fmt: skip
    b.add(
        "wardrobe_0", "cabinet", (7.2, 0.0, 0.4),
        [
            Part("box", (0.45, 1.0, 0.3), (0.0, 1.0, 0.0), (0.85, 0.84, 0.8), "wood"),
            Part("box", (0.005, 0.95, 0.005), (0.0, 1.0, 0.3), _DARK_WOOD, "plain"),
        ],
        room_id=1,
    )  # fmt: skip
    rooms = (
        Room(0, "living_room", (0.0, 0.0), (6.0, 5.0)),
        Room(1, "bedroom", (6.0, 0.0), (9.5, 5.0)),
    )
    return SceneSpec(
        "render_demo", rooms, tuple(b.objects), seed=0, generator="humanclaw_render_demo"
    )


def benchmark(
    renderer: object,
    scene: SceneSpec,
    link_poses: np.ndarray,
    frames: int = 40,
    modes: frozenset[str] = frozenset({"rgb"}),
    size: int = 448,
    view: str = "ego",
) -> float:
    """Median wall time in ms of one frame (pose upload + render + readback).

    Args:
        renderer: a RenderBackend (``build`` is called here).
        scene: the scene to draw.
        link_poses: ``(24, 7)`` humanoid pose the cameras follow.
        frames: timed frames (after two warm-up frames).
        modes: render modes of each frame (``"rgb"`` always; e.g. ``"instance"``).
        size: image side in pixels.
        view: ``"ego"`` (on the head) or ``"exo"`` (third person with cutaway).
    """
    from humanclaw_gym.render.cameras import ego_camera, exo_camera

    if view not in ("ego", "exo"):
        raise ValueError(f"view must be 'ego' or 'exo', got {view!r}")
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    renderer.build(scene)  # type: ignore[attr-defined]
    make_camera = ego_camera if view == "ego" else exo_camera
    camera = make_camera(link_poses, width=size, height=size)
    times = []
    for i in range(frames + 2):
        start = time.perf_counter()
        renderer.set_body_pose(link_poses)  # type: ignore[attr-defined]
        renderer.render(camera, modes)  # type: ignore[attr-defined]
        if i >= 2:
            times.append(time.perf_counter() - start)
    return 1000.0 * float(np.median(times))


def _save_png(path: str, rgb: np.ndarray) -> None:
    from PIL import Image

    from humanclaw_gym.fileio import atomic_path

    with atomic_path(path) as tmp:
        Image.fromarray(rgb).save(tmp, format="PNG")


def main(argv: Sequence[str] | None = None) -> None:
    """Time both backends on the demo scene; optionally write example images."""
    from humanclaw_gym.render import RenderBackendUnavailable, create_renderer
    from humanclaw_gym.render.cameras import ego_camera, exo_camera

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=40, help="timed frames per measurement")
    parser.add_argument("--out", default=None, help="directory for example ego/exo PNGs")
    parser.add_argument(
        "--scene-seed",
        type=int,
        default=None,
        help="use the procedural home generate_scene('hc_demo_<seed>', seed) instead of the "
        "hand-built demo scene; the body stands in front of its couch",
    )
    args = parser.parse_args(argv)
    if args.scene_seed is None:
        scene = demo_scene()
        poses = standing_link_poses(2.9, 1.3, -0.35)
    else:
        from humanclaw_gym.scenes.generator import generate_scene

        scene = generate_scene(f"hc_demo_{args.scene_seed:03d}", args.scene_seed)
        poses = standing_pose_facing(scene, "couch")
    n_parts = sum(len(o.parts) for o in scene.objects)
    print(
        f"scene {scene.scene_id}: {len(scene.objects)} objects, {n_parts} primitives "
        "+ 24 humanoid links"
    )
    for name in ("moderngl", "tiny"):
        try:
            renderer, reason = create_renderer(name)
        except RenderBackendUnavailable as exc:
            print(f"{name}: unavailable ({exc})")
            continue
        try:
            rgb_ms = benchmark(renderer, scene, poses, args.frames)
            both_ms = benchmark(renderer, scene, poses, args.frames, {"rgb", "instance"})
            exo_ms = benchmark(renderer, scene, poses, args.frames, size=512, view="exo")
            print(
                f"{name}: ego 448x448 {rgb_ms:.1f} ms rgb, {both_ms:.1f} ms rgb+instance; "
                f"exo 512x512 {exo_ms:.1f} ms rgb ({reason})"
            )
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                ego = renderer.render(ego_camera(poses)).rgb
                exo = renderer.render(exo_camera(poses)).rgb
                _save_png(os.path.join(args.out, f"{name}_ego.png"), ego)
                _save_png(os.path.join(args.out, f"{name}_exo.png"), exo)
        finally:
            renderer.close()


if __name__ == "__main__":  # pragma: no cover
    main()
