"""The benchmark's two camera views and their image sides (the one home of these numbers).

The paper's ego camera (on the head) is 448 x 448 and its third-person (exo) camera
512 x 512. The ego size is the default observation (:class:`~humanclaw_gym.sensors.EgoRGBSensor`),
the Find metric's semantic image and the ego video; the exo size is ``env.render()`` and the
exo video. An observation of another size is a sensor of another size
(:mod:`humanclaw_gym.sensors`); every other module takes its image side from a sensor, a
camera or these constants.
"""

from __future__ import annotations

__all__ = ["EGO_SIZE_PX", "EXO_SIZE_PX", "VIEWS", "VIEW_SIZE_PX"]

EGO_SIZE_PX = 448
"""Side of the paper's ego camera image, pixels."""

EXO_SIZE_PX = 512
"""Side of the paper's third-person (exo) camera image, pixels."""

VIEWS: tuple[str, ...] = ("ego", "exo")
"""The camera views: ``"ego"`` (head) and ``"exo"`` (third person)."""

VIEW_SIZE_PX: dict[str, int] = {"ego": EGO_SIZE_PX, "exo": EXO_SIZE_PX}
"""The paper's image side of each view, pixels."""
