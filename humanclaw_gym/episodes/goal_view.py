"""The goal-view check: does an image-goal episode's goal image show the room?

A goal image is useful only if it shows something to navigate by: a view of the room, not
a blank wall or the side of a wardrobe a hand's breadth away. :func:`goal_view_stats`
measures an ego render (RGB, depth and, optionally, instance ids) and
:func:`goal_view_problems` names every statistic below its threshold:

==================  ===========================================================  =========
statistic           definition                                                   threshold
==================  ===========================================================  =========
luminance_std       standard deviation of the 8-bit luminance (0.299 R + 0.587   >= 20
                    G + 0.114 B): a plain wall is nearly uniform
edge_fraction       fraction of pixels whose Sobel gradient magnitude of the     >= 0.02
                    luminance is at least 60: outlines of furniture, doors,
                    floor edges
depth_median_m      median depth (metres along the viewing axis; nothing drawn   >= 1.3
                    counts as far)
depth_spread_m      10th to 90th percentile of the depth, depths clipped at 10   >= 1.5
                    m: near and far things in one view
near_fraction       fraction of pixels closer than 0.75 m                        <= 0.15
landmark_fraction   fraction of pixels showing furniture or objects (anything    >= 0.03
                    but walls, floors, rugs, stairs and platforms); only when
                    the instance image and the scene are given
==================  ===========================================================  =========

The thresholds were set by looking at renders of the val100 start views and of views
facing the nearest obstacle (a tiled wall at 0.3 m scores luminance_std 8, depth spread
0.2 m, near_fraction 1.0). The split generator accepts a goal view only when every
statistic clears its threshold by :data:`GENERATOR_MARGIN` (10 %) as each built-in
renderer draws it (moderngl and the TinyRenderer, whose shading and textures differ: on
the shipped views the luminance deviation of one view differs between them by up to 18 %
and the edge fraction by up to 75 %, the depth statistics by under 3 %); the tests check
the plain thresholds with the renderer the machine has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "GENERATOR_MARGIN",
    "GOAL_VIEW_THRESHOLDS",
    "STRUCTURE_CATEGORIES",
    "GoalViewStats",
    "goal_view_problems",
    "goal_view_stats",
]

#: ``name -> (kind, value)``: ``"min"`` thresholds must be reached, ``"max"`` not exceeded.
GOAL_VIEW_THRESHOLDS: Mapping[str, tuple[str, float]] = {
    "luminance_std": ("min", 20.0),
    "edge_fraction": ("min", 0.02),
    "depth_median_m": ("min", 1.3),
    "depth_spread_m": ("min", 1.5),
    "near_fraction": ("max", 0.15),
    "landmark_fraction": ("min", 0.03),
}
#: The split generator's safety margin on every threshold (a fraction of it).
GENERATOR_MARGIN = 0.10
#: Scene categories that are the room's structure, not landmarks.
STRUCTURE_CATEGORIES: frozenset[str] = frozenset({"wall", "floor", "rug", "stairs", "platform"})

_EDGE_LEVEL = 60.0
_DEPTH_CLIP_M = 10.0
_NEAR_M = 0.75
_LUMA = np.array([0.299, 0.587, 0.114])


@dataclass(frozen=True)
class GoalViewStats:
    """The statistics of one goal view (see the module docstring)."""

    luminance_std: float
    edge_fraction: float
    depth_median_m: float
    depth_spread_m: float
    near_fraction: float
    landmark_fraction: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def goal_view_stats(
    rgb: np.ndarray,
    depth: np.ndarray,
    instance: np.ndarray | None = None,
    scene: Any = None,
) -> GoalViewStats:
    """Measure one ego render.

    Args:
        rgb: ``uint8 (H, W, 3)``.
        depth: ``float (H, W)`` or ``(H, W, 1)`` metres along the viewing axis.
        instance: ``int (H, W)`` object ids (-1 where no object), optional.
        scene: the :class:`~humanclaw_gym.scenes.spec.SceneSpec` the ids belong to
            (needed with ``instance``).

    Raises:
        ValueError: arrays of the wrong type or shape, naming them.
    """
    from scipy import ndimage

    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"rgb must be uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}")
    depth = np.asarray(depth, dtype=np.float64)
    if depth.ndim == 3 and depth.shape[2] == 1:
        depth = depth[:, :, 0]
    if depth.shape != rgb.shape[:2] or not np.all(np.isfinite(depth)):
        raise ValueError(f"depth must be finite (H, W) like rgb {rgb.shape[:2]}, got {depth.shape}")
    luma = rgb.astype(np.float64) @ _LUMA
    gradient = np.hypot(ndimage.sobel(luma, 0), ndimage.sobel(luma, 1))
    clipped = np.minimum(depth, _DEPTH_CLIP_M)
    p10, p50, p90 = np.percentile(clipped, [10, 50, 90])
    landmark = None
    if instance is not None:
        if scene is None:
            raise ValueError("goal_view_stats: an instance image needs the scene its ids name")
        instance = np.asarray(instance)
        if instance.shape != rgb.shape[:2]:
            raise ValueError(f"instance must be (H, W) like rgb, got {instance.shape}")
        ids = [o.object_id for o in scene.objects if o.category not in STRUCTURE_CATEGORIES]
        landmark = float(np.isin(instance, ids).mean())
    return GoalViewStats(
        luminance_std=float(luma.std()),
        edge_fraction=float((gradient >= _EDGE_LEVEL).mean()),
        depth_median_m=float(p50),
        depth_spread_m=float(p90 - p10),
        near_fraction=float((depth < _NEAR_M).mean()),
        landmark_fraction=landmark,
    )


def goal_view_problems(stats: GoalViewStats, margin: float = 0.0) -> tuple[str, ...]:
    """The statistics of ``stats`` that miss their threshold, as readable lines (empty:
    the view shows the room). ``margin`` tightens every threshold by that fraction of it
    (the generator's :data:`GENERATOR_MARGIN`); ``landmark_fraction`` is checked only when
    measured."""
    problems = []
    for name, (kind, limit) in GOAL_VIEW_THRESHOLDS.items():
        value = getattr(stats, name)
        if value is None:
            continue
        if kind == "min" and value < limit * (1.0 + margin):
            problems.append(f"{name} {value:.3f} < {limit * (1.0 + margin):.3f}")
        elif kind == "max" and value > limit * (1.0 - margin):
            problems.append(f"{name} {value:.3f} > {limit * (1.0 - margin):.3f}")
    return tuple(problems)
