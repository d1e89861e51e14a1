"""Episodes of the find-navigate-interact task: records, shards, splits and loaders.

Quick use::

    from humanclaw_gym.episodes import load_split, load_scene, get_episode

    episodes = load_split("val100")          # 100 Episode records
    scene = load_scene(episodes[0].scene_id)  # SceneSpec, hash-verified

Split generation (:mod:`humanclaw_gym.episodes.generate`, which needs scipy) and the named
homes (:mod:`humanclaw_gym.episodes.named_scenes`) are imported only when one of their names
is used.
"""

from __future__ import annotations

from typing import Any

from humanclaw_gym.episodes.io import (
    SCENE_DIR_ENV,
    SceneNotInstalledError,
    available_splits,
    check_scenes_installed,
    episodes_from_habitat,
    get_episode,
    habitat_quat_to_yaw,
    load_scene,
    load_split,
    read_shard,
    scene_installed,
    scene_not_installed,
    write_shard,
)
from humanclaw_gym.episodes.schema import (
    DEFAULT_MAX_STEPS,
    DIFFICULTY_LABELS,
    EPISODE_SCHEMA,
    INSTRUCTION_TEMPLATES,
    Episode,
    EpisodeFormatError,
    EpisodeInfo,
    Goal,
    InstructionTemplate,
    ReferenceRecord,
    instruction_for,
    reference_yaw_to_ours,
    yaw_to_quat_xyzw,
)

_LAZY = {
    "generate_named_scene": "named_scenes",
    "generate_scene_episodes": "generate",
    "training_scene_id": "named_scenes",
    "training_scene_seed": "named_scenes",
    "val_scene_id": "named_scenes",
    "val_scene_seed": "named_scenes",
}

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DIFFICULTY_LABELS",
    "EPISODE_SCHEMA",
    "INSTRUCTION_TEMPLATES",
    "SCENE_DIR_ENV",
    "Episode",
    "EpisodeFormatError",
    "EpisodeInfo",
    "Goal",
    "InstructionTemplate",
    "ReferenceRecord",
    "SceneNotInstalledError",
    "available_splits",
    "check_scenes_installed",
    "episodes_from_habitat",
    "get_episode",
    "habitat_quat_to_yaw",
    "instruction_for",
    "load_scene",
    "load_split",
    "read_shard",
    "reference_yaw_to_ours",
    "scene_installed",
    "scene_not_installed",
    "write_shard",
    "yaw_to_quat_xyzw",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"humanclaw_gym.episodes.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'humanclaw_gym.episodes' has no attribute {name!r}")
