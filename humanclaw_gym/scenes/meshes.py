"""Triangle-mesh assets of imported scenes: reading GLB files, and a disk cache.

A scene dataset (e.g. HSSD through :mod:`humanclaw_gym.scenes.hssd`) places mesh assets
with :class:`~humanclaw_gym.scenes.spec.MeshRef` parts. The physics backend, the renderers
and the navigation grid all read the geometry through :func:`load_mesh`, which returns the
same immutable :class:`MeshAsset` to every caller of a process.

Reading: GLB (binary glTF 2.0) files are parsed with ``trimesh`` (the ``hssd`` extra),
chosen over ``pygltflib`` by measurement: on a 2.6 MB GLB with 328k triangles, four
primitives and a PNG texture trimesh took 18 ms to vertices, faces, UVs and decoded
texture, pygltflib plus our own accessor decoding 32 ms (median of 5, 2 shared cores),
and trimesh also applies the node transforms and reads materials for us. Node transforms
are applied, and then the asset is turned into its canonical frame (declared ``up`` to +Y,
``front`` to -Z; :meth:`MeshRef.frame_matrix`): the one place an axis convention is
converted. glTF is Y-up, so for HSSD (``up = +Y``, ``front = -Z``) that rotation is the
identity.

Materials: the base colour factor (linear, converted to display sRGB) times vertex
colours, and the base colour texture when it can be decoded (PNG, JPEG, WebP: whatever
Pillow reads). A texture that cannot be decoded (e.g. KTX2/Basis, ``KHR_texture_basisu``)
falls back to its material's colour with one :class:`MeshTextureWarning` per asset and
process (never per frame). Geometry compression (``KHR_draco_mesh_compression``,
``EXT_meshopt_compression``) is refused with an error naming the file: decompress such
files first (e.g. ``gltf-transform copy in.glb out.glb``).

Bounds: a GLB is read as a regular file of at most ``MESH_LIMITS["file_bytes"]``; its JSON
chunk is read like every user JSON file (nesting and numbers the interpreter can take)
and its structure checked before the parser sees it (:func:`check_gltf`): the types of the
fields read, every index in range, every accessor and buffer view inside the binary
chunk, index buffers within their vertices, node hierarchies that are trees, node
transforms, counts and the triangles and vertices the file places in all, all bounded by
:data:`MESH_LIMITS`; textures larger than ``MESH_LIMITS["texture_pixels"]`` are not
decoded (the material colour is drawn); parsed vertices must be finite and within
``MESH_LIMITS["coordinate"]``. Every refusal is one :class:`MeshAssetError` line naming the
file, the field and what is allowed.

Cache: the parsed arrays are stored as ``.npz`` files under ``<cache dir>/meshes/``, keyed
by the SHA-256 of the asset file's bytes (plus the asset frame and the reader version),
so an edited file is parsed again and an unchanged one is not, wherever it lives. The
cache directory is ``$HUMANCLAW_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/humanclaw-gym``,
else ``~/.cache/humanclaw-gym``; ``HUMANCLAW_CACHE_DIR=off`` disables the disk cache. An
unreadable cache entry is ignored and rewritten. Entries are written atomically.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import struct
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MESH_CACHE_SCHEMA",
    "MESH_LIMITS",
    "MeshAsset",
    "MeshAssetError",
    "MeshPrimitive",
    "MeshTextureWarning",
    "cache_dir",
    "cache_size_bytes",
    "check_gltf",
    "clear_memory_cache",
    "load_mesh",
    "load_part_mesh",
    "mesh_cache_dir",
    "object_triangles",
    "place_vertices",
]

MESH_CACHE_SCHEMA = "humanclaw_mesh_cache_v1"
#: Bumped whenever the parsed arrays change meaning (invalidates older cache entries).
_READER_VERSION = 2
#: Longest texture side kept (larger textures are downsampled once, at parse time).
MAX_TEXTURE_SIDE = 1024
_UNSUPPORTED_EXTENSIONS = ("KHR_draco_mesh_compression", "EXT_meshopt_compression")
_MEMORY_CACHE_ENTRIES = 512
_GLB_MAGIC = b"glTF"
_BIN_CHUNK = 0x004E4942  # "BIN\0"
#: Bounds of one GLB (HSSD's largest: a 55 MB stage, 28 MB objects): file size; items in
#: each top-level array; node hierarchy depth; triangles and vertices the file places in
#: all (a mesh placed by several nodes counts each time); pixels of one texture (a larger
#: one is not decoded); |vertex coordinate| and node transform entries, in the file's units.
MESH_LIMITS: dict[str, float] = {
    "file_bytes": 512 << 20,
    "array_items": 100_000,
    "node_depth": 64,
    "triangles": 10_000_000,
    "vertices": 10_000_000,
    "texture_pixels": 8192 * 8192,
    "coordinate": 1e5,
    "transform": 1e5,
}


class MeshAssetError(ValueError):
    """A mesh asset is missing, unreadable or uses an unsupported feature; the message
    names the file."""


class MeshTextureWarning(UserWarning):
    """A texture of a mesh asset could not be decoded; its material colour is drawn."""


@dataclass(frozen=True)
class MeshPrimitive:
    """One drawable piece of a mesh (one glTF primitive with its material).

    Attributes:
        positions: ``float32 (V, 3)`` canonical asset frame, metres.
        normals: ``float32 (V, 3)`` unit normals (computed when the file has none).
        uvs: ``float32 (V, 2)`` texture coordinates, or None.
        colors: ``float32 (V, 3)`` display (sRGB) colour per vertex in ``[0, 1]``: the
            base colour factor times the vertex colours.
        indices: ``int32 (F, 3)`` counter-clockwise triangles.
        texture: ``uint8 (H, W, 4)`` RGBA base colour texture (row 0 = top), or None.
        alpha_cutoff: discard texels with alpha below this (glTF ``MASK``), or None.
    """

    positions: np.ndarray
    normals: np.ndarray
    uvs: np.ndarray | None
    colors: np.ndarray
    indices: np.ndarray
    texture: np.ndarray | None
    alpha_cutoff: float | None


@dataclass(frozen=True)
class MeshAsset:
    """A parsed mesh file (immutable; shared by every caller of :func:`load_mesh`).

    Attributes:
        path: the file it was read from.
        sha256: SHA-256 of the file's bytes.
        primitives: its drawable pieces.
        warnings: one-line messages about what could not be read exactly (textures).
    """

    path: str
    sha256: str
    primitives: tuple[MeshPrimitive, ...]
    warnings: tuple[str, ...] = ()

    def triangles(self) -> tuple[np.ndarray, np.ndarray]:
        """All primitives as one soup: ``float32 (V, 3)`` positions, ``int32 (F, 3)``
        faces (canonical asset frame; computed once, shared: do not modify)."""
        return self._soup

    @functools.cached_property
    def _soup(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.primitives:
            return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32)
        offsets = np.cumsum([0] + [len(p.positions) for p in self.primitives[:-1]])
        pos = np.concatenate([p.positions for p in self.primitives])
        faces = np.concatenate(
            [p.indices + np.int32(o) for p, o in zip(self.primitives, offsets, strict=True)]
        )
        return pos, faces.astype(np.int32)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(min (3,), max (3,))`` of the vertices (canonical frame); zeros when empty."""
        lo, hi = self._bounds
        return lo.copy(), hi.copy()

    @functools.cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.primitives:
            return np.zeros(3), np.zeros(3)
        pos = self._soup[0]
        return pos.min(axis=0).astype(np.float64), pos.max(axis=0).astype(np.float64)

    @property
    def num_triangles(self) -> int:
        return int(sum(len(p.indices) for p in self.primitives))

    def mean_color(self) -> np.ndarray:
        """Area-unweighted mean display colour ``(3,)`` (textures included): the colour of
        the asset where a renderer draws one colour per primitive."""
        return self._mean_color.copy()

    @functools.cached_property
    def _mean_color(self) -> np.ndarray:
        cols = [_primitive_mean_color(p) for p in self.primitives]
        return np.mean(cols, axis=0) if cols else np.full(3, 0.7)


def _primitive_mean_color(prim: MeshPrimitive) -> np.ndarray:
    color = prim.colors.mean(axis=0).astype(np.float64)
    if prim.texture is not None:
        color = color * (prim.texture[..., :3].reshape(-1, 3).mean(axis=0) / 255.0)
    return np.clip(color, 0.0, 1.0)


def place_vertices(positions: np.ndarray, mesh: Any) -> np.ndarray:
    """Canonical asset positions ``(V, 3)`` placed in the object frame by a
    :class:`~humanclaw_gym.scenes.spec.MeshRef` (``origin + R @ (scale * v)``), float64."""
    v = np.asarray(positions, dtype=np.float64) * np.asarray(mesh.scale)
    return v @ mesh.rotation_matrix().T + np.asarray(mesh.origin)


def object_triangles(obj: Any, collision: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """An object's mesh triangles in the world at its scene pose: ``float64 (V, 3)``
    vertices, ``int64 (F, 3)`` faces (the collision meshes by default, else the render
    meshes). Primitive parts contribute nothing."""
    verts: list[np.ndarray] = []
    faces: list[np.ndarray] = []
    base = 0
    for part in obj.parts:
        if part.mesh is None:
            continue
        m = part.mesh
        v, f = load_part_mesh(m, collision).triangles()
        world = np.asarray(obj.position) + place_vertices(v, m) @ obj.rotation().T
        verts.append(world)
        faces.append(f.astype(np.int64) + base)
        base += len(v)
    if not verts:
        return np.zeros((0, 3)), np.zeros((0, 3), np.int64)
    return np.concatenate(verts), np.concatenate(faces)


# ---------------------------------------------------------------------------------------
# cache locations
# ---------------------------------------------------------------------------------------
def cache_dir() -> Path | None:
    """The cache root (see the module docstring), or None when ``HUMANCLAW_CACHE_DIR=off``."""
    env = os.environ.get("HUMANCLAW_CACHE_DIR")
    if env is not None and env.strip().lower() in ("off", "0", "none", ""):
        return None
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "humanclaw-gym"


def mesh_cache_dir() -> Path | None:
    """Where parsed meshes are cached (``<cache dir>/meshes``), or None when disabled."""
    root = cache_dir()
    return None if root is None else root / "meshes"


def cache_size_bytes() -> tuple[int, int]:
    """``(entries, bytes)`` of the mesh disk cache (0, 0 when absent or disabled)."""
    root = mesh_cache_dir()
    if root is None or not root.is_dir():
        return 0, 0
    files = [p for p in root.rglob("*.npz") if p.is_file()]
    return len(files), int(sum(p.stat().st_size for p in files))


# ---------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------
_memory: OrderedDict[tuple[str, tuple[float, ...]], MeshAsset] = OrderedDict()
_warned: set[str] = set()
_lock = threading.Lock()


def clear_memory_cache() -> None:
    """Forget the meshes held in memory (the disk cache stays)."""
    with _lock:
        _memory.clear()


def load_part_mesh(mesh: Any, collision: bool = False) -> MeshAsset:
    """The render (or collision) mesh of a :class:`~humanclaw_gym.scenes.spec.MeshRef`,
    checked against the SHA-256 the ref recorded.

    Raises:
        MeshAssetError: see :func:`load_mesh`; or the file changed since the scene was
            built (naming it).
    """
    use_collision = collision and mesh.collision_asset is not None
    path = mesh.collision_asset if use_collision else mesh.asset
    expected = mesh.collision_sha256 if use_collision else mesh.sha256
    asset = load_mesh(path, mesh.up, mesh.front)
    if expected is not None and asset.sha256 != expected:
        raise MeshAssetError(
            f"mesh asset {path} changed since its scene was loaded (SHA-256 {asset.sha256}, "
            f"recorded {expected}); load the scene again"
        )
    return asset


def load_mesh(
    path: str | os.PathLike[str],
    up: tuple[float, float, float] = (0.0, 1.0, 0.0),
    front: tuple[float, float, float] = (0.0, 0.0, -1.0),
    *,
    referrer: str | None = None,
    use_disk_cache: bool = True,
) -> MeshAsset:
    """Read a GLB mesh asset in its canonical frame (memory, then disk cache, then parse).

    Args:
        path: the ``.glb`` file.
        up, front: the asset file's declared axes (see :class:`MeshRef`).
        referrer: what refers to this file (named in errors), e.g. an object config.
        use_disk_cache: read and write the disk cache (False: parse, keep in memory only).

    Returns:
        The shared, immutable :class:`MeshAsset`.

    Raises:
        MeshAssetError: the file is missing, unreadable, not a GLB, or compressed with an
            unsupported extension; the message names the file and ``referrer``.
    """
    from humanclaw_gym.fileio import FileContentError, read_bytes_limited

    p = Path(path)
    where = f"{p}" + (f" (referred to by {referrer})" if referrer else "")
    try:
        data = read_bytes_limited(p, int(MESH_LIMITS["file_bytes"]), "mesh asset")
    except FileNotFoundError:
        raise MeshAssetError(f"mesh asset {where} does not exist") from None
    except FileContentError as exc:
        text = str(exc)
        text = text[len(f"{p}: ") :] if text.startswith(f"{p}: ") else text
        raise MeshAssetError(f"mesh asset {where}: {text}") from None
    sha = hashlib.sha256(data).hexdigest()
    frame = tuple(float(v) for v in (*up, *front))
    key = (sha, frame)
    with _lock:
        hit = _memory.get(key)
        if hit is not None:
            _memory.move_to_end(key)
    if hit is None:
        hit = _load_uncached(p, data, sha, frame, where, use_disk_cache)
        with _lock:
            _memory[key] = hit
            while len(_memory) > _MEMORY_CACHE_ENTRIES:
                _memory.popitem(last=False)
    if hit.path != str(p):  # same bytes under another name: report the name asked for
        hit = dataclasses.replace(hit, path=str(p))
    for message in hit.warnings:
        token = f"{sha}:{message}"
        if token not in _warned:
            _warned.add(token)
            warnings.warn(f"{p}: {message}", MeshTextureWarning, stacklevel=2)
    return hit


def _cache_file(sha: str, frame: tuple[float, ...]) -> Path | None:
    root = mesh_cache_dir()
    if root is None:
        return None
    canonical = frame == (0.0, 1.0, 0.0, 0.0, 0.0, -1.0)
    suffix = "" if canonical else "-" + hashlib.sha256(repr(frame).encode()).hexdigest()[:12]
    return root / sha[:2] / f"{sha}{suffix}-r{_READER_VERSION}.npz"


def _load_uncached(
    p: Path, data: bytes, sha: str, frame: tuple[float, ...], where: str, use_disk: bool
) -> MeshAsset:
    cache_file = _cache_file(sha, frame) if use_disk else None
    if cache_file is not None and cache_file.is_file():
        try:
            return _read_cache(cache_file, str(p), sha)
        except Exception:  # noqa: BLE001 - a broken entry is re-parsed and rewritten
            pass
    asset = _parse_glb(data, str(p), sha, frame, where)
    if cache_file is not None:
        try:
            _write_cache(cache_file, asset)
        except OSError:  # a read-only or full cache never stops a run
            pass
    return asset


def _write_cache(target: Path, asset: MeshAsset) -> None:
    from humanclaw_gym.fileio import atomic_path

    arrays: dict[str, np.ndarray] = {}
    prims = []
    for i, prim in enumerate(asset.primitives):
        arrays[f"p{i}_pos"] = prim.positions
        arrays[f"p{i}_nrm"] = prim.normals
        arrays[f"p{i}_col"] = prim.colors
        arrays[f"p{i}_idx"] = prim.indices
        if prim.uvs is not None:
            arrays[f"p{i}_uv"] = prim.uvs
        if prim.texture is not None:
            arrays[f"p{i}_tex"] = prim.texture
        prims.append({"alpha_cutoff": prim.alpha_cutoff})
    meta = {
        "schema": MESH_CACHE_SCHEMA,
        "reader_version": _READER_VERSION,
        "sha256": asset.sha256,
        "primitives": prims,
        "warnings": list(asset.warnings),
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def _read_cache(path: Path, name: str, sha: str) -> MeshAsset:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(bytes(z["meta"]).decode("utf-8"))
        if (
            meta.get("schema") != MESH_CACHE_SCHEMA
            or meta.get("reader_version") != _READER_VERSION
            or meta.get("sha256") != sha
        ):
            raise ValueError("stale mesh cache entry")
        prims = []
        for i, info in enumerate(meta["primitives"]):
            prims.append(
                MeshPrimitive(
                    positions=z[f"p{i}_pos"],
                    normals=z[f"p{i}_nrm"],
                    uvs=z[f"p{i}_uv"] if f"p{i}_uv" in z else None,
                    colors=z[f"p{i}_col"],
                    indices=z[f"p{i}_idx"],
                    texture=z[f"p{i}_tex"] if f"p{i}_tex" in z else None,
                    alpha_cutoff=info.get("alpha_cutoff"),
                )
            )
    return MeshAsset(name, sha, tuple(prims), tuple(meta.get("warnings", ())))


# ---------------------------------------------------------------------------------------
# GLB parsing
# ---------------------------------------------------------------------------------------
def _glb_json(data: bytes, where: str) -> tuple[dict[str, Any], int, int]:
    """The JSON chunk of a GLB and its byte range ``(start, end)``."""
    from humanclaw_gym.fileio import FileContentError, loads_json

    if len(data) < 20 or data[:4] != _GLB_MAGIC:
        raise MeshAssetError(f"mesh asset {where} is not a binary glTF (.glb) file")
    length, kind = struct.unpack("<II", data[12:20])
    if kind != 0x4E4F534A or 20 + length > len(data):  # "JSON"
        raise MeshAssetError(f"mesh asset {where}: malformed GLB (no JSON chunk first)")
    try:
        doc = loads_json(data[20 : 20 + length], "the GLB's JSON chunk")
    except FileContentError as exc:
        raise MeshAssetError(f"mesh asset {where}: {exc}") from None
    if not isinstance(doc, dict):
        raise MeshAssetError(f"mesh asset {where}: the GLB's JSON chunk is not an object")
    return doc, 20, 20 + length


def _bin_chunk(data: bytes, end: int, where: str) -> tuple[int, int]:
    """``(start, length)`` of the GLB's binary chunk after the JSON chunk (``(end, 0)``
    without one)."""
    if len(data) < end + 8:
        return end + 8, 0
    length, kind = struct.unpack("<II", data[end : end + 8])
    if kind != _BIN_CHUNK or end + 8 + length > len(data):
        raise MeshAssetError(
            f"mesh asset {where}: malformed GLB (the chunk after the JSON is not a binary "
            "chunk that fits in the file)"
        )
    return end + 8, length


# ---------------------------------------------------------------------------------------
# GLB structure (checked before the parser reads it)
# ---------------------------------------------------------------------------------------
_COMPONENT_BYTES = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}
_COMPONENT_DTYPES = {5121: "<u1", 5123: "<u2", 5125: "<u4"}
_TYPE_COMPONENTS = {
    "SCALAR": 1,
    "VEC2": 2,
    "VEC3": 3,
    "VEC4": 4,
    "MAT2": 4,
    "MAT3": 9,
    "MAT4": 16,
}
_ARRAYS = (
    "accessors",
    "animations",
    "bufferViews",
    "buffers",
    "cameras",
    "images",
    "materials",
    "meshes",
    "nodes",
    "samplers",
    "scenes",
    "skins",
    "textures",
)
_TEXTURE_SLOTS = ("normalTexture", "occlusionTexture", "emissiveTexture")
_ALPHA_MODES = ("OPAQUE", "MASK", "BLEND")


class _Gltf:
    """Typed reads of a glTF JSON document, every failure a :class:`MeshAssetError` naming
    the file and the field."""

    def __init__(self, doc: dict[str, Any], where: str) -> None:
        self.doc, self.where = doc, where

    def fail(self, field: str, message: str) -> MeshAssetError:
        return MeshAssetError(f"mesh asset {self.where}: {field} {message}")

    def array(self, name: str) -> list[dict[str, Any]]:
        value = self.doc.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(name, "must be a list of objects")
        if len(value) > MESH_LIMITS["array_items"]:
            raise self.fail(
                name, f"holds {len(value)} items: allowed at most {int(MESH_LIMITS['array_items'])}"
            )
        return value

    def integer(self, d: dict[str, Any], key: str, field: str, low: int, high: int) -> int | None:
        if key not in d:
            return None
        value = d[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(
                f"{field}.{key}",
                f"={_shown(value)} is invalid: allowed an integer in [{low}, {high}]",
            )
        return value

    def index(self, d: dict[str, Any], key: str, field: str, target: str) -> int | None:
        """An optional index into the top-level array ``target``."""
        count = len(self.array(target))
        if key in d and count == 0:
            raise self.fail(f"{field}.{key}", f"refers to {target}, which the file has none of")
        return self.integer(d, key, field, 0, count - 1)

    def numbers(self, d: dict[str, Any], key: str, field: str, n: int, bound: float) -> None:
        if key not in d:
            return
        value = d[key]
        if (
            not isinstance(value, list)
            or len(value) != n
            or not all(_within(v, -bound, bound) for v in value)
        ):
            raise self.fail(
                f"{field}.{key}",
                f"must be {n} finite numbers within ±{bound:g}, got {_shown(value)}",
            )

    def number(self, d: dict[str, Any], key: str, field: str, low: float, high: float) -> None:
        if key not in d:
            return
        value = d[key]
        if not _within(value, low, high):
            raise self.fail(
                f"{field}.{key}",
                f"={_shown(value)} is invalid: allowed a number in [{low}, {high}]",
            )

    def obj(self, d: dict[str, Any], key: str, field: str) -> dict[str, Any]:
        value = d.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(f"{field}.{key}", "must be an object")
        return value

    def texture_ref(self, d: dict[str, Any], key: str, field: str) -> None:
        if key not in d:
            return
        ref = d[key]
        if not isinstance(ref, dict):
            raise self.fail(f"{field}.{key}", "must be an object")
        if "index" not in ref:
            raise self.fail(f"{field}.{key}.index", "is missing")
        self.index(ref, "index", f"{field}.{key}", "textures")
        self.integer(ref, "texCoord", f"{field}.{key}", 0, 16)


def _extension_names(doc: dict[str, Any], name: str, where: str) -> list[str]:
    """``extensionsUsed`` / ``extensionsRequired``: a list of at most 256 names."""
    value = doc.get(name, [])
    if (
        not isinstance(value, list)
        or len(value) > 256
        or not all(isinstance(v, str) and len(v) <= 256 for v in value)
    ):
        raise MeshAssetError(
            f"mesh asset {where}: {name} must be a list of extension names, got {_shown(value)}"
        )
    return value


def _within(value: Any, low: float, high: float) -> bool:
    """A JSON number (not a bool) in ``[low, high]`` (an integer of any size compares
    exactly; NaN and infinities are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return low <= value <= high


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of {len(str(value))} digits>"
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 60 else f"{text[:60]}..."


def check_gltf(
    doc: dict[str, Any], data: bytes, bin_start: int, bin_length: int, where: str
) -> None:
    """Check a GLB's JSON structure against its binary chunk (see the module docstring).

    Args:
        doc: the parsed JSON chunk.
        data: the whole file.
        bin_start, bin_length: the binary chunk's byte range in ``data``.
        where: the file (and what refers to it), for messages.

    Raises:
        MeshAssetError: naming the file and the field.
    """
    g = _Gltf(doc, where)
    for name in _ARRAYS:
        g.array(name)
    for name in ("extensionsUsed", "extensionsRequired"):
        _extension_names(doc, name, where)
    for name in ("asset", "extensions", "extras"):
        if name in doc and not isinstance(doc[name], dict):
            raise g.fail(name, "must be an object")
    g.index(doc, "scene", "scene", "scenes")

    buffers = g.array("buffers")
    for i, buf in enumerate(buffers):
        field = f"buffers[{i}]"
        if "uri" in buf or i > 0:
            raise g.fail(field, "is not the GLB's binary chunk: external buffers are not read")
        length = g.integer(buf, "byteLength", field, 1, bin_length)
        if length is None:
            raise g.fail(
                f"{field}.byteLength",
                f"is missing or beyond the binary chunk ({bin_length} bytes)",
            )
    views = g.array("bufferViews")
    for i, view in enumerate(views):
        field = f"bufferViews[{i}]"
        if g.index(view, "buffer", field, "buffers") is None:
            raise g.fail(f"{field}.buffer", "is missing")
        size = int(buffers[view["buffer"]]["byteLength"])
        offset = g.integer(view, "byteOffset", field, 0, size) or 0
        length = g.integer(view, "byteLength", field, 1, size - offset)
        if length is None:
            raise g.fail(f"{field}.byteLength", f"is missing or beyond buffer {view['buffer']}")
        g.integer(view, "byteStride", field, 4, 252)
        g.integer(view, "target", field, 0, 1 << 16)

    accessors = g.array("accessors")
    for i, acc in enumerate(accessors):
        _check_accessor(g, acc, i, views)

    totals = {"triangles": 0, "vertices": 0}
    mesh_triangles = []
    quantized = "KHR_mesh_quantization" in _extension_names(doc, "extensionsUsed", where)
    for i, mesh in enumerate(g.array("meshes")):
        mesh_triangles.append(
            _check_mesh(g, mesh, i, accessors, views, data, bin_start, totals, quantized)
        )

    nodes = g.array("nodes")
    parent = [-1] * len(nodes)
    for i, node in enumerate(nodes):
        field = f"nodes[{i}]"
        g.index(node, "mesh", field, "meshes")
        g.index(node, "camera", field, "cameras")
        g.index(node, "skin", field, "skins")
        bound = MESH_LIMITS["transform"]
        g.numbers(node, "matrix", field, 16, bound)
        g.numbers(node, "translation", field, 3, bound)
        g.numbers(node, "rotation", field, 4, bound)
        g.numbers(node, "scale", field, 3, bound)
        children = node.get("children", [])
        if not isinstance(children, list):
            raise g.fail(f"{field}.children", "must be a list of node indices")
        for child in children:
            if isinstance(child, bool) or not isinstance(child, int) or not 0 <= child < len(nodes):
                raise g.fail(f"{field}.children", f"holds {_shown(child)}: not a node index")
            if parent[child] != -1 or child == i:
                raise g.fail(
                    f"{field}.children",
                    f"make node {child} a child twice or of itself: the nodes must form trees",
                )
            parent[child] = i
    depth_limit = int(MESH_LIMITS["node_depth"])
    for i in range(len(nodes)):
        depth, node = 0, i
        while parent[node] != -1:
            node, depth = parent[node], depth + 1
            if depth > depth_limit:
                raise g.fail(
                    f"nodes[{i}]",
                    f"lies more than {depth_limit} levels deep (or in a cycle): allowed at most "
                    f"{depth_limit}",
                )
        if node == i and depth:  # pragma: no cover - a cycle returns to its start
            raise g.fail(f"nodes[{i}]", "lies in a cycle")
    placed = sum(mesh_triangles[n["mesh"]] for n in nodes if n.get("mesh") is not None)
    if placed > MESH_LIMITS["triangles"]:
        raise g.fail(
            "nodes",
            f"place {placed} triangles in all: allowed at most {int(MESH_LIMITS['triangles'])}",
        )
    for i, scene in enumerate(g.array("scenes")):
        roots = scene.get("nodes", [])
        if not isinstance(roots, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r < len(nodes) for r in roots
        ):
            raise g.fail(f"scenes[{i}].nodes", "must be a list of node indices")

    textures = g.array("textures")
    for i, material in enumerate(g.array("materials")):
        field = f"materials[{i}]"
        pbr = g.obj(material, "pbrMetallicRoughness", field)
        here = f"{field}.pbrMetallicRoughness"
        g.numbers(pbr, "baseColorFactor", here, 4, 1e6)
        g.number(pbr, "metallicFactor", here, -1e6, 1e6)  # not drawn: finite is enough
        g.number(pbr, "roughnessFactor", here, -1e6, 1e6)
        g.texture_ref(pbr, "baseColorTexture", here)
        g.texture_ref(pbr, "metallicRoughnessTexture", here)
        for slot in _TEXTURE_SLOTS:
            g.texture_ref(material, slot, field)
        g.numbers(material, "emissiveFactor", field, 3, 1e6)
        mode = material.get("alphaMode", "OPAQUE")
        if mode not in _ALPHA_MODES:
            raise g.fail(
                f"{field}.alphaMode", f"={_shown(mode)} is unknown: allowed {_ALPHA_MODES}"
            )
        g.number(material, "alphaCutoff", field, 0.0, 1e6)
        if not isinstance(material.get("doubleSided", False), bool):
            raise g.fail(f"{field}.doubleSided", "must be true or false")
        g.obj(material, "extensions", field)
    for i, texture in enumerate(textures):
        field = f"textures[{i}]"
        g.index(texture, "source", field, "images")
        g.index(texture, "sampler", field, "samplers")
        g.obj(texture, "extensions", field)
    for i, image in enumerate(g.array("images")):
        field = f"images[{i}]"
        g.index(image, "bufferView", field, "bufferViews")
        for key in ("mimeType", "uri", "name"):
            if key in image and not isinstance(image[key], str):
                raise g.fail(f"{field}.{key}", "must be a string")
    for i, sampler in enumerate(g.array("samplers")):
        for key in ("magFilter", "minFilter", "wrapS", "wrapT"):
            g.integer(sampler, key, f"samplers[{i}]", 0, 1 << 16)


def _check_accessor(g: _Gltf, acc: dict[str, Any], i: int, views: list[dict[str, Any]]) -> None:
    field = f"accessors[{i}]"
    if "sparse" in acc or acc.get("bufferView") is None:
        raise g.fail(field, "has no bufferView (sparse or zero-filled accessors are not read)")
    view_index = int(g.index(acc, "bufferView", field, "bufferViews"))  # type: ignore[arg-type]
    ctype = acc.get("componentType")
    if isinstance(ctype, bool) or not isinstance(ctype, int) or ctype not in _COMPONENT_BYTES:
        raise g.fail(
            f"{field}.componentType",
            f"={_shown(ctype)} is invalid: allowed {sorted(_COMPONENT_BYTES)}",
        )
    kind = acc.get("type")
    if not isinstance(kind, str) or kind not in _TYPE_COMPONENTS:
        raise g.fail(
            f"{field}.type", f"={_shown(kind)} is invalid: allowed {list(_TYPE_COMPONENTS)}"
        )
    count = g.integer(acc, "count", field, 1, int(MESH_LIMITS["vertices"]) * 3)
    if count is None:
        raise g.fail(f"{field}.count", "is missing")
    view = views[view_index]
    offset = g.integer(acc, "byteOffset", field, 0, int(view["byteLength"])) or 0
    item = _COMPONENT_BYTES[ctype] * _TYPE_COMPONENTS[kind]
    stride = int(view.get("byteStride") or item)
    if stride < item:
        raise g.fail(
            f"bufferViews[{view_index}].byteStride", f"={stride} is smaller than its items"
        )
    need = offset + stride * (count - 1) + item
    if need > int(view["byteLength"]):
        raise g.fail(
            field,
            f"needs {need} bytes of bufferView {view_index}, which has {view['byteLength']}",
        )
    if not isinstance(acc.get("normalized", False), bool):
        raise g.fail(f"{field}.normalized", "must be true or false")
    for key in ("min", "max"):
        g.numbers(acc, key, field, _TYPE_COMPONENTS[kind], 3.5e38)  # float32 range


def _accessor_array(
    acc: dict[str, Any], views: list[dict[str, Any]], data: bytes, bin_start: int, dtype: str
) -> np.ndarray:
    """The values of a checked SCALAR accessor (strided views honoured)."""
    view = views[acc["bufferView"]]
    start = bin_start + int(view.get("byteOffset", 0)) + int(acc.get("byteOffset", 0))
    item = np.dtype(dtype).itemsize
    stride = int(view.get("byteStride") or item)
    count = int(acc["count"])
    raw = np.frombuffer(data, dtype=np.uint8, count=stride * (count - 1) + item, offset=start)
    return np.lib.stride_tricks.as_strided(raw, (count, item), (stride, 1)).copy().view(dtype)[:, 0]


def _check_mesh(
    g: _Gltf,
    mesh: dict[str, Any],
    i: int,
    accessors: list[dict[str, Any]],
    views: list[dict[str, Any]],
    data: bytes,
    bin_start: int,
    totals: dict[str, int],
    quantized: bool,
) -> int:
    """Check one mesh's primitives; returns its triangles."""
    primitives = mesh.get("primitives")
    if (
        not isinstance(primitives, list)
        or not primitives
        or not all(isinstance(p, dict) for p in primitives)
    ):
        raise g.fail(f"meshes[{i}].primitives", "must be a non-empty list of objects")
    triangles = 0
    for k, prim in enumerate(primitives):
        field = f"meshes[{i}].primitives[{k}]"
        attributes = prim.get("attributes")
        if not isinstance(attributes, dict) or "POSITION" not in attributes:
            raise g.fail(f"{field}.attributes", "must be an object with POSITION")
        for name in attributes:
            g.index(attributes, name, f"{field}.attributes", "accessors")
        position = accessors[attributes["POSITION"]]
        if position.get("type") != "VEC3" or (
            position.get("componentType") != 5126 and not quantized
        ):
            raise g.fail(
                f"{field}.attributes.POSITION",
                "must be a VEC3 float accessor (other types with KHR_mesh_quantization only)",
            )
        vertices = int(position["count"])
        for name, index in attributes.items():
            if int(accessors[index]["count"]) != vertices:
                raise g.fail(
                    f"{field}.attributes.{_shown(name)}",
                    f"has {accessors[index]['count']} items, POSITION {vertices}",
                )
        mode = g.integer(prim, "mode", field, 0, 6)
        mode = 4 if mode is None else mode
        g.index(prim, "material", field, "materials")
        targets = prim.get("targets", [])
        if not isinstance(targets, list) or not all(isinstance(t, dict) for t in targets):
            raise g.fail(f"{field}.targets", "must be a list of objects")
        indices = g.index(prim, "indices", field, "accessors")
        count = vertices
        if indices is not None:
            acc = accessors[indices]
            dtype = _COMPONENT_DTYPES.get(acc.get("componentType"))
            if acc.get("type") != "SCALAR" or dtype is None:
                raise g.fail(
                    f"{field}.indices", "must be a SCALAR accessor of unsigned 8, 16 or 32 bits"
                )
            count = int(acc["count"])
            values = _accessor_array(acc, views, data, bin_start, dtype)
            if len(values) and int(values.max()) >= vertices:
                raise g.fail(
                    f"{field}.indices",
                    f"name vertex {int(values.max())}: POSITION has {vertices} vertices",
                )
        if mode == 4:
            triangles += count // 3
        elif mode in (5, 6):
            triangles += max(count - 2, 0)
        totals["vertices"] += vertices
        if totals["vertices"] > MESH_LIMITS["vertices"]:
            raise g.fail(
                field, f"brings the file past {int(MESH_LIMITS['vertices'])} vertices in all"
            )
    return triangles


def _texture_too_large(data: bytes, doc: dict[str, Any], bin_start: int) -> str | None:
    """A message when an embedded image is larger than ``MESH_LIMITS["texture_pixels"]``
    (its header read, nothing decoded), else None."""
    from PIL import Image

    views = doc.get("bufferViews", [])
    for i, image in enumerate(doc.get("images", [])):
        index = image.get("bufferView")
        if index is None:
            continue
        view = views[index]
        a = bin_start + int(view.get("byteOffset", 0))
        try:
            with Image.open(io.BytesIO(data[a : a + int(view["byteLength"])])) as im:
                width, height = im.size
        except Exception:  # noqa: BLE001 - undecodable: reported by _texture_problems
            continue
        if width * height > MESH_LIMITS["texture_pixels"]:
            return (
                f"image {i} is {width} x {height} pixels (allowed at most "
                f"{int(MESH_LIMITS['texture_pixels'])}): not decoded; drawing material colours only"
            )
    return None


def _without_textures(data: bytes, doc: dict[str, Any], start: int, end: int) -> bytes:
    """The same GLB with every texture reference removed (for files whose images make
    the parser fail)."""
    doc = json.loads(json.dumps(doc))
    for material in doc.get("materials", []) or []:
        pbr = material.get("pbrMetallicRoughness") or {}
        pbr.pop("baseColorTexture", None)
        pbr.pop("metallicRoughnessTexture", None)
        for key in ("normalTexture", "occlusionTexture", "emissiveTexture"):
            material.pop(key, None)
    for key in ("textures", "images", "samplers"):
        doc.pop(key, None)
    text = json.dumps(doc).encode("utf-8")
    text += b" " * ((4 - len(text) % 4) % 4)
    rest = data[end:]
    total = 12 + 8 + len(text) + len(rest)
    return (
        data[:4]
        + struct.pack("<II", 2, total)
        + struct.pack("<II", len(text), 0x4E4F534A)
        + text
        + rest
    )


def _texture_problems(data: bytes, doc: dict[str, Any], end: int) -> list[str]:
    """One message per base-colour image the file's materials use that Pillow cannot
    decode (without decoding anything twice later: trimesh does the real decoding)."""
    from PIL import Image

    images = doc.get("images", []) or []
    textures = doc.get("textures", []) or []
    views = doc.get("bufferViews", []) or []
    problems: list[str] = []
    used: set[int] = set()
    for material in doc.get("materials", []) or []:
        tex = (material.get("pbrMetallicRoughness") or {}).get("baseColorTexture")
        if isinstance(tex, dict) and isinstance(tex.get("index"), int):
            used.add(tex["index"])
    bin_start = end + 8
    for t in sorted(used):
        texture = textures[t] if t < len(textures) else {}
        source = texture.get("source")
        if source is None:
            ext = sorted((texture.get("extensions") or {}).keys())
            problems.append(
                f"texture {t} has no image Pillow can read (extensions {ext}); "
                "drawing the material's base colour"
            )
            continue
        image = images[source] if source < len(images) else {}
        view = image.get("bufferView")
        if view is None or view >= len(views):
            problems.append(
                f"texture {t}: image {source} is not embedded in the GLB; "
                "drawing the material's base colour"
            )
            continue
        bv = views[view]
        a = bin_start + int(bv.get("byteOffset", 0))
        try:
            with Image.open(io.BytesIO(data[a : a + int(bv["byteLength"])])) as im:
                im.size  # noqa: B018 - header read
        except Exception:  # noqa: BLE001 - any undecodable image
            problems.append(
                f"texture {t}: image {source} ({image.get('mimeType', 'unknown type')}) "
                "cannot be decoded; drawing the material's base colour"
            )
    return problems


def _srgb(linear: np.ndarray) -> np.ndarray:
    c = np.clip(linear, 0.0, 1.0)
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * np.power(c, 1.0 / 2.4) - 0.055)


def _normals(v: np.ndarray, f: np.ndarray) -> np.ndarray:
    face_n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]).astype(np.float64)
    summed = np.zeros((len(v), 3))
    for corner in range(3):
        np.add.at(summed, f[:, corner], face_n)
    length = np.linalg.norm(summed, axis=1)
    out = np.tile([0.0, 1.0, 0.0], (len(v), 1))
    good = length > 1e-20
    out[good] = summed[good] / length[good, None]
    return out.astype(np.float32)


def _parse_glb(data: bytes, name: str, sha: str, frame: tuple[float, ...], where: str) -> MeshAsset:
    try:
        import trimesh
    except ImportError as exc:
        raise MeshAssetError(
            f"reading mesh asset {where} needs the 'trimesh' package: "
            "pip install 'humanclaw-gym[hssd]'"
        ) from exc
    from humanclaw_gym.scenes.spec import MeshRef

    doc, start, end = _glb_json(data, where)
    required = set(_extension_names(doc, "extensionsRequired", where)) | set(
        _extension_names(doc, "extensionsUsed", where)
    )
    bad = sorted(required & set(_UNSUPPORTED_EXTENSIONS))
    if bad:  # named before the structure check: compressed accessors have no buffer view
        raise MeshAssetError(
            f"mesh asset {where} uses {', '.join(bad)} (compressed geometry), which this "
            "reader does not decode; decompress it first, e.g. "
            "'gltf-transform copy in.glb out.glb'"
        )
    bin_start, bin_length = _bin_chunk(data, end, where)
    check_gltf(doc, data, bin_start, bin_length, where)
    problems = _texture_problems(data, doc, end)
    too_large = _texture_too_large(data, doc, bin_start)
    try:
        if too_large is not None:  # never decoded: parsed without its images
            problems.append(too_large)
            raise _NoTextures
        scene = trimesh.load(io.BytesIO(data), file_type="glb", force="scene", process=False)
    except Exception as first:  # noqa: BLE001 - retry without the images that broke it
        try:
            scene = trimesh.load(
                io.BytesIO(_without_textures(data, doc, start, end)),
                file_type="glb",
                force="scene",
                process=False,
            )
        except Exception as exc:  # noqa: BLE001
            raise MeshAssetError(
                f"mesh asset {where} cannot be parsed ({_one_line(exc)})"
            ) from None
        if not isinstance(first, _NoTextures):
            problems.append(
                f"the file's textures broke the reader ({type(first).__name__}: "
                f"{_one_line(first)}); drawing material colours only"
            )
    up, front = frame[:3], frame[3:]
    to_canonical = MeshRef(asset=name, up=up, front=front).frame_matrix()
    prims: list[MeshPrimitive] = []
    for node in scene.graph.nodes_geometry:
        transform, geom_name = scene.graph[node]
        geom = scene.geometry.get(geom_name)
        if geom is None or not hasattr(geom, "faces") or len(geom.faces) == 0:
            continue  # points, lines, empty meshes
        prims.append(_primitive(geom, np.asarray(transform, dtype=np.float64), to_canonical, where))
    if not prims:
        raise MeshAssetError(f"mesh asset {where} contains no triangles")
    return MeshAsset(name, sha, tuple(prims), tuple(problems))


class _NoTextures(Exception):
    """Parse the file without its images (they are too large to decode)."""


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _primitive(
    geom: Any, transform: np.ndarray, to_canonical: np.ndarray, where: str
) -> MeshPrimitive:
    linear = to_canonical @ transform[:3, :3]
    v = np.asarray(geom.vertices, dtype=np.float64)
    bound = MESH_LIMITS["coordinate"]
    with np.errstate(over="ignore", invalid="ignore"):
        placed = v @ linear.T + to_canonical @ transform[:3, 3]
    if not np.all(np.isfinite(placed)) or (len(placed) and np.abs(placed).max() > bound):
        raise MeshAssetError(
            f"mesh asset {where}: a vertex (node transforms applied) is not finite or lies "
            f"beyond {bound:g} of the origin: allowed within ±{bound:g} (the file's units)"
        )
    positions = placed.astype(np.float32)
    faces = np.asarray(geom.faces, dtype=np.int64)
    if len(faces) and (faces.min() < 0 or faces.max() >= len(v)):
        raise MeshAssetError(f"mesh asset {where}: a triangle names a vertex the mesh lacks")
    if np.linalg.det(linear) < 0:  # a mirroring node transform flips the winding
        faces = faces[:, ::-1]
    faces = np.ascontiguousarray(faces, dtype=np.int32)
    normals = None
    cached = getattr(geom, "_cache", None)
    if cached is not None and "vertex_normals" in cached:
        n = np.asarray(geom.vertex_normals, dtype=np.float64)
        if n.shape == v.shape:
            n = n @ np.linalg.inv(linear)  # normals transform with the inverse transpose
            length = np.linalg.norm(n, axis=1, keepdims=True)
            normals = (n / np.maximum(length, 1e-12)).astype(np.float32)
    if normals is None:
        normals = _normals(positions, faces)
    visual = getattr(geom, "visual", None)
    colors = np.ones((len(v), 3))
    uvs = None
    texture = None
    alpha_cutoff = None
    material = getattr(visual, "material", None)
    if getattr(visual, "kind", None) == "vertex":
        vc = np.asarray(visual.vertex_colors, dtype=np.float64)[:, :3] / 255.0
        colors = colors * vc
    if material is not None:
        factor = getattr(material, "baseColorFactor", None)
        if factor is None:
            factor = getattr(material, "main_color", None)
        if factor is not None:
            f = np.asarray(factor, dtype=np.float64).reshape(-1)[:3]
            # trimesh stores the (linear) glTF factor as uint8 0..255
            colors = colors * _srgb(f / 255.0 if f.max() > 1.0 else f)[None, :]
        image = getattr(material, "baseColorTexture", None)
        if image is None:
            image = getattr(material, "image", None)
        uv = getattr(visual, "uv", None)
        if image is not None and uv is not None and len(uv) == len(v):
            texture = _texture_array(image)
            uvs = np.asarray(uv, dtype=np.float32)[:, :2].copy()
            if getattr(material, "alphaMode", None) == "MASK":
                cutoff = getattr(material, "alphaCutoff", None)
                alpha_cutoff = 0.5 if cutoff is None else float(cutoff)
    return MeshPrimitive(
        positions=positions,
        normals=normals,
        uvs=uvs,
        colors=np.clip(colors, 0.0, 1.0).astype(np.float32),
        indices=faces,
        texture=texture,
        alpha_cutoff=alpha_cutoff,
    )


def _texture_array(image: Any) -> np.ndarray:
    from PIL import Image

    im = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image))
    im = im.convert("RGBA")
    side = max(im.size)
    if side > MAX_TEXTURE_SIDE:
        k = MAX_TEXTURE_SIDE / side
        im = im.resize((max(1, round(im.size[0] * k)), max(1, round(im.size[1] * k))))
    return np.ascontiguousarray(np.asarray(im, dtype=np.uint8))
