"""Reading and writing episode shards, split indexes and shipped scenes.

On-disk layout (package data under ``humanclaw_gym/assets/``)::

    scenes/index.json              {"schema": "humanclaw_scene_index_v1", "scenes": {id: {...}}}
    scenes/<scene_id>.json.gz      canonical SceneSpec JSON (SceneSpec.to_json())
    splits/<split>/index.json      {"schema": "humanclaw_split_index_v1", counts, shard hashes}
    splits/<split>/<scene_id>.json.gz
                                   {"schema": "humanclaw_episodes_v2", "scene_id", "episodes"}
    splits/val100.json             {"schema": "humanclaw_subset_v1", "parent": "val",
                                    "episode_ids": [...]}

Shards are gzip files written deterministically (``mtime=0``, no file name in the header,
compression level 9) from canonical JSON (sorted keys, compact separators), so a
regeneration is byte-identical. Writes are atomic (temporary file + ``os.replace``).

Upstream shards in the Habitat ObjectNav layout (``{"episodes": [...],
"goals_by_category": {...}}``, no ``schema``) are recognised and converted by the same
loader; see :func:`episodes_from_habitat`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from humanclaw_gym.episodes.schema import (
    DEFAULT_MAX_STEPS,
    EPISODE_SCHEMA,
    EPISODE_SCHEMAS_READ,
    MAX_COORD_M,
    Episode,
    EpisodeFormatError,
    EpisodeInfo,
    Goal,
    InstructionTemplate,
    ReferenceRecord,
    instruction_for,
    reference_yaw_to_ours,
    shown_id,
    yaw_to_quat_xyzw,
)
from humanclaw_gym.fileio import (
    FileContentError,
    gunzip_limited,
    loads_json,
    read_bytes_limited,
    write_bytes_atomic,
)
from humanclaw_gym.scenes.spec import INTERACT_CATEGORIES, SceneSpec, SceneSpecError

__all__ = [
    "HABITAT_CATEGORY_ALIASES",
    "MAX_EPISODE_FILE_BYTES",
    "REFERENCE_SUBSET_SCHEMA",
    "SCENE_DIR_ENV",
    "SCENE_INDEX_SCHEMA",
    "SPLIT_INDEX_SCHEMA",
    "SUBSET_SCHEMA",
    "SceneNotInstalledError",
    "UnknownSplitError",
    "assets_dir",
    "available_splits",
    "check_scenes_installed",
    "canonical_json",
    "episodes_from_habitat",
    "get_episode",
    "gzip_bytes",
    "habitat_quat_to_yaw",
    "iter_scene_ids",
    "load_scene",
    "load_split",
    "read_json_gz",
    "read_scene_file",
    "read_shard",
    "read_split_index",
    "refuse_duplicate_ids",
    "scene_installed",
    "scene_not_installed",
    "sha256_hex",
    "shard_bytes",
    "write_bytes_atomic",
    "write_shard",
]

SPLIT_INDEX_SCHEMA = "humanclaw_split_index_v1"
SCENE_INDEX_SCHEMA = "humanclaw_scene_index_v1"
SUBSET_SCHEMA = "humanclaw_subset_v1"
#: Schema of the reference release's subset files (its ``val100.json``).
REFERENCE_SUBSET_SCHEMA = "humanclaw_episode_subset_v1"
#: Environment variable naming a directory of scene files ``<scene_id>.json(.gz)``.
SCENE_DIR_ENV = "HUMANCLAW_SCENE_DIR"
#: Upstream category names mapped to ours.
HABITAT_CATEGORY_ALIASES: dict[str, str] = {
    "sofa": "couch",
    "plant": "potted_plant",
    "tv_monitor": "tv",
}
_SCENE_SUFFIXES = (".basis.glb", ".scene_instance.json", ".glb", ".json", ".ply")
#: Largest episode file read (a shard, split index, subset or scene file), in bytes on disk
#: and again after decompression: 30 times the largest shard of the reference release.
MAX_EPISODE_FILE_BYTES = 64 << 20
_TRAINING_SCENE_RE = re.compile(r"hc_train_[0-9]{3,}")  # generate._TRAIN_ID, without importing it


# ---------------------------------------------------------------------------------------
# bytes
# ---------------------------------------------------------------------------------------
def assets_dir() -> Path:
    """The package's ``assets`` directory."""
    return Path(__file__).resolve().parent.parent / "assets"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj: Any) -> str:
    """Sorted keys, compact separators, no NaN: the same object gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip (mtime 0, empty file name, level 9)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return buf.getvalue()


def _read_file(path: Path) -> bytes:
    """A regular file of at most :data:`MAX_EPISODE_FILE_BYTES` (a FIFO is refused, never
    waited on)."""
    try:
        return read_bytes_limited(path, MAX_EPISODE_FILE_BYTES, "episode file")
    except (FileContentError, FileNotFoundError) as exc:
        raise EpisodeFormatError(str(exc)) from None


def _read_gz_bytes(path: Path) -> bytes:
    try:
        return gunzip_limited(_read_file(path), MAX_EPISODE_FILE_BYTES, str(path))
    except FileContentError as exc:
        raise EpisodeFormatError(str(exc)) from None


def read_json_gz(path: str | os.PathLike[str]) -> Any:
    """Parse a ``.json.gz`` (or plain ``.json``) file; errors name the file."""
    p = Path(path)
    data = _read_gz_bytes(p) if p.name.endswith(".gz") else _read_file(p)
    try:
        return loads_json(data, str(p))
    except FileContentError as exc:
        raise EpisodeFormatError(str(exc)) from None


# ---------------------------------------------------------------------------------------
# shards
# ---------------------------------------------------------------------------------------
def shard_bytes(scene_id: str, episodes: Sequence[Any], schema: str = EPISODE_SCHEMA) -> bytes:
    """The gzip bytes of one shard: ``{"schema", "scene_id", "episodes"}`` with every
    record's ``to_dict()`` (our format by default; the image-goal task's shards give
    their own ``schema``), canonical JSON, deterministic gzip."""
    doc = {
        "schema": schema,
        "scene_id": scene_id,
        "episodes": [e.to_dict() for e in episodes],
    }
    return gzip_bytes(canonical_json(doc).encode("utf-8"))


def write_shard(path: str | os.PathLike[str], scene_id: str, episodes: Sequence[Episode]) -> str:
    """Write one shard atomically; returns the SHA-256 of the written bytes."""
    data = shard_bytes(scene_id, episodes)
    write_bytes_atomic(path, data)
    return sha256_hex(data)


def read_shard(path: str | os.PathLike[str]) -> list[Episode]:
    """Read a shard of our format or a Habitat ObjectNav shard (detected)."""
    p = Path(path)
    doc = read_json_gz(p)
    return episodes_from_document(doc, p)


def episodes_from_document(doc: Any, where: str | os.PathLike[str] = "<memory>") -> list[Episode]:
    """Episodes of a parsed shard document (our schema or the Habitat layout)."""
    if not isinstance(doc, dict):
        raise EpisodeFormatError(
            f"{where}: a shard must be a JSON object, got {type(doc).__name__}"
        )
    schema = doc.get("schema")
    if schema is None and "episodes" in doc:
        return episodes_from_habitat(doc, where)
    if schema not in EPISODE_SCHEMAS_READ:
        raise EpisodeFormatError(
            f"{where}: field 'schema' must be one of {EPISODE_SCHEMAS_READ} (or absent for a Habitat ObjectNav shard), got {shown_id(schema)}"
        )
    raw = doc.get("episodes")
    if not isinstance(raw, list):
        raise EpisodeFormatError(
            f"{where}: field 'episodes' must be a list, got {type(raw).__name__}"
        )
    return [Episode.from_dict(e, f"{where}: episodes[{i}]") for i, e in enumerate(raw)]


# ---------------------------------------------------------------------------------------
# Habitat ObjectNav layout
# ---------------------------------------------------------------------------------------
def habitat_quat_to_yaw(q_xyzw: Sequence[float]) -> float:
    """Our yaw of a Habitat agent rotation.

    Habitat agents look along their local -Z; we look along +Z. The heading is the
    agent's world forward ``R(q) @ (0, 0, -1)`` projected on the floor, and our yaw is the
    angle with ``(sin yaw, 0, cos yaw)`` equal to it. For a pure rotation by ``theta``
    about +Y this is ``yaw = theta + pi`` (wrapped to ``[-pi, pi)``).
    """
    x, y, z, w = (float(v) for v in q_xyzw)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if not n > 0:
        raise EpisodeFormatError(f"start_rotation {list(q_xyzw)} is not a quaternion")
    x, y, z, w = x / n, y / n, z / n, w / n
    # third column of the rotation matrix, negated: R @ (0, 0, -1)
    fx = -(2.0 * (x * z + w * y))
    fz = -(1.0 - 2.0 * (x * x + y * y))
    if math.hypot(fx, fz) < 1e-9:
        raise EpisodeFormatError(
            f"start_rotation {list(q_xyzw)} looks straight up or down; no heading"
        )
    yaw = math.atan2(fx, fz)
    return (yaw + math.pi) % (2.0 * math.pi) - math.pi


def _short_scene_id(scene_path: str) -> str:
    base = os.path.basename(str(scene_path))
    for suffix in _SCENE_SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def _habitat_view_points(raw: Any, where: str) -> tuple[tuple[float, ...], ...] | None:
    """Positions of a Habitat goal's ``view_points`` (``[{"agent_state": {"position":
    [x, y, z], ...}, ...}]``, or bare ``[x, y, z]`` lists); None when absent or empty."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise EpisodeFormatError(f"{where}: field 'view_points' must be a list")
    points = []
    for k, vp in enumerate(raw):
        pos = vp
        if isinstance(vp, Mapping):
            state = vp.get("agent_state")
            pos = state.get("position") if isinstance(state, Mapping) else vp.get("position")
        if pos is None:
            raise EpisodeFormatError(
                f"{where}: view_points[{k}] has no agent_state.position (or position)"
            )
        points.append(pos)
    return tuple(points) if points else None


def _habitat_goal(g: Any, category: str, where: str) -> Goal:
    if not isinstance(g, Mapping):
        raise EpisodeFormatError(f"{where} must be a JSON object")
    if "position" not in g:
        raise EpisodeFormatError(f"{where} is missing field 'position'")
    oid = g.get("object_id")
    if oid is None:
        raise EpisodeFormatError(f"{where} is missing field 'object_id'")
    if isinstance(oid, str) and len(oid) <= 18 and re.fullmatch(r"-?\d+", oid):
        oid = int(oid)
    name = g.get("object_name")
    try:
        return Goal(
            object_id=oid,
            object_name=None if name is None else str(name),
            category=category,
            position=g["position"],
            aabb_min=g.get("aabb_min"),
            aabb_max=g.get("aabb_max"),
            approach_points=_habitat_view_points(g.get("view_points"), where),
        )
    except EpisodeFormatError as exc:
        raise EpisodeFormatError(f"{where}: {exc}") from None


def episodes_from_habitat(
    doc: Mapping[str, Any],
    where: str | os.PathLike[str] = "<memory>",
    instruction: str | InstructionTemplate = "touch",
) -> list[Episode]:
    """Convert a Habitat ObjectNav shard (the reference release's episode format) to ours.

    Reads ``episodes[*]`` with ``episode_id``, ``scene_id`` (a path or a short id; the id
    becomes its base name without ``.basis.glb`` / ``.glb`` / ``.scene_instance.json``),
    ``start_position``, ``start_rotation`` (Habitat convention, see
    :func:`habitat_quat_to_yaw`), ``object_category`` and optional ``info``; goals come
    from ``goals_by_category["<scene base name or short id>_<category>"]`` or the episode's
    own ``goals``. Categories ``sofa``, ``plant`` and ``tv_monitor`` map to ``couch``,
    ``potted_plant`` and ``tv``. A goal's ``view_points`` (positions from which the object
    is in view) become its ``approach_points``. Numeric episode ids (Habitat restarts them per scene) are
    prefixed with the scene id: ``"<scene>_<id>"``.

    The reference release's own fields are kept: when a record has ``init_yaw`` (degrees)
    it sets the start yaw (:func:`~humanclaw_gym.episodes.schema.reference_yaw_to_ours`:
    ``yaw = radians(init_yaw) + pi``), as in the reference; the whole record (``init_offset``
    in full included), its goals' ``view_points`` and its ``scene_dataset_config`` are in
    :attr:`Episode.reference`. Instructions use ``instruction`` (default the ``"touch"``
    template: what the reference instruction asks).
    """
    raw = doc.get("episodes")
    if not isinstance(raw, list):
        raise EpisodeFormatError(f"{where}: field 'episodes' must be a list")
    by_cat = doc.get("goals_by_category", {}) or {}
    if not isinstance(by_cat, Mapping):
        raise EpisodeFormatError(f"{where}: field 'goals_by_category' must be an object")
    out: list[Episode] = []
    for i, ep in enumerate(raw):
        here = f"{where}: episodes[{i}]"
        if not isinstance(ep, Mapping):
            raise EpisodeFormatError(f"{here} must be a JSON object")
        for key in ("scene_id", "start_position", "start_rotation"):
            if key not in ep:
                raise EpisodeFormatError(f"{here} is missing field {key!r}")
        scene_path = str(ep["scene_id"])
        scene_id = _short_scene_id(scene_path)
        raw_cat = ep.get("object_category")
        inline = ep.get("goals") or []
        if not isinstance(inline, list):
            raise EpisodeFormatError(
                f"{here}: field 'goals' must be a list, got {type(inline).__name__}"
            )
        if raw_cat is None and inline and isinstance(inline[0], Mapping):
            raw_cat = inline[0].get("object_category")
        if not isinstance(raw_cat, str) or not raw_cat:
            raise EpisodeFormatError(f"{here} is missing field 'object_category'")
        category = HABITAT_CATEGORY_ALIASES.get(raw_cat, raw_cat)
        keys = list(
            dict.fromkeys([f"{os.path.basename(scene_path)}_{raw_cat}", f"{scene_id}_{raw_cat}"])
        )
        goals_raw = next((by_cat[k] for k in keys if by_cat.get(k)), None) or inline
        if not goals_raw:
            raise EpisodeFormatError(
                f"{here}: no goals (neither goals_by_category[{shown_id(keys[0])}] nor inline "
                "'goals')"
            )
        if not isinstance(goals_raw, list):
            raise EpisodeFormatError(
                f"{here}: the goals (goals_by_category[{shown_id(keys[0])}] or inline 'goals') "
                f"must be a list, got {type(goals_raw).__name__}"
            )
        goals = tuple(
            _habitat_goal(g, category, f"{here} goals[{j}]") for j, g in enumerate(goals_raw)
        )
        try:
            if ep.get("init_yaw") is not None:
                yaw = reference_yaw_to_ours(ep["init_yaw"])
            else:
                yaw = habitat_quat_to_yaw(ep["start_rotation"])
        except (TypeError, ValueError) as exc:
            field = "init_yaw" if ep.get("init_yaw") is not None else "start_rotation"
            raise EpisodeFormatError(
                f"{here}: field {field!r} {shown_id(ep[field])}: {exc}"
            ) from None
        offset = ep.get("init_offset")
        if offset is not None and (
            not isinstance(offset, list)
            or len(offset) != 3
            or not all(
                isinstance(v, (int, float))
                and not isinstance(v, bool)
                and math.isfinite(v)
                and abs(v) <= MAX_COORD_M
                for v in offset
            )
        ):
            raise EpisodeFormatError(
                f"{here}: field 'init_offset' must be 3 numbers within ±{MAX_COORD_M:g} m, got "
                f"{shown_id(offset)}"
            )
        max_steps = ep.get("max_steps", DEFAULT_MAX_STEPS)
        if isinstance(max_steps, float) and max_steps.is_integer():
            max_steps = int(max_steps)
        eid = str(ep.get("episode_id", i))
        if re.fullmatch(r"\d+", eid):
            eid = f"{scene_id}_{eid}"
        info_raw = ep.get("info") or {}
        if not isinstance(info_raw, Mapping):
            raise EpisodeFormatError(f"{here}: field 'info' must be an object")
        view_points = {
            str(g.get("object_id")): g.get("view_points") or []
            for g in goals_raw
            if isinstance(g, Mapping)
        }
        dataset = ep.get("scene_dataset_config", doc.get("scene_dataset_config"))
        interact = category in INTERACT_CATEGORIES
        try:
            reference = ReferenceRecord.build(
                ep, view_points, None if dataset is None else str(dataset)
            )
            out.append(
                Episode(
                    episode_id=eid,
                    scene_id=scene_id,
                    start_position=ep["start_position"],
                    start_rotation=yaw_to_quat_xyzw(yaw),
                    start_yaw_rad=yaw,
                    object_category=category,
                    goals=goals,
                    info=EpisodeInfo(
                        geodesic_distance=info_raw.get("geodesic_distance"),
                        euclidean_distance=info_raw.get("euclidean_distance"),
                        difficulty=info_raw.get("difficulty"),
                        closest_goal_object_id=info_raw.get("closest_goal_object_id"),
                    ),
                    max_steps=max_steps,
                    interact=interact,
                    instruction=instruction_for(category, interact, instruction),
                    reference=reference,
                )
            )
        except EpisodeFormatError as exc:
            raise EpisodeFormatError(f"{here}: {exc}") from None
    return out


# ---------------------------------------------------------------------------------------
# splits
# ---------------------------------------------------------------------------------------
def _splits_dir() -> Path:
    return assets_dir() / "splits"


def available_splits() -> tuple[str, ...]:
    """Names of the shipped splits (directories with an index, and subset files)."""
    root = _splits_dir()
    if not root.is_dir():
        return ()
    names = [p.name for p in sorted(root.iterdir()) if p.is_dir() and (p / "index.json").is_file()]
    names += [p.name[: -len(".json")] for p in sorted(root.glob("*.json"))]
    return tuple(names)


def _read_json(path: Path) -> Any:
    return read_json_gz(path)


def _load_split_dir(directory: Path) -> tuple[Episode, ...]:
    index_path = directory / "index.json"
    episodes: list[Episode] = []
    content = directory / "content"
    if not index_path.is_file() and content.is_dir():
        # Habitat's layout, as the reference release ships it: episodes/<split>/ holds a
        # header <split>.json.gz (category tables, usually no episodes) and content/ one
        # shard per scene. Every header's episodes come first, then every shard's.
        headers = sorted(directory.glob("*.json.gz"))
        shards = sorted(content.glob("*.json.gz"))
        for path in (*headers, *shards):
            episodes += read_shard(path)
        if not episodes:
            raise EpisodeFormatError(
                f"{directory}: no episodes in {len(headers)} header file(s) and "
                f"{len(shards)} shard(s) under content/ (expected content/<scene>.json.gz "
                "holding episodes)"
            )
    elif index_path.is_file():
        _, shards = read_split_index(directory, SPLIT_INDEX_SCHEMA)
        for shard in shards:
            episodes += read_shard(shard)
    else:
        shards = sorted(directory.glob("*.json.gz"))
        if not shards:
            raise EpisodeFormatError(f"{directory}: no index.json and no *.json.gz shards")
        for shard in shards:
            episodes += read_shard(shard)
    if not episodes:
        raise EpisodeFormatError(f"{directory}: the split's shards hold no episodes")
    refuse_duplicate_ids(directory, episodes)
    return tuple(episodes)


def read_split_index(directory: Path, schema: str) -> tuple[dict[str, Any], list[Path]]:
    """The ``index.json`` of a split folder and the shard files it lists, each checked
    against the SHA-256 the index gives (``{"schema", "scenes": [{"file", "sha256", ...},
    ...], ...}``; ``file`` a name in the folder).

    Args:
        directory: the split folder.
        schema: the index schema the caller reads (:data:`SPLIT_INDEX_SCHEMA`, the
            image-goal task's).

    Returns:
        ``(index document, shard paths in index order)``.

    Raises:
        EpisodeFormatError: another schema, a malformed entry, a missing or changed shard;
            naming the file.
    """
    index_path = directory / "index.json"
    index = _read_json(index_path)
    if not isinstance(index, dict) or index.get("schema") != schema:
        got = index.get("schema") if isinstance(index, dict) else type(index).__name__
        raise EpisodeFormatError(
            f"{index_path}: field 'schema' must be {schema!r}, got {shown_id(got)}"
        )
    scenes = index.get("scenes")
    if not isinstance(scenes, list) or not scenes:
        raise EpisodeFormatError(f"{index_path}: field 'scenes' must be a non-empty list")
    shards = []
    for k, entry in enumerate(scenes):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("file"), str):
            raise EpisodeFormatError(
                f"{index_path}: scenes[{k}] must have a string field 'file' and a field 'sha256'"
            )
        name = entry["file"]
        if "/" in name or "\\" in name or name.startswith("."):
            raise EpisodeFormatError(
                f"{index_path}: scenes[{k}].file {shown_id(name)} must be a file name in the "
                "split folder"
            )
        shard = directory / name
        try:
            data = _read_file(shard)
        except EpisodeFormatError as exc:
            raise EpisodeFormatError(f"{exc} (listed in {index_path})") from None
        if sha256_hex(data) != entry.get("sha256"):
            raise EpisodeFormatError(
                f"{shard}: SHA-256 does not match {index_path} (file changed or corrupt)"
            )
        shards.append(shard)
    return index, shards


def refuse_duplicate_ids(where: str | os.PathLike[str], episodes: Iterable[Any]) -> None:
    """Refuse a split whose records repeat an ``episode_id`` (naming ``where``)."""
    seen: set[str] = set()
    for ep in episodes:
        if ep.episode_id in seen:
            raise EpisodeFormatError(f"{where}: duplicate episode_id {ep.episode_id!r}")
        seen.add(ep.episode_id)


def _reference_subset(path: Path, doc: dict[str, Any]) -> tuple[Episode, ...]:
    """The reference release's subset file: ``{"schema": "humanclaw_episode_subset_v1",
    "split": "val", "episodes": [{"scene_id", "episode_id", "object_category"}, ...]}``,
    resolved against the reference's episode folder next to it (``episodes/<split>/``:
    header + ``content/``) when present, else against the shipped split of that
    name."""
    rows = doc.get("episodes")
    if not isinstance(rows, list) or not rows:
        raise EpisodeFormatError(f"{path}: field 'episodes' must be a non-empty list")
    split = doc.get("split", "val")
    if not isinstance(split, str) or not split:
        raise EpisodeFormatError(
            f"{path}: field 'split' must be a split name, got {shown_id(split)}"
        )
    folder = path.parent / "episodes" / split
    parent: str | Path = folder.resolve() if folder.is_dir() else split
    pool = {ep.episode_id: ep for ep in _load_cached(_resolve(parent))}
    out, missing = [], []
    for k, row in enumerate(rows):
        if not isinstance(row, Mapping) or not all(
            isinstance(row.get(f), str) for f in ("scene_id", "episode_id")
        ):
            raise EpisodeFormatError(
                f"{path}: episodes[{k}] must have string fields 'scene_id' and 'episode_id'"
            )
        eid = row["episode_id"]
        if re.fullmatch(r"\d+", eid):
            eid = f"{row['scene_id']}_{eid}"
        ep = pool.get(eid)
        if ep is None:
            missing.append(eid)
            continue
        cat = row.get("object_category")
        if cat is not None and HABITAT_CATEGORY_ALIASES.get(cat, cat) != ep.object_category:
            raise EpisodeFormatError(
                f"{path}: episodes[{k}] ({shown_id(eid)}) has object_category {shown_id(cat)} but the episode's "
                f"is {ep.object_category!r}"
            )
        out.append(ep)
    if missing:
        raise EpisodeFormatError(
            f"{path}: {len(missing)} episode ids are not in split {str(parent)!r}, "
            f"e.g. {', '.join(shown_id(m) for m in missing[:3])}"
        )
    _refuse_repeats(path, [ep.episode_id for ep in out])
    count = doc.get("n_episodes")
    if count is not None and count != len(out):
        raise EpisodeFormatError(
            f"{path}: n_episodes is {shown_id(count)} but {len(out)} are listed"
        )
    return tuple(out)


def _refuse_repeats(path: Path, ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for k, eid in enumerate(ids):
        if eid in seen:
            raise EpisodeFormatError(
                f"{path}: episode id {shown_id(eid)} is listed twice (entry {k}); allowed: "
                "each episode once"
            )
        seen.add(eid)


def _load_subset(path: Path) -> tuple[Episode, ...]:
    doc = _read_json(path)
    parent: str | Path = "val"
    if isinstance(doc, dict) and doc.get("schema") == REFERENCE_SUBSET_SCHEMA:
        return _reference_subset(path, doc)
    if isinstance(doc, list):
        ids = doc
    elif isinstance(doc, dict):
        if doc.get("schema") != SUBSET_SCHEMA:
            raise EpisodeFormatError(
                f"{path}: field 'schema' must be {SUBSET_SCHEMA!r} or "
                f"{REFERENCE_SUBSET_SCHEMA!r}, got {shown_id(doc.get('schema'))}"
            )
        if "episode_ids" not in doc:
            raise EpisodeFormatError(f"{path}: missing field 'episode_ids'")
        ids = doc["episode_ids"]
        parent = doc.get("parent", "val")
        if isinstance(parent, str) and ("/" in parent or parent.startswith(".")):
            parent = (path.parent / parent).resolve()
    else:
        raise EpisodeFormatError(
            f"{path}: must be a JSON list of episode ids or a {SUBSET_SCHEMA!r} or "
            f"{REFERENCE_SUBSET_SCHEMA!r} object"
        )
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise EpisodeFormatError(f"{path}: 'episode_ids' must be a list of strings")
    _refuse_repeats(path, ids)
    pool = {ep.episode_id: ep for ep in _load_cached(_resolve(parent))}
    missing = [i for i in ids if i not in pool]
    if missing:
        raise EpisodeFormatError(
            f"{path}: {len(missing)} episode ids are not in split {str(parent)!r}, "
            f"e.g. {', '.join(shown_id(m) for m in missing[:3])}"
        )
    return tuple(pool[i] for i in ids)


def _resolve(split: str | os.PathLike[str]) -> Path:
    if (
        isinstance(split, str)
        and not any(c in split for c in "/\\")
        and not split.endswith((".json", ".gz"))
    ):
        root = _splits_dir()
        if (root / split / "index.json").is_file():
            return (root / split).resolve()
        if (root / f"{split}.json").is_file():
            return (root / f"{split}.json").resolve()
        if not Path(split).exists():
            raise UnknownSplitError(
                f"unknown split {shown_id(split)}; allowed: a shipped split "
                f"({', '.join(available_splits()) or 'none'}), a split directory or an "
                "episode file"
            )
    path = Path(split).expanduser().resolve()
    if not path.exists():
        raise FileNotFoundError(f"split path {str(split)!r} does not exist")
    return path


@lru_cache(maxsize=16)
def _load_cached(path: Path) -> tuple[Episode, ...]:
    if path.is_dir():
        return _load_split_dir(path)
    if path.name.endswith(".json.gz"):
        episodes = tuple(read_shard(path))
        if not episodes and (path.parent / "content").is_dir():
            # a Habitat split header (``episodes/val/val.json.gz``): its split is the folder
            return _load_split_dir(path.parent)
        if not episodes:
            raise EpisodeFormatError(f"{path}: the shard holds no episodes")
        return episodes
    if path.name.endswith(".json"):
        return _load_subset(path)
    raise EpisodeFormatError(
        f"{path}: expected a split directory, a .json.gz shard or a .json episode-id list"
    )


def load_split(split: str | os.PathLike[str] = "val") -> list[Episode]:
    """Episodes of a split.

    Args:
        split: a shipped split name (``"val"``, ``"val100"``), a split directory (with an
            ``index.json`` whose shard hashes are verified, or just ``*.json.gz`` shards of
            our format or the Habitat ObjectNav layout, or Habitat's header + content
            layout as the reference release ships it: ``episodes/val/val.json.gz`` plus
            ``episodes/val/content/<scene>.json.gz``, every shard read), one shard file
            (a header file whose folder has ``content/`` reads that folder), or a JSON
            file listing episode ids (a plain list, resolved against ``val``,
            ``{"schema": "humanclaw_subset_v1", "parent": ..., "episode_ids": [...]}``
            or the reference release's ``humanclaw_episode_subset_v1`` file).

    Returns:
        A new list (the records are immutable and shared between calls).

    Raises:
        EpisodeFormatError: a malformed file, or a split that holds no episodes (never an
            empty list).
    """
    return list(_load_cached(_resolve(split)))


def get_episode(split: str | os.PathLike[str], episode_id: str) -> Episode:
    """One episode of a split by id (``KeyError`` naming the split when absent)."""
    for ep in _load_cached(_resolve(split)):
        if ep.episode_id == episode_id:
            return ep
    episodes = _load_cached(_resolve(split))
    example = episodes[0].episode_id if episodes else "?"
    raise KeyError(
        f"no episode {episode_id!r} in split {str(split)!r} ({len(episodes)} episodes; ids look like {example!r})"
    )


def iter_scene_ids(episodes: Iterable[Episode]) -> list[str]:
    """Scene ids in first-seen order."""
    out: dict[str, None] = {}
    for ep in episodes:
        out.setdefault(ep.scene_id, None)
    return list(out)


# ---------------------------------------------------------------------------------------
# scenes
# ---------------------------------------------------------------------------------------
def _scenes_dir() -> Path:
    return assets_dir() / "scenes"


@lru_cache(maxsize=1)
def _scene_index() -> dict[str, Any]:
    path = _scenes_dir() / "index.json"
    if not path.is_file():
        return {}
    doc = _read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != SCENE_INDEX_SCHEMA:
        raise EpisodeFormatError(f"{path}: field 'schema' must be {SCENE_INDEX_SCHEMA!r}")
    scenes = doc.get("scenes")
    if not isinstance(scenes, dict):
        raise EpisodeFormatError(f"{path}: field 'scenes' must be an object")
    return scenes


def read_scene_file(path: str | os.PathLike[str], expected_sha256: str | None = None) -> SceneSpec:
    """Read a ``.json.gz`` / ``.json`` SceneSpec; with ``expected_sha256`` the canonical
    JSON text must hash to it."""
    p = Path(path)
    data = _read_gz_bytes(p) if p.name.endswith(".gz") else _read_file(p)
    if expected_sha256 is not None and sha256_hex(data) != expected_sha256:
        raise EpisodeFormatError(
            f"{p}: content SHA-256 does not match the scene index (file changed or corrupt)"
        )
    try:
        return SceneSpec.from_json(data)
    except SceneSpecError as exc:
        raise EpisodeFormatError(f"{p}: {exc}") from exc


class UnknownSplitError(EpisodeFormatError, KeyError):
    """A split name that is neither shipped nor a path (a ``KeyError`` too, as before)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown split"


class SceneNotInstalledError(KeyError):
    """A scene an episode needs is not installed; the message says where it could come from."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "scene not installed"


def _scene_dir_file(scene_id: str) -> Path | None:
    directory = os.environ.get(SCENE_DIR_ENV)
    if not directory:
        return None
    for name in (f"{scene_id}.json.gz", f"{scene_id}.json"):
        candidate = Path(directory).expanduser() / name
        if candidate.is_file():
            return candidate
    return None


def _training_scene(scene_id: str) -> bool:
    """``hc_train_<n>``: the procedural training homes, generated on request by name."""
    return _TRAINING_SCENE_RE.fullmatch(scene_id) is not None


def scene_installed(scene_id: str) -> bool:
    """Whether :func:`load_scene` can find ``scene_id`` (without loading it)."""
    return (
        scene_id in _scene_index()
        or _training_scene(scene_id)
        or (scene_id.endswith((".json", ".json.gz")) and Path(scene_id).is_file())
        or _scene_dir_file(scene_id) is not None
    )


def scene_not_installed(scene_id: str, episode: Any = None) -> SceneNotInstalledError:
    """The error for a missing scene, naming it, the scene dataset ``episode`` needs (from
    its reference record, when it has one) and :data:`SCENE_DIR_ENV`."""
    where = os.environ.get(SCENE_DIR_ENV)
    looked = f"${SCENE_DIR_ENV}={where}" if where else f"${SCENE_DIR_ENV} (unset)"
    need = ""
    if episode is not None:
        reference = getattr(episode, "reference", None)
        dataset = None if reference is None else reference.scene_dataset_config
        need = f"episode {episode.episode_id!r} needs scene {scene_id!r}"
        need += (
            f" of the scene dataset {dataset!r} (its scene_dataset_config); "
            if dataset
            else " (its scene dataset is not named in the episode); "
        )
    shipped = sorted(_scene_index())
    known = f"{shipped[0]}..{shipped[-1]}" if shipped else "none"
    return SceneNotInstalledError(
        f"{need}scene {shown_id(scene_id)} is not installed: it is none of the "
        f"{len(shipped)} shipped scenes ({known}), no training home hc_train_<n>, no scene "
        f"file path, and not in {looked}. Point scene_dataset= (--scene-dataset) at the Habitat "
        "scene dataset that holds it (e.g. HSSD prepared by the reference release, see "
        "docs/scenes.md), or put a SceneSpec file "
        f"{scene_id}.json.gz in the directory named by the environment variable {SCENE_DIR_ENV}"
    )


def check_scenes_installed(episodes: Iterable[Any], scene_dataset: Any = None) -> None:
    """Check, by name only, that every episode's scene can be loaded: from
    ``scene_dataset`` (an opened scene dataset with ``has_scene``) when given, else as a
    shipped, training or installed scene (:func:`scene_installed`). Nothing is loaded.

    Args:
        episodes: records with ``scene_id`` and ``episode_id`` (episodes or run specs).
        scene_dataset: the run's scene dataset, or None.

    Raises:
        SceneNotInstalledError: without a dataset, naming the first missing scene, the
            scene dataset it needs and :data:`SCENE_DIR_ENV`.
        SceneDatasetError: with a dataset, naming the scenes it lacks and the dataset.
    """
    missing: dict[str, None] = {}
    for episode in episodes:
        sid = episode.scene_id
        if sid in missing or (scene_dataset is not None and scene_dataset.has_scene(sid)):
            continue
        if scene_installed(sid):
            continue
        if scene_dataset is None:
            raise scene_not_installed(sid, episode)
        missing[sid] = None
    if missing:
        from humanclaw_gym.scenes.hssd import SceneDatasetError

        names = list(missing)
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        raise SceneDatasetError(
            f"{len(names)} episode scenes are not in scene_dataset "
            f"{scene_dataset.config_path}: {names[:5]}{more}; point scene_dataset "
            "(--scene-dataset) at the dataset these episodes were made for"
        )


@lru_cache(maxsize=64)
def load_scene(scene_id: str) -> SceneSpec:
    """A scene by id.

    Shipped scenes (``assets/scenes/<scene_id>.json.gz``) are verified against the SHA-256
    in ``assets/scenes/index.json``. Training scenes ``hc_train_<n>`` are generated on the
    fly from :func:`~humanclaw_gym.episodes.named_scenes.training_scene_seed` (asking for that
    name is the explicit request); any other id, an ``hc_val_<n>`` that is not shipped
    included, is never generated in its place. A path to a
    ``.json`` / ``.json.gz`` scene file is read as is, and so is ``<scene_id>.json(.gz)`` in
    the directory named by the environment variable ``HUMANCLAW_SCENE_DIR``.

    Raises:
        SceneNotInstalledError: (a ``KeyError``) naming the scene and where it was looked for.
    """
    index = _scene_index()
    if scene_id in index:
        entry = index[scene_id]
        return read_scene_file(_scenes_dir() / entry["file"], entry.get("content_sha256"))
    if _training_scene(scene_id):
        from humanclaw_gym.episodes.named_scenes import generate_named_scene

        return generate_named_scene(scene_id)
    if scene_id.endswith((".json", ".json.gz")) and Path(scene_id).is_file():
        return read_scene_file(scene_id)
    installed = _scene_dir_file(scene_id)
    if installed is not None:
        return read_scene_file(installed)
    raise scene_not_installed(scene_id)
