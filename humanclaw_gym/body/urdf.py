"""URDF of the humanoid, generated from a :class:`~humanclaw_gym.body.model.BodyModel` at
run time (default: :func:`~humanclaw_gym.body.model.skeleton_body`, which mirrors
:mod:`humanclaw_gym.body.skeleton` exactly).

The model:

* the base link is the body's root (``"pelvis"``); the other links follow in the body's
  order (parents before children; the skeleton's ``JOINT_NAMES[1:]``), each attached to its
  parent by a ``spherical`` joint of the same name;
* every link frame is the joint frame: origin at the rest joint centre, axes equal to the
  body frame at rest (the joint origin carries only the translation ``REST[j] - REST[parent]``,
  no rotation). A link's world orientation is therefore the joint's global rotation from
  :func:`~humanclaw_gym.body.skeleton.forward_kinematics`, and a spherical joint's
  position is the joint's local rotation of the 75-D frame;
* one collision primitive per link from the body's shapes (the skeleton's
  :func:`~humanclaw_gym.body.skeleton.link_shapes`)
  (capsule, box or sphere, placed by the shape's offset/rotation in the link frame), the
  same primitive as the visual, coloured ``HUMANOID_RGBA``;
* masses from the shapes; inertia of the solid primitive (uniform density) expressed in the
  link frame, diagonal only, with the inertial frame at the shape centre and *unrotated*
  (see :func:`link_frame_inertia_diagonal` for why).

Pure text generation: no simulator is imported here.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from humanclaw_gym.body.model import BodyModel, skeleton_body
from humanclaw_gym.body.skeleton import LinkShape
from humanclaw_gym.fileio import write_text_atomic

__all__ = [
    "HUMANOID_RGBA",
    "HUMANOID_ROBOT_NAME",
    "build_humanoid_urdf",
    "held_links_fixed_urdf_text",
    "humanoid_urdf_text",
    "link_frame_inertia_diagonal",
    "shape_principal_inertia",
]

#: Colour of every humanoid link (RGBA).
HUMANOID_RGBA: tuple[float, float, float, float] = (0.15, 0.35, 0.85, 1.0)
#: ``<robot name=...>`` of the generated URDF.
HUMANOID_ROBOT_NAME = "humanclaw_humanoid"


def shape_principal_inertia(shape: LinkShape) -> tuple[float, float, float]:
    """Principal moments of inertia (kg m^2) of a link primitive about its centre, in the
    shape frame (capsule axis = shape +Z), for a solid body of uniform density.

    Args:
        shape: the link primitive.

    Returns:
        ``(ixx, iyy, izz)`` in the shape frame.
    """
    m = float(shape.mass_kg)
    if m <= 0.0:
        raise ValueError(f"link shape of joint {shape.joint} has mass_kg {m}; expected > 0")
    if shape.kind == "sphere":
        i = 0.4 * m * shape.radius**2
        return (i, i, i)
    if shape.kind == "box":
        hx, hy, hz = (float(v) for v in shape.half_extents)
        return (
            m * (hy * hy + hz * hz) / 3.0,
            m * (hx * hx + hz * hz) / 3.0,
            m * (hx * hx + hy * hy) / 3.0,
        )
    if shape.kind == "capsule":
        r, h = float(shape.radius), float(shape.half_length)
        # Split the mass between the cylinder (length 2h) and the two hemispheres by volume.
        v_cyl = math.pi * r * r * 2.0 * h
        v_sph = 4.0 / 3.0 * math.pi * r**3
        m_cyl = m * v_cyl / (v_cyl + v_sph)
        m_sph = m - m_cyl
        i_axis = 0.5 * m_cyl * r * r + 0.4 * m_sph * r * r
        # Hemisphere centroid sits 3r/8 from the cap's flat face, which is at +-h.
        i_perp = m_cyl * (3.0 * r * r + 4.0 * h * h) / 12.0 + m_sph * (
            0.4 * r * r + h * h + 0.75 * h * r
        )
        return (i_perp, i_perp, i_axis)
    raise ValueError(f"link shape kind must be capsule, box or sphere, got {shape.kind!r}")


def _quat_to_rpy(quat_xyzw: tuple[float, float, float, float]) -> tuple[float, float, float]:
    """URDF roll/pitch/yaw (fixed axes X, then Y, then Z) of an xyzw quaternion."""
    x, y, z, w = (float(v) for v in quat_xyzw)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    roll = math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    sinp = max(-1.0, min(1.0, 2.0 * (w * y - z * x)))
    pitch = math.asin(sinp)
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return (roll, pitch, yaw)


def _fmt(values: tuple[float, ...] | np.ndarray) -> str:
    return " ".join(f"{float(v):.9g}" for v in values)


def _geometry_xml(shape: LinkShape) -> str:
    if shape.kind == "capsule":
        return f'<capsule radius="{shape.radius:.9g}" length="{2.0 * shape.half_length:.9g}"/>'
    if shape.kind == "box":
        size = tuple(2.0 * float(v) for v in shape.half_extents)
        return f'<box size="{_fmt(size)}"/>'
    if shape.kind == "sphere":
        return f'<sphere radius="{shape.radius:.9g}"/>'
    raise ValueError(f"link shape kind must be capsule, box or sphere, got {shape.kind!r}")


def _quat_to_matrix(quat_xyzw: tuple[float, float, float, float]) -> np.ndarray:
    x, y, z, w = (float(v) for v in quat_xyzw)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def link_frame_inertia_diagonal(shape: LinkShape) -> tuple[float, float, float]:
    """Diagonal of a link primitive's inertia tensor about its centre, expressed in the
    link frame (axes of the joint frame), kg m^2.

    The URDF gives only this diagonal with an unrotated inertial frame: pybullet expresses a
    spherical joint's position relative to the *inertial* frames of the two links, and it
    would re-orient an inertial frame to diagonalise a full tensor. Keeping the inertial axes
    parallel to the link axes makes the joint quaternion equal the link-frame rotation of the
    75-D frame. The dropped products of inertia are small (bones run close to a body axis).
    """
    principal = np.diag(shape_principal_inertia(shape))
    rot = _quat_to_matrix(shape.quat_xyzw)
    tensor = rot @ principal @ rot.T
    return (float(tensor[0, 0]), float(tensor[1, 1]), float(tensor[2, 2]))


def _link_xml(name: str, shape: LinkShape) -> str:
    origin = f'<origin xyz="{_fmt(shape.offset_m)}" rpy="{_fmt(_quat_to_rpy(shape.quat_xyzw))}"/>'
    inertial_origin = f'<origin xyz="{_fmt(shape.offset_m)}" rpy="0 0 0"/>'
    ixx, iyy, izz = link_frame_inertia_diagonal(shape)
    geometry = _geometry_xml(shape)
    return (
        f"  <link name={quoteattr(name)}>\n"
        f"    <inertial>\n"
        f"      {inertial_origin}\n"
        f'      <mass value="{shape.mass_kg:.9g}"/>\n'
        f'      <inertia ixx="{ixx:.9g}" ixy="0" ixz="0" iyy="{iyy:.9g}" iyz="0" izz="{izz:.9g}"/>\n'
        f"    </inertial>\n"
        f"    <visual>\n"
        f"      {origin}\n"
        f"      <geometry>{geometry}</geometry>\n"
        f'      <material name="humanoid_blue"/>\n'
        f"    </visual>\n"
        f"    <collision>\n"
        f"      {origin}\n"
        f"      <geometry>{geometry}</geometry>\n"
        f"    </collision>\n"
        f"  </link>\n"
    )


def humanoid_urdf_text(body: BodyModel | None = None) -> str:
    """The URDF of ``body`` (default :func:`~humanclaw_gym.body.model.skeleton_body`) as
    text: the root link, then every link in ``body.names`` order, each after its joint."""
    body = skeleton_body() if body is None else body
    parts = [
        '<?xml version="1.0"?>\n',
        f"<robot name={quoteattr(HUMANOID_ROBOT_NAME)}>\n",
        f'  <material name="humanoid_blue"><color rgba="{_fmt(HUMANOID_RGBA)}"/></material>\n',
    ]
    for j, name in enumerate(body.names):
        parts.append(_link_xml(name, body.shapes[j]))
        if j == 0:
            continue
        parts.append(
            f'  <joint name={quoteattr(name)} type="spherical">\n'
            f"    <parent link={quoteattr(body.names[body.parents[j]])}/>\n"
            f"    <child link={quoteattr(name)}/>\n"
            f'    <origin xyz="{_fmt(body.joint_offsets_m[j])}" rpy="0 0 0"/>\n'
            f'    <axis xyz="0 0 1"/>\n'
            f"  </joint>\n"
        )
    parts.append("</robot>\n")
    return "".join(parts)


def build_humanoid_urdf(
    path: str | os.PathLike[str] | None = None, body: BodyModel | None = None
) -> Path:
    """Write the humanoid URDF to ``path`` atomically and return the path.

    Args:
        path: target file. A directory is accepted (the file is then
            ``<dir>/humanclaw_humanoid.urdf``). None writes into a fresh temporary
            directory (the caller owns it and may delete it).
        body: the body to write (default :func:`~humanclaw_gym.body.model.skeleton_body`).

    Returns:
        Path of the written URDF file.
    """
    if path is None:
        target = Path(tempfile.mkdtemp(prefix="humanclaw_urdf_")) / f"{HUMANOID_ROBOT_NAME}.urdf"
    else:
        target = Path(path)
        if target.is_dir():
            target = target / f"{HUMANOID_ROBOT_NAME}.urdf"
    if not target.parent.is_dir():
        raise FileNotFoundError(f"URDF directory {str(target.parent)!r} does not exist")
    text = humanoid_urdf_text(body)
    return write_text_atomic(target, text)


def held_links_fixed_urdf_text(source_urdf: str | os.PathLike[str], held: set[str]) -> str:
    """A body asset's URDF as a physics engine loads it: the same text except that

    * the joint of every link in ``held`` (links the 75-D frame does not drive: jaw, eyes,
      fingers) is ``fixed``, so the link stays at rest relative to its parent (pybullet's
      joint-state and motor calls reach only 128 position coordinates of a body, fewer
      than the 54 ball joints of the release's bodies need);
    * every mesh ``filename`` is made absolute (the file is written elsewhere);
    * every ``spherical`` joint gets ``<axis xyz="0 0 1"/>`` (URDF readers warn without).

    Links, masses, inertias and geometry are untouched. The source was checked by
    :func:`~humanclaw_gym.body.asset.load_body_asset`; it is read again here and must still
    parse.
    """
    import xml.etree.ElementTree as ET

    source = Path(source_urdf)
    root = ET.fromstring(source.read_bytes())
    folder = source.parent
    for mesh in root.iter("mesh"):
        name = mesh.get("filename")
        if name:
            mesh.set("filename", str((folder / name).resolve()))
    for joint in root.findall("joint"):
        child = joint.find("child")
        if child is not None and child.get("link") in held:
            joint.set("type", "fixed")
        elif joint.get("type") == "spherical" and joint.find("axis") is None:
            ET.SubElement(joint, "axis", {"xyz": "0 0 1"})
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
