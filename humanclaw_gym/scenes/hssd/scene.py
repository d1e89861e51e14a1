"""A Habitat scene instance as our :class:`~humanclaw_gym.scenes.spec.SceneSpec`.

Object ids: the stage is object 1; object instance ``i`` of the scene instance file is
object ``i + 2`` (so ids stay stable whatever the objects are). Every object is one
``"mesh"`` part (:class:`~humanclaw_gym.scenes.spec.MeshRef`) whose box is the scaled
render mesh's bounds, the box Habitat itself bounds an object with.

Placement of an instance (translation ``T``, rotation ``R``, scale ``S``, render mesh
``v`` already in its canonical frame)::

    asset_local:  x_world = T + R @ (S * v)
    COM:          x_world = T + R @ (S * (v - c))

where ``c`` is the config's ``COM`` or else the centre of the render mesh's box (Habitat
centres objects on their centre of mass unless the scene says ``asset_local``). The
object's own frame is turned about +Y so that its local +Z is the asset's front (canonical
-Z) on the floor plane, our convention for seats and approach points; the rest of ``R``
stays in the mesh part. Config scale (times ``units_to_meters``) and instance scale
multiply. ``KINEMATIC`` instances are static (nothing pushes them), ``DYNAMIC`` ones are
simulated with the config's ``mass``.

Categories come from the dataset's semantic lexicon through ``semantic_id`` (``sofa`` ->
``couch``, ``plant`` -> ``potted_plant``, ``tv_monitor`` / ``television`` -> ``tv``), else
``"object"``; the stage is ``"stage"``. Seat heights of chairs, beds, couches and toilets
are measured on their collision meshes (see :func:`seat_height`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.scenes.hssd.configs import (
    DATASET_LIMITS,
    AssetConfig,
    DatasetIndex,
    SceneDatasetError,
    SceneInstance,
    read_asset_config,
)
from humanclaw_gym.scenes.meshes import MeshAssetError, load_mesh, object_triangles
from humanclaw_gym.scenes.spec import (
    MeshRef,
    ObjectSource,
    Part,
    SceneObject,
    SceneSpec,
    SceneSpecError,
)

__all__ = [
    "CATEGORY_ALIASES",
    "GENERATOR",
    "SITTABLE_CATEGORIES",
    "STAGE_OBJECT_ID",
    "build_scene",
    "normalize_category",
    "seat_height",
    "scene_summary",
]

GENERATOR = "habitat_scene_dataset_v1"
STAGE_OBJECT_ID = 1
SITTABLE_CATEGORIES: frozenset[str] = frozenset({"chair", "bed", "couch", "toilet"})
CATEGORY_ALIASES: dict[str, str] = {
    "sofa": "couch",
    "plant": "potted_plant",
    "tv_monitor": "tv",
    "television": "tv",
    "tv_screen": "tv",
}
#: Seats are looked for this high above the object's bottom (the sit skill's range).
_SEAT_BAND_M = (0.15, 0.85)


def normalize_category(name: str | None) -> str:
    """A lexicon class name as one of our categories (lower case, ``_`` separated)."""
    if not name:
        return "object"
    key = "_".join(name.strip().lower().replace("-", " ").split())
    return CATEGORY_ALIASES.get(key, key)


def _quat_to_matrix(q: tuple[float, float, float, float]) -> np.ndarray:
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _matrix_to_quat(m: np.ndarray) -> tuple[float, float, float, float]:
    tr = float(np.trace(m))
    if tr > 0.0:
        s = math.sqrt(tr + 1.0) * 2.0
        w, x, y, z = (
            0.25 * s,
            (m[2, 1] - m[1, 2]) / s,
            (m[0, 2] - m[2, 0]) / s,
            (m[1, 0] - m[0, 1]) / s,
        )
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2.0
        w, x, y, z = (
            (m[2, 1] - m[1, 2]) / s,
            0.25 * s,
            (m[0, 1] + m[1, 0]) / s,
            (m[0, 2] + m[2, 0]) / s,
        )
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2.0
        w, x, y, z = (
            (m[0, 2] - m[2, 0]) / s,
            (m[0, 1] + m[1, 0]) / s,
            0.25 * s,
            (m[1, 2] + m[2, 1]) / s,
        )
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2.0
        w, x, y, z = (
            (m[1, 0] - m[0, 1]) / s,
            (m[0, 2] + m[2, 0]) / s,
            (m[1, 2] + m[2, 1]) / s,
            0.25 * s,
        )
    n = math.sqrt(w * w + x * x + y * y + z * z)
    return (x / n, y / n, z / n, w / n)


def _yaw_matrix(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _front_yaw(rot: np.ndarray) -> float:
    """Yaw whose local +Z is the canonical front (-Z) turned by ``rot``, on the floor."""
    front = rot @ np.array([0.0, 0.0, -1.0])
    if math.hypot(front[0], front[2]) < 1e-6:  # the asset's front points up or down
        return 0.0
    return math.atan2(front[0], front[2])


def _check_assets(stage: AssetConfig | None, objects: list[AssetConfig], scene_path: str) -> None:
    """Raise one error listing every missing render/collision asset (and its config)."""
    missing: list[str] = []
    seen: set[str] = set()
    for cfg in ([stage] if stage is not None else []) + objects:
        for asset in (cfg.render_asset, cfg.collision_asset):
            if asset is None or asset in seen:
                continue
            seen.add(asset)
            if not Path(asset).is_file():
                missing.append(f"{asset} (referred to by {cfg.path})")
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise SceneDatasetError(
            f"scene {scene_path}: {len(missing)} mesh assets are missing: "
            + "; ".join(missing[:5])
            + more
            + ". Prepare the dataset with the reference release's prepare-hssd (it links "
            "the licensed HSSD meshes and the supplement)"
        )


def _mesh_part(
    cfg: AssetConfig,
    rot: np.ndarray,
    scale: np.ndarray,
    origin_local: np.ndarray,
    referrer: str,
    budget: list[int],
) -> tuple[Part, Any]:
    """The object's mesh part: ``rot`` turns the canonical asset into the object frame,
    ``origin_local`` is where the canonical asset origin goes (object frame). Its render
    and collision triangles are added to ``budget[0]`` (the scene's, bounded)."""
    try:
        asset = load_mesh(cfg.render_asset, cfg.up, cfg.front, referrer=cfg.path)
        collision = (
            None
            if cfg.collision_asset is None
            else load_mesh(cfg.collision_asset, cfg.up, cfg.front, referrer=cfg.path)
        )
    except MeshAssetError as exc:
        raise SceneDatasetError(f"{exc} [{referrer}]") from None
    budget[0] += asset.num_triangles + (0 if collision is None else collision.num_triangles)
    if budget[0] > DATASET_LIMITS["scene_triangles"]:
        raise SceneDatasetError(
            f"{referrer}: the scene places more than {int(DATASET_LIMITS['scene_triangles'])} "
            "triangles in all (render and collision meshes of every instance); refused"
        )
    try:
        return _make_part(cfg, asset, collision, rot, scale, origin_local), asset
    except (SceneSpecError, ValueError) as exc:
        raise SceneDatasetError(f"{referrer}: {exc}") from None


def _make_part(
    cfg: AssetConfig,
    asset: Any,
    collision: Any,
    rot: np.ndarray,
    scale: np.ndarray,
    origin_local: np.ndarray,
) -> Part:
    lo, hi = asset.bounds()
    mesh = MeshRef(
        asset=cfg.render_asset,
        collision_asset=cfg.collision_asset,
        sha256=asset.sha256,
        collision_sha256=None if collision is None else collision.sha256,
        rotation=_matrix_to_quat(rot),
        scale=tuple(float(s) for s in scale),  # type: ignore[arg-type]
        origin=tuple(float(v) for v in origin_local),  # type: ignore[arg-type]
        up=cfg.up,
        front=cfg.front,
    )
    centre = origin_local + mesh.rotation_matrix() @ (scale * 0.5 * (lo + hi))
    half = scale * 0.5 * (hi - lo)
    part = Part(
        shape="mesh",
        size=tuple(float(v) for v in half),  # type: ignore[arg-type]
        offset=tuple(float(v) for v in centre),  # type: ignore[arg-type]
        color=tuple(float(c) for c in asset.mean_color()),  # type: ignore[arg-type]
        material="mesh",
        mesh=mesh,
    )
    return part


def build_scene(index: DatasetIndex, instance: SceneInstance) -> SceneSpec:
    """Build the scene spec of a parsed scene instance (loads the render meshes).

    Raises:
        SceneDatasetError: an unknown template, a malformed config, missing or unreadable
            assets (every message names the file and what refers to it).
    """
    referrer = instance.path
    configs: dict[str, AssetConfig] = {}

    budget = [0]

    def config(kind: str, template: str, where: str) -> AssetConfig:
        path = index.template_path(kind, template, where)
        if path not in configs:
            configs[path] = read_asset_config(Path(path), kind, where, Path(index.root))
        return configs[path]

    stage_cfg = None
    if instance.stage_template is not None:
        stage_cfg = config("stage", instance.stage_template, f"{referrer} stage_instance")
    obj_cfgs = [
        config("object", inst.template, f"{referrer} object_instances[{inst.index}]")
        for inst in instance.objects
    ]
    _check_assets(stage_cfg, obj_cfgs, referrer)

    objects: list[SceneObject] = []
    if stage_cfg is not None:
        rot = _quat_to_matrix(instance.stage_rotation_xyzw)
        where = f"{referrer} stage_instance"
        part, _ = _mesh_part(
            stage_cfg, rot, np.asarray(stage_cfg.scale), np.zeros(3), where, budget
        )
        position = np.asarray(instance.stage_translation) + np.asarray(stage_cfg.origin)
        stage = _placed(
            where,
            object_id=STAGE_OBJECT_ID,
            name="stage",
            category="stage",
            position=tuple(position),
            yaw_rad=0.0,
            parts=(part,),
            source=ObjectSource(
                template=instance.stage_template or "",
                semantic_id=stage_cfg.semantic_id,
                friction=stage_cfg.friction,
                restitution=stage_cfg.restitution,
            ),
        )
        objects.append(stage)
    for inst, cfg in zip(instance.objects, obj_cfgs, strict=True):
        where = f"{referrer} object_instances[{inst.index}]"
        r_inst = _quat_to_matrix(inst.rotation_xyzw)
        yaw = _front_yaw(r_inst)
        r_part = _yaw_matrix(yaw).T @ r_inst
        scale = np.asarray(cfg.scale) * np.asarray(inst.scale)
        origin = np.zeros(3)
        if inst.translation_origin == "com":
            if cfg.com is not None:
                com = np.asarray(cfg.com)
            else:
                asset = load_mesh(cfg.render_asset, cfg.up, cfg.front, referrer=cfg.path)
                lo, hi = asset.bounds()
                com = 0.5 * (lo + hi)
            origin = -(r_part @ (scale * com))
        part, _ = _mesh_part(cfg, r_part, scale, origin, where, budget)
        category = (
            normalize_category(index.lexicon.get(cfg.semantic_id))
            if cfg.semantic_id is not None and cfg.semantic_id in index.lexicon
            else "object"
        )
        dynamic = inst.motion_type == "DYNAMIC"
        obj = _placed(
            where,
            object_id=inst.index + 2,
            name=f"{category}_{inst.index}",
            category=category,
            position=inst.translation,
            yaw_rad=yaw,
            parts=(part,),
            dynamic=dynamic,
            mass_kg=cfg.mass_kg if dynamic else 0.0,
            source=ObjectSource(
                template=inst.template,
                index=inst.index,
                semantic_id=cfg.semantic_id,
                friction=cfg.friction,
                restitution=cfg.restitution,
            ),
        )
        if category in SITTABLE_CATEGORIES and not dynamic:
            seat = seat_height(obj)
            if seat is not None:
                obj = _with_seat(obj, seat)
        objects.append(obj)
    scene = SceneSpec(
        scene_id=instance.scene_id,
        rooms=(),
        objects=tuple(objects),
        generator=GENERATOR,
        metadata={
            "scene_dataset": index.config_path,
            "scene_instance": instance.path,
        },
    )
    from humanclaw_gym.scenes.meshgrid import floor_levels

    levels = floor_levels(scene)
    meta = dict(scene.metadata)
    meta["floor_levels_m"] = [round(v, 4) for v in levels]
    return SceneSpec(
        scene_id=scene.scene_id,
        rooms=(),
        objects=scene.objects,
        generator=GENERATOR,
        metadata=meta,
    )


def _placed(where: str, **fields: Any) -> SceneObject:
    """``SceneObject(**fields)``, whose world box must lie within
    ``DATASET_LIMITS["coordinate_m"]`` of the origin; a malformed value is a
    :class:`SceneDatasetError` naming ``where``."""
    try:
        obj = SceneObject(**fields)
        lo, hi = obj.aabb()
    except (SceneSpecError, ValueError, FloatingPointError) as exc:
        raise SceneDatasetError(f"{where}: {exc}") from None
    bound = DATASET_LIMITS["coordinate_m"]
    if (
        not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)))
        or max(float(np.abs(lo).max()), float(np.abs(hi).max())) > bound
    ):
        raise SceneDatasetError(
            f"{where}: the placed object reaches {float(max(np.abs(lo).max(), np.abs(hi).max())):.4g} "
            f"m from the origin: allowed within ±{bound:g} m"
        )
    return obj


def _with_seat(obj: SceneObject, seat: float) -> SceneObject:
    return SceneObject(
        object_id=obj.object_id,
        name=obj.name,
        category=obj.category,
        position=obj.position,
        yaw_rad=obj.yaw_rad,
        parts=obj.parts,
        room_id=obj.room_id,
        dynamic=obj.dynamic,
        mass_kg=obj.mass_kg,
        seat_height_m=round(float(seat), 4),
        source=obj.source,
    )


# ---------------------------------------------------------------------------------------
# geometry in the world
# ---------------------------------------------------------------------------------------
def _top_samples(v: np.ndarray, f: np.ndarray, cell_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Per occupied ``cell_m`` cell of the x/z plane: ``(top height, top is an upward
    surface)``, the surface one sees from straight above."""
    from humanclaw_gym.scenes.meshgrid import surface_samples

    pts, ny = surface_samples(v, f, cell_m / 1.5)
    if len(pts) == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    ix = np.floor(pts[:, 0] / cell_m).astype(np.int64)
    iz = np.floor(pts[:, 2] / cell_m).astype(np.int64)
    key = (ix - ix.min()) * (int(iz.max() - iz.min()) + 1) + (iz - iz.min())
    order = np.lexsort((pts[:, 1], key))  # by cell, then height: the last one is the top
    key, y, up = key[order], pts[order, 1].astype(np.float64), ny[order] >= 0.8
    last = np.r_[key[1:] != key[:-1], True]
    return y[last], up[last]


def seat_height(obj: SceneObject, cell_m: float = 0.05) -> float | None:
    """World height of an object's seat, measured on its collision mesh seen from above:
    among the cells whose top surface faces up and lies 0.15-0.85 m above the object's
    bottom, the most common top height (2 cm bins; the top of the winning bin). None
    when there is none (at least 0.02 m^2)."""
    v, f = object_triangles(obj, collision=True)
    if len(f) == 0:
        return None
    bottom = float(v[:, 1].min())
    top, up = _top_samples(v, f, cell_m)
    rel = top - bottom
    keep = up & (rel >= _SEAT_BAND_M[0]) & (rel <= _SEAT_BAND_M[1])
    if keep.sum() * cell_m * cell_m < 0.02:
        return None
    bins = np.floor(rel[keep] / 0.02).astype(np.int64)
    best = int(np.argmax(np.bincount(bins - bins.min()))) + int(bins.min())
    return bottom + float(rel[keep][bins == best].max())


def scene_summary(scene: SceneSpec) -> Mapping[str, Any]:
    """Counts for reports: objects, dynamic objects, categories, triangles."""
    cats: dict[str, int] = {}
    for o in scene.objects:
        cats[o.category] = cats.get(o.category, 0) + 1
    return {
        "objects": len(scene.objects),
        "dynamic_objects": len(scene.dynamic_objects),
        "categories": dict(sorted(cats.items())),
        "floor_levels_m": list(scene.metadata.get("floor_levels_m", [])),
    }
