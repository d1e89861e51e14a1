"""GeodesicProgressReward: an optional shaped reward for learning (not part of the benchmark).

The benchmark env always returns reward 0.0; success is scored after the fact by the
metrics. For reinforcement learning this wrapper replaces the reward with

    r_t = progress_scale * (d_{t-1} - d_t)                  geodesic progress (m)
        - step_penalty                                       every decision
        + success_bonus   if the step is an active Stop with a body point within
                          0.2 m of a target box (NavSR@20cm), and for interact episodes
                          additionally the pelvis on the target after a Sit
        - failed_stop_penalty   for any other Stop

where ``d`` is the geodesic distance (navigation grid, humanoid clearance) from the pelvis
to the nearest approach point of a target (:meth:`NavGrid.goal_region`: free cells from
which the body can touch and see the target, never through a wall). It reads hidden state, so it needs an env made with
``privileged=True``; the observation and ``info`` stay unchanged apart from
``info["shaped_reward_terms"]`` (the terms above, for logging).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["GeodesicProgressReward"]


def _aabb_distance(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    d = np.maximum(np.maximum(lo - points, points - hi), 0.0)
    return float(np.min(np.linalg.norm(d, axis=1)))


class GeodesicProgressReward(gym.Wrapper):
    """Shaped reward from geodesic progress plus a success bonus (see module docstring).

    Args:
        env: a ``HumanClawFindNavInteract-v0`` env made with ``privileged=True``.
        progress_scale: reward per metre of geodesic progress.
        step_penalty: cost of every decision.
        success_bonus: reward of a successful active stop.
        failed_stop_penalty: cost of a Stop that does not succeed.
    """

    def __init__(
        self,
        env: gym.Env,
        progress_scale: float = 1.0,
        step_penalty: float = 0.01,
        success_bonus: float = 10.0,
        failed_stop_penalty: float = 1.0,
    ) -> None:
        super().__init__(env)
        if not getattr(env.unwrapped, "privileged", False):
            raise PermissionError(
                "GeodesicProgressReward reads hidden state: make the env with privileged=True"
            )
        self.progress_scale = float(progress_scale)
        self.step_penalty = float(step_penalty)
        self.success_bonus = float(success_bonus)
        self.failed_stop_penalty = float(failed_stop_penalty)
        self._grids: dict[tuple[str, float], Any] = {}
        self._region: np.ndarray | None = None
        self._grid: Any = None
        self._dist = 0.0
        self._sat_on_target = False

    def _distance(self) -> float:
        st = self.env.unwrapped.privileged_state()
        d = self._grid.geodesic_distance(st.root_xz, self._region)
        return float(d) if np.isfinite(d) else float(self._dist)

    def reset(self, **kwargs: Any):
        from humanclaw_gym.scenes.meshgrid import navigation_grid

        obs, info = self.env.reset(**kwargs)
        st = self.env.unwrapped.privileged_state()
        key = (st.scene.scene_id, round(float(st.episode.start_position[1]), 3))
        grid = self._grids.get(key)
        if grid is None:  # imported multi-floor homes: the grid of the episode's floor
            grid = navigation_grid(st.scene, float(st.episode.start_position[1]))
            self._grids = {key: grid}
        self._grid = grid
        self._region = grid.goal_region([int(g.object_id) for g in st.episode.goals])
        self._dist = 0.0
        self._dist = self._distance()
        self._sat_on_target = False
        return obs, info

    def step(self, action: Any):
        obs, _reward, terminated, truncated, info = self.env.step(action)
        st = self.env.unwrapped.privileged_state()
        ep = st.episode
        d = self._distance()
        progress = self._dist - d
        self._dist = d
        terms = {
            "progress": self.progress_scale * progress,
            "step": -self.step_penalty,
            "stop": 0.0,
        }
        executed = info.get("executed_skill") or ""
        if executed.startswith("Sit down"):
            self._sat_on_target = self._pelvis_on_target(st)
        if terminated:
            boxes = [
                (np.asarray(g.aabb_min), np.asarray(g.aabb_max))
                for g in ep.goals
                if g.aabb_min is not None
            ]
            near = min(_aabb_distance(st.link_origins, lo, hi) for lo, hi in boxes) <= 0.2
            success = near and (self._sat_on_target if ep.interact else True)
            terms["stop"] = self.success_bonus if success else -self.failed_stop_penalty
        info = dict(info)
        info["shaped_reward_terms"] = terms
        return obs, float(sum(terms.values())), terminated, truncated, info

    @staticmethod
    def _pelvis_on_target(st: Any) -> bool:
        """Pelvis above a target's seat region and at most 0.25 m above its seat height."""
        pelvis = st.realized_frame[:3]
        for goal in st.episode.goals:
            if goal.aabb_min is None or goal.seat_height_m is None:
                continue
            lo, hi = np.asarray(goal.aabb_min), np.asarray(goal.aabb_max)
            inside = lo[0] <= pelvis[0] <= hi[0] and lo[2] <= pelvis[2] <= hi[2]
            if inside and pelvis[1] - goal.seat_height_m <= 0.25:
                return True
        return False
