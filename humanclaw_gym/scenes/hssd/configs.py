"""Reading a Habitat scene dataset's JSON configs (no geometry).

The format (habitat-sim's "Using JSON Files to configure Attributes"):

* ``<name>.scene_dataset_config.json``: for ``stages``, ``objects`` and
  ``scene_instances``, ``paths`` maps a file suffix (``".json"``) to folders (or globs of
  folders, e.g. ``"objects/*"``) relative to the dataset config, searched for
  ``*.stage_config.json`` / ``*.object_config.json`` / ``*.scene_instance.json`` files
  (one level, not recursive); ``semantic_scene_descriptor_instances`` names the semantic
  lexicon (``{"classes": [{"name", "id"}]}``).
* ``*.stage_config.json`` / ``*.object_config.json``: ``render_asset`` and
  ``collision_asset`` (paths relative to the config file), ``up`` / ``front`` (default
  +Y / -Z), ``scale``, ``units_to_meters``, ``mass``, ``friction_coefficient``,
  ``restitution_coefficient``, ``semantic_id``, ``COM``; a stage also ``origin``.
* ``*.scene_instance.json``: ``stage_instance.template_name``, ``translation_origin``
  (``"asset_local"`` or ``"COM"``, scene-wide, overridable per instance),
  ``object_instances`` with ``template_name``, ``translation``, ``rotation`` (a quaternion
  in Habitat's ``[w, x, y, z]`` order), ``non_uniform_scale``, ``uniform_scale``,
  ``motion_type`` (``STATIC``, ``KINEMATIC``, ``DYNAMIC``).

Everything here is plain parsing into frozen records; every missing or malformed file or
field raises :class:`SceneDatasetError` naming the file, the field and what refers to it.
Every path a config names (a ``paths`` folder or glob, ``render_asset``,
``collision_asset``, the lexicon) must stay inside the dataset folder as written
(:func:`humanclaw_gym.fileio.path_inside`: a symbolic link inside it may lead to the
licensed meshes, never into /proc, /sys or /dev other than /dev/shm); counts,
coordinates, scales and masses are bounded by :data:`DATASET_LIMITS`.
Template names resolve like Habitat's: a path relative to the dataset folder without the
config suffix (``"stages/102343992"``) or a bare config name (``"hcbv3r_..._0000_..."``).
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DATASET_LIMITS",
    "DATASET_SUFFIX",
    "MOTION_TYPES",
    "OBJECT_SUFFIX",
    "SCENE_SUFFIX",
    "STAGE_SUFFIX",
    "AssetConfig",
    "DatasetIndex",
    "ObjectInstance",
    "SceneDatasetError",
    "SceneInstance",
    "find_dataset_config",
    "read_asset_config",
    "read_dataset_index",
    "read_scene_instance",
]

DATASET_SUFFIX = ".scene_dataset_config.json"
STAGE_SUFFIX = ".stage_config.json"
OBJECT_SUFFIX = ".object_config.json"
SCENE_SUFFIX = ".scene_instance.json"
MOTION_TYPES: tuple[str, ...] = ("STATIC", "KINEMATIC", "DYNAMIC")
_MAX_NAME_CHARS = 512
TRANSLATION_ORIGINS: tuple[str, ...] = ("asset_local", "com")


#: Largest scene dataset JSON file read (configs, scene instances), in bytes.
MAX_CONFIG_BYTES = 64 << 20
#: Bounds of a scene dataset (the release's HSSD: at most 1,042 object instances in a
#: scene, 14,537 object configs, episodes within 112 m of the origin): object instances of one
#: scene; config files a dataset config's ``paths`` may index, and the folders its globs
#: may match; |translation| and |coordinate| of anything placed in a scene (metres); each
#: scale factor (config scale times ``units_to_meters`` times instance scale); an object's
#: mass (kg); its friction and restitution coefficients; the triangles a scene places in
#: all (render and collision meshes of every instance); the lexicon's classes.
DATASET_LIMITS: dict[str, float] = {
    "object_instances": 10_000,
    "config_files": 500_000,
    "glob_matches": 10_000,
    "coordinate_m": 10_000.0,
    "scale_min": 1e-4,
    "scale_max": 1e4,
    "mass_kg": 1e6,
    "friction": 100.0,
    "restitution": 1.0,
    "scene_triangles": 50_000_000,
    "lexicon_classes": 100_000,
}


class SceneDatasetError(ValueError):
    """A scene dataset file is missing or malformed; the message names the file, the field
    and what refers to it."""


def _where(path: Path | str, referrer: str | None) -> str:
    return f"{path}" + (f" (referred to by {referrer})" if referrer else "")


def read_json(path: Path, referrer: str | None = None) -> Any:
    """Parse a JSON file (a regular file of at most :data:`MAX_CONFIG_BYTES`); errors name
    the file and its referrer."""
    from humanclaw_gym.fileio import FileContentError, loads_json, read_bytes_limited

    where = _where(path, referrer)
    try:
        return loads_json(read_bytes_limited(path, MAX_CONFIG_BYTES, "config file"), where)
    except FileNotFoundError:
        raise SceneDatasetError(f"{where} does not exist") from None
    except FileContentError as exc:
        raise SceneDatasetError(str(exc)) from None


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of {len(str(value))} digits>"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}... ({len(text)} characters)"


def _vec(
    d: Mapping[str, Any],
    key: str,
    n: int,
    default: Any,
    where: str,
    bound: float = DATASET_LIMITS["coordinate_m"],
) -> tuple[float, ...]:
    value = d.get(key, default)
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise SceneDatasetError(f"{where}: field {key!r} must be {n} numbers, got {_shown(value)}")
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError, OverflowError):
        raise SceneDatasetError(
            f"{where}: field {key!r} must be {n} numbers, got {_shown(value)}"
        ) from None
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise SceneDatasetError(
            f"{where}: field {key!r} must be {n} finite numbers, got {_shown(value)}"
        )
    if any(abs(v) > bound for v in out):
        raise SceneDatasetError(
            f"{where}: field {key!r} {_shown(list(out))} is out of range: allowed values within "
            f"±{bound:g}"
        )
    return out


def _num(
    d: Mapping[str, Any],
    key: str,
    default: float | None,
    where: str,
    low: float = -math.inf,
    high: float = math.inf,
) -> float | None:
    value = d.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SceneDatasetError(f"{where}: field {key!r} must be a number, got {_shown(value)}")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise SceneDatasetError(f"{where}: field {key!r} must be finite, got {_shown(value)}")
    if not low <= out <= high:
        raise SceneDatasetError(
            f"{where}: field {key!r}={_shown(value)} is out of range: allowed [{low:g}, {high:g}]"
        )
    return out


def _scale(scale: tuple[float, ...], field: str, where: str) -> tuple[float, ...]:
    low, high = DATASET_LIMITS["scale_min"], DATASET_LIMITS["scale_max"]
    if not all(low <= s <= high for s in scale):
        raise SceneDatasetError(
            f"{where}: {field} {_shown(list(scale))} is out of range: allowed each factor in "
            f"[{low:g}, {high:g}]"
        )
    return scale


def _inside(root: Path, relative: Any, where: str, base: Path | None = None) -> Path:
    """A path a dataset file names, inside the dataset folder (see the module docstring)."""
    from humanclaw_gym.fileio import FileContentError, path_inside

    try:
        return path_inside(root, relative, where, base)
    except FileContentError as exc:
        raise SceneDatasetError(str(exc)) from None


def _unit(v: tuple[float, ...], key: str, where: str) -> tuple[float, float, float]:
    n = math.sqrt(sum(c * c for c in v))
    if n < 1e-9:
        raise SceneDatasetError(f"{where}: field {key!r} must be a non-zero vector, got {list(v)}")
    return (v[0] / n, v[1] / n, v[2] / n)


# ---------------------------------------------------------------------------------------
# stage and object configs
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AssetConfig:
    """A parsed ``*.stage_config.json`` or ``*.object_config.json``.

    Attributes:
        path: the config file.
        kind: ``"stage"`` or ``"object"``.
        render_asset: absolute path of the render mesh.
        collision_asset: absolute path of the collision mesh (None: the render mesh).
        up / front: the asset file's axes (unit).
        scale: the config's scale times ``units_to_meters``.
        mass_kg: ``mass`` (objects; Habitat's default 1 kg when absent).
        friction / restitution: the config's coefficients (None when absent).
        semantic_id: ``semantic_id`` (None when absent).
        com: ``COM`` in the asset frame (None: the centre of the render mesh's box).
        origin: a stage's ``origin`` translation (objects: zeros).
    """

    path: str
    kind: str
    render_asset: str
    collision_asset: str | None
    up: tuple[float, float, float]
    front: tuple[float, float, float]
    scale: tuple[float, float, float]
    mass_kg: float
    friction: float | None
    restitution: float | None
    semantic_id: int | None
    com: tuple[float, float, float] | None
    origin: tuple[float, float, float]


def read_asset_config(
    path: Path, kind: str, referrer: str | None = None, root: Path | None = None
) -> AssetConfig:
    """Parse one stage or object config (asset paths resolved, not opened).

    Args:
        path: the config file.
        kind: ``"stage"`` or ``"object"``.
        referrer: what refers to it (named in errors).
        root: the dataset folder its asset paths must stay inside (default: the config's
            own folder).

    Raises:
        SceneDatasetError: missing file, invalid JSON, a missing ``render_asset``, an asset
            path leaving the dataset folder or a malformed or out-of-range field (naming
            the file, the field and ``referrer``).
    """
    doc = read_json(path, referrer)
    where = _where(path, referrer)
    if not isinstance(doc, dict):
        raise SceneDatasetError(f"{where} must be a JSON object")
    render = doc.get("render_asset")
    if not isinstance(render, str) or not render:
        raise SceneDatasetError(f"{where}: field 'render_asset' is missing or not a file name")
    collision = doc.get("collision_asset")
    if collision is not None and (not isinstance(collision, str) or not collision):
        raise SceneDatasetError(f"{where}: field 'collision_asset' must be a file name")
    folder = path.parent if root is None else root
    render_path = _inside(folder, render, f"{where}: field 'render_asset'", path.parent)
    collision_path = (
        None
        if collision is None
        else _inside(folder, collision, f"{where}: field 'collision_asset'", path.parent)
    )
    if doc.get("is_collidable") is False:
        raise SceneDatasetError(
            f"{where}: 'is_collidable': false is not supported (every object of a scene "
            "collides in the half-physics)"
        )
    up = _unit(_vec(doc, "up", 3, (0.0, 1.0, 0.0), where), "up", where)
    front = _unit(_vec(doc, "front", 3, (0.0, 0.0, -1.0), where), "front", where)
    if abs(sum(a * b for a, b in zip(up, front, strict=True))) > 1e-3:
        raise SceneDatasetError(
            f"{where}: fields 'up' {list(up)} and 'front' {list(front)} are not perpendicular"
        )
    scale = _vec(doc, "scale", 3, (1.0, 1.0, 1.0), where, math.inf)
    units = _num(doc, "units_to_meters", 1.0, where)
    scale = tuple(s * float(units) for s in scale)  # type: ignore[arg-type]
    if any(s <= 0.0 for s in scale):
        raise SceneDatasetError(
            f"{where}: 'scale' times 'units_to_meters' must be > 0, got {_shown(list(scale))}"
        )
    _scale(scale, "'scale' times 'units_to_meters'", where)
    mass = _num(doc, "mass", 1.0, where)
    if mass is None or not 0.0 < mass <= DATASET_LIMITS["mass_kg"]:
        raise SceneDatasetError(
            f"{where}: field 'mass' must be > 0 and at most {DATASET_LIMITS['mass_kg']:g} kg, "
            f"got {_shown(doc.get('mass'))}"
        )
    sem = doc.get("semantic_id")
    if sem is not None and (
        isinstance(sem, bool) or not isinstance(sem, int) or not 0 <= sem < 1 << 31
    ):
        raise SceneDatasetError(
            f"{where}: field 'semantic_id' must be an integer in [0, 2**31), got {_shown(sem)}"
        )
    com = _vec(doc, "COM", 3, None, where) if doc.get("COM") is not None else None
    return AssetConfig(
        path=str(path),
        kind=kind,
        render_asset=str(render_path.resolve()),
        collision_asset=None if collision_path is None else str(collision_path.resolve()),
        up=up,
        front=front,
        scale=scale,  # type: ignore[arg-type]
        mass_kg=float(mass),
        friction=_num(doc, "friction_coefficient", None, where, 0.0, DATASET_LIMITS["friction"]),
        restitution=_num(
            doc, "restitution_coefficient", None, where, 0.0, DATASET_LIMITS["restitution"]
        ),
        semantic_id=sem,
        com=com,  # type: ignore[arg-type]
        origin=_vec(doc, "origin", 3, (0.0, 0.0, 0.0), where)
        if kind == "stage"
        else (0.0, 0.0, 0.0),  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------------------------------
# scene instances
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectInstance:
    """One entry of ``object_instances``.

    Attributes:
        index: position in the list (Habitat's object index).
        template: ``template_name``.
        translation: metres, world.
        rotation_xyzw: the instance rotation, converted from Habitat's ``[w, x, y, z]``.
        scale: ``non_uniform_scale`` times ``uniform_scale``.
        motion_type: ``STATIC``, ``KINEMATIC`` or ``DYNAMIC``.
        translation_origin: ``"asset_local"`` or ``"com"``.
    """

    index: int
    template: str
    translation: tuple[float, float, float]
    rotation_xyzw: tuple[float, float, float, float]
    scale: tuple[float, float, float]
    motion_type: str
    translation_origin: str


@dataclass(frozen=True)
class SceneInstance:
    """A parsed ``*.scene_instance.json``.

    Attributes:
        path: the file.
        scene_id: its name without ``.scene_instance.json``.
        stage_template: ``stage_instance.template_name`` (None: no stage).
        stage_translation / stage_rotation_xyzw: the stage instance's placement.
        objects: the object instances, in file order.
        semantic_descriptor: ``semantic_scene_instance`` when given.
    """

    path: str
    scene_id: str
    stage_template: str | None
    stage_translation: tuple[float, float, float]
    stage_rotation_xyzw: tuple[float, float, float, float]
    objects: tuple[ObjectInstance, ...]
    semantic_descriptor: str | None = None


def _quat_wxyz(d: Mapping[str, Any], key: str, where: str) -> tuple[float, float, float, float]:
    w, x, y, z = _vec(d, key, 4, (1.0, 0.0, 0.0, 0.0), where)
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if n < 1e-9:
        raise SceneDatasetError(f"{where}: field {key!r} is not a rotation quaternion [w, x, y, z]")
    if abs(n - 1.0) > 1e-3:
        raise SceneDatasetError(
            f"{where}: field {key!r} {[w, x, y, z]} is not a unit quaternion (norm {n:.4f})"
        )
    return (x / n, y / n, z / n, w / n)


def _origin(value: Any, where: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise SceneDatasetError(
            f"{where}: field 'translation_origin' must be 'asset_local' or 'COM', got "
            f"{_shown(value)}"
        )
    text = value.strip().lower()
    if text in ("", "unknown"):
        return default
    if text not in TRANSLATION_ORIGINS:
        raise SceneDatasetError(
            f"{where}: field 'translation_origin' must be 'asset_local' or 'COM', got "
            f"{_shown(value)}"
        )
    return text


def read_scene_instance(path: Path, referrer: str | None = None) -> SceneInstance:
    """Parse one scene instance file (templates not resolved yet).

    Raises:
        SceneDatasetError: naming the file, the instance index and the field.
    """
    doc = read_json(path, referrer)
    where = _where(path, referrer)
    if not isinstance(doc, dict):
        raise SceneDatasetError(f"{where} must be a JSON object")
    if doc.get("articulated_object_instances"):
        raise SceneDatasetError(
            f"{where}: 'articulated_object_instances' are not supported (rigid objects only)"
        )
    scene_origin = _origin(doc.get("translation_origin"), where, "com")
    stage = doc.get("stage_instance")
    stage_template = None
    stage_t: tuple[float, ...] = (0.0, 0.0, 0.0)
    stage_q: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    if stage is not None:
        if (
            not isinstance(stage, dict)
            or not isinstance(stage.get("template_name"), str)
            or len(stage["template_name"]) > _MAX_NAME_CHARS
        ):
            raise SceneDatasetError(f"{where}: 'stage_instance' must have a 'template_name'")
        stage_template = stage["template_name"]
        here = f"{where}: stage_instance"
        stage_t = _vec(stage, "translation", 3, (0.0, 0.0, 0.0), here)
        stage_q = _quat_wxyz(stage, "rotation", here)
    raw = doc.get("object_instances", [])
    if not isinstance(raw, list):
        raise SceneDatasetError(f"{where}: field 'object_instances' must be a list")
    if len(raw) > DATASET_LIMITS["object_instances"]:
        raise SceneDatasetError(
            f"{where}: field 'object_instances' holds {len(raw)} instances: allowed at most "
            f"{int(DATASET_LIMITS['object_instances'])}"
        )
    objects = []
    for i, inst in enumerate(raw):
        here = f"{where}: object_instances[{i}]"
        if not isinstance(inst, dict):
            raise SceneDatasetError(f"{here} must be a JSON object")
        template = inst.get("template_name")
        if not isinstance(template, str) or not template or len(template) > _MAX_NAME_CHARS:
            raise SceneDatasetError(
                f"{here}: field 'template_name' is missing or not a name of at most "
                f"{_MAX_NAME_CHARS} characters"
            )
        scale = _vec(inst, "non_uniform_scale", 3, (1.0, 1.0, 1.0), here, math.inf)
        uniform = _num(inst, "uniform_scale", 1.0, here)
        scale = tuple(s * float(uniform) for s in scale)  # type: ignore[arg-type]
        if any(s <= 0.0 for s in scale):
            raise SceneDatasetError(
                f"{here}: the scale must be > 0 on every axis, got {_shown(list(scale))}"
            )
        _scale(scale, "the scale", here)
        motion = inst.get("motion_type", "STATIC")
        motion = motion.upper() if isinstance(motion, str) else motion
        if motion == "UNDEFINED":
            motion = "STATIC"
        if motion not in MOTION_TYPES:
            raise SceneDatasetError(
                f"{here}: field 'motion_type' must be one of {list(MOTION_TYPES)}, got "
                f"{_shown(inst.get('motion_type'))}"
            )
        objects.append(
            ObjectInstance(
                index=i,
                template=template,
                translation=_vec(inst, "translation", 3, (0.0, 0.0, 0.0), here),  # type: ignore[arg-type]
                rotation_xyzw=_quat_wxyz(inst, "rotation", here),
                scale=scale,  # type: ignore[arg-type]
                motion_type=motion,
                translation_origin=_origin(inst.get("translation_origin"), here, scene_origin),
            )
        )
    name = path.name[: -len(SCENE_SUFFIX)] if path.name.endswith(SCENE_SUFFIX) else path.stem
    sem = doc.get("semantic_scene_instance")
    return SceneInstance(
        path=str(path),
        scene_id=name,
        stage_template=stage_template,
        stage_translation=stage_t,  # type: ignore[arg-type]
        stage_rotation_xyzw=stage_q,
        objects=tuple(objects),
        semantic_descriptor=sem if isinstance(sem, str) else None,
    )


# ---------------------------------------------------------------------------------------
# the dataset config and its index
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetIndex:
    """Where every config of a dataset is (found by the dataset config's paths).

    Attributes:
        config_path: the ``*.scene_dataset_config.json``.
        root: its folder.
        stages / objects / scenes: template or scene id -> config file (see
            :meth:`template_path`).
        lexicon: semantic id -> class name (empty without a lexicon).
        lexicon_path: the lexicon file (None when the dataset names none).
    """

    config_path: str
    root: str
    stages: Mapping[str, str]
    objects: Mapping[str, str]
    scenes: Mapping[str, str]
    lexicon: Mapping[int, str]
    lexicon_path: str | None

    def template_path(self, kind: str, template: str, referrer: str) -> str:
        """The config file of a template name.

        Raises:
            SceneDatasetError: unknown template (naming the referrer and the dataset).
        """
        table = self.stages if kind == "stage" else self.objects
        key = template.replace("\\", "/").strip("/")
        for candidate in (key, key.rsplit("/", 1)[-1]):
            hit = table.get(candidate)
            if hit is not None:
                return hit
        suffix = STAGE_SUFFIX if kind == "stage" else OBJECT_SUFFIX
        raise SceneDatasetError(
            f"{referrer}: {kind} template {template!r} has no {suffix} file in the scene "
            f"dataset {self.config_path} ({len(set(table.values()))} {kind} configs found by "
            "its paths)"
        )


def find_dataset_config(path: str | os.PathLike[str]) -> Path:
    """The ``*.scene_dataset_config.json`` of ``path`` (the file itself, or the only one
    in a folder).

    Raises:
        SceneDatasetError: no such file, or a folder with none or several.
    """
    p = Path(path).expanduser()
    if p.is_file():
        if not p.name.endswith(DATASET_SUFFIX):
            raise SceneDatasetError(
                f"scene_dataset={str(path)!r} is a file but not a *{DATASET_SUFFIX}"
            )
        return p.resolve()
    if p.is_dir():
        found = sorted(p.glob(f"*{DATASET_SUFFIX}"))
        if len(found) == 1:
            return found[0].resolve()
        if not found:
            raise SceneDatasetError(
                f"scene_dataset={str(path)!r}: the folder holds no *{DATASET_SUFFIX} file"
            )
        raise SceneDatasetError(
            f"scene_dataset={str(path)!r}: the folder holds several dataset configs "
            f"{[f.name for f in found]}; pass one of them"
        )
    raise SceneDatasetError(
        f"scene_dataset={str(path)!r} does not exist (expected a *{DATASET_SUFFIX} file or "
        "its folder, e.g. the humanclaw-hssd-val41 folder prepared by the reference release)"
    )


def _section_dirs(root: Path, section: Any, name: str, where: str) -> list[Path]:
    if section is None:
        return []
    if not isinstance(section, dict):
        raise SceneDatasetError(f"{where}: field {name!r} must be an object")
    paths = section.get("paths", {}) or {}
    if not isinstance(paths, dict):
        raise SceneDatasetError(f"{where}: field '{name}.paths' must be an object")
    out: list[Path] = []
    limit = int(DATASET_LIMITS["glob_matches"])
    for suffix, entries in paths.items():
        if suffix != ".json":
            continue  # e.g. ".glb" stage lists: assets without a config are not used here
        field = f"{where}: field '{name}.paths[\".json\"]'"
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise SceneDatasetError(f"{field} must be a list of paths")
        for entry in entries:
            pattern = str(_inside(root, entry, field))
            if any(c in entry for c in "*?["):
                matches = []
                for m in glob.iglob(pattern):
                    matches.append(m)
                    if len(out) + len(matches) > limit:
                        raise SceneDatasetError(
                            f"{field}: {_shown(entry)} matches more than {limit} folders"
                        )
                matches.sort()
            else:
                matches = [pattern]
            for m in matches:  # symbolic links resolved: never into a system folder
                _inside(root, os.path.relpath(m, root), field)
            out += [Path(m) for m in matches]
    return out


def _collect(dirs: list[Path], suffix: str, root: Path, where: str, kind: str) -> dict[str, str]:
    table: dict[str, str] = {}
    bare: dict[str, list[str]] = {}
    seen = 0
    limit = int(DATASET_LIMITS["config_files"])
    for d in dirs:
        if d.is_file() and d.name.endswith(suffix):
            files = [d]
        elif d.is_dir():
            files = []
            for f in d.iterdir():
                seen += 1
                if seen > limit:
                    raise SceneDatasetError(
                        f"{where}: the folders its {kind} paths name hold more than {limit} "
                        "entries in all; refused"
                    )
                if f.name.endswith(suffix):
                    files.append(f)
            files.sort()
        else:
            continue  # a listed folder that is absent holds nothing (reported per template)
        for f in files:
            stem = f.name[: -len(suffix)]
            try:
                rel = f.relative_to(root).as_posix()[: -len(suffix)]
            except ValueError:
                rel = stem
            table[rel] = str(f)
            bare.setdefault(stem, []).append(str(f))
    for stem, files in bare.items():
        if stem not in table:
            if len(set(files)) > 1:
                continue  # ambiguous short name: only the relative path resolves it
            table[stem] = files[0]
    del where, kind
    return table


def _lexicon(root: Path, doc: Mapping[str, Any], where: str) -> tuple[dict[int, str], str | None]:
    ssd = doc.get("semantic_scene_descriptor_instances")
    if not isinstance(ssd, dict):
        return {}, None
    paths = [v for v in ssd.values() if isinstance(v, str)]
    if not paths:
        return {}, None
    field = f"{where}: field 'semantic_scene_descriptor_instances'"
    lex_path = _inside(root, paths[0], field)
    lex = read_json(lex_path, f"{where} semantic_scene_descriptor_instances")
    classes = lex.get("classes") if isinstance(lex, dict) else None
    if not isinstance(classes, list):
        raise SceneDatasetError(f"{lex_path}: field 'classes' must be a list of {{name, id}}")
    if len(classes) > DATASET_LIMITS["lexicon_classes"]:
        raise SceneDatasetError(
            f"{lex_path}: field 'classes' holds {len(classes)} classes: allowed at most "
            f"{int(DATASET_LIMITS['lexicon_classes'])}"
        )
    out: dict[int, str] = {}
    for k, c in enumerate(classes):
        if (
            not isinstance(c, dict)
            or not isinstance(c.get("name"), str)
            or not isinstance(c.get("id"), int)
            or isinstance(c.get("id"), bool)
        ):
            raise SceneDatasetError(f"{lex_path}: classes[{k}] must be {{'name': str, 'id': int}}")
        out[int(c["id"])] = c["name"]
    return out, str(lex_path)


def read_dataset_index(config_path: Path) -> DatasetIndex:
    """Parse the dataset config and index its stage, object and scene instance files.

    Raises:
        SceneDatasetError: the config (or its lexicon) is missing or malformed.
    """
    doc = read_json(config_path)
    where = str(config_path)
    if not isinstance(doc, dict):
        raise SceneDatasetError(f"{where} must be a JSON object")
    root = config_path.parent
    stages = _collect(
        _section_dirs(root, doc.get("stages"), "stages", where), STAGE_SUFFIX, root, where, "stage"
    )
    objects = _collect(
        _section_dirs(root, doc.get("objects"), "objects", where),
        OBJECT_SUFFIX,
        root,
        where,
        "object",
    )
    scene_dirs = _section_dirs(root, doc.get("scene_instances"), "scene_instances", where)
    scenes: dict[str, str] = {}
    for path in _collect(scene_dirs, SCENE_SUFFIX, root, where, "scene").values():
        sid = Path(path).name[: -len(SCENE_SUFFIX)]
        scenes.setdefault(sid, path)
    lexicon, lexicon_path = _lexicon(root, doc, where)
    return DatasetIndex(
        config_path=str(config_path),
        root=str(root),
        stages=stages,
        objects=objects,
        scenes=dict(sorted(scenes.items())),
        lexicon=lexicon,
        lexicon_path=lexicon_path,
    )
