"""Input checks shared by the metric modules (private)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID
from humanclaw_gym.skills import Skill


def as_contacts(contacts: np.ndarray, name: str = "contacts") -> np.ndarray:
    """Return ``contacts`` as a 1-D :data:`CONTACT_DTYPE` array or raise naming the field."""
    arr = np.asarray(contacts)
    if arr.dtype == CONTACT_DTYPE:
        return arr.reshape(-1)
    if arr.dtype.names is None or set(CONTACT_DTYPE.names or ()) - set(arr.dtype.names):
        raise ValueError(
            f"{name} must be a structured array with CONTACT_DTYPE fields "
            f"{CONTACT_DTYPE.names}, got dtype {arr.dtype}"
        )
    return arr.reshape(-1)


def as_int(value: object, name: str, minimum: int | None = None) -> int:
    """An exact integer (not bool), optionally ``>= minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def as_id_set(ids: Iterable[object], name: str) -> frozenset[int]:
    """Scene object ids (ints >= 1)."""
    if isinstance(ids, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of object ids, got {ids!r}")
    return frozenset(as_int(v, f"{name}[{i}]", 1) for i, v in enumerate(ids))


def as_skill(value: object, name: str = "skill") -> Skill:
    """A :class:`Skill` from a Skill or its int id (0..7)."""
    if type(value) is Skill:
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a Skill or an int 0..{len(Skill) - 1}, got {value!r}")
    try:
        return Skill(int(value))
    except ValueError:
        raise ValueError(f"{name} must be in 0..{len(Skill) - 1}, got {value!r}") from None


def as_finite_float(value: object, name: str) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number, got {value!r}") from None
    if not np.isfinite(out):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return out


def check_human_links(rows: np.ndarray, num_links: int) -> None:
    """Humanoid rows (``a == HUMAN_ID``) must name a humanoid link ``0..num_links-1``."""
    links = rows["link_a"]
    if not links.size or (links.min() >= 0 and links.max() < num_links):
        return  # every row's link is a humanoid link (object rows' part indices included)
    human_links = links[rows["a"] == HUMAN_ID]
    bad = human_links[(human_links < 0) | (human_links >= num_links)]
    if bad.size:
        raise ValueError(
            f"contacts.link_a must be a humanoid link 0..{num_links - 1} on humanoid rows, "
            f"got {int(bad[0])}"
        )


def check_object_positions(object_ids: Iterable[object], object_positions: np.ndarray) -> None:
    """``object_ids`` are ids >= 1 and ``object_positions`` is ``(len(ids), 3)``."""
    ids = [as_int(v, f"object_ids[{i}]", 1) for i, v in enumerate(object_ids)]
    pos = np.asarray(object_positions, dtype=np.float64)
    if pos.shape != (len(ids), 3):
        raise ValueError(
            f"object_positions must have shape ({len(ids)}, 3) to match object_ids, got {pos.shape}"
        )
