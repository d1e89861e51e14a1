"""Every fixed number of the paper metrics, in one place.

These are the benchmark's published thresholds; changing one changes what a metric means,
so they are constants, not options. Units are in the names.
"""

from __future__ import annotations

__all__ = [
    "COLLISION_MIN_HEIGHT_M",
    "FIND_PIXEL_THRESHOLD",
    "FLOOR_SELECT_EPSILON_M",
    "INITIAL_PENETRATION_FLAG_M",
    "INTERACT_CATEGORIES",
    "JERK_FPS",
    "JERK_STRIDE",
    "JERK_WINDOW",
    "MOTION_ANOMALY_BOUND_DEG",
    "NAV_DISTANCE_M",
    "NAV_RELAXED_DISTANCE_M",
]

#: GeoFindSR: union of target-instance pixels in the 448 x 448 semantic image (pixels, >=).
FIND_PIXEL_THRESHOLD: int = 100

#: NavSR@20cm / GeoNavSR@20cm: final body-to-target-AABB distance (m, <=).
NAV_DISTANCE_M: float = 0.2

#: NavSR@1m: final body-to-target-AABB distance (m, strictly <).
NAV_RELAXED_DISTANCE_M: float = 1.0

#: A fixed-geometry contact counts as a collision when its height above the floor is
#: strictly greater than this (m).
COLLISION_MIN_HEIGHT_M: float = 0.0205

#: Floor selection: the spawn ray hit must not be above the body's lowest point + this (m).
FLOOR_SELECT_EPSILON_M: float = 0.05

#: Initial penetration deeper than this is flagged in metrics.json (m, strictly >).
INITIAL_PENETRATION_FLAG_M: float = 0.01

#: Motion Jerk: frame rate of the generated motion (Hz), finite-difference stride (frames)
#: and width of the centred moving average (frames).
JERK_FPS: float = 30.0
JERK_STRIDE: int = 8
JERK_WINDOW: int = 3

#: motion_anomaly: a realized frame is an anomaly when some joint's local rotation differs
#: from the generated (commanded) one by more than this (degrees, strictly >). It equals the
#: half-physics drive cap of one frame: a joint further off cannot catch up within a frame.
MOTION_ANOMALY_BOUND_DEG: float = 30.0

#: Categories whose episodes carry the final "sit on it" goal and are scored by InteractSR.
INTERACT_CATEGORIES: tuple[str, ...] = ("bed", "couch", "toilet")
