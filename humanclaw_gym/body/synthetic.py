"""A synthetic body folder in the reference release's format, for tests and benchmarks.

:func:`write_synthetic_body_asset` writes what :func:`humanclaw_gym.body.asset.load_body_asset`
reads: a URDF of the 55 SMPL-X links (the 22 body joints, jaw, two eyes, 30 finger links)
with ``spherical`` joints, one binary STL box per link with geometry, ``shift.npy`` and
``metadata.json``. Joint centres are the skeleton's rest joints
(:data:`~humanclaw_gym.body.skeleton.REST_JOINTS_M`) for the body joints, made-up offsets
for the face and the fingers. Masses and inertias follow the release's bodies as written:
5 kg and an identity inertia per link with geometry, 1 g and 1e-6 kg m^2 per finger link
without it (the hand-merged variant: 125.03 kg in all).

No file of the release is read or copied: every number here is made up or the package's
own.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from humanclaw_gym.body.skeleton import JOINT_INDEX, JOINT_NAMES, PARENTS, REST_JOINTS_M
from humanclaw_gym.fileio import write_bytes_atomic, write_text_atomic

__all__ = ["SYNTHETIC_LINKS", "write_synthetic_body_asset"]

_BODY = JOINT_NAMES[:22]
_FINGER_NAMES = ("index", "middle", "pinky", "ring", "thumb")
_FINGERS = tuple(
    f"{side}_{finger}{k}"
    for side in ("left", "right")
    for finger in _FINGER_NAMES
    for k in (1, 2, 3)
)
#: Link names in URDF order: the 22 body joints, jaw, the eyes, 30 finger links.
SYNTHETIC_LINKS: tuple[str, ...] = (*_BODY, "jaw", "left_eye_smplhf", "right_eye_smplhf", *_FINGERS)


def _parent(name: str) -> str:
    if name in _BODY:
        return JOINT_NAMES[PARENTS[JOINT_INDEX[name]]]
    if name in ("jaw", "left_eye_smplhf", "right_eye_smplhf"):
        return "head"
    side, rest = name.split("_", 1)
    k = int(rest[-1])
    return f"{side}_wrist" if k == 1 else f"{side}_{rest[:-1]}{k - 1}"


def _offset(name: str) -> np.ndarray:
    if name in _BODY:
        j = JOINT_INDEX[name]
        return REST_JOINTS_M[j] - REST_JOINTS_M[PARENTS[j]] if j else np.zeros(3)
    if name == "jaw":
        return np.array([0.0, 0.02, 0.05])
    if name.endswith("eye_smplhf"):
        return np.array([0.03 if name.startswith("left") else -0.03, 0.09, 0.06])
    side, rest = name.split("_", 1)
    sign = 1.0 if side == "left" else -1.0
    k = int(rest[-1])
    finger = _FINGER_NAMES.index(rest[:-1])
    if k == 1:
        return np.array([sign * 0.09, -0.005, 0.03 - 0.015 * finger])
    return np.array([sign * 0.03, 0.0, 0.0])


def _box_stl(center: np.ndarray, half: np.ndarray) -> bytes:
    """A binary STL of an axis-aligned box (12 triangles, counter-clockwise outside)."""
    signs = [(x, y, z) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
    corner = {s: center + half * np.array(s, dtype=np.float64) for s in signs}
    quads = [
        ((1, -1, -1), (1, 1, -1), (1, 1, 1), (1, -1, 1)),
        ((-1, -1, -1), (-1, -1, 1), (-1, 1, 1), (-1, 1, -1)),
        ((-1, 1, -1), (-1, 1, 1), (1, 1, 1), (1, 1, -1)),
        ((-1, -1, -1), (1, -1, -1), (1, -1, 1), (-1, -1, 1)),
        ((-1, -1, 1), (1, -1, 1), (1, 1, 1), (-1, 1, 1)),
        ((-1, -1, -1), (-1, 1, -1), (1, 1, -1), (1, -1, -1)),
    ]
    out = bytearray(b"synthetic humanclaw body part".ljust(80, b"\0"))
    out += struct.pack("<I", 12)
    for a, b, cc, d in quads:
        for tri in ((a, b, cc), (a, cc, d)):
            pts = [corner[p] for p in tri]
            normal = np.cross(pts[1] - pts[0], pts[2] - pts[0])
            normal = normal / np.linalg.norm(normal)
            out += struct.pack("<3f", *normal)
            for p in pts:
                out += struct.pack("<3f", *p)
            out += b"\0\0"
    return bytes(out)


def _part_box(name: str, children: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Centre and half extents of a link's box, link frame: around the bone to its
    children (the pelvis, wrists and feet get wider boxes)."""
    ends = [_offset(c) for c in children if c in _BODY] or [np.zeros(3)]
    if name.endswith("_wrist"):
        ends = [np.array([0.12 if name.startswith("left") else -0.12, 0.0, 0.0])]
    if name == "head":
        ends = [np.array([0.0, 0.2, 0.02])]
    pts = np.vstack([np.zeros(3), *ends])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    width = 0.1 if name == "pelvis" else 0.04
    center = 0.5 * (lo + hi)
    half = np.maximum(0.5 * (hi - lo), width)
    if name.endswith("_foot"):
        center = center + np.array([0.0, -0.02, 0.03])
        half = np.array([0.045, 0.03, 0.06])
    if name.endswith("_ankle"):
        center = center + np.array([0.0, -0.02, 0.02])
    if name.endswith("eye_smplhf") or name == "jaw":
        half = np.full(3, 0.015)
    if name in _FINGERS:
        center = np.array([0.012 if name.startswith("left") else -0.012, 0.0, 0.0])
        half = np.array([0.012, 0.008, 0.008])
    return center, half


def write_synthetic_body_asset(
    folder: str | os.PathLike[str],
    *,
    finger_geometry: bool = False,
    name: str = "synthetic_beta0",
) -> Path:
    """Write a body folder in the release's format and return its path.

    Args:
        folder: created if missing; ``<name>.urdf``, ``meshes/*.stl``, ``shift.npy`` and
            ``metadata.json`` are written into it (atomically, file by file).
        finger_geometry: give every finger link a mesh and 5 kg (the finger-separated
            variant); False: fingers without geometry, 1 g each (the hand-merged variant).
        name: the robot and metadata name.
    """
    root = Path(folder)
    (root / "meshes").mkdir(parents=True, exist_ok=True)
    children: dict[str, list[str]] = {n: [] for n in SYNTHETIC_LINKS}
    for n in SYNTHETIC_LINKS[1:]:
        children[_parent(n)].append(n)
    lines = ['<?xml version="1.0" ?>', f'<robot name="{name}">']
    for n in SYNTHETIC_LINKS:
        geometry = finger_geometry or n not in _FINGERS
        mass, inertia = (5.0, 1.0) if geometry else (0.001, 1e-6)
        lines.append(f'  <link name="{n}">')
        lines.append(
            f'    <inertial><mass value="{mass:.6f}"/><inertia ixx="{inertia}" ixy="0.0" '
            f'ixz="0.0" iyy="{inertia}" iyz="0.0" izz="{inertia}"/></inertial>'
        )
        if geometry:
            center, half = _part_box(n, children[n])
            write_bytes_atomic(root / "meshes" / f"{n}.stl", _box_stl(center, half))
            for tag in ("visual", "collision"):
                lines.append(
                    f'    <{tag}><origin rpy="0 0 0" xyz="0 0 0"/><geometry>'
                    f'<mesh filename="meshes/{n}.stl"/></geometry></{tag}>'
                )
        lines.append("  </link>")
    for n in SYNTHETIC_LINKS[1:]:
        x, y, z = _offset(n)
        lines.append(
            f'  <joint name="{n}" type="spherical"><parent link="{_parent(n)}"/>'
            f'<child link="{n}"/><origin rpy="0 0 0" xyz="{x:.6f} {y:.6f} {z:.6f}"/></joint>'
        )
    lines.append("</robot>")
    write_text_atomic(root / f"{name}.urdf", "\n".join(lines) + "\n")
    shift = np.array([_offset(n) for n in SYNTHETIC_LINKS])
    shift[0] = (0.003, -0.35, 0.012)
    import io

    buffer = io.BytesIO()
    np.save(buffer, shift)
    write_bytes_atomic(root / "shift.npy", buffer.getvalue())
    merge = {
        f"{side}_wrist": [f"{side}_wrist", *(f for f in _FINGERS if f.startswith(side))]
        for side in ("left", "right")
    }
    meta = {"name": name, "joint_count": len(SYNTHETIC_LINKS), "hand_merge": merge}
    write_text_atomic(root / "metadata.json", json.dumps(meta, indent=2) + "\n")
    return root
