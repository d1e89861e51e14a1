"""Procedural, tileable material pattern textures (numpy only, deterministic).

Each pattern is a ``uint8 (S, S)`` brightness multiplier image (stored value ``v`` means a
factor ``2 v / 255`` on the part's colour, mean about 1) that tiles seamlessly. The moderngl
renderer uploads them once as a mipmapped texture array and samples them in the fragment
shader with face coordinates in metres divided by the layer's tile size, which costs one
texture fetch per pixel and, thanks to the mipmaps, stays free of moire at a distance
(evaluating the same patterns analytically per pixel cost about 6 ms per 448 x 448 frame
on llvmpipe).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from humanclaw_gym.render.materials import normalize_material

__all__ = ["PATTERN_SIZE", "MATERIAL_LAYERS", "PatternLayers", "pattern_layers"]

PATTERN_SIZE = 256
_SEED = 20260817


def _noise(size: int, cells: int, rng: np.random.Generator) -> np.ndarray:
    """Tileable smooth value noise in [0, 1], ``(size, size)``, ``cells`` lattice cells."""
    grid = rng.random((cells, cells))
    coord = np.arange(size) * (cells / size)
    i0 = np.floor(coord).astype(np.int64) % cells
    i1 = (i0 + 1) % cells
    f = coord - np.floor(coord)
    s = f * f * (3.0 - 2.0 * f)
    top = grid[i0][:, i0] * (1 - s)[None, :] + grid[i0][:, i1] * s[None, :]
    bottom = grid[i1][:, i0] * (1 - s)[None, :] + grid[i1][:, i1] * s[None, :]
    return top * (1 - s)[:, None] + bottom * s[:, None]


def _fbm(size: int, base_cells: int, octaves: int, rng: np.random.Generator) -> np.ndarray:
    """Sum of noise octaves normalised to [-1, 1] (roughly zero mean)."""
    total = np.zeros((size, size))
    amp, norm = 1.0, 0.0
    cells = base_cells
    for _ in range(octaves):
        total += amp * (_noise(size, min(cells, size), rng) - 0.5)
        norm += 0.5 * amp
        amp *= 0.5
        cells *= 2
    return total / norm


def _wood_planks(size: int, rng: np.random.Generator) -> np.ndarray:
    """Eight 0.15 m planks per 1.2 m tile (rows along v), one staggered end seam per row."""
    rows = 8
    row_px = size // rows
    v = np.arange(size)
    u = np.arange(size)
    out = np.empty((size, size))
    warp = _noise(size, 8, rng)
    for r in range(rows):
        seam = int(rng.integers(0, size))
        tint_a, tint_b = 0.86 + 0.26 * rng.random(2)
        sl = slice(r * row_px, (r + 1) * row_px)
        vv = v[sl][:, None]
        grain = 0.045 * np.sin(vv * (2 * np.pi * 3.0 / row_px) * 2.0 + 6.0 * warp[sl, :])
        tint = np.where(u[None, :] >= seam, tint_a, tint_b)
        out[sl, :] = tint + grain
        out[r * row_px, :] *= 0.55  # seam between rows
        out[r * row_px + 1, :] *= 0.8
        out[sl, seam] *= 0.6  # end seam
    return out


def _wood_grain(size: int, rng: np.random.Generator) -> np.ndarray:
    warp = _noise(size, 6, rng)
    u = np.arange(size)[None, :]
    return 1.0 + 0.06 * np.sin(u * (2 * np.pi * 14.0 / size) + 7.0 * warp)


def _tile(size: int, rng: np.random.Generator) -> np.ndarray:
    """2 x 2 tiles per texture (0.3 m tiles at a 0.6 m tile size), dark grout lines."""
    half = size // 2
    out = np.ones((size, size))
    for i in range(2):
        for j in range(2):
            out[i * half : (i + 1) * half, j * half : (j + 1) * half] = 0.96 + 0.08 * rng.random()
    out += 0.015 * _fbm(size, 16, 3, rng)
    grout = 0.72
    for k in (0, half):
        out[k : k + 2, :] = grout
        out[:, k : k + 2] = grout
    return out


def _scaled(pattern: np.ndarray, amount: float) -> np.ndarray:
    return 1.0 + amount * pattern


def _build_layers() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(_SEED)
    s = PATTERN_SIZE
    brushed = np.repeat(rng.random((s, 1)), s, axis=1)  # streaks along u
    brushed = 0.6 * (brushed - 0.5) + 0.4 * (_noise(s, 32, rng) - 0.5)
    plant = 0.7 * _fbm(s, 6, 3, rng) + 0.3 * _fbm(s, 24, 2, rng)
    return {
        "wood_planks": _wood_planks(s, rng),
        "wood_grain": _wood_grain(s, rng),
        "tile": _tile(s, rng),
        "carpet": _scaled(0.7 * _fbm(s, 64, 3, rng) + 0.5 * _fbm(s, 4, 2, rng), 0.12),
        "fabric": _scaled(0.6 * _fbm(s, 128, 2, rng) + 0.6 * _fbm(s, 8, 2, rng), 0.08),
        "plaster": _scaled(_fbm(s, 4, 4, rng), 0.035),
        "metal": _scaled(brushed, 0.1),
        "leather": _scaled(_fbm(s, 24, 3, rng), 0.12),
        "plant": _scaled(plant, 0.45),
        "stone": _scaled(_fbm(s, 6, 5, rng), 0.18),
    }


#: Tile size in metres of each texture layer (how much surface one texture copy covers).
_LAYER_TILE_M: dict[str, float] = {
    "wood_planks": 1.2,
    "wood_grain": 0.8,
    "tile": 0.6,
    "carpet": 0.5,
    "fabric": 0.3,
    "plaster": 3.0,
    "metal": 0.6,
    "leather": 0.4,
    "plant": 0.35,
    "stone": 1.2,
}

#: Material name -> (layer on up/down-facing faces, layer on other faces); None = untextured.
#: Keys are exactly :data:`humanclaw_gym.render.materials.MATERIAL_NAMES`.
MATERIAL_LAYERS: dict[str, tuple[str | None, str | None]] = {
    "plain": (None, None),
    "wood": ("wood_planks", "wood_grain"),
    "tile": ("tile", "tile"),
    "carpet": ("carpet", "carpet"),
    "fabric": ("fabric", "fabric"),
    "plaster": ("plaster", "plaster"),
    "metal": ("metal", "metal"),
    "ceramic": (None, None),
    "leather": ("leather", "leather"),
    "plant": ("plant", "plant"),
    "foliage": ("plant", "plant"),
    "screen": (None, None),
    "stone": ("stone", "stone"),
    "soil": ("carpet", "carpet"),
    "plastic": (None, None),
    "rubber": (None, None),
    "glass": (None, None),
    "paper": (None, None),
}


class PatternLayers:
    """The texture array contents: ``images uint8 (L, S, S)``, ``names`` (L,) and
    ``tile_m float32 (L,)``; :meth:`layers_of` maps a material name to layer indices."""

    def __init__(self, images: np.ndarray, names: tuple[str, ...], tile_m: np.ndarray) -> None:
        self.images = images
        self.names = names
        self.tile_m = tile_m
        self._index = {name: i for i, name in enumerate(names)}

    def layers_of(self, material: str) -> tuple[int, int]:
        """``(up-facing, other faces)`` layer indices of a material, -1 when untextured
        (unknown materials are untextured)."""
        pair = MATERIAL_LAYERS[normalize_material(material)]
        return tuple(-1 if n is None else self._index[n] for n in pair)  # type: ignore[return-value]


@lru_cache(maxsize=1)
def pattern_layers() -> PatternLayers:
    """Build (once per process) every pattern layer."""
    layers = _build_layers()
    names = tuple(layers)
    images = np.stack(
        [np.clip(np.round(layers[n] * 127.5), 0, 255).astype(np.uint8) for n in names]
    )
    images.setflags(write=False)
    tile_m = np.array([_LAYER_TILE_M[n] for n in names], dtype=np.float32)
    tile_m.setflags(write=False)
    return PatternLayers(images, names, tile_m)
