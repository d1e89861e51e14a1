"""Procedural homes: the SceneSpec format, the generator, navigation grid and maps."""

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

__all__ = [
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
