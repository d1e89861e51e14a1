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
    "MeshAsset",
    "MeshAssetError",
    "MeshPrimitive",
    "MeshTextureWarning",
    "cache_dir",
    "cache_size_bytes",
    "clear_memory_cache",
    "load_mesh",
    "load_part_mesh",
    "mesh_cache_dir",
    "object_triangles",
    "place_vertices",
]

MESH_CACHE_SCHEMA = "humanclaw_mesh_cache_v1"
#: Bumped whenever the parsed arrays change meaning (invalidates older cache entries).
_READER_VERSION = 1
#: Longest texture side kept (larger textures are downsampled once, at parse time).
MAX_TEXTURE_SIDE = 1024
_UNSUPPORTED_EXTENSIONS = ("KHR_draco_mesh_compression", "EXT_meshopt_compression")
_MEMORY_CACHE_ENTRIES = 512
_GLB_MAGIC = b"glTF"


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
    p = Path(path)
    where = f"{p}" + (f" (referred to by {referrer})" if referrer else "")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise MeshAssetError(f"mesh asset {where} does not exist") from None
    except OSError as exc:
        raise MeshAssetError(f"mesh asset {where} cannot be read ({exc})") from None
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
    if len(data) < 20 or data[:4] != _GLB_MAGIC:
        raise MeshAssetError(f"mesh asset {where} is not a binary glTF (.glb) file")
    length, kind = struct.unpack("<II", data[12:20])
    if kind != 0x4E4F534A or 20 + length > len(data):  # "JSON"
        raise MeshAssetError(f"mesh asset {where}: malformed GLB (no JSON chunk first)")
    try:
        doc = json.loads(data[20 : 20 + length])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MeshAssetError(
            f"mesh asset {where}: the GLB's JSON chunk is invalid ({exc})"
        ) from None
    if not isinstance(doc, dict):
        raise MeshAssetError(f"mesh asset {where}: the GLB's JSON chunk is not an object")
    return doc, 20, 20 + length


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
    required = set(doc.get("extensionsRequired", []) or []) | set(
        doc.get("extensionsUsed", []) or []
    )
    bad = sorted(required & set(_UNSUPPORTED_EXTENSIONS))
    if bad:
        raise MeshAssetError(
            f"mesh asset {where} uses {', '.join(bad)} (compressed geometry), which this "
            "reader does not decode; decompress it first, e.g. "
            "'gltf-transform copy in.glb out.glb'"
        )
    problems = _texture_problems(data, doc, end)
    try:
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
            raise MeshAssetError(f"mesh asset {where} cannot be parsed ({exc})") from None
        problems.append(
            f"the file's textures broke the reader ({type(first).__name__}: {first}); "
            "drawing material colours only"
        )
    up, front = frame[:3], frame[3:]
    to_canonical = MeshRef(asset=name, up=up, front=front).frame_matrix()
    prims: list[MeshPrimitive] = []
    for node in scene.graph.nodes_geometry:
        transform, geom_name = scene.graph[node]
        geom = scene.geometry.get(geom_name)
        if geom is None or not hasattr(geom, "faces") or len(geom.faces) == 0:
            continue  # points, lines, empty meshes
        prims.append(_primitive(geom, np.asarray(transform, dtype=np.float64), to_canonical))
    if not prims:
        raise MeshAssetError(f"mesh asset {where} contains no triangles")
    return MeshAsset(name, sha, tuple(prims), tuple(problems))


def _primitive(geom: Any, transform: np.ndarray, to_canonical: np.ndarray) -> MeshPrimitive:
    linear = to_canonical @ transform[:3, :3]
    v = np.asarray(geom.vertices, dtype=np.float64)
    positions = (v @ linear.T + to_canonical @ transform[:3, 3]).astype(np.float32)
    faces = np.asarray(geom.faces, dtype=np.int64)
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
