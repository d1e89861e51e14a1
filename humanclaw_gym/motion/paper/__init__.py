"""The paper's motion model (registry name ``"paper"``) from the weights its authors publish.

Importing this package is cheap (no torch): the public names below are loaded on first use.

* :class:`PaperMotion`, :class:`BatchedMotionService`, :func:`generate_many`,
  :class:`PaperMotionError` (:mod:`.generator`);
* :func:`read_manifest`, :func:`verify_files`, :func:`check_weights`,
  :func:`weights_record`, :class:`PaperWeightsError`, :data:`BRANCHES` (:mod:`.manifest`,
  no torch);
* :func:`release_condition` (:mod:`.conditioning`, no torch);
* :func:`clear_verified_cache` (:mod:`.verified`, no torch): what the files were found to
  be (manifest, SHA-256s, payload and seed checks), worked out once per process per file
  state;
* :func:`load_models`, :func:`clear_model_cache` (:mod:`.weights`, torch);
* :func:`write_synthetic_release` (:mod:`.synthetic`, torch): random weights in the
  release's layout, for tests and benchmarks.

See docs/motion.md, "The paper's motion model".
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BRANCHES",
    "BatchedMotionService",
    "PaperMotion",
    "PaperMotionError",
    "PaperWeightsError",
    "check_weights",
    "clear_model_cache",
    "clear_verified_cache",
    "generate_many",
    "load_models",
    "read_manifest",
    "release_condition",
    "verify_files",
    "weights_record",
    "write_synthetic_release",
]

_HOME = {
    "BatchedMotionService": "generator",
    "PaperMotion": "generator",
    "PaperMotionError": "generator",
    "generate_many": "generator",
    "BRANCHES": "manifest",
    "PaperWeightsError": "manifest",
    "check_weights": "manifest",
    "read_manifest": "manifest",
    "verify_files": "manifest",
    "weights_record": "manifest",
    "release_condition": "conditioning",
    "clear_verified_cache": "verified",
    "clear_model_cache": "weights",
    "load_models": "weights",
    "write_synthetic_release": "synthetic",
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
