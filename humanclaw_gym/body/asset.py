"""A humanoid body from a folder in the reference release's format: :func:`load_body_asset`.

The release ships its bodies (``resources/agent/neutral_beta0_handmerged/`` and
``neutral_beta0_finger_separated/``) as a folder holding

* one URDF: links with ``<inertial>`` (mass, inertia, optional origin), ``<visual>`` and
  ``<collision>`` elements whose geometry is a ``<mesh filename="...">`` (binary or ASCII
  STL, relative to the folder), and ``spherical`` joints with an ``<origin xyz>``;
* the STL meshes the URDF names (convex hulls, one per link; finger links may have none);
* ``shift.npy``: ``(L, 3)`` rest joint offsets, row 0 the root's rest position;
* ``metadata.json`` (optional here): the body's name and notes such as the hand-merge map.

:func:`load_body_asset` reads and checks all of it before anything uses it and returns a
:class:`BodyAsset`: names in URDF order, the joint tree, masses and inertias as written,
per-link collision and visual meshes in the link frame, the rest height, the SHA-256 of
every file, and what the rest of the package needs to use the body the way the release
does (see :class:`BodyAsset`). :meth:`BodyAsset.body_model` is the
:class:`~humanclaw_gym.body.model.BodyModel` the physics backends build (pybullet loads the
URDF itself; MuJoCo gets the same meshes, masses and inertias in generated MJCF).

Everything is checked, each failure one line naming the file: malformed or oversized XML,
XML entity or DOCTYPE declarations in any encoding (the URDF is parsed with ``defusedxml``),
elements nested deeper than a URDF nests them, a mesh file outside the folder (``..``,
absolute paths, URLs, symbolic links leading out), missing or oversized files, more mesh
elements or triangles in all than :data:`BODY_ASSET_LIMITS` allows (a mesh named by many
elements counts each time: each is a transformed copy), non-finite numbers, coordinates of
placed meshes and origins beyond 100 m, non-positive or huge masses, inertias that are not
positive definite, a pelvis without collision geometry (the Interact metric
needs its contacts), joints other than ``spherical``, rotated joint or inertial frames, a
link tree with several roots, cycles or children listed before their parent, and a driven
link whose parent is not its frame joint's parent.

Frames: the link frame is the joint frame (origin at the joint centre, axes of the body
frame at rest: Y up, Z forward, X left), as in :mod:`humanclaw_gym.body.model`. The 75-D
frame drives every link named like one of its joints (``JOINT_NAMES``: the release's 22
SMPL-X body joints ``pelvis`` ... ``right_wrist``); every other link (jaw, eyes, fingers)
is held at its rest rotation, as the release holds them. The root link must be
``pelvis``. No simulator is imported here.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.body.model import BodyModel, LinkMesh
from humanclaw_gym.body.skeleton import JOINT_INDEX, JOINT_NAMES, PARENTS

__all__ = [
    "BODY_ASSET_LIMITS",
    "BodyAsset",
    "BodyAssetError",
    "MeshPart",
    "load_body_asset",
    "release_body_group",
]

#: Limits of a body folder: file sizes in bytes (a larger file is refused before it is
#: read), links, the depth of the URDF's element tree, triangles of one STL file, and in
#: all the ``<collision>`` / ``<visual>`` meshes and their triangles (each element is a
#: transformed copy of its file, so a file named many times counts many times). The
#: release's bodies: 55 links, depth 5, 110 mesh elements, 17,604 triangles in all.
BODY_ASSET_LIMITS: dict[str, int] = {
    "urdf_bytes": 4 << 20,
    "mesh_bytes": 32 << 20,
    "total_mesh_bytes": 256 << 20,
    "shift_bytes": 1 << 20,
    "metadata_bytes": 1 << 20,
    "links": 512,
    "urdf_depth": 16,
    "mesh_triangles": 500_000,
    "mesh_elements": 2048,
    "total_triangles": 2_000_000,
}

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_ROOT_LINK = "pelvis"
_SHIFT_FILE = "shift.npy"
_METADATA_FILE = "metadata.json"
#: Largest |coordinate| accepted in a mesh (as placed in its link frame, scale applied)
#: or an origin, metres (a body fits in 100 m).
_MAX_COORD_M = 100.0
#: Range of each ``<mesh scale>`` factor.
_SCALE_RANGE = (1e-6, 1e3)
#: Largest link mass (kg), inertia entry (kg m^2) and lateral friction accepted.
_MAX_MASS_KG = 1e4
_MAX_INERTIA = 1e4
_MAX_FRICTION = 100.0
_ZERO_RPY_TOL = 1e-9


class BodyAssetError(ValueError):
    """A body folder that cannot be used; the message is one line naming the file."""


def _fail(path: Path | str, message: str) -> BodyAssetError:
    return BodyAssetError(f"body asset {os.fspath(path)}: {message}")


# ---------------------------------------------------------------------------------------
# collision groups by link name (the release's rule)
# ---------------------------------------------------------------------------------------
_FINGERS = tuple(
    f"{side}_{finger}{k}"
    for side in ("left", "right")
    for finger in ("index", "middle", "pinky", "ring", "thumb")
    for k in (1, 2, 3)
)
_ARM_LINKS = frozenset(
    {
        "left_collar",
        "right_collar",
        "left_shoulder",
        "right_shoulder",
        "left_elbow",
        "right_elbow",
        "left_wrist",
        "right_wrist",
        "left_hand",
        "right_hand",
        *_FINGERS,
    }
)
_HEAD_LINKS = frozenset({"head", "jaw", "left_eye_smplhf", "right_eye_smplhf"})
_LEG_LINKS = frozenset(
    {
        "left_hip",
        "right_hip",
        "left_knee",
        "right_knee",
        "left_ankle",
        "right_ankle",
        "left_foot",
        "right_foot",
    }
)


def release_body_group(link_name: str) -> str:
    """The collision body group (a key of ``BODY_GROUPS``) of a link, by the reference
    release's name rule: head, jaw and eyes are ``head``; collars, upper arms, elbows,
    wrists, hands and the 30 finger links ``arm/hand``; hips, knees, ankles and feet
    ``leg/foot``; every other link (pelvis, spine, neck, ...) ``torso``."""
    if link_name in _HEAD_LINKS:
        return "head"
    if link_name in _ARM_LINKS:
        return "arm/hand"
    if link_name in _LEG_LINKS:
        return "leg/foot"
    return "torso"


# ---------------------------------------------------------------------------------------
# the record
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class MeshPart:
    """One mesh of a link, in the link frame: ``vertices`` ``float64 (V, 3)`` metres,
    ``faces`` ``int32 (F, 3)`` (counter-clockwise seen from outside), and the file it
    came from (relative to the body folder)."""

    vertices: np.ndarray
    faces: np.ndarray
    file: str


@dataclass(frozen=True, eq=False)
class BodyAsset:
    """A body read by :func:`load_body_asset` (all arrays read-only).

    Attributes:
        name: the body's name (``metadata.json`` ``name``, else the URDF robot name).
        path: the body folder (absolute).
        urdf_path: the URDF file (absolute).
        links: link names in URDF order; link 0 is the root (``pelvis``).
        parents: parent link of each link (``-1`` for the root), parents first.
        joint_offsets_m: ``float64 (L, 3)``: each link's joint centre in its parent's link
            frame at rest (row 0 zero).
        masses_kg: ``float64 (L,)`` as written.
        inertias: ``float64 (L, 6)``: ``ixx, iyy, izz, ixy, ixz, iyz`` (kg m^2) about the
            inertial origin, link axes, as written.
        inertial_origins_m: ``float64 (L, 3)``: centre of mass of each link, link frame.
        collision: per link, its collision meshes (possibly none).
        visual: per link, its visual meshes (possibly none).
        shift_m: ``float64 (L, 3)`` from ``shift.npy`` (row 0: the root's rest position in
            the release's motion frame; the release uses only that row).
        metadata: ``metadata.json`` as read (``{}`` without one).
        files: ``{relative path: sha256}`` of every file the body is made of.
        sha256: one digest of all of them (see :meth:`identity`).
        default_inertial_links: links without an ``<inertial>`` element. URDF readers
            (Bullet's, pybullet's, Habitat's) give such a link 1 kg and a unit inertia and
            ignore a ``<mass>`` or ``<inertia>`` placed directly in the ``<link>``; so does
            this reader (the release's finger-separated body is written that way: it
            weighs 55 kg as simulated, not the 5 kg per link its file shows).
        lateral_friction: per link, the ``<contact><lateral_friction value>`` its URDF
            gives, or None (URDF readers then use 0.5).
    """

    name: str
    path: Path
    urdf_path: Path
    links: tuple[str, ...]
    parents: tuple[int, ...]
    joint_offsets_m: np.ndarray
    masses_kg: np.ndarray
    inertias: np.ndarray
    inertial_origins_m: np.ndarray
    collision: tuple[tuple[MeshPart, ...], ...]
    visual: tuple[tuple[MeshPart, ...], ...]
    shift_m: np.ndarray
    metadata: dict[str, Any]
    files: dict[str, str]
    sha256: str
    default_inertial_links: tuple[str, ...] = ()
    lateral_friction: tuple[float | None, ...] = ()
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # ---- sizes ----------------------------------------------------------------------
    @property
    def num_links(self) -> int:
        """Number of links ``L``."""
        return len(self.links)

    @property
    def total_mass_kg(self) -> float:
        """Sum of the link masses as written, kg."""
        return float(self.masses_kg.sum())

    @cached_property
    def rest_link_origins_m(self) -> np.ndarray:
        """``float64 (L, 3)``: every link origin at rest, pelvis-relative, body frame."""
        out = np.zeros((self.num_links, 3))
        for j in range(1, self.num_links):
            out[j] = out[self.parents[j]] + self.joint_offsets_m[j]
        out.setflags(write=False)
        return out

    @cached_property
    def _rest_extent(self) -> tuple[float, float]:
        rest = self.rest_link_origins_m
        lo, hi = math.inf, -math.inf
        for j, parts in enumerate(self.visual):
            for part in parts:
                ys = part.vertices[:, 1] + rest[j, 1]
                lo, hi = min(lo, float(ys.min())), max(hi, float(ys.max()))
        if not math.isfinite(lo):  # no visual geometry at all: the link origins
            lo, hi = float(rest[:, 1].min()), float(rest[:, 1].max())
        return lo, hi

    @property
    def height_m(self) -> float:
        """Height of the body at rest (top of the highest visual mesh to the bottom of the
        lowest), metres."""
        lo, hi = self._rest_extent
        return hi - lo

    @property
    def standing_pelvis_height_m(self) -> float:
        """Pelvis joint above the lowest visual point at rest, metres (the release's body:
        about 0.95 m)."""
        return -self._rest_extent[0]

    # ---- how the package uses it -----------------------------------------------------
    @cached_property
    def frame_joints(self) -> tuple[int, ...]:
        """Per link, the 75-D frame joint that drives it (``JOINT_NAMES`` index), or ``-1``
        for a link held at its rest rotation (jaw, eyes, fingers)."""
        return tuple(JOINT_INDEX.get(name, -1) for name in self.links)

    @cached_property
    def link_groups(self) -> tuple[str, ...]:
        """Per link, its collision body group by the release's name rule
        (:func:`release_body_group`)."""
        return tuple(release_body_group(name) for name in self.links)

    def link_index(self, name: str) -> int | None:
        """The index of a link by name, or None."""
        try:
            return self.links.index(name)
        except ValueError:
            return None

    def body_model(self) -> BodyModel:
        """The :class:`~humanclaw_gym.body.model.BodyModel` physics builds from this body:
        one :class:`~humanclaw_gym.body.model.LinkMesh` per link (its collision meshes, mass,
        centre of mass and inertia as written), the frame map, and the URDF pybullet loads."""
        model = self._cache.get("model")
        if model is None:
            shapes = tuple(
                LinkMesh(
                    joint=j,
                    parts=tuple((p.vertices, p.faces) for p in self.collision[j]),
                    mass_kg=float(self.masses_kg[j]),
                    com_m=tuple(float(v) for v in self.inertial_origins_m[j]),
                    inertia=tuple(float(v) for v in self.inertias[j]),
                )
                for j in range(self.num_links)
            )
            model = BodyModel(
                names=self.links,
                parents=self.parents,
                joint_offsets_m=self.joint_offsets_m,
                shapes=shapes,
                frame_joints=self.frame_joints,
                source_urdf=str(self.urdf_path),
            )
            self._cache["model"] = model
        return model

    @cached_property
    def visual_mesh(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every visual mesh in one array set: ``(vertices float64 (V, 3) link frame,
        faces int32 (F, 3), link of each vertex int64 (V,))``; :meth:`posed_vertices`
        places them."""
        verts, faces, owner = [], [], []
        count = 0
        for j, parts in enumerate(self.visual):
            for part in parts:
                verts.append(part.vertices)
                faces.append(part.faces + count)
                owner.append(np.full(len(part.vertices), j, dtype=np.int64))
                count += len(part.vertices)
        if not verts:
            raise _fail(self.urdf_path, "no link has visual geometry: nothing to draw")
        out = (
            np.concatenate(verts),
            np.concatenate(faces).astype(np.int32),
            np.concatenate(owner),
        )
        for array in out:
            array.setflags(write=False)
        return out

    def posed_vertices(self, link_poses: np.ndarray) -> np.ndarray:
        """World positions of the visual mesh's vertices for ``(L, 7)`` link poses
        (``[x, y, z, qx, qy, qz, qw]`` of each link frame), ``float64 (V, 3)``."""
        from humanclaw_gym.rotations import quat_xyzw_to_matrix

        poses = np.asarray(link_poses, dtype=np.float64)
        if poses.shape != (self.num_links, 7):
            raise ValueError(f"link_poses must have shape ({self.num_links}, 7), got {poses.shape}")
        verts, _, owner = self.visual_mesh
        rot = quat_xyzw_to_matrix(poses[:, 3:7])
        return np.einsum("nij,nj->ni", rot[owner], verts) + poses[owner, :3]

    def link_poses_from_frame(self, frame: np.ndarray) -> np.ndarray:
        """The ``(L, 7)`` world link poses of this body in a 75-D frame, by forward
        kinematics (root at ``frame[0:3]``; each driven link turned by its frame joint's
        rotation, the held ones at rest): what physics reports for that realized pose."""
        from humanclaw_gym.rotations import quat_exp, quat_mul, quat_rotate

        f = np.asarray(frame, dtype=np.float64)
        if f.shape != (75,) or not np.all(np.isfinite(f)):
            raise ValueError(f"frame must be a finite (75,) vector, got shape {f.shape}")
        joints = quat_exp(f[3:].reshape(-1, 3))
        out = np.empty((self.num_links, 7))
        out[0, 0:3] = f[0:3]
        out[0, 3:7] = joints[0]
        for j in range(1, self.num_links):
            parent = out[self.parents[j]]
            k = self.frame_joints[j]
            local = joints[k] if k >= 0 else np.array([0.0, 0.0, 0.0, 1.0])
            out[j, 0:3] = parent[0:3] + quat_rotate(parent[3:7], self.joint_offsets_m[j])
            out[j, 3:7] = quat_mul(parent[3:7], local)
        return out

    def skeleton_link_poses(self, link_poses: np.ndarray) -> np.ndarray:
        """The ``(24, 7)`` link poses of the 75-D frame's skeleton read off this body's
        ``(L, 7)`` link poses: each frame joint from its link; a frame joint the body lacks
        (the release's bodies have no ``left_hand`` / ``right_hand``) at its rest offset from
        its parent's pose. For cameras and renderers that place things by skeleton joint."""
        from humanclaw_gym.body.skeleton import REST_JOINTS_M
        from humanclaw_gym.rotations import quat_xyzw_to_matrix

        poses = np.asarray(link_poses, dtype=np.float64)
        if poses.shape != (self.num_links, 7):
            raise ValueError(f"link_poses must have shape ({self.num_links}, 7), got {poses.shape}")
        out = np.empty((len(JOINT_NAMES), 7))
        link_of = {fj: j for j, fj in enumerate(self.frame_joints) if fj >= 0}
        for fj in range(len(JOINT_NAMES)):
            j = link_of.get(fj)
            if j is not None:
                out[fj] = poses[j]
                continue
            parent = out[PARENTS[fj]]
            rot = quat_xyzw_to_matrix(parent[3:7])
            out[fj, 0:3] = parent[0:3] + rot @ (REST_JOINTS_M[fj] - REST_JOINTS_M[PARENTS[fj]])
            out[fj, 3:7] = parent[3:7]
        return out

    def identity(self) -> dict[str, Any]:
        """JSON-ready identity for fingerprints and replay manifests: name, folder, the
        digest of all files, link count and total mass."""
        return {
            "name": self.name,
            "path": str(self.path),
            "sha256": self.sha256,
            "links": self.num_links,
            "total_mass_kg": round(self.total_mass_kg, 6),
            "default_inertial_links": len(self.default_inertial_links),
        }


# ---------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_capped(path: Path, limit: int, what: str) -> bytes:
    """A regular file of at most ``limit`` bytes (FIFOs, devices and folders refused)."""
    from humanclaw_gym.fileio import FileContentError, read_bytes_limited

    try:
        return read_bytes_limited(path, limit, what)
    except FileNotFoundError:
        raise _fail(path, f"{what} is missing (expected a regular file)") from None
    except FileContentError as exc:
        text = str(exc)
        prefix = f"{path}: "
        raise _fail(path, text[len(prefix) :] if text.startswith(prefix) else text) from None


def _floats(
    text: str | None, n: int, path: Path, what: str, default: str | None = None
) -> np.ndarray:
    raw = default if text is None else text
    if raw is None:
        raise _fail(path, f"{what} is missing")
    parts = raw.split()
    try:
        values = np.array([float(p) for p in parts], dtype=np.float64)
    except ValueError:
        raise _fail(path, f"{what} {raw[:60]!r} is not {n} numbers") from None
    if values.shape != (n,):
        raise _fail(path, f"{what} {raw[:60]!r} is not {n} numbers")
    if not np.all(np.isfinite(values)):
        raise _fail(path, f"{what} {raw[:60]!r} is not finite")
    return values


def _origin(elem: ET.Element | None, path: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(xyz, rpy)`` of an optional ``<origin>`` child."""
    node = None if elem is None else elem.find("origin")
    if node is None:
        return np.zeros(3), np.zeros(3)
    xyz = _floats(node.get("xyz"), 3, path, f"{what} origin xyz", "0 0 0")
    rpy = _floats(node.get("rpy"), 3, path, f"{what} origin rpy", "0 0 0")
    if np.abs(xyz).max() > _MAX_COORD_M:
        raise _fail(path, f"{what} origin xyz {xyz.tolist()} is over {_MAX_COORD_M} m")
    return xyz, rpy


def _rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF fixed-axis roll (X), pitch (Y), yaw (Z): ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = (
        math.cos(r),
        math.sin(r),
        math.cos(p),
        math.sin(p),
        math.cos(y),
        math.sin(y),
    )
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _mesh_file(
    folder: Path, real_folder: Path, filename: str | None, urdf: Path, what: str
) -> tuple[Path, str]:
    """The mesh file a URDF names, checked to lie inside the body folder."""
    if not filename:
        raise _fail(urdf, f"{what} mesh has no filename")
    if "://" in filename or filename.startswith(("/", "\\")) or "\\" in filename or ":" in filename:
        raise _fail(
            urdf, f"{what} mesh filename {_q(filename)} must be a relative path inside the folder"
        )
    rel = Path(filename)
    if any(part in ("..", "") for part in rel.parts) or rel.is_absolute():
        raise _fail(urdf, f"{what} mesh filename {_q(filename)} leaves the body folder")
    if rel.suffix.lower() != ".stl":
        raise _fail(urdf, f"{what} mesh {_q(filename)}: only STL meshes are read (.stl)")
    target = folder / rel
    real = Path(os.path.realpath(target))
    if real_folder not in real.parents:
        raise _fail(urdf, f"{what} mesh {_q(filename)} resolves outside the body folder")
    return target, rel.as_posix()


_STL_RECORD = np.dtype([("normal", "<f4", (3,)), ("v", "<f4", (3, 3)), ("attr", "<u2")])


def _read_stl(data: bytes, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Triangles of a binary or ASCII STL as an indexed mesh (duplicate corners merged):
    ``float64 (V, 3)`` vertices and ``int32 (F, 3)`` faces."""
    tris: np.ndarray
    if len(data) >= 84:
        count = int.from_bytes(data[80:84], "little")
        binary = len(data) == 84 + 50 * count
    else:
        binary = False
    if binary:
        if count == 0:
            raise _fail(path, "STL holds no triangle")
        if count > BODY_ASSET_LIMITS["mesh_triangles"]:
            raise _fail(
                path,
                f"STL holds {count} triangles; at most "
                f"{BODY_ASSET_LIMITS['mesh_triangles']} are accepted",
            )
        tris = np.frombuffer(data, dtype=_STL_RECORD, count=count, offset=84)["v"].astype(
            np.float64
        )
    else:
        head = data[:5].lower()
        if head != b"solid":
            raise _fail(
                path, "not an STL file (neither a binary STL of consistent size nor ASCII 'solid')"
            )
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise _fail(path, "ASCII STL holds non-ASCII bytes") from None
        corners = re.findall(r"vertex\s+(\S+)\s+(\S+)\s+(\S+)", text)
        if not corners or len(corners) % 3:
            raise _fail(
                path, f"ASCII STL holds {len(corners)} vertices (a positive multiple of 3 expected)"
            )
        if len(corners) // 3 > BODY_ASSET_LIMITS["mesh_triangles"]:
            raise _fail(path, "ASCII STL holds too many triangles")
        try:
            tris = np.array(corners, dtype=np.float64).reshape(-1, 3, 3)
        except ValueError:
            raise _fail(path, "ASCII STL holds a vertex that is not 3 numbers") from None
    if not np.all(np.isfinite(tris)):
        raise _fail(path, "STL holds a non-finite vertex coordinate")
    if np.abs(tris).max() > _MAX_COORD_M:
        raise _fail(path, f"STL holds a coordinate over {_MAX_COORD_M} m")
    vertices, inverse = np.unique(tris.reshape(-1, 3), axis=0, return_inverse=True)
    faces = inverse.reshape(-1, 3).astype(np.int32)
    keep = (
        (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    )
    faces = faces[keep]
    if len(faces) == 0:
        raise _fail(path, "STL holds only degenerate triangles")
    return vertices, faces


def _geometry(
    elem: ET.Element,
    folder: Path,
    real_folder: Path,
    urdf: Path,
    what: str,
    meshes: dict[str, tuple[bytes, np.ndarray, np.ndarray]],
    budget: dict[str, int],
) -> MeshPart:
    geom = elem.find("geometry")
    if geom is None or len(geom) != 1:
        raise _fail(urdf, f"{what} must hold one <geometry> with one shape")
    shape = geom[0]
    if shape.tag != "mesh":
        raise _fail(urdf, f"{what} geometry <{_clip(shape.tag)}> is not supported (meshes only)")
    budget["elements"] += 1
    if budget["elements"] > BODY_ASSET_LIMITS["mesh_elements"]:
        raise _fail(
            urdf,
            f"{what}: more than {BODY_ASSET_LIMITS['mesh_elements']} <collision> / <visual> "
            "meshes in all; refused",
        )
    target, rel = _mesh_file(folder, real_folder, shape.get("filename"), urdf, what)
    if rel not in meshes:
        data = _read_capped(target, BODY_ASSET_LIMITS["mesh_bytes"], "mesh file")
        budget["bytes"] += len(data)
        if budget["bytes"] > BODY_ASSET_LIMITS["total_mesh_bytes"]:
            raise _fail(
                target, f"meshes exceed {BODY_ASSET_LIMITS['total_mesh_bytes']} bytes in all"
            )
        verts, faces = _read_stl(data, target)
        meshes[rel] = (data, verts, faces)
    _, verts, faces = meshes[rel]
    budget["triangles"] += len(faces)
    if budget["triangles"] > BODY_ASSET_LIMITS["total_triangles"]:
        raise _fail(
            urdf,
            f"{what} mesh {_q(rel)}: the <collision> / <visual> meshes hold more than "
            f"{BODY_ASSET_LIMITS['total_triangles']} triangles in all (each element counts "
            "its file's triangles); refused",
        )
    scale = _floats(shape.get("scale"), 3, urdf, f"{what} mesh scale", "1 1 1")
    low, high = _SCALE_RANGE
    if not np.all((scale >= low) & (scale <= high)):
        raise _fail(urdf, f"{what} mesh scale {scale.tolist()} must be in [{low}, {high}]")
    xyz, rpy = _origin(elem, urdf, what)
    placed = (verts * scale) @ _rpy_matrix(rpy).T + xyz
    if np.abs(placed).max() > _MAX_COORD_M:
        raise _fail(
            urdf,
            f"{what} mesh {_q(rel)} (scale {scale.tolist()}) reaches "
            f"{float(np.abs(placed).max()):.3g} m from its link: allowed at most {_MAX_COORD_M} m",
        )
    placed.setflags(write=False)
    f = np.ascontiguousarray(faces, dtype=np.int32)
    f.setflags(write=False)
    return MeshPart(vertices=placed, faces=f, file=rel)


#: What URDF readers (Bullet's, pybullet's and Habitat's) give a link without ``<inertial>``:
#: 1 kg, a unit diagonal inertia, the inertial frame at the link frame.
DEFAULT_LINK_MASS_KG = 1.0


def _inertial(
    link: ET.Element, urdf: Path, name: str
) -> tuple[float, np.ndarray, np.ndarray] | None:
    """``(mass, inertia, com)`` of a link's ``<inertial>``, or None without one."""
    node = link.find("inertial")
    if node is None:
        return None
    mass_node = node.find("mass")
    mass = _floats(
        None if mass_node is None else mass_node.get("value"), 1, urdf, f"link {name!r} mass"
    )[0]
    if not 0 < mass <= _MAX_MASS_KG:
        raise _fail(urdf, f"link {name!r} mass {mass} must be > 0 and at most {_MAX_MASS_KG} kg")
    inertia_node = node.find("inertia")
    if inertia_node is None:
        raise _fail(urdf, f"link {name!r} has no <inertia>")
    keys = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
    values = np.array(
        [_floats(inertia_node.get(k), 1, urdf, f"link {name!r} inertia {k}", "0")[0] for k in keys]
    )
    if np.abs(values).max() > _MAX_INERTIA:
        raise _fail(
            urdf, f"link {name!r} inertia {values.tolist()}: allowed entries within ±{_MAX_INERTIA}"
        )
    ixx, iyy, izz, ixy, ixz, iyz = values
    tensor = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    eig = np.linalg.eigvalsh(tensor)
    if not (
        eig.min() > 0
        and ixx + iyy >= izz - 1e-12
        and iyy + izz >= ixx - 1e-12
        and ixx + izz >= iyy - 1e-12
    ):
        raise _fail(
            urdf,
            f"link {name!r} inertia {values.tolist()} is not a positive definite inertia "
            "tensor satisfying the triangle inequality",
        )
    xyz, rpy = _origin(node, urdf, f"link {name!r} inertial")
    if np.abs(rpy).max() > _ZERO_RPY_TOL:
        raise _fail(urdf, f"link {name!r} inertial origin rpy {rpy.tolist()} must be 0 0 0")
    return float(mass), values, xyz


def _parse_urdf(data: bytes, urdf: Path) -> ET.Element:
    """The URDF's element tree, parsed with ``defusedxml`` (DOCTYPE, entity and external
    references refused whatever the encoding: UTF-8, UTF-16, ...), its depth checked while
    it is read."""
    import defusedxml
    from defusedxml.ElementTree import iterparse

    limit = BODY_ASSET_LIMITS["urdf_depth"]
    depth = 0
    root: ET.Element | None = None
    try:
        for event, elem in iterparse(
            io.BytesIO(data), events=("start", "end"), forbid_dtd=True, forbid_entities=True
        ):
            if event == "end":
                depth -= 1
                continue
            depth += 1
            if root is None:
                root = elem
            if depth > limit:
                raise _fail(
                    urdf,
                    f"elements nested {depth} deep (<{_clip(elem.tag)}>): allowed at most {limit} "
                    "levels (a URDF nests 5)",
                )
    except defusedxml.DefusedXmlException:
        raise _fail(urdf, "XML DOCTYPE or ENTITY declarations are not accepted") from None
    except ET.ParseError as exc:
        raise _fail(urdf, f"malformed XML ({exc})") from None
    if root is None:  # pragma: no cover - expat refuses a document without an element
        raise _fail(urdf, "malformed XML (no element)")
    if root.tag != "robot":
        raise _fail(urdf, f"root element is <{_clip(root.tag)}>, expected <robot>")
    return root


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _q(value: Any) -> str:
    """``repr`` of a name taken from the file, clipped for a message."""
    return repr(_clip(value, 64)) if isinstance(value, str) else repr(value)


def _find_urdf(path: Path) -> tuple[Path, Path]:
    if path.is_file():
        if path.suffix.lower() != ".urdf":
            raise _fail(path, "expected a body folder or its .urdf file")
        return path.parent, path
    if not path.is_dir():
        raise _fail(
            path, "does not exist (expected a body folder holding a URDF, meshes and shift.npy)"
        )
    candidates = sorted(p for p in path.glob("*.urdf") if p.is_file())
    if len(candidates) != 1:
        found = [p.name for p in candidates]
        raise _fail(path, f"expected exactly one .urdf file in the folder, found {found}")
    return path, candidates[0]


def load_body_asset(path: str | os.PathLike[str]) -> BodyAsset:
    """Read and check a body folder in the release's format (see the module docstring).

    Args:
        path: the body folder (holding exactly one ``.urdf``), or the URDF file itself.

    Returns:
        The :class:`BodyAsset`.

    Raises:
        BodyAssetError: a one-line message naming the file and what is wrong.
    """
    folder, urdf = _find_urdf(Path(os.fspath(path)).expanduser())
    folder = folder.resolve()
    urdf = urdf.resolve()
    real_folder = Path(os.path.realpath(folder))
    if Path(os.path.realpath(urdf)).parent != real_folder:
        raise _fail(urdf, "the URDF resolves outside the body folder")
    urdf_bytes = _read_capped(urdf, BODY_ASSET_LIMITS["urdf_bytes"], "URDF")
    root = _parse_urdf(urdf_bytes, urdf)

    link_elems = root.findall("link")
    if not link_elems:
        raise _fail(urdf, "the URDF has no <link>")
    if len(link_elems) > BODY_ASSET_LIMITS["links"]:
        raise _fail(
            urdf, f"{len(link_elems)} links; at most {BODY_ASSET_LIMITS['links']} are accepted"
        )
    names: list[str] = []
    for elem in link_elems:
        name = elem.get("name") or ""
        if not _NAME.match(name):
            raise _fail(
                urdf, f"link name {name[:70]!r} must be 1-64 characters of A-Z a-z 0-9 _ . -"
            )
        if name in names:
            raise _fail(urdf, f"link {name!r} is defined twice")
        names.append(name)
    index = {name: i for i, name in enumerate(names)}

    parents = [-1] * len(names)
    offsets = np.zeros((len(names), 3))
    seen_joints: set[str] = set()
    for joint in root.findall("joint"):
        jname = joint.get("name") or ""
        if jname in seen_joints:
            raise _fail(urdf, f"joint {_q(jname)} is defined twice")
        seen_joints.add(jname)
        jtype = joint.get("type")
        if jtype != "spherical":
            raise _fail(
                urdf,
                f"joint {_q(jname)} has type {_q(jtype)}; only 'spherical' joints are supported",
            )
        parent_node, child_node = joint.find("parent"), joint.find("child")
        parent = None if parent_node is None else parent_node.get("link")
        child = None if child_node is None else child_node.get("link")
        if parent not in index or child not in index:
            raise _fail(
                urdf, f"joint {_q(jname)} connects unknown links {_q(parent)} -> {_q(child)}"
            )
        c, p = index[child], index[parent]
        if parents[c] != -1:
            raise _fail(urdf, f"link {_q(child)} has two parent joints")
        if p >= c:
            raise _fail(
                urdf,
                f"link {_q(child)} is listed before (or is) its parent {_q(parent)}; links must be "
                "listed parents first, the root first",
            )
        xyz, rpy = _origin(joint, urdf, f"joint {_q(jname)}")
        if np.abs(rpy).max() > _ZERO_RPY_TOL:
            raise _fail(
                urdf,
                f"joint {_q(jname)} origin rpy {rpy.tolist()} must be 0 0 0 (link frames are joint frames)",
            )
        parents[c] = p
        offsets[c] = xyz
    roots = [names[i] for i, p in enumerate(parents) if p == -1]
    if roots != [names[0]]:
        raise _fail(
            urdf, f"the link tree must have exactly one root, the first link; roots: {roots}"
        )
    if names[0] != _ROOT_LINK:
        raise _fail(
            urdf,
            f"the root link is {names[0]!r}; it must be {_ROOT_LINK!r} (joint 0 of the 75-D frame)",
        )
    # every link named like a frame joint must hang from its frame parent's link
    for j, name in enumerate(names[1:], start=1):
        fj = JOINT_INDEX.get(name)
        if fj is None:
            continue
        want = JOINT_NAMES[PARENTS[fj]]
        got = names[parents[j]]
        if got != want:
            raise _fail(
                urdf,
                f"link {name!r} hangs from {got!r}; the 75-D frame drives it relative to {want!r}",
            )

    masses = np.zeros(len(names))
    inertias = np.zeros((len(names), 6))
    coms = np.zeros((len(names), 3))
    meshes: dict[str, tuple[bytes, np.ndarray, np.ndarray]] = {}
    budget = {"bytes": 0, "elements": 0, "triangles": 0}
    collision: list[tuple[MeshPart, ...]] = []
    visual: list[tuple[MeshPart, ...]] = []
    defaulted: list[str] = []
    frictions: list[float | None] = []
    for j, elem in enumerate(link_elems):
        name = names[j]
        inertial = _inertial(elem, urdf, name)
        if inertial is None:  # as URDF readers do: 1 kg, unit inertia (stray <mass> ignored)
            defaulted.append(name)
            inertial = (DEFAULT_LINK_MASS_KG, np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]), np.zeros(3))
        masses[j], inertias[j], coms[j] = inertial
        friction = elem.find("contact/lateral_friction")
        if friction is None:
            frictions.append(None)
        else:
            value = _floats(friction.get("value"), 1, urdf, f"link {name!r} lateral_friction")[0]
            if not 0 <= value <= _MAX_FRICTION:
                raise _fail(
                    urdf, f"link {name!r} lateral_friction {value} must be in [0, {_MAX_FRICTION}]"
                )
            frictions.append(float(value))
        collision.append(
            tuple(
                _geometry(c, folder, real_folder, urdf, f"link {name!r} collision", meshes, budget)
                for c in elem.findall("collision")
            )
        )
        visual.append(
            tuple(
                _geometry(v, folder, real_folder, urdf, f"link {name!r} visual", meshes, budget)
                for v in elem.findall("visual")
            )
        )

    if not collision[0]:
        raise _fail(
            urdf,
            f"link {_ROOT_LINK!r} has no <collision> geometry; the Interact metric scores the "
            "pelvis's contact with the seat, so the root link must collide",
        )
    shift_path = folder / _SHIFT_FILE
    shift_bytes = _read_capped(shift_path, BODY_ASSET_LIMITS["shift_bytes"], "shift.npy")
    shift = _read_shift(shift_bytes, shift_path, len(names))

    metadata: dict[str, Any] = {}
    meta_path = folder / _METADATA_FILE
    files = {urdf.name: _sha256(urdf_bytes), _SHIFT_FILE: _sha256(shift_bytes)}
    if meta_path.exists():
        meta_bytes = _read_capped(meta_path, BODY_ASSET_LIMITS["metadata_bytes"], "metadata.json")
        metadata = _read_metadata(meta_bytes, meta_path, index)
        files[_METADATA_FILE] = _sha256(meta_bytes)
    for rel, (data, _, _) in meshes.items():
        files[rel] = _sha256(data)
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel]}\n".encode())

    meta_name = metadata.get("name")
    name = meta_name if isinstance(meta_name, str) and _NAME.match(meta_name) else None
    if name is None:
        robot = root.get("name") or folder.name
        name = robot if _NAME.match(robot) else folder.name
    for array in (offsets, masses, inertias, coms, shift):
        array.setflags(write=False)
    return BodyAsset(
        name=name,
        path=folder,
        urdf_path=urdf,
        links=tuple(names),
        parents=tuple(parents),
        joint_offsets_m=offsets,
        masses_kg=masses,
        inertias=inertias,
        inertial_origins_m=coms,
        collision=tuple(collision),
        visual=tuple(visual),
        shift_m=shift,
        metadata=metadata,
        files=dict(sorted(files.items())),
        sha256=digest.hexdigest(),
        default_inertial_links=tuple(defaulted),
        lateral_friction=tuple(frictions),
    )


def _read_shift(data: bytes, path: Path, links: int) -> np.ndarray:
    import io

    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise _fail(path, f"not a numpy .npy array without pickled objects ({exc})") from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "fi":
        raise _fail(path, "must hold a float array")
    if array.shape != (links, 3):
        raise _fail(
            path,
            f"has shape {array.shape}; the URDF has {links} links, so ({links}, 3) is expected",
        )
    out = array.astype(np.float64)
    if not np.all(np.isfinite(out)):
        raise _fail(path, "holds a non-finite value")
    if np.abs(out).max(initial=0.0) > _MAX_COORD_M:
        raise _fail(path, f"holds an offset beyond {_MAX_COORD_M} m")
    return out


def _read_metadata(data: bytes, path: Path, links: dict[str, int]) -> dict[str, Any]:
    from humanclaw_gym.fileio import loads_json

    try:
        value = loads_json(data, "metadata.json")
    except ValueError as exc:
        raise _fail(path, str(exc)[:160]) from None
    if not isinstance(value, dict):
        raise _fail(path, "must hold a JSON object")
    merge = value.get("hand_merge")
    if merge is not None:
        if not isinstance(merge, dict):
            raise _fail(path, "hand_merge must be an object")
        for key, items in merge.items():
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise _fail(path, f"hand_merge[{_q(key)}] must be a list of link names")
            unknown = [i for i in items if i not in links]
            if unknown:
                raise _fail(
                    path,
                    f"hand_merge[{_q(key)}] names links the URDF lacks: {[_clip(u) for u in unknown[:5]]}",
                )
    return value
