"""The learned motion generator: a flow-matching MotionDiT with one control branch per skill.

Importing this package is cheap (no torch): the public names below are loaded on first use.

* :class:`FlowMotionGenerator` (registry name ``"flow"``), :func:`generate_many`,
  :class:`BatchedMotionService`, :func:`load_model` (:mod:`.generator`);
* :func:`load_checkpoint`, :func:`save_checkpoint`, :class:`CheckpointError`,
  :func:`default_checkpoint_path` (:mod:`.checkpoint`);
* :class:`FlowModelConfig`, :class:`MotionDiT` (:mod:`.model`, torch);
* :class:`ChunkSet`, :func:`procedural_chunks`, :func:`mocap_chunks`, :data:`BRANCHES`
  (:mod:`.dataset`, numpy only);
* SMPL-X mocap conversion: :mod:`.smplx_io` (needs the licensed model files; the body
  model itself is :mod:`humanclaw_gym.body.smplx_model`).

See docs/motion_flow.md.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BRANCHES",
    "BatchedMotionService",
    "CheckpointError",
    "ChunkSet",
    "FlowModelConfig",
    "FlowMotionGenerator",
    "MotionDiT",
    "default_checkpoint_path",
    "generate_many",
    "load_checkpoint",
    "load_model",
    "mocap_chunks",
    "procedural_chunks",
    "save_checkpoint",
]

_HOME = {
    "BRANCHES": "dataset",
    "ChunkSet": "dataset",
    "mocap_chunks": "dataset",
    "procedural_chunks": "dataset",
    "CheckpointError": "checkpoint",
    "default_checkpoint_path": "checkpoint",
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "BatchedMotionService": "generator",
    "FlowMotionGenerator": "generator",
    "generate_many": "generator",
    "load_model": "generator",
    "FlowModelConfig": "model",
    "MotionDiT": "model",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
