"""Exceptions of the render package (importable without any GL or pybullet library)."""

from __future__ import annotations

__all__ = ["RenderBackendUnavailable"]


class RenderBackendUnavailable(RuntimeError):
    """A render backend cannot run in this process (missing package, no EGL/GL driver).

    The message names the missing piece and how to install it; ``create_renderer("auto")``
    catches exactly this exception to fall back to the next backend. Other exceptions
    (bugs, bad arguments) are never swallowed.
    """
