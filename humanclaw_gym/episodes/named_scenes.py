"""Named procedural homes: scene ids, their seeds, and generating a home from its id.

Seed namespaces never overlap: validation scene ``i`` (``hc_val_000`` ...) uses seed
``VAL_SCENE_SEED_BASE + i`` (``i < 1000``); training scene ``i`` (``hc_train_000`` ...) uses
``TRAIN_SCENE_SEED_BASE + i``. Validation homes have 3-6 rooms, training homes 2-6.
:func:`~humanclaw_gym.episodes.io.load_scene` generates a named home that is not shipped
with this module; the split builder (:mod:`humanclaw_gym.episodes.generate`) uses it too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.scenes.spec import SceneSpec

__all__ = [
    "TRAIN_SCENE_SEED_BASE",
    "VAL_SCENE_SEED_BASE",
    "generate_named_scene",
    "training_scene_id",
    "training_scene_seed",
    "val_scene_id",
    "val_scene_seed",
]

VAL_SCENE_SEED_BASE = 10_000
TRAIN_SCENE_SEED_BASE = 1_000_000
_VAL_ID = re.compile(r"hc_val_(\d{3,})")
_TRAIN_ID = re.compile(r"hc_train_(\d{3,})")


def val_scene_id(index: int) -> str:
    return f"hc_val_{int(index):03d}"


def val_scene_seed(index: int) -> int:
    """Seed of validation scene ``index`` (``0 <= index < 1000``)."""
    if not 0 <= int(index) < 1000:
        raise ValueError(f"validation scene index must be in [0, 1000), got {index!r}")
    return VAL_SCENE_SEED_BASE + int(index)


def training_scene_id(index: int) -> str:
    return f"hc_train_{int(index):03d}"


def training_scene_seed(index: int) -> int:
    """Seed of training scene ``index`` (``index >= 0``); disjoint from validation seeds."""
    if int(index) < 0:
        raise ValueError(f"training scene index must be >= 0, got {index!r}")
    return TRAIN_SCENE_SEED_BASE + int(index)


def generate_named_scene(scene_id: str) -> SceneSpec:
    """Generate ``hc_val_<i>`` (3-6 rooms) or ``hc_train_<i>`` (2-6 rooms) from its seed."""
    from humanclaw_gym.scenes.generator import generate_scene

    m = _VAL_ID.fullmatch(scene_id)
    if m:
        return generate_scene(scene_id, val_scene_seed(int(m.group(1))), min_rooms=3)
    m = _TRAIN_ID.fullmatch(scene_id)
    if m:
        return generate_scene(scene_id, training_scene_seed(int(m.group(1))))
    raise ValueError(f"scene id must look like hc_val_000 or hc_train_000, got {scene_id!r}")
