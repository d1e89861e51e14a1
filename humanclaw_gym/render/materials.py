"""Material names the renderers understand (``Part.material`` in a SceneSpec).

The moderngl renderer multiplies a part's colour by a tileable procedural pattern chosen
by the material name (:mod:`humanclaw_gym.render.textures`), so that floors, walls and
furniture read as a home to a vision-language model; the TinyRenderer fallback draws every
material as its plain colour. Names are case-insensitive; unknown names render as
``"plain"``, so a scene stays renderable when a generator invents a new one.

========  ===============================================================================
name      look (moderngl)
========  ===============================================================================
plain     the flat colour
wood      0.15 m wide planks with staggered end seams on up-facing faces (floors, table
          tops), grain stripes on the other faces
tile      0.30 m square tiles with dark grout lines
carpet    fine fibre noise plus soft blotches (carpets, rugs)
fabric    fine woven noise (couches, beds, curtains)
plaster   very subtle large-scale unevenness (walls, ceilings)
metal     brushed streaks
ceramic   the flat colour (toilets, sinks, cups)
leather   medium grain
plant     strong leafy light/dark variation (use a green colour)
foliage   same as plant
screen    the flat colour (TV screens; use a dark colour)
stone     mottled noise (counter tops, stone floors)
soil      fine earthy noise (the top of a plant pot)
plastic   the flat colour
rubber    the flat colour
glass     the flat colour (no transparency)
paper     the flat colour
========  ===============================================================================
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BODY_COLOR",
    "MATERIAL_NAMES",
    "SKY_COLOR",
    "is_known_material",
    "normalize_material",
]

#: Colour of the humanoid in both renderers (RGB in [0, 1]).
DEFAULT_BODY_COLOR: tuple[float, float, float] = (0.15, 0.35, 0.85)
#: Background colour where no geometry is drawn: a light neutral grey-blue.
SKY_COLOR: tuple[float, float, float] = (0.86, 0.88, 0.9)

MATERIAL_NAMES: tuple[str, ...] = (
    "plain",
    "wood",
    "tile",
    "carpet",
    "fabric",
    "plaster",
    "metal",
    "ceramic",
    "leather",
    "plant",
    "foliage",
    "screen",
    "stone",
    "soil",
    "plastic",
    "rubber",
    "glass",
    "paper",
)


def normalize_material(name: str) -> str:
    """Lower-case, stripped material name; unknown names become ``"plain"``."""
    key = str(name).strip().lower()
    return key if key in MATERIAL_NAMES else "plain"


def is_known_material(name: str) -> bool:
    """True if the renderers have a look for ``name`` (case-insensitive)."""
    return str(name).strip().lower() in MATERIAL_NAMES
