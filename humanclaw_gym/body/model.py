"""The humanoid as data: its links, joint tree and link shapes (masses included).

A physics backend builds its humanoid from a :class:`BodyModel` (pybullet through the URDF
of :mod:`humanclaw_gym.body.urdf` or the body's own URDF, MuJoCo through its generated
model), so another body is another record, not other backend code. :func:`skeleton_body` is
the default body: the 24 links of :mod:`humanclaw_gym.body.skeleton`, one per joint of the
75-D frame, shaped and weighted by :func:`~humanclaw_gym.body.skeleton.link_shapes`. A body
read from a folder in the reference release's format
(:func:`humanclaw_gym.body.asset.load_body_asset`) has other links (55 for the release's
SMPL-X bodies) with triangle-mesh geometry (:class:`LinkMesh`).

Conventions: link 0 is the root (a free base); every other link hangs from its parent by a
ball joint placed at ``joint_offsets_m[i]`` in the parent's link frame at rest; a link frame
has the body frame's axes at rest (Y up, Z forward, X left), so a joint's rotation is the
link's rotation relative to its parent. The 75-D frame drives the links of
``frame_joints`` (link -> frame joint); any other link is held at its rest rotation.
Metres, kilograms.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from humanclaw_gym.body.skeleton import JOINT_NAMES, PARENTS, REST_JOINTS_M, LinkShape, link_shapes

__all__ = ["BodyModel", "LinkMesh", "skeleton_body"]


@dataclass(frozen=True, eq=False)
class LinkMesh:
    """Collision geometry and mass of one link given as triangle meshes (each collided as
    its convex hull), with the mass properties as written in the body's file.

    Attributes:
        joint: the link's index.
        parts: ``(vertices float64 (V, 3), faces int32 (F, 3))`` per mesh, link frame;
            empty for a link without collision geometry.
        mass_kg: > 0.
        com_m: the centre of mass (the inertial origin), link frame.
        inertia: ``(ixx, iyy, izz, ixy, ixz, iyz)`` kg m^2 about ``com_m``, link axes.
    """

    joint: int
    parts: tuple[tuple[np.ndarray, np.ndarray], ...]
    mass_kg: float
    com_m: tuple[float, float, float]
    inertia: tuple[float, float, float, float, float, float]
    kind: str = "mesh"


@dataclass(frozen=True, eq=False)
class BodyModel:
    """An articulated humanoid: links, joint tree, joint placement and link shapes.

    Attributes:
        names: link names, ``(L,)``; link 0 is the root. A link's joint has its name.
        parents: parent link of each link, ``-1`` for the root; parents come before their
            children (``0 <= parents[i] < i`` for ``i >= 1``).
        joint_offsets_m: ``float64 (L, 3)``, each link's joint centre in its parent's link
            frame at rest (row 0, the root, is zero).
        shapes: one :class:`~humanclaw_gym.body.skeleton.LinkShape` per link (collision and
            visual primitive, placement in the link frame, ``mass_kg`` > 0), or one
            :class:`LinkMesh` per link (every link the same kind).
        frame_joints: per link, the index of the 75-D frame joint (``JOINT_NAMES``) whose
            rotation drives it, ``-1`` for a link held at its rest rotation. None: the
            links are the frame's joints in order (the skeleton's body). Link 0 must be
            driven by joint 0 (the root), a joint drives at most one link, and a driven
            link's parent must be driven by its frame joint's parent.
        source_urdf: a URDF file holding exactly this body (links in this order), which a
            physics engine may load instead of a generated one; None for generated bodies.

    Raises:
        ValueError: lengths differ, names repeat, a parent is out of order, an offset is
            not finite, a shape belongs to another link or has no mass, or the frame map
            breaks a rule above.
    """

    names: tuple[str, ...]
    parents: tuple[int, ...]
    joint_offsets_m: np.ndarray
    shapes: tuple[LinkShape | LinkMesh, ...]
    frame_joints: tuple[int, ...] | None = None
    source_urdf: str | None = None

    def __post_init__(self) -> None:
        n = len(self.names)
        if n < 1 or len(self.parents) != n or len(self.shapes) != n:
            raise ValueError(
                f"BodyModel: names, parents and shapes must have one entry per link, got "
                f"{n}, {len(self.parents)} and {len(self.shapes)}"
            )
        if len(set(self.names)) != n:
            raise ValueError(f"BodyModel: link names must be unique, got {self.names}")
        if self.parents[0] != -1:
            raise ValueError(
                f"BodyModel: link 0 is the root, its parent must be -1, got {self.parents[0]}"
            )
        for i in range(1, n):
            if not 0 <= self.parents[i] < i:
                raise ValueError(
                    f"BodyModel: parents[{i}] ({self.names[i]!r}) is {self.parents[i]}; "
                    f"allowed: a link before it, 0..{i - 1}"
                )
        offsets = np.array(self.joint_offsets_m, dtype=np.float64)
        if offsets.shape != (n, 3) or not np.all(np.isfinite(offsets)):
            raise ValueError(
                f"BodyModel: joint_offsets_m must be finite ({n}, 3), got {offsets.shape}"
            )
        offsets.setflags(write=False)
        object.__setattr__(self, "joint_offsets_m", offsets)
        for i, shape in enumerate(self.shapes):
            if shape.joint != i or not shape.mass_kg > 0.0:
                raise ValueError(
                    f"BodyModel: shapes[{i}] must be link {i}'s with mass_kg > 0, got joint "
                    f"{shape.joint} and mass_kg {shape.mass_kg}"
                )
        if len({type(shape) for shape in self.shapes}) != 1:
            raise ValueError("BodyModel: shapes must all be LinkShape or all LinkMesh")
        self._check_frame_joints()

    def _check_frame_joints(self) -> None:
        n = len(self.names)
        if self.frame_joints is None:
            if n != len(JOINT_NAMES) or self.parents != PARENTS:
                raise ValueError(
                    "BodyModel: without frame_joints the links must be the 75-D frame's "
                    f"{len(JOINT_NAMES)} joints with parents {PARENTS}"
                )
            return
        fj = tuple(int(v) for v in self.frame_joints)
        object.__setattr__(self, "frame_joints", fj)
        if len(fj) != n or fj[0] != 0:
            raise ValueError(
                f"BodyModel: frame_joints must have one entry per link ({n}) and start with 0 "
                f"(the root is driven by the frame's root), got {fj[:3]}..."
            )
        driven = [v for v in fj if v >= 0]
        if any(not -1 <= v < len(JOINT_NAMES) for v in fj) or len(set(driven)) != len(driven):
            raise ValueError(
                f"BodyModel: frame_joints entries must be -1 or distinct frame joints "
                f"0..{len(JOINT_NAMES) - 1}, got {fj}"
            )
        for i in range(1, n):
            if fj[i] >= 0 and fj[self.parents[i]] != PARENTS[fj[i]]:
                raise ValueError(
                    f"BodyModel: link {self.names[i]!r} is driven by frame joint "
                    f"{JOINT_NAMES[fj[i]]!r} but its parent {self.names[self.parents[i]]!r} "
                    f"is not driven by {JOINT_NAMES[PARENTS[fj[i]]]!r}"
                )

    @property
    def drive_map(self) -> np.ndarray:
        """``int64 (L,)``: per link, the frame joint driving it or -1 (the identity map for
        a body without ``frame_joints``)."""
        if self.frame_joints is None:
            return np.arange(self.num_links, dtype=np.int64)
        return np.asarray(self.frame_joints, dtype=np.int64)

    @property
    def num_links(self) -> int:
        """Number of links ``L`` (the root included)."""
        return len(self.names)

    @property
    def total_mass_kg(self) -> float:
        """Sum of the link masses, kg."""
        return float(sum(shape.mass_kg for shape in self.shapes))

    def children(self) -> tuple[tuple[int, ...], ...]:
        """The child links of every link, in link order, ``(L,)`` tuples."""
        out: list[list[int]] = [[] for _ in self.names]
        for i in range(1, self.num_links):
            out[self.parents[i]].append(i)
        return tuple(tuple(c) for c in out)


@lru_cache(maxsize=1)
def skeleton_body() -> BodyModel:
    """The default body: the skeleton's 24 links in ``JOINT_NAMES`` order, joints at the
    rest joint centres, :func:`~humanclaw_gym.body.skeleton.link_shapes` (72.5 kg)."""
    offsets = np.zeros((len(JOINT_NAMES), 3))
    for j in range(1, len(JOINT_NAMES)):
        offsets[j] = REST_JOINTS_M[j] - REST_JOINTS_M[PARENTS[j]]
    return BodyModel(
        names=JOINT_NAMES, parents=PARENTS, joint_offsets_m=offsets, shapes=link_shapes()
    )
