"""Rendering: two interchangeable :class:`~humanclaw_gym.backends.protocols.RenderBackend`
implementations and the env's cameras.

* :class:`ModernglRenderer` (``"moderngl"``, the default): instanced OpenGL on a headless
  EGL context, procedural materials, RGB + instance ids in one pass; a few ms per frame
  on Mesa llvmpipe.
* :class:`TinyRenderer` (``"tiny"``, the fallback): pybullet's software TinyRenderer in a
  private DIRECT client; plain colours, same camera maths, several times slower.

:func:`create_renderer` picks one; ``"auto"`` falls back from moderngl to tiny only when
moderngl raises :class:`RenderBackendUnavailable` (no moderngl package or no EGL context)
and says why. Importing this package loads neither moderngl nor pybullet.
"""

from __future__ import annotations

from humanclaw_gym.backends.protocols import RenderBackendUnavailable
from humanclaw_gym.image_sizes import EGO_SIZE_PX
from humanclaw_gym.render.cameras import CutawayCamera, ego_camera, exo_camera, top_down_camera
from humanclaw_gym.render.materials import DEFAULT_BODY_COLOR, MATERIAL_NAMES, SKY_COLOR
from humanclaw_gym.render.moderngl_backend import ModernglRenderer
from humanclaw_gym.render.tiny_backend import TinyRenderer
from humanclaw_gym.render.transforms import project_points, projection_matrix, view_matrix

__all__ = [
    "DEFAULT_BODY_COLOR",
    "MATERIAL_NAMES",
    "RENDERER_NAMES",
    "SKY_COLOR",
    "CutawayCamera",
    "ModernglRenderer",
    "RenderBackendUnavailable",
    "TinyRenderer",
    "create_renderer",
    "ego_camera",
    "exo_camera",
    "project_points",
    "projection_matrix",
    "top_down_camera",
    "view_matrix",
]

#: Accepted values of ``create_renderer(name)``.
RENDERER_NAMES: tuple[str, ...] = ("auto", "moderngl", "tiny")


def create_renderer(
    name: str = "auto",
    width_hint: int = EGO_SIZE_PX,
    body_color: tuple[float, float, float] = DEFAULT_BODY_COLOR,
) -> tuple[ModernglRenderer | TinyRenderer, str]:
    """Create a render backend.

    Args:
        name: ``"auto"`` (moderngl, else tiny), ``"moderngl"`` or ``"tiny"``.
        width_hint: framebuffer side the moderngl renderer allocates up front.
        body_color: RGB colour of the humanoid.

    Returns:
        ``(renderer, reason)``: the renderer and one line saying which backend runs on what
        and why (for ``humanclaw doctor`` and ``env.unwrapped.backend_info``).

    Raises:
        ValueError: unknown ``name``.
        RenderBackendUnavailable: the explicitly requested backend cannot run (``"auto"``
            raises it only when neither backend can).
    """
    if name not in RENDERER_NAMES:
        raise ValueError(f"renderer name must be one of {RENDERER_NAMES}, got {name!r}")
    if name == "tiny":
        renderer = TinyRenderer(body_color=body_color)
        return renderer, f"tiny: requested; {renderer.device}"
    try:
        mgl = ModernglRenderer(width_hint=width_hint, body_color=body_color)
    except RenderBackendUnavailable as exc:
        if name == "moderngl":
            raise
        try:
            renderer = TinyRenderer(body_color=body_color)
        except RenderBackendUnavailable as tiny_exc:
            raise RenderBackendUnavailable(
                f"no render backend can run: moderngl: {exc}; tiny: {tiny_exc}"
            ) from tiny_exc
        return renderer, f"tiny: fallback because moderngl is unavailable ({exc})"
    how = "requested" if name == "moderngl" else "auto, EGL context available"
    return mgl, f"moderngl: {how}; OpenGL renderer {mgl.device}"
