"""The view of a body standing at a pose of one's choosing (image-goal goal images).

:func:`render_standing_view` places the humanoid standing at a position and yaw through
the simulation (the motion generator's standing pose, placed by the physics backend like
an episode start) and renders a camera there, through the same path as every observation:
the same camera rules (the built-in body's head camera, a body asset's own), the same
renderer and body drawing. The image-goal task renders its goal image this way at reset,
before placing the body at the episode's start; the split generator checks the same image.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.envs.simulation import Simulation

__all__ = ["render_standing_view"]


def render_standing_view(
    sim: Simulation,
    position: Sequence[float],
    yaw_rad: float,
    size: int,
    modes: Iterable[str] = ("rgb",),
    *,
    seed: int = 0,
    view: str = "ego",
) -> dict[str, np.ndarray]:
    """Stand the body at ``position`` facing ``yaw_rad`` and render ``view``.

    The simulation's scene must be loaded; its body is left standing there (place it
    again with :meth:`~humanclaw_gym.envs.simulation.Simulation.reset` afterwards).

    Args:
        sim: the simulation.
        position: ``[x, y, z]``: pelvis x/z and the floor height, metres.
        yaw_rad: heading (0 faces +Z).
        size: image side in pixels.
        modes: render modes (``"rgb"`` always).
        seed: the motion generator's standing-pose seed.
        view: ``"ego"`` (default) or ``"exo"``.

    Returns:
        The images keyed by mode, copies the caller owns.
    """
    sim.reset(np.asarray(position, dtype=np.float64), float(yaw_rad), seed=int(seed))
    result = sim.render(view, int(size), frozenset(modes))
    return {mode: np.array(image, copy=True) for mode, image in result.items()}
