"""A small synthetic scene dataset in exactly the reference release's HSSD layout.

For tests and benchmarks on machines without the licensed HSSD meshes. It writes, with
``trimesh`` (the ``hssd`` extra)::

    <root>/hssd-hab.scene_dataset_config.json
    <root>/stages/<scene>.stage_config.json, <scene>.glb
    <root>/objects/humanclaw/<template>.object_config.json, <asset>.glb, <asset>.collider.glb
    <root>/scenes/<scene>.scene_instance.json
    <root>/semantics/hssd-hab_semantic_lexicon.json
    <root>/episodes/val/val.json.gz                  (the split's header: category tables,
                                                      no episodes)
    <root>/episodes/val/content/<scene>.json.gz      (Habitat ObjectNav shards + HumanClaw
                                                      fields: init_offset, init_yaw,
                                                      view_points)

The home (scene ``synth_home_01``): a ground floor (y = 0) of two rooms, 5 x 6 m each,
joined by a 1 m doorway; an upper floor (y = 3.0 m) above the east room, reached by a
flight of 20 stairs; chairs (red, untextured), a couch (textured, an instance with
non-uniform scale and a rotated quaternion), a TV, a potted plant (textured), a toilet, a
bed upstairs and a dynamic box. Object configs follow the reference's per-instance layout
(``objects/humanclaw/<template>.object_config.json`` with ``render_asset``,
``collision_asset``, ``up``, ``front``, ``semantic_id``, friction, restitution, ``mass``).
Every asset's front is -Z and its origin is at the bottom centre (``asset_local``).

:func:`write_synthetic_dataset` returns a :class:`SyntheticDataset` naming the paths and
the ground truth (where each object is, its colour) the tests check renders against.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SCENE_ID", "SyntheticDataset", "write_synthetic_dataset"]

SCENE_ID = "synth_home_01"
UPPER_FLOOR_Y = 3.0
_LEXICON = {"chair": 1, "bed": 2, "sofa": 3, "toilet": 4, "tv": 5, "plant": 6, "box": 7}
#: Untextured display colours (linear factors chosen so that their sRGB is the name).
CHAIR_COLOR = (1.0, 0.0, 0.0)


@dataclass(frozen=True)
class SyntheticDataset:
    """What :func:`write_synthetic_dataset` wrote.

    Attributes:
        root: the dataset folder (pass it as ``scene_dataset``).
        config: the ``hssd-hab.scene_dataset_config.json`` file.
        episodes_dir: the folder of reference-format episode shards.
        scene_id: the scene's id.
        objects: per object instance index: ``{"template", "category", "translation",
            "rotation_wxyz", "scale", "motion_type", "center", "color"}`` (``center`` is the
            world centre of its render mesh's box).
    """

    root: Path
    config: Path
    episodes_dir: Path
    scene_id: str
    objects: tuple[dict[str, Any], ...] = field(default_factory=tuple)


# ---------------------------------------------------------------------------------------
# geometry helpers (trimesh)
# ---------------------------------------------------------------------------------------
def _trimesh() -> Any:
    try:
        import trimesh
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "the synthetic scene dataset is written with trimesh: pip install 'humanclaw-gym[hssd]'"
        ) from exc
    return trimesh


def _box(lo: tuple[float, float, float], hi: tuple[float, float, float]) -> Any:
    tm = _trimesh()
    lo_a, hi_a = np.asarray(lo, float), np.asarray(hi, float)
    m = tm.creation.box(extents=hi_a - lo_a)
    m.apply_translation(0.5 * (lo_a + hi_a))
    return m


def _cylinder(radius: float, height: float, base: tuple[float, float, float]) -> Any:
    tm = _trimesh()
    m = tm.creation.cylinder(radius=radius, height=height, sections=24)
    # trimesh cylinders run along +Z: turn them to +Y
    m.apply_transform(tm.transformations.rotation_matrix(-math.pi / 2, [1, 0, 0]))
    m.apply_translation([base[0], base[1] + height / 2, base[2]])
    return m


def _sphere(radius: float, centre: tuple[float, float, float]) -> Any:
    tm = _trimesh()
    m = tm.creation.icosphere(subdivisions=2, radius=radius)
    m.apply_translation(centre)
    return m


def _linear(srgb: tuple[float, float, float]) -> list[float]:
    c = np.asarray(srgb, dtype=np.float64)
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return [float(v) for v in lin]


def _colored(meshes: list[Any], srgb: tuple[float, float, float]) -> Any:
    tm = _trimesh()
    m = tm.util.concatenate(meshes)
    m.unmerge_vertices()  # flat shading: one normal per face corner
    factor = [int(round(v * 255)) for v in _linear(srgb)] + [255]
    m.visual = tm.visual.TextureVisuals(
        material=tm.visual.material.PBRMaterial(baseColorFactor=factor, name="color")
    )
    return m


def _textured(meshes: list[Any], image: Any, tile_m: float = 0.5) -> Any:
    """Planar-mapped UVs (world metres / tile) on the dominant axis pair of each face."""
    tm = _trimesh()
    m = tm.util.concatenate(meshes)
    m.unmerge_vertices()
    v = m.vertices
    n = m.vertex_normals if len(m.vertex_normals) == len(v) else np.zeros_like(v)
    fn = np.repeat(m.face_normals, 3, axis=0)[np.argsort(m.faces.reshape(-1))]
    axis = np.argmax(np.abs(fn), axis=1)
    uv = np.where(
        (axis == 1)[:, None],
        v[:, [0, 2]],
        np.where((axis == 0)[:, None], v[:, [2, 1]], v[:, [0, 1]]),
    )
    del n
    material = tm.visual.material.PBRMaterial(
        baseColorTexture=image, baseColorFactor=[255, 255, 255, 255], name="textured"
    )
    m.visual = tm.visual.TextureVisuals(uv=uv / tile_m, material=material)
    return m


def _image(kind: str) -> Any:
    from PIL import Image

    size = 64
    yy, xx = np.mgrid[0:size, 0:size]
    img = np.zeros((size, size, 3), dtype=np.uint8)
    if kind == "fabric":  # green/teal checks
        check = ((xx // 8) + (yy // 8)) % 2
        img[...] = np.where(check[..., None] == 1, [40, 140, 110], [20, 100, 80])
    elif kind == "leaves":
        stripe = (xx // 4 + yy // 6) % 3
        img[...] = np.choose(stripe[..., None], [[30, 120, 40], [60, 170, 60], [20, 90, 30]])
    else:  # wood floor planks
        plank = (yy // 16) % 2
        img[...] = np.where(plank[..., None] == 1, [150, 110, 70], [130, 95, 60])
        img[(xx + 16 * (yy // 16)) % 64 == 0] = [90, 65, 40]
    return Image.fromarray(img)


def _export(meshes: list[Any], path: Path) -> None:
    tm = _trimesh()
    scene = tm.Scene()
    for i, m in enumerate(meshes):
        scene.add_geometry(m, node_name=f"node_{i}", geom_name=f"mesh_{i}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(scene.export(file_type="glb", include_normals=True))


# ---------------------------------------------------------------------------------------
# the assets (front = -Z, origin at the bottom centre)
# ---------------------------------------------------------------------------------------
def _chair() -> tuple[list[Any], list[Any]]:
    legs = [
        _box((sx * 0.2 - 0.025, 0.0, sz * 0.2 - 0.025), (sx * 0.2 + 0.025, 0.42, sz * 0.2 + 0.025))
        for sx in (-1, 1)
        for sz in (-1, 1)
    ]
    seat = _box((-0.24, 0.42, -0.24), (0.24, 0.47, 0.24))
    back = _box((-0.24, 0.47, 0.19), (0.24, 0.95, 0.24))
    render = [_colored([*legs, seat, back], (1.0, 0.0, 0.0))]
    return render, [_box((-0.24, 0.0, -0.24), (0.24, 0.47, 0.24)), back]


def _couch() -> tuple[list[Any], list[Any]]:
    base = _box((-1.0, 0.0, -0.45), (1.0, 0.42, 0.45))
    back = _box((-1.0, 0.42, 0.2), (1.0, 0.85, 0.45))
    arms = [_box((sx * 0.9 - 0.1, 0.42, -0.45), (sx * 0.9 + 0.1, 0.62, 0.2)) for sx in (-1, 1)]
    render = [_textured([base, back, *arms], _image("fabric"), 0.4)]
    return render, [base, back, *arms]


def _tv() -> tuple[list[Any], list[Any]]:
    stand = _box((-0.55, 0.0, -0.25), (0.55, 0.45, 0.25))
    screen = _box((-0.6, 0.5, -0.04), (0.6, 1.2, 0.04))
    neck = _box((-0.05, 0.45, -0.03), (0.05, 0.5, 0.03))
    render = [_colored([stand], (0.45, 0.32, 0.2)), _colored([screen, neck], (0.08, 0.08, 0.1))]
    return render, [stand, screen, neck]


def _plant() -> tuple[list[Any], list[Any]]:
    pot = _cylinder(0.2, 0.35, (0.0, 0.0, 0.0))
    foliage = _sphere(0.35, (0.0, 0.7, 0.0))
    render = [_colored([pot], (0.65, 0.35, 0.2)), _textured([foliage], _image("leaves"), 0.3)]
    return render, [pot, _box((-0.3, 0.35, -0.3), (0.3, 1.0, 0.3))]


def _toilet() -> tuple[list[Any], list[Any]]:
    base = _box((-0.2, 0.0, -0.3), (0.2, 0.4, 0.25))
    tank = _box((-0.22, 0.4, 0.15), (0.22, 0.8, 0.3))
    render = [_colored([base, tank], (0.93, 0.93, 0.9))]
    return render, [base, tank]


def _bed() -> tuple[list[Any], list[Any]]:
    frame = _box((-0.8, 0.0, -1.0), (0.8, 0.3, 1.0))
    mattress = _box((-0.78, 0.3, -0.98), (0.78, 0.52, 0.98))
    head = _box((-0.8, 0.0, 0.95), (0.8, 1.0, 1.05))
    render = [_colored([frame, head], (0.35, 0.25, 0.2)), _colored([mattress], (0.2, 0.3, 0.8))]
    return render, [frame, mattress, head]


def _crate() -> tuple[list[Any], list[Any]]:
    b = _box((-0.15, 0.0, -0.15), (0.15, 0.3, 0.15))
    return [_colored([b], (0.85, 0.6, 0.1))], [b]


def _stage() -> list[Any]:
    floor = _textured(
        [
            _box((-0.1, -0.1, -0.1), (10.1, 0.0, 6.1)),
            _box((5.0, UPPER_FLOOR_Y - 0.15, 0.0), (10.0, UPPER_FLOOR_Y, 5.0)),
        ],
        _image("wood"),
        1.0,
    )
    top = UPPER_FLOOR_Y + 2.8
    walls = [
        _box((-0.1, 0.0, -0.1), (0.0, 2.85, 6.1)),  # west
        _box((0.0, 0.0, -0.1), (5.0, 2.85, 0.0)),  # south, west room
        _box((0.0, 0.0, 6.0), (5.0, 2.85, 6.1)),  # north, west room
        _box((5.0, 0.0, -0.1), (10.1, top, 0.0)),  # south, east part (two storeys)
        _box((5.0, 0.0, 6.0), (10.1, top, 6.1)),  # north, east part
        _box((10.0, 0.0, 0.0), (10.1, top, 6.0)),  # east
        # interior wall with a 1 m doorway (z 2.5..3.5, 2.1 m high), full height above
        _box((4.95, 0.0, 0.0), (5.05, 2.85, 2.5)),
        _box((4.95, 0.0, 3.5), (5.05, 2.85, 6.0)),
        _box((4.95, 2.1, 2.5), (5.05, 2.85, 3.5)),
        _box((4.95, 2.85, 0.0), (5.05, top, 6.0)),  # west wall of the upper room
    ]
    steps = [
        _box((6.0 + 0.15 * k, 0.0, 5.0), (6.0 + 0.15 * (k + 1), 0.15 * (k + 1), 6.0))
        for k in range(20)
    ]
    return [floor, _colored(walls, (0.86, 0.84, 0.8)), _colored(steps, (0.55, 0.5, 0.45))]


_ASSETS = {
    "chair": _chair,
    "couch": _couch,
    "tv": _tv,
    "plant": _plant,
    "toilet": _toilet,
    "bed": _bed,
    "crate": _crate,
}
_SEMANTIC = {
    "chair": "chair",
    "couch": "sofa",
    "tv": "tv",
    "plant": "plant",
    "toilet": "toilet",
    "bed": "bed",
    "crate": "box",
}
_CATEGORY = {
    "chair": "chair",
    "couch": "couch",
    "tv": "tv",
    "plant": "potted_plant",
    "toilet": "toilet",
    "bed": "bed",
    "crate": "box",
}


def _yaw_quat_wxyz(theta_deg: float) -> list[float]:
    """Habitat ``[w, x, y, z]`` of a turn by ``theta`` about +Y."""
    h = math.radians(theta_deg) / 2.0
    return [math.cos(h), 0.0, math.sin(h), 0.0]


# (asset, translation, rotation [w, x, y, z], non_uniform_scale, motion type)
# A front (-Z) turned by theta about +Y faces (-sin theta, 0, -cos theta).
_INSTANCES: list[
    tuple[str, tuple[float, float, float], list[float], tuple[float, float, float], str]
] = [
    ("chair", (1.5, 0.0, 1.4), _yaw_quat_wxyz(180.0), (1.0, 1.0, 1.0), "STATIC"),
    ("chair", (3.2, 0.0, 4.6), _yaw_quat_wxyz(-30.0), (1.0, 1.0, 1.0), "STATIC"),
    ("couch", (0.55, 0.0, 3.0), _yaw_quat_wxyz(-90.0), (1.2, 1.0, 0.9), "STATIC"),
    ("tv", (4.6, 0.0, 1.2), _yaw_quat_wxyz(90.0), (1.0, 1.0, 1.0), "STATIC"),
    ("plant", (4.5, 0.0, 5.5), _yaw_quat_wxyz(0.0), (1.0, 1.0, 1.0), "STATIC"),
    # 1 cm above the floor, like HSSD's dynamic objects (a convex hull collides with
    # Bullet's 1 cm margin outside it)
    ("crate", (3.0, 0.01, 0.5), _yaw_quat_wxyz(20.0), (1.0, 1.0, 1.0), "DYNAMIC"),
    ("toilet", (9.65, 0.0, 1.0), _yaw_quat_wxyz(90.0), (1.0, 1.0, 1.0), "STATIC"),
    ("chair", (7.0, 0.0, 3.6), _yaw_quat_wxyz(135.0), (1.0, 1.0, 1.0), "STATIC"),
    ("bed", (8.9, UPPER_FLOOR_Y, 2.0), _yaw_quat_wxyz(90.0), (1.0, 1.0, 1.0), "STATIC"),
    ("chair", (6.3, UPPER_FLOOR_Y, 0.8), _yaw_quat_wxyz(180.0), (1.0, 1.0, 1.0), "STATIC"),
]

# (category, start x, start y, start z, start yaw deg in our convention)
_EPISODES: list[tuple[str, float, float, float, float]] = [
    ("chair", 2.5, 0.0, 2.6, 0.0),
    ("couch", 2.6, 0.0, 2.2, 90.0),
    ("tv", 1.6, 0.0, 4.4, 120.0),
    ("toilet", 3.4, 0.0, 3.0, 90.0),
    ("potted_plant", 7.6, 0.0, 2.2, -90.0),
    ("bed", 6.2, UPPER_FLOOR_Y, 3.9, 90.0),
    ("chair", 9.0, UPPER_FLOOR_Y, 4.2, -120.0),
    ("couch", 3.8, 0.0, 1.8, 0.0),
]


def _rotate_y_wxyz(q: list[float], v: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    m = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    return v @ m.T


def write_synthetic_dataset(root: str | os.PathLike[str]) -> SyntheticDataset:
    """Write the synthetic dataset and its episodes under ``root`` (created; must not hold
    a dataset yet). Deterministic: the same files every time.

    Returns:
        The :class:`SyntheticDataset` record.
    """
    root = Path(root)
    config = root / "hssd-hab.scene_dataset_config.json"
    if config.exists():
        raise FileExistsError(f"{config} already exists")
    root.mkdir(parents=True, exist_ok=True)
    config.write_text(
        json.dumps(
            {
                "stages": {"paths": {".json": ["stages"]}},
                "objects": {"paths": {".json": ["objects/*", "objects/decomposed/*"]}},
                "scene_instances": {
                    "default_attributes": {
                        "default_lighting": "",
                        "semantic_scene_instance": "hssd_ssd_map",
                    },
                    "paths": {".json": ["scenes"]},
                },
                "semantic_scene_descriptor_instances": {
                    "hssd_ssd_map": "semantics/hssd-hab_semantic_lexicon.json"
                },
            },
            indent=4,
        )
    )
    (root / "semantics").mkdir(exist_ok=True)
    (root / "semantics" / "hssd-hab_semantic_lexicon.json").write_text(
        json.dumps({"classes": [{"name": n, "id": i} for n, i in _LEXICON.items()]}, indent=2)
    )
    stages = root / "stages"
    _export(_stage(), stages / f"{SCENE_ID}.glb")
    (stages / f"{SCENE_ID}.stage_config.json").write_text(
        json.dumps(
            {
                "render_asset": f"{SCENE_ID}.glb",
                "up": [0, 1, 0],
                "front": [0, 0, -1],
                "margin": 0.01,
                "friction_coefficient": 0.8,
                "restitution_coefficient": 0.0,
            },
            indent=2,
        )
    )
    objdir = root / "objects" / "humanclaw"
    objdir.mkdir(parents=True, exist_ok=True)
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, make in _ASSETS.items():
        render, collision = make()
        _export(render, objdir / f"{name}.glb")
        tm = _trimesh()
        both = tm.util.concatenate(render)
        bounds[name] = (both.bounds[0], both.bounds[1])
        if name != "crate":  # the crate collides with its render mesh (no collider)
            _export([tm.util.concatenate(collision)], objdir / f"{name}.collider.glb")
    instances = []
    records = []
    for i, (asset, t, q, s, motion) in enumerate(_INSTANCES):
        template = f"synthr_{SCENE_ID}_{i:04d}_{asset}"
        cfg: dict[str, Any] = {
            "up": [0.0, 1.0, 0.0],
            "front": [0.0, 0.0, -1.0],
            "render_asset": f"{asset}.glb",
            "semantic_id": _LEXICON[_SEMANTIC[asset]],
            "friction_coefficient": 1.0,
            "restitution_coefficient": 0.0,
            "mass": 2.0 if motion == "DYNAMIC" else 10.0,
        }
        if asset != "crate":
            cfg["collision_asset"] = f"{asset}.collider.glb"
        (objdir / f"{template}.object_config.json").write_text(json.dumps(cfg, indent=2))
        instances.append(
            {
                "template_name": template,
                "translation": list(t),
                "rotation": q,
                "non_uniform_scale": list(s),
                "motion_type": motion,
            }
        )
        lo, hi = bounds[asset]
        centre_local = 0.5 * (lo + hi) * np.asarray(s)
        centre = np.asarray(t) + _rotate_y_wxyz(q, centre_local[None])[0]
        records.append(
            {
                "index": i,
                "template": template,
                "asset": asset,
                "category": _CATEGORY[asset],
                "translation": t,
                "rotation_wxyz": tuple(q),
                "scale": s,
                "motion_type": motion,
                "center": tuple(float(v) for v in centre),
            }
        )
    scenes = root / "scenes"
    scenes.mkdir(exist_ok=True)
    (scenes / f"{SCENE_ID}.scene_instance.json").write_text(
        json.dumps(
            {
                "stage_instance": {"template_name": f"stages/{SCENE_ID}"},
                "translation_origin": "asset_local",
                "object_instances": instances,
            },
            indent=2,
        )
    )
    episodes_dir = root / "episodes" / "val" / "content"
    _write_episodes(root, episodes_dir, records)
    return SyntheticDataset(
        root=root,
        config=config,
        episodes_dir=episodes_dir,
        scene_id=SCENE_ID,
        objects=tuple(records),
    )


def _habitat_rotation(yaw_deg: float) -> list[float]:
    """Habitat agent rotation ``[x, y, z, w]`` whose forward (-Z) is our yaw."""
    theta = math.radians(yaw_deg) + math.pi
    return [0.0, math.sin(theta / 2.0), 0.0, math.cos(theta / 2.0)]


def _wrap_deg(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


def _write_episodes(root: Path, out_dir: Path, records: list[dict[str, Any]]) -> None:
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset
    from humanclaw_gym.scenes.meshgrid import navigation_grid

    dataset = SceneDataset(root)
    scene = dataset.load_scene(SCENE_ID)
    goals_by_category: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        if rec["category"] == "box":
            continue
        obj = scene.object_by_id(rec["index"] + 2)
        lo, hi = obj.aabb()
        grid = navigation_grid(scene, float(lo[1]))
        # view points: free cells 1.0-1.4 m from the object's box, facing it
        views = []
        for ang in range(0, 360, 45):
            d = np.array([math.sin(math.radians(ang)), math.cos(math.radians(ang))])
            centre = 0.5 * (lo + hi)
            for r in (1.0, 1.2, 1.4):
                px, pz = (
                    centre[0] + d[0] * (r + 0.5 * abs(hi[0] - lo[0]) * abs(d[0])),
                    centre[2] + d[1] * (r + 0.5 * abs(hi[2] - lo[2]) * abs(d[1])),
                )
                if grid.is_free(px, pz):
                    yaw = math.degrees(math.atan2(centre[0] - px, centre[2] - pz))
                    views.append(
                        {
                            "agent_state": {
                                "position": [
                                    round(px, 4),
                                    round(float(grid.floor_y), 4),
                                    round(pz, 4),
                                ],
                                "rotation": _habitat_rotation(yaw),
                            },
                            "iou": 0.5,
                        }
                    )
                    break
        goals_by_category.setdefault(f"{SCENE_ID}_{rec['category']}", []).append(
            {
                "position": [round(float(v), 6) for v in 0.5 * (lo + hi)],
                "object_id": rec["index"],
                "object_name": f"{rec['template']}_:0000",
                "object_category": rec["category"],
                "view_points": views,
            }
        )
    episodes = []
    for k, (cat, x, y, z, yaw) in enumerate(_EPISODES):
        grid = navigation_grid(scene, y)
        goal_ids = [g["object_id"] + 2 for g in goals_by_category[f"{SCENE_ID}_{cat}"]]
        same_floor = [
            oid for oid in goal_ids if abs(scene.object_by_id(oid).aabb()[0][1] - y) < 0.5
        ]
        geo = grid.geodesic_distance((x, z), same_floor or goal_ids)
        euclid = min(
            float(np.linalg.norm(np.array([x, z]) - 0.5 * (o[0][[0, 2]] + o[1][[0, 2]])))
            for o in (scene.object_by_id(i).aabb() for i in goal_ids)
        )
        episodes.append(
            {
                "episode_id": str(k),
                "scene_id": SCENE_ID,
                "scene_dataset_config": "hssd-hab.scene_dataset_config.json",
                "additional_obj_config_paths": [],
                "start_position": [x, y, z],
                "start_rotation": _habitat_rotation(yaw),
                "info": {
                    "geodesic_distance": round(float(geo), 4) if math.isfinite(geo) else None,
                    "euclidean_distance": round(euclid, 4),
                    "closest_goal_object_id": (same_floor or goal_ids)[0] - 2,
                },
                "goals": [],
                "object_category": cat,
                "init_offset": [-x, z, 0.0],
                "init_yaw": _wrap_deg(yaw - 180.0),
            }
        )
    category_ids = {c: i for i, c in enumerate(sorted(set(_CATEGORY.values())))}
    tables = {
        "category_to_task_category_id": category_ids,
        "category_to_scene_annotation_category_id": category_ids,
    }
    doc = {"goals_by_category": goals_by_category, "episodes": episodes, **tables}
    out_dir.mkdir(parents=True, exist_ok=True)
    # the split's header beside content/, holding no episodes, as the reference ships it
    header = {"episodes": [], **tables}
    for path, body in (
        (out_dir.parent / f"{out_dir.parent.name}.json.gz", header),
        (out_dir / f"{SCENE_ID}.json.gz", doc),
    ):
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(json.dumps(body, sort_keys=True).encode("utf-8"))
