"""Top-down maps of a home (PIL): rooms, walls, furniture by category, an episode's
targets with their approach points, start pose and shortest path, and optionally the path
an agent actually walked.

Image axes: +x to the right, +z downwards (the view from above, looking down -Y), the same
orientation as :meth:`NavGrid.to_image`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.fileio import atomic_path
from humanclaw_gym.scenes.spec import SceneObject, SceneSpec

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image as PILImage

    from humanclaw_gym.scenes.navgrid import NavGrid

__all__ = [
    "CATEGORY_COLORS",
    "MAX_MAP_PX",
    "ROOM_COLORS",
    "legend_rows",
    "render_grid_image",
    "render_map",
    "save_map",
]

#: Map colour of each category (RGB 0-255); unknown categories are grey.
CATEGORY_COLORS: dict[str, tuple[int, int, int]] = {
    "wall": (55, 55, 60),
    "bed": (214, 96, 77),
    "couch": (146, 94, 200),
    "chair": (240, 160, 40),
    "toilet": (70, 170, 220),
    "tv": (30, 30, 35),
    "potted_plant": (60, 160, 70),
    "table": (170, 120, 80),
    "counter": (150, 140, 130),
    "cabinet": (190, 150, 110),
    "refrigerator": (200, 205, 215),
    "shelf": (140, 100, 70),
    "wardrobe": (120, 85, 60),
    "lamp": (245, 220, 120),
    "rug": (225, 205, 185),
    "sink": (175, 210, 225),
    "bathtub": (215, 230, 240),
    "coat_rack": (110, 80, 55),
    "platform": (200, 170, 130),
    "stairs": (160, 125, 90),
    "ottoman": (180, 130, 160),
    "cup": (230, 60, 60),
    "book": (60, 90, 200),
    "box": (190, 150, 90),
    "ball": (230, 90, 160),
    "vase": (90, 180, 180),
}
#: Floor tint of each room type.
ROOM_COLORS: dict[str, tuple[int, int, int]] = {
    "living_room": (250, 243, 228),
    "bedroom": (236, 240, 252),
    "bathroom": (228, 246, 248),
    "kitchen": (250, 246, 226),
    "hallway": (240, 240, 236),
}
_TARGET_OUTLINE = (220, 20, 60)
_APPROACH_POINT = (255, 140, 0)
_PATH_COLOR = (30, 110, 230)
_AGENT_PATH_COLOR = (200, 0, 200)
_START_COLOR = (20, 150, 60)
_MARGIN_PX = 24
#: Most pixels the map of a home may span along its longer side (the ``px_per_m`` bound).
MAX_MAP_PX = 8192
_LINTEL_BOTTOM_M = 1.9
_LEGEND_W_PX = 190
_TITLE_H_PX = 44
# what lies under a pixel, for placing the room labels (see _draw_room_labels)
_COST_RUG = 1
_COST_FURNITURE = 2  # and walls
_COST_OVERLAY = 3  # episode markers, paths and placed labels
_LABEL_PAD_PX = 3
_LABEL_STEP_PX = 3


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def _part_polygon(obj: SceneObject, part, to_px) -> tuple[str, Any]:
    center = obj.part_world_center(part)
    if part.shape == "box":
        c, s = math.cos(obj.yaw_rad), math.sin(obj.yaw_rad)
        hx, hz = part.size[0], part.size[2]
        corners = []
        for lx, lz in ((-hx, -hz), (hx, -hz), (hx, hz), (-hx, hz)):
            corners.append(to_px(center[0] + c * lx + s * lz, center[2] - s * lx + c * lz))
        return "polygon", corners
    radius = part.size[0]
    x0, y0 = to_px(center[0] - radius, center[2] - radius)
    x1, y1 = to_px(center[0] + radius, center[2] + radius)
    return "ellipse", (x0, y0, x1, y1)


def _shade(color: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    return tuple(int(max(0, min(255, c * factor))) for c in color)  # type: ignore[return-value]


def render_map(
    scene: SceneSpec,
    *,
    grid: NavGrid | None = None,
    episode: Any | None = None,
    path_xz: np.ndarray | None = None,
    shortest_path: bool = True,
    px_per_m: float = 60.0,
    show_clearance: bool = True,
    legend: bool = True,
    title: str | None = None,
    room_labels: bool = True,
) -> PILImage.Image:
    """Draw a labelled top-down map.

    Room labels are drawn last, on top of everything, each at the place of its room where
    it covers the least: episode markers and paths first, then furniture and walls, then
    rugs (nearest the room's centre among equals), and never another label.

    Args:
        scene: the home.
        grid: navigation grid (built on demand when an episode needs a path); with
            ``show_clearance`` its clearance margin is tinted.
        episode: optional :class:`~humanclaw_gym.episodes.Episode`: its target instances are
            outlined (seat approach poses as red arrows along their facing), the recorded
            approach points of every target drawn as small orange rings, its start pose
            drawn as a green arrow and,
            with ``shortest_path``, the simplified shortest path to the nearest target's
            approach points drawn (blue, "shortest path").
        path_xz: optional ``(K, 2)`` world x/z polyline of the path an agent walked, drawn in
            magenta ("agent path") with its end point circled.
        shortest_path: draw the episode's shortest path (needs ``episode``).
        px_per_m: scale.
        show_clearance: tint cells that are inside the body clearance of obstacles.
        legend: draw the category legend on the right.
        title: text on top (default: scene id and, with an episode, its id and instruction).
        room_labels: write each room's type on it.

    Returns:
        An RGB ``PIL.Image``.
    """
    from PIL import Image, ImageDraw

    if not px_per_m > 0:
        raise ValueError(f"px_per_m must be > 0, got {px_per_m!r}")
    lo = np.min([r.min_xz for r in scene.rooms], axis=0) - 0.1
    hi = np.max([r.max_xz for r in scene.rooms], axis=0) + 0.1
    extent = float(max(hi[0] - lo[0], hi[1] - lo[1]))
    if not extent * px_per_m <= MAX_MAP_PX:
        raise ValueError(
            f"px_per_m {px_per_m:g} would draw this {extent:.1f} m home over more than "
            f"{MAX_MAP_PX} pixels: allowed at most {MAX_MAP_PX / extent:.0f} px per metre here"
        )
    map_w = int(math.ceil((hi[0] - lo[0]) * px_per_m))
    map_h = int(math.ceil((hi[1] - lo[1]) * px_per_m))
    width = map_w + 2 * _MARGIN_PX + (_LEGEND_W_PX if legend else 0)
    height = max(map_h + 2 * _MARGIN_PX + _TITLE_H_PX, 420 if legend else 0)
    img = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(img)
    # what each pixel holds, for placing the room labels: 0 floor, then _COST_* (the last
    # drawn wins; drawn in order of increasing cost)
    cost = Image.new("L", (width, height), 0)
    cost_draw = ImageDraw.Draw(cost)
    ox, oy = _MARGIN_PX, _MARGIN_PX + _TITLE_H_PX

    def to_px(x: float, z: float) -> tuple[float, float]:
        return ox + (x - lo[0]) * px_per_m, oy + (z - lo[1]) * px_per_m

    for room in scene.rooms:
        x0, y0 = to_px(*room.min_xz)
        x1, y1 = to_px(*room.max_xz)
        draw.rectangle((x0, y0, x1, y1), fill=ROOM_COLORS.get(room.room_type, (240, 240, 240)))

    needs_grid = episode is not None and shortest_path
    if grid is None and (needs_grid or show_clearance):
        from humanclaw_gym.scenes.navgrid import NavGrid

        grid = NavGrid.from_scene(scene)
    if grid is not None and show_clearance:
        margin = (~grid.free) & (~grid.blocked)
        overlay = np.zeros(grid.shape + (4,), dtype=np.uint8)
        overlay[margin] = (120, 120, 120, 40)
        tile = Image.fromarray(overlay).resize(
            (
                int(round(grid.shape[1] * grid.cell_m * px_per_m)),
                int(round(grid.shape[0] * grid.cell_m * px_per_m)),
            ),
            Image.NEAREST,
        )
        gx, gy = to_px(grid.origin_xz[0], grid.origin_xz[1])
        img.paste(tile, (int(round(gx)), int(round(gy))), tile)

    def top_of(o: SceneObject) -> float:
        return float(o.aabb()[1][1])

    drawable = [o for o in scene.objects if o.category != "floor"]
    drawable.sort(key=lambda o: (o.category != "rug", o.category == "wall", top_of(o), o.object_id))
    present: list[str] = []
    for obj in drawable:
        color = CATEGORY_COLORS.get(obj.category, (150, 150, 150))
        if obj.category not in present:
            present.append(obj.category)
        outline = _shade(color, 0.6)
        parts = sorted(obj.parts, key=lambda p: p.offset[1] + p.local_half_extents()[1])
        for part in parts:
            if (
                obj.category == "wall"
                and part.offset[1] - part.local_half_extents()[1] > _LINTEL_BOTTOM_M
            ):
                continue  # door lintels would hide the doorways
            kind, geom = _part_polygon(obj, part, to_px)
            weight = _COST_RUG if obj.category == "rug" else _COST_FURNITURE
            if kind == "polygon":
                draw.polygon(geom, fill=color, outline=outline if obj.category != "wall" else None)
                cost_draw.polygon(geom, fill=weight, outline=weight)
            else:
                draw.ellipse(geom, fill=color, outline=outline)
                cost_draw.ellipse(geom, fill=weight, outline=weight)

    font_small = _font(12)
    font = _font(14)

    # episode overlays
    overlays: list[tuple[str, Any]] = []  # ("box", xyxy) or ("line", points): label keep-outs
    route_xz = None
    has_approach = has_points = False
    if episode is not None:
        for goal in episode.goals:
            if goal.object_id in {o.object_id for o in scene.objects}:
                lo3, hi3 = scene.object_by_id(int(goal.object_id)).aabb()
            elif goal.aabb_min is not None and goal.aabb_max is not None:
                lo3, hi3 = goal.aabb_min, goal.aabb_max
            else:
                continue
            x0, y0 = to_px(lo3[0], lo3[2])
            x1, y1 = to_px(hi3[0], hi3[2])
            draw.rectangle((x0 - 3, y0 - 3, x1 + 3, y1 + 3), outline=_TARGET_OUTLINE, width=3)
            overlays.append(("box", (x0 - 3, y0 - 3, x1 + 3, y1 + 3)))
            if goal.approach_pose is not None:
                ax, ay = to_px(goal.approach_pose[0], goal.approach_pose[1])
                _arrow(draw, ax, ay, float(goal.approach_pose[2]), 9.0, _TARGET_OUTLINE)
                overlays.append(("box", (ax - 10, ay - 10, ax + 10, ay + 10)))
                has_approach = True
            for px_, _py, pz_ in goal.approach_points or ():
                ax, ay = to_px(px_, pz_)
                _ring(draw, ax, ay, 3.0, _APPROACH_POINT)
                overlays.append(("box", (ax - 4, ay - 4, ax + 4, ay + 4)))
                has_points = True
        if shortest_path and grid is not None:
            ids = {int(g.object_id) for g in episode.goals if isinstance(g.object_id, int)}
            objs = [o for o in scene.objects if o.object_id in ids]
            if objs:
                start = (episode.start_position[0], episode.start_position[2])
                route_xz = grid.shortest_path(start, objs, simplify=True)
    if route_xz is not None and len(route_xz) >= 2:
        pts = [to_px(float(x), float(z)) for x, z in np.asarray(route_xz)]
        draw.line(pts, fill=_PATH_COLOR, width=3, joint="curve")
        overlays.append(("line", pts))
        for px, py in pts[1:-1]:
            draw.ellipse((px - 3, py - 3, px + 3, py + 3), fill=_PATH_COLOR)
    else:
        route_xz = None
    if path_xz is not None and len(path_xz) >= 2:
        pts = [to_px(float(x), float(z)) for x, z in np.asarray(path_xz)]
        draw.line(pts, fill=_AGENT_PATH_COLOR, width=2, joint="curve")
        overlays.append(("line", pts))
        ex, ey = pts[-1]
        draw.ellipse((ex - 5, ey - 5, ex + 5, ey + 5), outline=_AGENT_PATH_COLOR, width=2)
        overlays.append(("box", (ex - 6, ey - 6, ex + 6, ey + 6)))
    else:
        path_xz = None
    if episode is not None:
        sx, sy = to_px(episode.start_position[0], episode.start_position[2])
        size = max(10.0, 0.35 * px_per_m)
        _arrow(draw, sx, sy, float(episode.start_yaw_rad), size, _START_COLOR)
        overlays.append(("box", (sx - size - 1, sy - size - 1, sx + size + 1, sy + size + 1)))
    for kind, geom in overlays:
        if kind == "box":
            cost_draw.rectangle(geom, fill=_COST_OVERLAY)
        else:
            cost_draw.line(geom, fill=_COST_OVERLAY, width=9, joint="curve")
    if room_labels:
        _draw_room_labels(draw, scene, to_px, np.asarray(cost), font)

    # scale bar (1 m)
    bx, by = ox, height - 14
    draw.line((bx, by, bx + px_per_m, by), fill=(40, 40, 40), width=3)
    draw.text((bx + px_per_m + 6, by - 8), "1 m", fill=(40, 40, 40), font=font_small)

    if title is None:
        title = scene.scene_id
        if episode is not None:
            title = f"{scene.scene_id}  |  {episode.episode_id}  |  {episode.instruction}"
    draw.text((_MARGIN_PX, 12), title, fill=(20, 20, 20), font=_font(16))

    if legend:
        lx = ox + map_w + _MARGIN_PX
        ly = oy
        draw.text((lx, ly - 22), "legend", fill=(20, 20, 20), font=font)
        rows = legend_rows(
            present,
            episode=episode is not None,
            approach_pose=has_approach,
            approach_points=has_points,
            shortest_path=route_xz is not None,
            agent_path=path_xz is not None,
        )
        for label, color, style in rows:
            if ly > height - 20:
                break
            if style == "fill":
                draw.rectangle((lx, ly, lx + 14, ly + 12), fill=color, outline=_shade(color, 0.6))
            elif style == "outline":
                draw.rectangle((lx, ly, lx + 14, ly + 12), outline=color, width=3)
            elif style == "arrow":  # pointing right: the facing direction
                _arrow(draw, lx + 5, ly + 6, math.pi / 2, 9.0, color)
            elif style == "ring":
                _ring(draw, lx + 7, ly + 6, 3.0, color)
            else:
                draw.line((lx, ly + 6, lx + 14, ly + 6), fill=color, width=3)
            draw.text((lx + 22, ly - 1), label, fill=(40, 40, 40), font=font_small)
            ly += 18
    return img


def _draw_room_labels(draw: Any, scene: SceneSpec, to_px: Any, cost: np.ndarray, font: Any) -> None:
    """Write each room's type on a white box, on top of everything drawn, where the box
    covers the least: the fewest pixels of episode markers and paths, then of furniture and
    walls, then of rugs, then nearest the room's centre (``cost`` holds per pixel the class
    of what lies there). A placed label is a keep-out for the next ones."""
    cost = cost.copy()
    height, width = cost.shape
    for room in scene.rooms:
        label = room.room_type.replace("_", " ")
        box = draw.textbbox((0, 0), label, font=font)
        tw, th = box[2] - box[0], box[3] - box[1]
        bw, bh = tw + 2 * _LABEL_PAD_PX, th + 2 * _LABEL_PAD_PX + 1
        x0, y0 = to_px(*room.min_xz)
        x1, y1 = to_px(*room.max_xz)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        inset = 6  # keep the box off the walls
        xs = np.arange(int(x0) + inset, int(x1) - inset - bw + 1, _LABEL_STEP_PX)
        ys = np.arange(int(y0) + inset, int(y1) - inset - bh + 1, _LABEL_STEP_PX)
        xs = xs[(xs >= 0) & (xs + bw < width)]
        ys = ys[(ys >= 0) & (ys + bh < height)]
        if xs.size == 0 or ys.size == 0:  # a room smaller than its label: centre it
            left, top = int(round(cx - bw / 2)), int(round(cy - bh / 2))
        else:
            gx, gy = np.meshgrid(xs, ys)
            keys = [np.hypot(gx + bw / 2 - cx, gy + bh / 2 - cy).ravel()]
            for level in (_COST_RUG, _COST_FURNITURE, _COST_OVERLAY):  # least important first
                integral = np.zeros((height + 1, width + 1), dtype=np.int64)
                integral[1:, 1:] = (cost == level).cumsum(0).cumsum(1)
                covered = (
                    integral[gy + bh + 1, gx + bw + 1]
                    - integral[gy, gx + bw + 1]
                    - integral[gy + bh + 1, gx]
                    + integral[gy, gx]
                )
                keys.append(covered.ravel())
            best = np.lexsort(keys)[0]  # the last key sorts first
            left, top = int(gx.ravel()[best]), int(gy.ravel()[best])
        draw.rectangle((left, top, left + bw, top + bh), fill=(255, 255, 255))
        draw.text(
            (left + _LABEL_PAD_PX - box[0], top + _LABEL_PAD_PX - box[1]),
            label,
            fill=(60, 60, 60),
            font=font,
        )
        cost[max(top, 0) : top + bh + 1, max(left, 0) : left + bw + 1] = _COST_OVERLAY


def _arrow(draw: Any, x: float, y: float, yaw: float, size: float, color) -> None:
    """A filled arrowhead at image point ``(x, y)`` pointing along ``yaw`` (map view: +x
    right, +z down), outlined in a darker shade."""
    fx, fy = math.sin(yaw), math.cos(yaw)
    tip = (x + fx * size, y + fy * size)
    left = (x - fx * size * 0.5 + fy * size * 0.5, y - fy * size * 0.5 - fx * size * 0.5)
    right = (x - fx * size * 0.5 - fy * size * 0.5, y - fy * size * 0.5 + fx * size * 0.5)
    draw.polygon([tip, left, (x, y), right], fill=color, outline=_shade(color, 0.45))


def _ring(draw: Any, x: float, y: float, radius: float, color) -> None:
    """A hollow ring (white inside): a point marker no filled object disc looks like."""
    draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=(255, 255, 255),
                 outline=color, width=2)  # fmt: skip


def legend_rows(
    categories: list[str],
    *,
    episode: bool = False,
    approach_pose: bool = False,
    approach_points: bool = False,
    shortest_path: bool = False,
    agent_path: bool = False,
) -> list[tuple[str, tuple[int, int, int], str]]:
    """The legend of a map, ``(label, colour, style)`` per row: the episode's overlays first
    (they must not fall off the bottom of a long legend), then the drawn categories. Styles:
    ``"fill"`` (an object category: filled shapes), ``"outline"`` (target), ``"arrow"``
    (a pose with its facing: the seat approach pose, the start), ``"ring"`` (approach
    points), ``"line"`` (paths). No two rows share a style and colour, and no overlay is a
    filled shape, so a marker is never mistaken for a small object (a cup)."""
    rows: list[tuple[str, tuple[int, int, int], str]] = []
    if episode:
        rows.append(("target", _TARGET_OUTLINE, "outline"))
        if approach_pose:
            rows.append(("seat approach pose (facing)", _TARGET_OUTLINE, "arrow"))
        if approach_points:
            rows.append(("approach points", _APPROACH_POINT, "ring"))
        rows.append(("start (facing)", _START_COLOR, "arrow"))
        if shortest_path:
            rows.append(("shortest path", _PATH_COLOR, "line"))
    if agent_path:
        rows.append(("agent path (o = end)", _AGENT_PATH_COLOR, "line"))
    order = list(CATEGORY_COLORS)
    for cat in sorted(
        categories, key=lambda c: (c not in CATEGORY_COLORS, order.index(c) if c in order else 0, c)
    ):
        rows.append((cat.replace("_", " "), CATEGORY_COLORS.get(cat, (150, 150, 150)), "fill"))
    return rows


def save_map(image: PILImage.Image, path: str | os.PathLike[str]) -> Path:
    """Write a PNG atomically (temporary file in the same directory, then rename)."""
    out = Path(path)
    with atomic_path(out) as tmp:
        image.save(tmp, format="PNG")
    return out


def render_grid_image(grid: NavGrid, scale: int = 2) -> PILImage.Image:
    """The raw navigation grid picture (:meth:`NavGrid.to_image`), upscaled."""
    from PIL import Image

    arr = grid.to_image()
    return Image.fromarray(arr).resize((arr.shape[1] * scale, arr.shape[0] * scale), Image.NEAREST)
