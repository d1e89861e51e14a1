"""Procedural homes: the SceneSpec format, the generator, navigation grid and maps.

``NavGrid`` (scipy) and ``render_map`` (PIL) are imported on first use.
"""

from __future__ import annotations

from typing import Any

from humanclaw_gym.scenes.generator import GENERATOR_VERSION, SceneGenerationError, generate_scene
from humanclaw_gym.scenes.spec import (
    INTERACT_CATEGORIES,
    SCENE_SCHEMA,
    STAIR_RISE_M,
    STAIR_RUN_M,
    TARGET_CATEGORIES,
    Part,
    Room,
    SceneObject,
    SceneSpec,
    SceneSpecError,
)

_LAZY = {
    "NavGrid": "humanclaw_gym.scenes.navgrid",
    "NavGridError": "humanclaw_gym.scenes.navgrid",
    "render_map": "humanclaw_gym.scenes.maps",
    "save_map": "humanclaw_gym.scenes.maps",
}

__all__ = [
    "GENERATOR_VERSION",
    "NavGrid",
    "NavGridError",
    "SceneGenerationError",
    "generate_scene",
    "render_map",
    "save_map",
    "INTERACT_CATEGORIES",
    "SCENE_SCHEMA",
    "STAIR_RISE_M",
    "STAIR_RUN_M",
    "TARGET_CATEGORIES",
    "Part",
    "Room",
    "SceneObject",
    "SceneSpec",
    "SceneSpecError",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'humanclaw_gym.scenes' has no attribute {name!r}")
