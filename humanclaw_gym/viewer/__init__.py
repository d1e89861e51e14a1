"""Browser debug viewer for humanclaw-gym (optional extra: ``pip install 'humanclaw-gym[viewer]'``).

``humanclaw view`` serves one live episode on http://127.0.0.1:8080/: the 3-D scene, the
humanoid's realized pose, the dynamic objects, the ego image, the instruction, the last
skill and the step count, with pause / resume, single step, reset and choose-skill
controls. See ``docs/viewer.md``.

Importing this package is cheap: viser is imported only when a :class:`DebugViewer` is
built.
"""

from __future__ import annotations

from typing import Any

from humanclaw_gym.viewer.control import ControlRequest, ViewerClosedError, ViewerState

__all__ = [
    "ControlRequest",
    "DebugViewer",
    "ViewerClosedError",
    "ViewerState",
    "ViewerUnavailableError",
    "resolve_viewer_policy",
    "run_viewer",
]

_LAZY = {
    "DebugViewer": "humanclaw_gym.viewer.debug_viewer",
    "ViewerUnavailableError": "humanclaw_gym.viewer.debug_viewer",
    "run_viewer": "humanclaw_gym.viewer.loop",
    "resolve_viewer_policy": "humanclaw_gym.viewer.loop",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'humanclaw_gym.viewer' has no attribute {name!r}")
