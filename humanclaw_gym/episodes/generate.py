"""Building the fixed splits: episode sampling, ``val`` and ``val100``.

The homes are the named procedural scenes of :mod:`humanclaw_gym.episodes.named_scenes`
(validation scene ``i``, ``hc_val_000`` .. ``hc_val_040``, from seed
``VAL_SCENE_SEED_BASE + i``; its names are re-exported here).

``val`` holds 1,218 episodes in 41 scenes: per category, 199 each of bed, couch and toilet
(the 597 interact episodes) and 207 each of chair, tv and potted_plant, spread over the
scenes by :func:`val_category_plan`. In each scene, episodes are drawn per category with
``numpy.random.default_rng(VAL_EPISODE_SEED_BASE + i)``:

* the goals are the instances of the category that have approach points (free cells from
  which a standing body can touch and see them, never through a wall:
  :meth:`NavGrid.goal_region`) in the main connected free region; an instance without
  one is not a target. The route goes to the union of their approach points. Each goal
  records a sample of its approach points (at least ``APPROACH_POINT_SPACING_M`` apart,
  nearest to the object first);
* starts are centres of free cells in the main connected free region whose geodesic
  distance to the nearest target is at least ``MIN_START_GEODESIC_M``, that leave room
  for the whole standing body (:class:`~humanclaw_gym.episodes.spawns.SpawnChecker`) and
  are at least ``_MIN_START_SEPARATION_M`` from other starts of the same category; the
  yaw is uniform, drawn again while the start faces a wall closer than 0.5 m;
* to spread difficulty, each episode asks for a label (cycling easy, medium, hard from a
  random phase), draws up to ``_CANDIDATES`` starts and keeps the first with that label
  (else the closest label).

``val100`` takes 5 scenes of ``val`` and 20 episodes of each, drawn with
``numpy.random.default_rng(VAL100_SEED)``; it stores episode ids only.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from humanclaw_gym.episodes.difficulty import RouteStats, nearest_difficulty, route_stats
from humanclaw_gym.episodes.io import (
    SCENE_INDEX_SCHEMA,
    SPLIT_INDEX_SCHEMA,
    SUBSET_SCHEMA,
    gzip_bytes,
    sha256_hex,
    shard_bytes,
    write_bytes_atomic,
)
from humanclaw_gym.episodes.named_scenes import (
    TRAIN_SCENE_SEED_BASE,
    VAL_SCENE_SEED_BASE,
    generate_named_scene,
    training_scene_id,
    training_scene_seed,
    val_scene_id,
    val_scene_seed,
)
from humanclaw_gym.episodes.schema import (
    DEFAULT_MAX_STEPS,
    DIFFICULTY_LABELS,
    Episode,
    EpisodeInfo,
    Goal,
    instruction_for,
    yaw_to_quat_xyzw,
)
from humanclaw_gym.episodes.spawns import SpawnChecker
from humanclaw_gym.scenes.generator import GENERATOR_VERSION
from humanclaw_gym.scenes.navgrid import NavGrid
from humanclaw_gym.scenes.spec import INTERACT_CATEGORIES, TARGET_CATEGORIES, SceneObject, SceneSpec

__all__ = [
    "APPROACH_POINT_SPACING_M",
    "MIN_START_GEODESIC_M",
    "TRAIN_SCENE_SEED_BASE",
    "VAL100_SEED",
    "VAL_EPISODE_SEED_BASE",
    "VAL_NUM_EPISODES",
    "VAL_NUM_INTERACT",
    "VAL_NUM_SCENES",
    "VAL_SCENE_SEED_BASE",
    "SplitFiles",
    "build_val_files",
    "generate_named_scene",
    "generate_scene_episodes",
    "scene_files",
    "training_scene_id",
    "training_scene_seed",
    "val100_episode_ids",
    "val_category_plan",
    "val_scene_id",
    "val_scene_seed",
    "write_files",
]

VAL_NUM_SCENES = 41
VAL_NUM_EPISODES = 1218
VAL_NUM_INTERACT = 597
VAL_EPISODE_SEED_BASE = 20_000
VAL100_SEED = 100
VAL100_SCENES = 5
VAL100_PER_SCENE = 20
MIN_START_GEODESIC_M = 1.5
#: Recorded approach points of a goal are at least this far apart (metres).
APPROACH_POINT_SPACING_M = 0.25
_MIN_START_SEPARATION_M = 0.5
_CANDIDATES = 20
_YAW_DRAWS = 64
# episodes per category across val: interact categories 199 each, the others 207 each
_VAL_CATEGORY_TOTALS: dict[str, int] = {
    "chair": 207,
    "bed": 199,
    "potted_plant": 207,
    "toilet": 199,
    "tv": 207,
    "couch": 199,
}


# ---------------------------------------------------------------------------------------
# episode plan and sampling
# ---------------------------------------------------------------------------------------
def val_category_plan(num_scenes: int = VAL_NUM_SCENES) -> list[dict[str, int]]:
    """Episodes per category for each val scene.

    Every scene gets ``total // num_scenes`` of each category; the remaining episodes of
    all categories, listed category by category, go to scenes round-robin, so scene totals
    differ by at most one (29 or 30 for val)."""
    plan = [
        {c: _VAL_CATEGORY_TOTALS[c] // num_scenes for c in TARGET_CATEGORIES}
        for _ in range(num_scenes)
    ]
    extras = [c for c in TARGET_CATEGORIES for _ in range(_VAL_CATEGORY_TOTALS[c] % num_scenes)]
    # interact categories first so that they spread over distinct scenes
    extras.sort(key=lambda c: (c not in INTERACT_CATEGORIES, TARGET_CATEGORIES.index(c)))
    for k, cat in enumerate(extras):
        plan[k % num_scenes][cat] += 1
    return plan


def _r(v: float, nd: int = 4) -> float:
    out = round(float(v), nd)
    return 0.0 if out == 0.0 else out


def _approach_points(
    grid: NavGrid, obj, reachable: np.ndarray, floor_y: float
) -> tuple[tuple[float, float, float], ...]:
    """A deterministic sample of the object's reachable approach points: cells ordered by
    x/z distance to the object's box (then row, column), each kept when it lies at least
    ``APPROACH_POINT_SPACING_M`` from every point kept before."""
    cells = np.argwhere(grid.goal_region(obj) & reachable)
    if len(cells) == 0:
        return ()
    dist = grid.aabb_distance_map(obj)[cells[:, 0], cells[:, 1]]
    order = np.lexsort((cells[:, 1], cells[:, 0], np.round(dist, 6)))
    xz = grid.cells_to_xz(cells[order])
    kept: list[np.ndarray] = []
    for p in xz:
        if all(float(np.hypot(*(p - k))) >= APPROACH_POINT_SPACING_M - 1e-9 for k in kept):
            kept.append(p)
    return tuple((_r(p[0]), _r(floor_y), _r(p[1])) for p in kept)


def _goal_records(
    scene: SceneSpec, grid: NavGrid, category: str, objs, reachable: np.ndarray
) -> tuple[Goal, ...]:
    goals = []
    for obj in objs:
        lo, hi = obj.aabb()
        approach = None
        if obj.seat_height_m is not None:
            x, z, yaw = grid.approach_pose(obj)
            approach = (_r(x), _r(z), _r(yaw, 6))
        goals.append(
            Goal(
                object_id=obj.object_id,
                object_name=obj.name,
                category=category,
                position=tuple(_r(v) for v in (lo + hi) / 2),
                aabb_min=tuple(_r(v) for v in lo),
                aabb_max=tuple(_r(v) for v in hi),
                seat_height_m=obj.seat_height_m,
                approach_pose=approach,
                approach_points=_approach_points(grid, obj, reachable, grid.floor_y),
            )
        )
    return tuple(goals)


def _nearest_by_aabb(objs, x: float, z: float) -> tuple[float, int]:
    best = (math.inf, -1)
    for o in objs:
        lo, hi = o.aabb()
        dx = max(lo[0] - x, 0.0, x - hi[0])
        dz = max(lo[2] - z, 0.0, z - hi[2])
        best = min(best, (math.hypot(dx, dz), o.object_id))
    return best


def _start_draws(
    rng: np.random.Generator,
    grid: NavGrid,
    cells: np.ndarray,
    objs: Sequence[SceneObject],
    used: Sequence[tuple[float, float]],
) -> Iterator[tuple[RouteStats, tuple[float, float]]]:
    """Up to ``_CANDIDATES`` start cells drawn from ``cells``, with their route to ``objs``
    (those too close to a start in ``used``, or with no route, are drawn and skipped)."""
    for _ in range(_CANDIDATES):
        iz, ix = (int(v) for v in cells[int(rng.integers(len(cells)))])
        x, z = grid.cell_center(iz, ix)
        if any(math.hypot(x - ux, z - uz) < _MIN_START_SEPARATION_M for ux, uz in used):
            continue
        stats = route_stats(grid, (x, z), list(objs))
        if stats is not None:
            yield stats, (x, z)


def generate_scene_episodes(
    scene: SceneSpec,
    plan: Mapping[str, int],
    seed: int,
    *,
    grid: NavGrid | None = None,
    id_prefix: str | None = None,
) -> list[Episode]:
    """Sample the episodes of one scene.

    Args:
        scene: the home.
        plan: episodes per target category (categories absent from the scene raise).
        seed: episode sampling seed.
        grid: the scene's navigation grid (built when None).
        id_prefix: episode ids are ``f"{id_prefix}_{k:03d}"`` (default: the scene id).

    Returns:
        Episodes ordered by category (``TARGET_CATEGORIES`` order), then draw order.

    Raises:
        ValueError: a planned category is absent, has no instance with an approach point,
            or leaves no clear start.
    """
    grid = grid if grid is not None else NavGrid.from_scene(scene)
    rng = np.random.default_rng(int(seed))
    main = grid.main_component()
    spawns = SpawnChecker(scene, grid)
    clear = spawns.clear_mask()
    prefix = id_prefix or scene.scene_id
    episodes: list[Episode] = []
    for category in TARGET_CATEGORIES:
        n = int(plan.get(category, 0))
        if n <= 0:
            continue
        instances = scene.objects_of(category)
        if not instances:
            raise ValueError(
                f"scene {scene.scene_id!r} has no {category!r}, but the plan asks for {n} episodes"
            )
        # an instance without an approach point reachable from the main region is no target
        objs = [o for o in instances if (grid.goal_region(o) & main).any()]
        if not objs:
            raise ValueError(
                f"scene {scene.scene_id!r}: no {category} has an approach point in the main free region"
            )
        field = grid.distance_field(list(objs))
        region_xz = grid.cells_to_xz(np.argwhere(grid.goal_region(list(objs)) & main))
        candidates = np.argwhere(
            main & clear & np.isfinite(field) & (field >= MIN_START_GEODESIC_M)
        )
        if len(candidates) == 0:
            raise ValueError(
                f"scene {scene.scene_id!r}: no clear start cell at least {MIN_START_GEODESIC_M} m from a {category}"
            )
        goals = _goal_records(scene, grid, category, objs, main)
        phase = int(rng.integers(3))
        used: list[tuple[float, float]] = []
        interact = category in INTERACT_CATEGORIES
        for j in range(n):
            chosen = nearest_difficulty(
                (phase + j) % 3, _start_draws(rng, grid, candidates, objs, used)
            )
            if chosen is None:
                raise ValueError(
                    f"scene {scene.scene_id!r}: could not place a start for a {category} episode"
                )
            stats, (x, z) = chosen
            used.append((x, z))
            for _ in range(_YAW_DRAWS):
                yaw = _r(float(rng.uniform(-math.pi, math.pi)), 4)
                if not spawns.faces_wall(x, z, yaw):
                    break
            else:
                raise ValueError(
                    f"scene {scene.scene_id!r}: every yaw drawn at ({x:.2f}, {z:.2f}) faces a wall"
                )
            end = stats.path_xz[-1]
            _, closest = _nearest_by_aabb(objs, float(end[0]), float(end[1]))
            euclid = float(np.min(np.hypot(region_xz[:, 0] - x, region_xz[:, 1] - z)))
            room = scene.room_at(x, z)
            floor_y = room.floor_y if room is not None else 0.0
            episodes.append(
                Episode(
                    episode_id="pending",
                    scene_id=scene.scene_id,
                    start_position=(_r(x), _r(floor_y), _r(z)),
                    start_rotation=tuple(_r(v, 6) for v in yaw_to_quat_xyzw(yaw)),  # type: ignore[arg-type]
                    start_yaw_rad=yaw,
                    object_category=category,
                    goals=goals,
                    info=EpisodeInfo(
                        geodesic_distance=_r(stats.geodesic_distance),
                        euclidean_distance=_r(euclid),
                        difficulty=stats.difficulty,
                        choice_points=stats.choice_points,
                        obstacle_density=_r(stats.obstacle_density),
                        closest_goal_object_id=closest,
                    ),
                    max_steps=DEFAULT_MAX_STEPS,
                    interact=interact,
                    instruction=instruction_for(category, interact),
                )
            )
    return [_with_id(ep, f"{prefix}_{k:03d}") for k, ep in enumerate(episodes)]


def _with_id(ep: Episode, episode_id: str) -> Episode:
    return replace(ep, episode_id=episode_id)


# ---------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SplitFiles:
    """Every file of the shipped data, as relative path -> bytes (under ``assets/``)."""

    files: dict[str, bytes]
    episodes: tuple[Episode, ...]
    val100_ids: tuple[str, ...]


def scene_files(index: int) -> tuple[SceneSpec, bytes, list[Episode], bytes]:
    """Scene spec, its gzip bytes, its val episodes and their shard bytes for val scene
    ``index`` (independent of the other scenes)."""
    scene_id = val_scene_id(index)
    scene = generate_named_scene(scene_id)
    scene_gz = gzip_bytes(scene.to_json().encode("utf-8"))
    plan = val_category_plan()[index]
    episodes = generate_scene_episodes(scene, plan, VAL_EPISODE_SEED_BASE + index)
    return scene, scene_gz, episodes, shard_bytes(scene_id, episodes)


def val100_episode_ids(episodes: Sequence[Episode]) -> tuple[str, ...]:
    """The fixed val100 subset: 5 scenes x 20 episodes drawn with ``VAL100_SEED``."""
    by_scene: dict[str, list[str]] = {}
    for ep in episodes:
        by_scene.setdefault(ep.scene_id, []).append(ep.episode_id)
    scene_ids = sorted(by_scene)
    rng = np.random.default_rng(VAL100_SEED)
    chosen = sorted(
        scene_ids[int(i)] for i in rng.choice(len(scene_ids), size=VAL100_SCENES, replace=False)
    )
    ids: list[str] = []
    for sid in chosen:
        pool = by_scene[sid]
        pick = sorted(int(i) for i in rng.choice(len(pool), size=VAL100_PER_SCENE, replace=False))
        ids += [pool[i] for i in pick]
    return tuple(ids)


def build_val_files(progress: Callable[[str], None] | None = None) -> SplitFiles:
    """Generate all shipped data (scenes, val shards + index, val100) in memory.

    Returns:
        :class:`SplitFiles` whose ``files`` maps paths relative to ``assets/`` to bytes.
    """
    files: dict[str, bytes] = {}
    scene_index: dict[str, dict[str, object]] = {}
    split_entries = []
    all_episodes: list[Episode] = []
    for i in range(VAL_NUM_SCENES):
        scene, scene_gz, episodes, shard = scene_files(i)
        sid = scene.scene_id
        content_sha = scene.content_hash()
        files[f"scenes/{sid}.json.gz"] = scene_gz
        scene_index[sid] = {
            "file": f"{sid}.json.gz",
            "seed": scene.seed,
            "content_sha256": content_sha,
            "num_rooms": len(scene.rooms),
            "num_objects": len(scene.objects),
            "has_platform": bool(scene.metadata.get("has_platform", False)),
        }
        files[f"splits/val/{sid}.json.gz"] = shard
        split_entries.append(
            {
                "scene_id": sid,
                "file": f"{sid}.json.gz",
                "num_episodes": len(episodes),
                "num_interact": sum(e.interact for e in episodes),
                "sha256": sha256_hex(shard),
                "scene_content_sha256": content_sha,
            }
        )
        all_episodes += episodes
        if progress is not None:
            progress(
                f"{sid}: {len(scene.rooms)} rooms, {len(scene.objects)} objects, {len(episodes)} episodes"
            )
    n_int = sum(e.interact for e in all_episodes)
    if len(all_episodes) != VAL_NUM_EPISODES or n_int != VAL_NUM_INTERACT:
        raise RuntimeError(
            f"val has {len(all_episodes)} episodes ({n_int} interact); expected {VAL_NUM_EPISODES} ({VAL_NUM_INTERACT})"
        )
    by_cat = Counter(e.object_category for e in all_episodes)
    by_diff = Counter(e.info.difficulty for e in all_episodes)
    split_index = {
        "schema": SPLIT_INDEX_SCHEMA,
        "split": "val",
        "num_scenes": VAL_NUM_SCENES,
        "num_episodes": len(all_episodes),
        "num_interact": n_int,
        "counts_by_category": {c: by_cat[c] for c in TARGET_CATEGORIES},
        "counts_by_difficulty": {d: by_diff[d] for d in DIFFICULTY_LABELS},
        "generator": {
            "scene_generator": GENERATOR_VERSION,
            "scene_seed_base": VAL_SCENE_SEED_BASE,
            "episode_seed_base": VAL_EPISODE_SEED_BASE,
        },
        "scenes": split_entries,
    }
    files["splits/val/index.json"] = (canonical_json_pretty(split_index) + "\n").encode("utf-8")
    files["scenes/index.json"] = (
        canonical_json_pretty({"schema": SCENE_INDEX_SCHEMA, "scenes": scene_index}) + "\n"
    ).encode("utf-8")
    ids = val100_episode_ids(all_episodes)
    subset = {
        "schema": SUBSET_SCHEMA,
        "name": "val100",
        "parent": "val",
        "seed": VAL100_SEED,
        "num_scenes": VAL100_SCENES,
        "episodes_per_scene": VAL100_PER_SCENE,
        "episode_ids": list(ids),
    }
    files["splits/val100.json"] = (canonical_json_pretty(subset) + "\n").encode("utf-8")
    return SplitFiles(files=files, episodes=tuple(all_episodes), val100_ids=ids)


def canonical_json_pretty(obj: object) -> str:
    """Sorted keys and two-space indentation (for small human-readable index files)."""
    return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False)


def write_files(files: Mapping[str, bytes], root: str | Path) -> None:
    """Write ``files`` (relative path -> bytes) under ``root`` atomically, one by one."""
    for rel in sorted(files):
        write_bytes_atomic(Path(root) / rel, files[rel])
