"""The humanoid as data: its links, joint tree and link shapes (masses included).

A physics backend builds its humanoid from a :class:`BodyModel` (pybullet through the URDF
of :mod:`humanclaw_gym.body.urdf`, MuJoCo through its generated model), so another body is
another record, not other backend code. :func:`skeleton_body` is the default body: the 24
links of :mod:`humanclaw_gym.body.skeleton`, one per joint of the 75-D frame, shaped and
weighted by :func:`~humanclaw_gym.body.skeleton.link_shapes`.

Conventions: link 0 is the root (a free base); every other link hangs from its parent by a
ball joint placed at ``joint_offsets_m[i]`` in the parent's link frame at rest; a link frame
has the body frame's axes at rest (Y up, Z forward, X left), so a joint's rotation is the
link's rotation relative to its parent. Metres, kilograms.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from humanclaw_gym.body.skeleton import JOINT_NAMES, PARENTS, REST_JOINTS_M, LinkShape, link_shapes

__all__ = ["BodyModel", "skeleton_body"]


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
            visual primitive, placement in the link frame, ``mass_kg`` > 0).

    Raises:
        ValueError: lengths differ, names repeat, a parent is out of order, an offset is
            not finite, or a shape belongs to another link or has no mass.
    """

    names: tuple[str, ...]
    parents: tuple[int, ...]
    joint_offsets_m: np.ndarray
    shapes: tuple[LinkShape, ...]

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
