"""Record oracle demonstrations on training scenes (``hc_train_###``) for behaviour cloning.

Reads top to bottom:

1. :class:`Args` (tyro): which training scenes, how many episodes each, seeds, output.
2. :func:`make_training_episodes`: the validation episode sampler
   (:func:`humanclaw_gym.episodes.generate_scene_episodes`) applied to training scene ids,
   one call per target category so that a category without a reachable instance is
   skipped instead of failing the whole scene. Training scenes never overlap ``val``.
3. :class:`DemoRecordingWrapper`: records every step of the env it wraps with
   :class:`humanclaw_gym.data.EpisodeRecorder` (obs + info the action was chosen on, the
   action, next obs, terminated, truncated). With ``label_visibility`` it also asks the env
   for the instance render of each decision's ego view (the same pixel rule as GeoFindSR)
   and stores, as the step's policy text, whether the target is in view
   (:func:`humanclaw_agents.bc_policy.visibility_text`); the learned policy trains a visibility head on it.
4. the loop: a privileged env over all sampled episodes, the oracle, the one episode loop
   :func:`humanclaw_gym.evaluation.run_episode`, the paper metrics per demo, and
   ``demos_summary.json`` (written atomically after every episode) with each demo's outcome
   so that training can keep only the successful ones.

Example::

    python scripts/record_demos.py --output outputs/bc/demos --num-scenes 40 \\
        --episodes-per-scene 10

The images are stored as recorded (``uint8 448 x 448 x 3``); training downsamples.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import tyro

SUMMARY_FILE = "demos_summary.json"
SUMMARY_SCHEMA = "humanclaw_demo_summary_v1"
# Episode sampling seeds of training scenes: far away from the val episode seeds (20_000+).
_TRAIN_EPISODE_SEED_BASE = 3_000_000
_SEEDS_PER_RUN_SEED = 100_000
_SEEDS_PER_SCENE = 16


@dataclass
class Args:
    """Record oracle demonstrations on training scenes."""

    output: Path = Path("outputs/bc/demos")
    """dataset directory (humanclaw_demos_v1 episode files + demos_summary.json)"""
    num_scenes: int = 20
    """number of training scenes hc_train_<first_scene> .. hc_train_<first_scene+num_scenes-1>"""
    first_scene: int = 0
    """index of the first training scene"""
    episodes_per_scene: int = 10
    """episodes sampled per scene, spread round-robin over the categories the scene has"""
    seed: int = 0
    """episode sampling seed (start positions, yaws); scenes come from their fixed seeds"""
    max_steps: int | None = None
    """override the episode step limit (default: the episode's, 100)"""
    renderer: Literal["auto", "moderngl", "tiny"] = "auto"
    """render backend"""
    label_visibility: bool = True
    """store a target-in-view label per step as the policy text (instance render)"""
    metrics: bool = True
    """compute the paper metrics of each demo (success flags go to demos_summary.json)"""
    max_buffer_bytes: int = 256 * 1024 * 1024
    """EpisodeRecorder budget for unfinished episodes"""
    resume: bool = False
    """skip episodes already listed in demos_summary.json"""
    quiet: bool = False
    """no per-episode lines"""


# ----------------------------------------------------------------------------------------
# episodes on training scenes
# ----------------------------------------------------------------------------------------
def training_category_plan(
    categories: Sequence[str], num_episodes: int, rotation: int
) -> dict[str, int]:
    """Spread ``num_episodes`` round-robin over ``categories``, starting at ``rotation``.

    Args:
        categories: the target categories the scene has (in TARGET_CATEGORIES order).
        num_episodes: episodes for this scene (>= 0).
        rotation: offset of the first category (the scene index, so that totals balance
            over scenes).

    Returns:
        ``{category: count}`` for the categories that get at least one episode.
    """
    if num_episodes < 0:
        raise ValueError(f"num_episodes={num_episodes!r} is out of range: allowed >= 0")
    if not categories:
        return {}
    plan: dict[str, int] = {}
    for j in range(num_episodes):
        category = categories[(rotation + j) % len(categories)]
        plan[category] = plan.get(category, 0) + 1
    return plan


def make_training_episodes(
    scene_index: int, episodes_per_scene: int, seed: int = 0, log: Any = None
) -> list[Any]:
    """Sample episodes on training scene ``hc_train_<scene_index>`` with the val sampler.

    Every category gets its own :func:`generate_scene_episodes` call (seeded from ``seed``,
    the scene index and the category), so a category that cannot be placed in this scene
    is skipped (reported through ``log``) and the others are unaffected. Episode ids are
    ``<scene_id>_<category>_<k>``.

    Returns:
        Episode records, in TARGET_CATEGORIES order.
    """
    from humanclaw_gym.episodes import generate_named_scene, generate_scene_episodes
    from humanclaw_gym.episodes.generate import training_scene_id
    from humanclaw_gym.scenes.navgrid import NavGrid
    from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

    if seed < 0:
        raise ValueError(f"seed={seed!r} is out of range: allowed >= 0")
    scene = generate_named_scene(training_scene_id(scene_index))
    grid = NavGrid.from_scene(scene)
    present = [c for c in TARGET_CATEGORIES if scene.objects_of(c)]
    plan = training_category_plan(present, episodes_per_scene, rotation=scene_index)
    base = _TRAIN_EPISODE_SEED_BASE + seed * _SEEDS_PER_RUN_SEED + scene_index * _SEEDS_PER_SCENE
    episodes: list[Any] = []
    for category, count in plan.items():
        try:
            episodes += generate_scene_episodes(
                scene,
                {category: count},
                base + TARGET_CATEGORIES.index(category),
                grid=grid,
                id_prefix=f"{scene.scene_id}_{category}",
            )
        except ValueError as exc:
            if log is not None:
                log(f"{scene.scene_id}: skipping {category}: {exc}")
    return episodes


# ----------------------------------------------------------------------------------------
# recording
# ----------------------------------------------------------------------------------------
class _VisibilityObserver:
    """Counts target-instance pixels of each decision's ego view (the GeoFindSR rule)."""

    def __init__(self) -> None:
        self.targets: np.ndarray = np.zeros(0, dtype=np.int64)
        self.category = ""
        self.pixels: int | None = None

    def on_reset(self, event: Any) -> None:
        self.targets = np.array([int(g.object_id) for g in event.episode.goals], dtype=np.int64)
        self.category = str(event.episode.object_category)
        self.pixels = None

    def on_decision(self, event: Any) -> None:
        if event.instance is None:
            raise RuntimeError("the env sent no instance render; was the 'instance' need lost?")
        self.pixels = int(np.isin(event.instance, self.targets).sum())


class DemoRecordingWrapper(gym.Wrapper):
    """Record every step of the wrapped env with an :class:`EpisodeRecorder`.

    ``reset`` starts an episode in the recorder (``begin``); ``step`` records
    ``(obs, info, action, next_obs, terminated, truncated)`` with the observation and info
    the action was chosen on. With ``label_visibility`` the step's policy text is
    ``visibility_text`` of "target pixels >= FIND_PIXEL_THRESHOLD" in the decision's
    view; otherwise the Decision's own ``visible_state`` is stored.

    Args:
        env: a HumanClaw env (possibly wrapped).
        recorder: where the steps go (owned by the caller; not closed here).
        label_visibility: request the instance render and store visibility labels.
    """

    def __init__(self, env: gym.Env, recorder: Any, label_visibility: bool = True) -> None:
        super().__init__(env)
        self.recorder = recorder
        self._observer: _VisibilityObserver | None = None
        self._handle: int | None = None
        if label_visibility:
            self._observer = _VisibilityObserver()
            self._handle = env.unwrapped.add_observer(self._observer, needs=("instance",))
        self._obs: Any = None
        self._info: Mapping[str, Any] | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.recorder.begin(obs, info)
        self._obs, self._info = obs, info
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._info is None:
            raise RuntimeError("DemoRecordingWrapper.step() called before reset()")
        from humanclaw_agents.bc_policy import visibility_text
        from humanclaw_gym.metrics.thresholds import FIND_PIXEL_THRESHOLD

        next_obs, reward, terminated, truncated, info = self.env.step(action)
        text = None
        if self._observer is not None:
            if self._observer.pixels is None:
                raise RuntimeError("no visibility count was observed for this step")
            visible = self._observer.pixels >= FIND_PIXEL_THRESHOLD
            text = visibility_text(self._observer.category, visible)
            self._observer.pixels = None
        self.recorder.record(
            self._obs, self._info, action, next_obs, terminated, truncated, text=text
        )
        self._obs, self._info = next_obs, info
        return next_obs, reward, terminated, truncated, info

    def detach(self) -> None:
        """Stop observing the env (idempotent); the recorder stays open."""
        if self._handle is not None:
            self.env.unwrapped.remove_observer(self._handle)
            self._handle = None


def demo_success(metrics: Mapping[str, Any] | None) -> bool | None:
    """The task success of one demo: InteractSR for interact episodes, else NavSR@20cm."""
    if not metrics:
        return None
    if metrics.get("interact"):
        return bool(metrics.get("interact_success"))
    return bool(metrics.get("nav_success_20cm"))


def _load_summary(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"schema": SUMMARY_SCHEMA, "runs": [], "episodes": {}}
    data = json.loads(path.read_text())
    if data.get("schema") != SUMMARY_SCHEMA:
        raise ValueError(f"{path} has schema {data.get('schema')!r}, expected {SUMMARY_SCHEMA!r}")
    return data


def _write_summary(path: Path, data: Mapping[str, Any]) -> None:
    from humanclaw_gym.evaluation.episode import write_json_atomic

    write_json_atomic(path, data)


def main(args: Args) -> dict[str, Any]:
    """Record the demos described by ``args``; returns the summary written to disk."""
    from humanclaw_agents.oracle import OraclePolicy
    from humanclaw_gym.data import EpisodeRecorder
    from humanclaw_gym.envs import ENV_ID
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
    from humanclaw_gym.evaluation import run_episode
    from humanclaw_gym.wrappers import MetricsWrapper

    for name in ("num_scenes", "episodes_per_scene"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}={getattr(args, name)} must be >= 1")
    if args.first_scene < 0:
        raise ValueError(f"--first-scene={args.first_scene} must be >= 0")
    os.environ.setdefault("LP_NUM_THREADS", "1")

    def log(message: str) -> None:
        if not args.quiet:
            print(message, flush=True)

    # -- episodes ------------------------------------------------------------------------
    episodes: list[Any] = []
    for index in range(args.first_scene, args.first_scene + args.num_scenes):
        episodes += make_training_episodes(index, args.episodes_per_scene, args.seed, log=log)
    summary_path = args.output / SUMMARY_FILE
    args.output.mkdir(parents=True, exist_ok=True)
    summary = _load_summary(summary_path)
    if args.resume:
        done = set(summary["episodes"])
        episodes = [ep for ep in episodes if ep.episode_id not in done]
    elif summary["episodes"]:
        raise ValueError(
            f"{summary_path} already lists {len(summary['episodes'])} demos; use --resume or "
            "another --output"
        )
    summary["runs"].append({"args": {k: str(v) for k, v in asdict(args).items()}})
    log(f"recording {len(episodes)} oracle demos into {args.output}")

    # -- env, wrappers, policy ------------------------------------------------------------
    if not episodes:
        _write_summary(summary_path, summary)
        return summary
    base = FindNavInteractEnv(
        episodes=episodes, privileged=True, max_steps=args.max_steps, renderer=args.renderer
    )
    recorder = EpisodeRecorder(args.output, max_buffer_bytes=args.max_buffer_bytes, env_id=ENV_ID)
    recording = DemoRecordingWrapper(base, recorder, label_visibility=args.label_visibility)
    env: gym.Env = MetricsWrapper(recording) if args.metrics else recording
    policy = OraclePolicy(seed=args.seed)
    t_start = time.perf_counter()
    try:
        for k, ep in enumerate(episodes):
            result = run_episode(env, policy, episode_id=ep.episode_id)
            success = demo_success(result.metrics)
            summary["episodes"][ep.episode_id] = {
                "scene_id": ep.scene_id,
                "category": ep.object_category,
                "interact": bool(ep.interact),
                "difficulty": ep.info.difficulty,
                "steps": result.steps,
                "ended_by": result.ended_by,
                "success": success,
                "nav_success_20cm": (result.metrics or {}).get("nav_success_20cm"),
                "final_distance_m": (result.metrics or {}).get("final_distance_m"),
                "wall_time_s": round(result.wall_time_s, 3),
            }
            _write_summary(summary_path, summary)
            log(
                f"[{k + 1}/{len(episodes)}] {ep.episode_id}: {result.steps} steps, "
                f"{result.ended_by}, success={success}, {result.wall_time_s:.1f} s"
            )
    finally:
        recording.detach()
        if isinstance(env, MetricsWrapper):
            env.detach()
        recorder.close()
        base.close()
    rows = list(summary["episodes"].values())
    ok = sum(1 for r in rows if r["success"])
    log(
        f"done: {len(rows)} demos ({ok} successful) in {time.perf_counter() - t_start:.0f} s; "
        f"{len(recorder.published_paths)} files published this run"
    )
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args))
    sys.exit(0)
