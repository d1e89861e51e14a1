"""Building the shipped image-goal split ``imagegoal_val100``.

``imagegoal_val100`` holds 100 episodes: 20 in each home of ``val100`` (the same five
procedural validation homes), drawn per home with ``numpy.random.default_rng(
IMAGEGOAL_SEED_BASE + i)`` where ``i`` is the home's validation index (``hc_val_003``: 3).
Each episode is drawn like a find-navigate-interact one, with a point goal instead of
objects:

* starts and goals are centres of free cells in the main connected free region that
  leave room for the whole standing body (:class:`~humanclaw_gym.episodes.spawns.
  SpawnChecker`), at least ``_MIN_SEPARATION_M`` from the other starts (goals) of the home;
* the goal is reachable from the start, at least :data:`MIN_GOAL_GEODESIC_M` along the
  navigation grid and :data:`MIN_GOAL_EUCLIDEAN_M` in a straight line (so the start lies
  well outside the 1 m success radius);
* to spread difficulty, each episode asks for a label (cycling easy, medium, hard from a
  random phase), draws up to ``_CANDIDATES`` start/goal pairs and keeps the first with
  that label (else the closest label); the label is the find-navigate-interact one
  (:mod:`humanclaw_gym.episodes.difficulty`) of the route to the goal cell;
* the start yaw is uniform, drawn again while it faces a wall closer than 0.5 m;
* the goal yaw is uniform, drawn again (up to ``_GOAL_YAW_DRAWS`` times, then a new pair)
  while the view faces a wall closer than 0.5 m or the rendered goal view fails the
  goal-view check (:mod:`humanclaw_gym.episodes.goal_view`) with the generator's margin,
  in any of the renderers given (the shipped split: both built-in ones, moderngl and the
  TinyRenderer fallback, whose shading and textures differ).

Rendering is the caller's: :func:`build_imagegoal_files` takes :data:`RenderView` functions
(one per renderer) that return the goal view (``"rgb"``, ``"depth"``, ``"instance"``) as the task renders it at
reset; ``scripts/generate_imagegoal_split.py`` renders with the env's own simulation
(``Simulation.reset`` at the start, then ``Simulation.render_at`` at the goal), so the
checked image is the goal picture the task shows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from humanclaw_gym.episodes.difficulty import RouteStats, nearest_difficulty, route_stats
from humanclaw_gym.episodes.goal_view import (
    GENERATOR_MARGIN,
    GOAL_VIEW_THRESHOLDS,
    goal_view_problems,
    goal_view_stats,
)
from humanclaw_gym.episodes.imagegoal import (
    IMAGEGOAL_EPISODE_SCHEMA,
    IMAGEGOAL_SPLIT_INDEX_SCHEMA,
    SUCCESS_DISTANCE_M,
    ImageGoalEpisode,
    imagegoal_shard_bytes,
)
from humanclaw_gym.episodes.io import sha256_hex
from humanclaw_gym.episodes.schema import DIFFICULTY_LABELS, EpisodeInfo, yaw_to_quat_xyzw
from humanclaw_gym.episodes.spawns import SpawnChecker
from humanclaw_gym.scenes.navgrid import NavGrid
from humanclaw_gym.scenes.spec import SceneSpec

__all__ = [
    "IMAGEGOAL_EPISODES_PER_SCENE",
    "IMAGEGOAL_SEED_BASE",
    "IMAGEGOAL_SPLIT_NAME",
    "MIN_GOAL_EUCLIDEAN_M",
    "MIN_GOAL_GEODESIC_M",
    "ImageGoalSplitFiles",
    "RenderView",
    "build_imagegoal_files",
    "generate_imagegoal_scene_episodes",
    "imagegoal_scene_ids",
]

IMAGEGOAL_SPLIT_NAME = "imagegoal_val100"
IMAGEGOAL_SEED_BASE = 40_000
IMAGEGOAL_EPISODES_PER_SCENE = 20
#: Shortest route from the start to the goal, metres.
MIN_GOAL_GEODESIC_M = 2.0
#: Straight distance from the start to the goal, metres (twice the success radius would
#: be too strict for small rooms; 1.5 m keeps the start clearly outside it).
MIN_GOAL_EUCLIDEAN_M = 1.5
_MIN_SEPARATION_M = 0.5
_CANDIDATES = 20
_START_YAW_DRAWS = 64
_GOAL_YAW_DRAWS = 12
_PAIR_DRAWS = 60
#: A drawn cell: its centre ``(x, z)`` and grid indices ``(iz, ix)``.
_Cell = tuple[float, float, int, int]

#: ``render_view(scene, start_xyz, start_yaw_rad, goal_xyz, goal_yaw_rad, episode_id) ->
#: {"rgb", "depth", "instance"}``: the goal view as the task renders it at reset (the body
#: placed at the start, then drawn standing at the goal).
RenderView = Callable[
    [SceneSpec, tuple[float, float, float], float, tuple[float, float, float], float, str],
    Mapping[str, np.ndarray],
]


def _r(v: float, nd: int = 4) -> float:
    out = round(float(v), nd)
    return 0.0 if out == 0.0 else out


def imagegoal_scene_ids() -> tuple[str, ...]:
    """The homes of ``imagegoal_val100``: those of ``val100``, sorted."""
    from humanclaw_gym.episodes.io import load_split

    return tuple(sorted({ep.scene_id for ep in load_split("val100")}))


def _scene_index(scene_id: str) -> int:
    prefix = "hc_val_"
    if not scene_id.startswith(prefix) or not scene_id[len(prefix) :].isdigit():
        raise ValueError(f"scene {scene_id!r} is not a validation home hc_val_<i>")
    return int(scene_id[len(prefix) :])


def generate_imagegoal_scene_episodes(
    scene: SceneSpec,
    count: int,
    seed: int,
    render_views: Sequence[RenderView],
    *,
    grid: NavGrid | None = None,
    id_prefix: str | None = None,
) -> list[ImageGoalEpisode]:
    """Draw ``count`` image-goal episodes in one home (see the module docstring).

    Args:
        scene: the home.
        count: episodes to draw (>= 1).
        seed: episode sampling seed.
        render_views: render the goal view (see :data:`RenderView`), one per renderer;
            a goal view must pass the check in every one of them.
        grid: the scene's navigation grid (built when None).
        id_prefix: episode ids are ``f"{id_prefix}_{k:03d}"`` (default ``ig_<scene id>``).

    Raises:
        ValueError: the home leaves no pair of clear cells far enough apart, or no goal
            view passing the check was found.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count={count!r} is invalid: allowed an int >= 1")
    grid = grid if grid is not None else NavGrid.from_scene(scene)
    rng = np.random.default_rng(int(seed))
    spawns = SpawnChecker(scene, grid)
    cells = np.argwhere(grid.main_component() & spawns.clear_mask())
    if len(cells) < 2:
        raise ValueError(f"scene {scene.scene_id!r}: fewer than two clear cells to stand on")
    prefix = id_prefix or f"ig_{scene.scene_id}"
    floor_y = grid.floor_y
    starts: list[tuple[float, float]] = []
    goals: list[tuple[float, float]] = []
    episodes: list[ImageGoalEpisode] = []
    phase = int(rng.integers(3))

    def draw_cell(used: Sequence[tuple[float, float]]) -> _Cell | None:
        iz, ix = (int(v) for v in cells[int(rng.integers(len(cells)))])
        x, z = grid.cell_center(iz, ix)
        if any(math.hypot(x - ux, z - uz) < _MIN_SEPARATION_M for ux, uz in used):
            return None
        return x, z, iz, ix

    def pair_draws() -> Iterator[tuple[RouteStats, tuple[_Cell, _Cell]]]:
        """Up to ``_CANDIDATES`` start/goal pairs with their route (the pairs too close
        to earlier starts or goals, too near each other or without a long enough route
        are drawn and skipped)."""
        for _ in range(_CANDIDATES):
            start = draw_cell(starts)
            goal = draw_cell(goals)
            if start is None or goal is None:
                continue
            if math.hypot(start[0] - goal[0], start[1] - goal[1]) < MIN_GOAL_EUCLIDEAN_M:
                continue
            target = np.array([[goal[2], goal[3]]], dtype=np.int64)
            stats = route_stats(grid, (start[0], start[1]), target)
            if stats is None or stats.geodesic_distance < MIN_GOAL_GEODESIC_M:
                continue
            yield stats, (start, goal)

    for k in range(count):
        episode_id = f"{prefix}_{k:03d}"
        want = (phase + k) % 3
        accepted = None
        for _ in range(_PAIR_DRAWS):
            chosen = nearest_difficulty(want, pair_draws())
            if chosen is None:
                continue
            stats, (start, goal) = chosen
            start_yaw = _start_yaw(scene, spawns, rng, start)
            start_pose = ((_r(start[0]), _r(floor_y), _r(start[1])), start_yaw)
            goal_yaw = _goal_yaw(
                scene, spawns, rng, goal, floor_y, start_pose, episode_id, render_views
            )
            if goal_yaw is not None:
                accepted = (start, goal, stats, start_yaw, goal_yaw)
                break
        if accepted is None:
            raise ValueError(
                f"scene {scene.scene_id!r}: no start/goal pair with a goal view passing the "
                f"check after {_PAIR_DRAWS} draws (episode {episode_id})"
            )
        start, goal, stats, start_yaw, goal_yaw = accepted
        starts.append(start[:2])
        goals.append(goal[:2])
        episodes.append(
            ImageGoalEpisode(
                episode_id=episode_id,
                scene_id=scene.scene_id,
                start_position=(_r(start[0]), _r(floor_y), _r(start[1])),
                start_rotation=tuple(_r(v, 6) for v in yaw_to_quat_xyzw(start_yaw)),  # type: ignore[arg-type]
                start_yaw_rad=start_yaw,
                goal_position=(_r(goal[0]), _r(floor_y), _r(goal[1])),
                goal_rotation=tuple(_r(v, 6) for v in yaw_to_quat_xyzw(goal_yaw)),  # type: ignore[arg-type]
                goal_yaw_rad=goal_yaw,
                info=EpisodeInfo(
                    geodesic_distance=_r(stats.geodesic_distance),
                    euclidean_distance=_r(math.hypot(start[0] - goal[0], start[1] - goal[1])),
                    difficulty=stats.difficulty,
                    choice_points=stats.choice_points,
                    obstacle_density=_r(stats.obstacle_density),
                ),
                success_distance_m=SUCCESS_DISTANCE_M,
            )
        )
    return episodes


def _start_yaw(
    scene: SceneSpec, spawns: SpawnChecker, rng: np.random.Generator, start: tuple
) -> float:
    """A uniform start yaw that does not face a wall closer than 0.5 m."""
    for _ in range(_START_YAW_DRAWS):
        yaw = _r(float(rng.uniform(-math.pi, math.pi)))
        if not spawns.faces_wall(start[0], start[1], yaw):
            return yaw
    raise ValueError(
        f"scene {scene.scene_id!r}: every yaw drawn at ({start[0]:.2f}, {start[1]:.2f}) "
        "faces a wall"
    )


def _view_passes(view: Mapping[str, np.ndarray], scene: SceneSpec) -> bool:
    stats = goal_view_stats(view["rgb"], view["depth"], view.get("instance"), scene)
    return not goal_view_problems(stats, margin=GENERATOR_MARGIN)


def _goal_yaw(
    scene: SceneSpec,
    spawns: SpawnChecker,
    rng: np.random.Generator,
    goal: tuple[float, float, int, int],
    floor_y: float,
    start_pose: tuple[tuple[float, float, float], float],
    episode_id: str,
    render_views: Sequence[RenderView],
) -> float | None:
    """A goal yaw whose view passes the goal-view check with the generator's margin, as
    every renderer of ``render_views`` draws it."""
    x, z = goal[0], goal[1]
    position = (_r(x), _r(floor_y), _r(z))
    for _ in range(_GOAL_YAW_DRAWS):
        yaw = _r(float(rng.uniform(-math.pi, math.pi)))
        if spawns.faces_wall(x, z, yaw):
            continue
        if all(
            _view_passes(
                render(scene, start_pose[0], start_pose[1], position, yaw, episode_id), scene
            )
            for render in render_views
        ):
            return yaw
    return None


# ---------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImageGoalSplitFiles:
    """Every file of the split, as path relative to ``assets/`` -> bytes."""

    files: dict[str, bytes]
    episodes: tuple[ImageGoalEpisode, ...]


def build_imagegoal_files(
    render_views: Sequence[RenderView],
    progress: Callable[[str], None] | None = None,
    *,
    scene_ids: Sequence[str] | None = None,
    episodes_per_scene: int = IMAGEGOAL_EPISODES_PER_SCENE,
    split_name: str = IMAGEGOAL_SPLIT_NAME,
    view_renderers: Sequence[str] = (),
) -> ImageGoalSplitFiles:
    """Generate the split in memory (index + one shard per home).

    Args:
        render_views: render a goal view (see :data:`RenderView`), one per renderer.
        progress: called with one line per home.
        scene_ids: the homes (default :func:`imagegoal_scene_ids`).
        episodes_per_scene: episodes per home.
        split_name: the folder under ``splits/``.
        view_renderers: the renderers of ``render_views``, recorded in the index.
    """
    from humanclaw_gym.episodes.generate import canonical_json_pretty
    from humanclaw_gym.episodes.io import load_scene
    from humanclaw_gym.scenes.generator import GENERATOR_VERSION

    files: dict[str, bytes] = {}
    entries = []
    everything: list[ImageGoalEpisode] = []
    for scene_id in scene_ids if scene_ids is not None else imagegoal_scene_ids():
        scene = load_scene(scene_id)
        seed = IMAGEGOAL_SEED_BASE + _scene_index(scene_id)
        episodes = generate_imagegoal_scene_episodes(
            scene, episodes_per_scene, seed, render_views, id_prefix=f"ig_{scene_id[3:]}"
        )
        shard = imagegoal_shard_bytes(scene_id, episodes)
        files[f"splits/{split_name}/{scene_id}.json.gz"] = shard
        entries.append(
            {
                "scene_id": scene_id,
                "file": f"{scene_id}.json.gz",
                "num_episodes": len(episodes),
                "sha256": sha256_hex(shard),
                "scene_content_sha256": scene.content_hash(),
                "seed": seed,
            }
        )
        everything += episodes
        if progress is not None:
            labels = Counter(e.info.difficulty for e in episodes)
            progress(
                f"{scene_id}: {len(episodes)} episodes "
                + ", ".join(f"{d} {labels[d]}" for d in DIFFICULTY_LABELS)
            )
    by_diff = Counter(e.info.difficulty for e in everything)
    index = {
        "schema": IMAGEGOAL_SPLIT_INDEX_SCHEMA,
        "episode_schema": IMAGEGOAL_EPISODE_SCHEMA,
        "split": split_name,
        "task": "image_goal",
        "num_scenes": len(entries),
        "num_episodes": len(everything),
        "counts_by_difficulty": {d: by_diff[d] for d in DIFFICULTY_LABELS},
        "generator": {
            "scene_generator": GENERATOR_VERSION,
            "episode_seed_base": IMAGEGOAL_SEED_BASE,
            "episodes_per_scene": episodes_per_scene,
            "min_goal_geodesic_m": MIN_GOAL_GEODESIC_M,
            "min_goal_euclidean_m": MIN_GOAL_EUCLIDEAN_M,
            "goal_view_thresholds": {k: list(v) for k, v in GOAL_VIEW_THRESHOLDS.items()},
            "goal_view_margin": GENERATOR_MARGIN,
            "goal_view_renderers": list(view_renderers),
        },
        "scenes": entries,
    }
    files[f"splits/{split_name}/index.json"] = (canonical_json_pretty(index) + "\n").encode()
    return ImageGoalSplitFiles(files=files, episodes=tuple(everything))
