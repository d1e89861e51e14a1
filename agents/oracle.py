"""The privileged oracle: plans with the navigation grid to prove episodes solvable.

It reads hidden state (target instances, the realized pose, the scene) through the env's
explicit privileged mode only (``gym.make(..., privileged=True)``; the episode loop calls
:meth:`OraclePolicy.attach_env`). Each decision it

1. plans a path on the clearance-inflated navigation grid from the realized pelvis position
   to the goal, keeping 0.42 m from walls and furniture where there is room (the arms swing
   wider than the 0.25 m the grid guarantees) (interact targets: the approach pose in front of the seat; other
   targets: the approach points of any target instance, i.e. the grid's goal regions,
   from which the body can touch and see the target, never through a wall), looks ahead
   along the simplified path and either turns toward the look-ahead point or walks (fast /
   normal / slow by the remaining distance; never fast closer than 0.38 m to an obstacle
   nor normal closer than 0.33 m, where the swinging arms would catch it); before turning in place closer than 0.33 m to
   a wall or furniture, it first steps away from it (turning sweeps the hanging arms);
2. recovers from contacts: when a walk achieved less than a third of its distance, it steps
   back and side steps away from the blocked side;
3. on reaching the approach points of a non-interact target, picks the instance whose
   approach points it reached (the geodesically nearest), faces the nearest point of that
   instance's box and closes in with slow walks until a body point is within 0.17 m of a
   target box, then stops;
4. for beds, couches and toilets, reaches the approach point, turns its back to the seat,
   corrects its position with side steps / step backs, sits at the seat height, and stops;
5. for a point goal (an episode with a ``goal_position``, e.g. image-goal navigation),
   follows the path to the goal cell until the pelvis is within 0.35 m of the goal, turns
   to the goal's heading (so that it sees what the goal image shows) and stops.

The oracle never reads anything a policy could not be given in privileged mode, and the
server refuses privileged mode, so it cannot be evaluated through the benchmark server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import SkillCall

__all__ = ["OraclePolicy"]

_LOOKAHEAD_M = 0.45
_TURN_TOLERANCE_DEG = 17.0
_ALIGN_TOLERANCE_DEG = 7.0
_STOP_DISTANCE_M = 0.17
_APPROACH_REACHED_M = 0.09
_APPROACH_CLOSE_M = 0.6
_MAX_APPROACH_STEPS = 8
# Turning in place sweeps the hanging arms about 0.3 m around the pelvis: closer to a wall
# or furniture than this, the oracle first steps away from it.
_TURN_ROOM_M = 0.33
_MAX_ROOM_STEPS = 2
# A fast stride swings the arms widest: only with this much room on both sides.
_FAST_WALK_ROOM_M = 0.38
# Point goals: stop this close to the goal position (well inside a 1 m success radius),
# after turning to the goal heading within this tolerance; give up closing in after
# this many decisions within the success radius.
_POINT_REACHED_M = 0.35
_POINT_ALIGN_DEG = 15.0
_MAX_POINT_STEPS = 12


def _wrap(a: float) -> float:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def _turn_towards(error_rad: float) -> SkillCall:
    deg = min(max(abs(math.degrees(error_rad)), 10.0), 120.0)
    return SkillCall.turn("left" if error_rad > 0 else "right", round(deg, 1))


def _point_goal(episode: Any) -> tuple[float, float, float] | None:
    """``(x, z, yaw)`` of an episode's goal pose when it has one (a point goal, e.g. an
    image-goal episode), else None."""
    position = getattr(episode, "goal_position", None)
    if position is None:
        return None
    return float(position[0]), float(position[2]), float(getattr(episode, "goal_yaw_rad", 0.0))


def _aabb_distance(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    d = np.maximum(np.maximum(lo - points, points - hi), 0.0)
    return float(np.min(np.linalg.norm(d, axis=1)))


class OraclePolicy:
    """Privileged shortest-path planner (see module docstring).

    Args:
        seed: unused (the oracle is deterministic); accepted for a uniform interface.
        clearance_m: body clearance of the planning grid (the hard limit).
        preferred_clearance_m: clearance its paths keep where there is room: the hands
            swing up to about 0.32 m from the pelvis, so paths that graze walls at the hard
            limit catch the arms on them (None: shortest paths).
    """

    requires_privileged = True

    def __init__(
        self, seed: int = 0, clearance_m: float = 0.25, preferred_clearance_m: float | None = 0.42
    ) -> None:
        del seed
        self.clearance_m = float(clearance_m)
        self.preferred_clearance_m = preferred_clearance_m
        self._env: Any = None
        self._grids: dict[Any, Any] = {}
        self._path_grids: dict[Any, Any] = {}
        self._clearance_cache: tuple[Any, np.ndarray, np.ndarray] | None = None
        self._reset_state()

    def _reset_state(self) -> None:
        self._phase = "navigate"
        self._goal: Any = None
        self._last: SkillCall | None = None
        self._last_xz: np.ndarray | None = None
        self._stuck = 0
        self._approach_steps = 0
        self._close_box: tuple[np.ndarray, np.ndarray] | None = None
        self._sat = False
        self._settle = True
        self._recover: list[SkillCall] = []
        self._room_steps = 0
        self._point_steps = 0

    # -- policy protocol -----------------------------------------------------------------
    def attach_env(self, env: Any) -> None:
        """Receive the (privileged) env; called by the episode loop."""
        self._env = env.unwrapped

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        if self._env is None:
            raise RuntimeError(
                "OraclePolicy needs attach_env(env) with a privileged env before reset"
            )
        self._reset_state()
        st = self._env.privileged_state()
        grid = self._grid(st)
        ep = st.episode
        if _point_goal(ep) is not None:
            self._goal = None
        elif ep.interact:
            best = None
            for goal in self._floor_goals(ep):
                pose = goal.approach_pose
                if pose is None:
                    continue
                d = grid.geodesic_distance(st.root_xz, self._point_mask(grid, pose[0], pose[1]))
                if best is None or d < best[0]:
                    best = (d, goal)
            if best is None or not math.isfinite(best[0]):
                best = (0.0, ep.goals[0])
            self._goal = best[1]
        else:
            self._goal = None

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision:
        call, note = self._decide()
        self._last = call
        st = self._env.privileged_state()
        self._last_xz = st.root_xz.copy()
        return Decision(action=call, visible_state=self._visible_state(), extras={"oracle": note})

    # -- planning ------------------------------------------------------------------------
    def _grid(self, st: Any) -> Any:
        """The navigation grid of the episode's floor (imported multi-floor homes have one
        per floor level; generated homes one)."""
        scene = st.scene
        floor = float(st.episode.start_position[1])
        key = (scene.scene_id, round(floor, 3))
        grid = self._grids.get(key)
        if grid is None:
            from humanclaw_gym.scenes.meshgrid import navigation_grid

            grid = navigation_grid(scene, floor, clearance_m=self.clearance_m)
            self._grids = {key: grid}  # keep one scene floor
            self._path_grids = {}
        return grid

    def _path_grid(self, grid: Any) -> Any:
        """The grid paths are planned on: keeps the preferred clearance where there is room."""
        if self.preferred_clearance_m is None:
            return grid
        view = self._path_grids.get(id(grid))
        if view is None:
            view = grid.with_preferred_clearance(self.preferred_clearance_m)
            self._path_grids = {id(grid): view}
        return view

    @staticmethod
    def _floor_goals(ep: Any) -> list[Any]:
        """The goals on the episode's floor (all goals when none is): the planner walks on
        one floor and does not climb stairs."""
        floor = float(ep.start_position[1])
        same = [
            g for g in ep.goals if g.aabb_min is None or floor - 0.5 <= g.aabb_min[1] <= floor + 1.9
        ]
        return same or list(ep.goals)

    @staticmethod
    def _point_mask(grid: Any, x: float, z: float, radius_m: float = 0.1) -> np.ndarray:
        xs = grid.cell_centers_x()[None, :]
        zs = grid.cell_centers_z()[:, None]
        mask = (xs - x) ** 2 + (zs - z) ** 2 <= radius_m**2
        if not (mask & grid.free).any():
            fx, fz = grid.nearest_free(x, z)
            mask = (xs - fx) ** 2 + (zs - fz) ** 2 <= max(radius_m, grid.cell_m) ** 2
        return mask

    def _clearance(self, grid: Any, pos: np.ndarray) -> tuple[float, np.ndarray]:
        """Distance (m) from ``pos`` to the nearest fixed obstacle of ``grid`` and the unit
        x/z direction pointing away from it."""
        cache = self._clearance_cache
        if cache is None or cache[0] is not grid:
            from scipy import ndimage

            dist, idx = ndimage.distance_transform_edt(~grid.blocked, return_indices=True)
            cache = self._clearance_cache = (grid, dist * grid.cell_m, idx)
        _, dist, idx = cache
        iz, ix = grid.world_to_cell(float(pos[0]), float(pos[1]))
        if not grid.in_bounds(iz, ix):
            return math.inf, np.zeros(2)
        bz, bx = int(idx[0, iz, ix]), int(idx[1, iz, ix])
        away = np.asarray(grid.cell_center(iz, ix)) - np.asarray(grid.cell_center(bz, bx))
        norm = float(np.linalg.norm(away))
        return float(dist[iz, ix]), (away / norm if norm > 0 else np.zeros(2))

    def _turn(self, st: Any, grid: Any, error_rad: float, note: str) -> tuple[SkillCall, str]:
        """Turn by ``error_rad``, first stepping away from an obstacle the arms would sweep."""
        clear, away = self._clearance(grid, st.root_xz)
        if clear < _TURN_ROOM_M and self._room_steps < _MAX_ROOM_STEPS and away.any():
            yaw = st.yaw_rad
            fwd = np.array([math.sin(yaw), math.cos(yaw)])
            left = np.array([math.cos(yaw), -math.sin(yaw)])
            f, lat = float(away @ fwd), float(away @ left)
            need = _TURN_ROOM_M - clear + 0.03
            if abs(lat) >= abs(f):
                dist = min(max(need / max(abs(lat), 0.5), 0.1), 0.5)
                call = SkillCall.side_step("left" if lat > 0 else "right", round(dist, 2))
                move = left * (dist if lat > 0 else -dist)
            elif f < 0:
                dist = min(max(need / max(-f, 0.5), 0.1), 0.6)
                call, move = SkillCall.step_back(round(dist, 2)), -fwd * dist
            else:
                call, move = SkillCall.walk("slow"), fwd * 0.2
            dest = st.root_xz + move
            iz, ix = grid.world_to_cell(float(dest[0]), float(dest[1]))
            if grid.in_bounds(iz, ix) and grid.free[iz, ix]:
                self._room_steps += 1
                return call, f"make room to turn ({clear:.2f} m clear)"
        self._room_steps = 0
        return _turn_towards(error_rad), note

    def _visible_state(self) -> str:
        ep = self._env.privileged_state().episode
        if _point_goal(ep) is not None:
            return "The goal place is part of this home; I know where it is."
        name = ep.object_category.replace("_", " ")
        return f"The {name} I am looking for is part of this home; I know where it is."

    def _progress_blocked(self, st: Any) -> bool:
        """True when the last walk moved less than a third of its distance."""
        if self._last is None or self._last_xz is None or self._last.skill.key != "walk":
            return False
        expected = self._last.condition["distance_m"]
        moved = float(np.linalg.norm(st.root_xz - self._last_xz))
        return moved < expected / 3.0

    def _decide(self) -> tuple[SkillCall, str]:
        st = self._env.privileged_state()
        if self._sat:
            if self._settle and self._last is not None:
                # Hold the seated pose for one more chunk: the body comes down at nearly free
                # fall and may rebound a few millimetres off the seat on the sit's last frame.
                self._settle = False
                return self._last, "stay seated"
            return SkillCall.stop(), "stop after sitting"
        if self._recover:
            return self._recover.pop(0), "recover"
        grid = self._grid(st)
        ep = st.episode
        if self._progress_blocked(st):
            self._stuck += 1
            side = "left" if self._stuck % 2 else "right"
            self._recover = [SkillCall.side_step(side, 0.3)]
            return SkillCall.step_back(0.25), "blocked: back off"
        if _point_goal(ep) is not None:
            return self._point(st, grid)
        if ep.interact:
            return self._interact(st, grid)
        return self._find(st, grid)

    def _follow_path(
        self, st: Any, grid: Any, goals: Any, remaining_m: float
    ) -> tuple[SkillCall, str]:
        pos = st.root_xz
        path = self._path_grid(grid).shortest_path(pos, goals)
        if path is None or len(path) == 0:
            return SkillCall.turn("left", 45), "no path from here: look around"
        path = np.vstack([pos[None, :], np.asarray(path)])
        target = path[-1]
        travelled = 0.0
        for a, b in zip(path[:-1], path[1:], strict=False):
            seg = float(np.linalg.norm(b - a))
            if travelled + seg >= _LOOKAHEAD_M:
                t = (_LOOKAHEAD_M - travelled) / max(seg, 1e-9)
                target = a + t * (b - a)
                break
            travelled += seg
        d = target - pos
        desired = math.atan2(float(d[0]), float(d[1]))
        err = _wrap(desired - st.yaw_rad)
        if abs(math.degrees(err)) > _TURN_TOLERANCE_DEG:
            return self._turn(st, grid, err, "turn to path")
        room = self._clearance(grid, pos)[0]  # longer strides swing the arms wider
        if remaining_m >= 1.0 and abs(math.degrees(err)) < 10.0 and room >= _FAST_WALK_ROOM_M:
            return SkillCall.walk("fast"), "walk"
        if remaining_m >= 0.5 and room >= _TURN_ROOM_M:
            return SkillCall.walk("normal"), "walk"
        return SkillCall.walk("slow"), "walk"

    # point goals: walk to the goal position, face the goal heading, stop
    def _point(self, st: Any, grid: Any) -> tuple[SkillCall, str]:
        gx, gz, goal_yaw = _point_goal(st.episode)
        pos = st.root_xz
        dist = float(np.hypot(gx - pos[0], gz - pos[1]))
        radius = float(getattr(st.episode, "success_distance_m", 1.0))
        if dist <= radius:
            self._point_steps += 1
            if self._point_steps > _MAX_POINT_STEPS:
                return SkillCall.stop(), "point budget used"
        if self._phase == "navigate" and dist > _POINT_REACHED_M:
            mask = self._point_mask(grid, gx, gz)
            remaining = grid.geodesic_distance(pos, mask)
            return self._follow_path(st, grid, mask, remaining)
        self._phase = "face_goal"
        err = _wrap(goal_yaw - st.yaw_rad)
        if abs(math.degrees(err)) > _POINT_ALIGN_DEG and self._point_steps <= _MAX_POINT_STEPS:
            return self._turn(st, grid, err, "face the goal heading")
        return SkillCall.stop(), f"at the goal ({dist:.2f} m)"

    # non-interact targets: reach the approach points, then close in on that target's box
    def _find(self, st: Any, grid: Any) -> tuple[SkillCall, str]:
        ep = st.episode
        goals = self._floor_goals(ep)
        boxes = [
            (np.asarray(g.aabb_min), np.asarray(g.aabb_max))
            for g in goals
            if g.aabb_min is not None
        ]
        d3 = min(_aabb_distance(st.link_origins, lo, hi) for lo, hi in boxes)
        if d3 <= _STOP_DISTANCE_M:
            return SkillCall.stop(), f"within {d3:.2f} m"
        goal_ids = [int(g.object_id) for g in goals]
        region = grid.goal_region(goal_ids)
        remaining = grid.geodesic_distance(st.root_xz, region)
        in_region = remaining <= grid.cell_m or self._phase == "close_in"
        if not in_region:
            return self._follow_path(st, grid, region, remaining)
        self._phase = "close_in"
        self._approach_steps += 1
        if self._approach_steps > _MAX_APPROACH_STEPS:
            return SkillCall.stop(), "approach budget used"
        if self._close_box is None:
            self._close_box = self._reached_box(st, grid, ep)
        # face the nearest point of the reached target's box (x/z)
        pos = st.root_xz
        lo, hi = self._close_box
        d = np.clip(pos, lo[[0, 2]], hi[[0, 2]]) - pos
        err = _wrap(math.atan2(float(d[0]), float(d[1])) - st.yaw_rad)
        if abs(math.degrees(err)) > 12.0:
            return self._turn(st, grid, err, "face target")
        return SkillCall.walk("slow"), "close in"

    @staticmethod
    def _reached_box(st: Any, grid: Any, ep: Any) -> tuple[np.ndarray, np.ndarray]:
        """Box of the target whose approach points are geodesically nearest (the one just
        reached); ties go to the nearest box in a straight line."""
        pos = st.root_xz
        best = None
        for g in OraclePolicy._floor_goals(ep):
            if g.aabb_min is None:
                continue
            lo, hi = np.asarray(g.aabb_min), np.asarray(g.aabb_max)
            geo = grid.geodesic_distance(pos, grid.goal_region(int(g.object_id)))
            straight = float(np.linalg.norm(np.clip(pos, lo[[0, 2]], hi[[0, 2]]) - pos))
            key = (geo if math.isfinite(geo) else math.inf, straight)
            if best is None or key < best[0]:
                best = (key, (lo, hi))
        assert best is not None
        return best[1]

    # interact targets: approach point, turn away from the seat, sit, stop
    def _interact(self, st: Any, grid: Any) -> tuple[SkillCall, str]:
        goal = self._goal
        ax, az, ayaw = goal.approach_pose
        pos = st.root_xz
        offset = np.array([ax, az]) - pos
        dist = float(np.linalg.norm(offset))
        if self._phase == "navigate":
            if dist > _APPROACH_CLOSE_M:
                mask = self._point_mask(grid, ax, az)
                remaining = grid.geodesic_distance(pos, mask)
                return self._follow_path(st, grid, mask, remaining)
            self._phase = "approach"
        if self._phase == "approach":
            self._approach_steps += 1
            if dist > _APPROACH_REACHED_M and self._approach_steps <= _MAX_APPROACH_STEPS:
                if dist >= 0.3:
                    err = _wrap(math.atan2(float(offset[0]), float(offset[1])) - st.yaw_rad)
                    if abs(math.degrees(err)) > 12.0:
                        return self._turn(st, grid, err, "face approach point")
                    return SkillCall.walk("slow"), "walk to approach point"
                return self._correct(st, offset), "fine position"
            self._phase = "align"
        if self._phase == "align":
            err = _wrap(ayaw - st.yaw_rad)
            if abs(math.degrees(err)) > _ALIGN_TOLERANCE_DEG:
                return self._turn(st, grid, err, "turn back to the seat")
            # fine correction in the body frame once aligned
            if dist > _APPROACH_REACHED_M and self._approach_steps <= _MAX_APPROACH_STEPS:
                self._approach_steps += 1
                return self._correct(st, offset), "fine position"
            self._sat = True
            floor = float(st.episode.start_position[1])  # the sit height is above the floor
            seat = 0.5 if goal.seat_height_m is None else goal.seat_height_m - floor
            height = float(np.clip(seat, 0.15, 0.85))
            return SkillCall.sit(round(height, 3)), "sit"
        return SkillCall.stop(), "done"

    @staticmethod
    def _correct(st: Any, offset: np.ndarray) -> SkillCall:
        """Side step / step back / slow walk toward ``offset`` (world x/z) in the body frame."""
        yaw = st.yaw_rad
        fwd = np.array([math.sin(yaw), math.cos(yaw)])
        left = np.array([math.cos(yaw), -math.sin(yaw)])
        f = float(offset @ fwd)
        lat = float(offset @ left)
        if abs(lat) >= abs(f) and abs(lat) >= 0.05:
            return SkillCall.side_step(
                "left" if lat > 0 else "right", round(min(max(abs(lat), 0.1), 0.5), 2)
            )
        if f < 0:
            return SkillCall.step_back(round(min(max(-f, 0.1), 0.6), 2))
        if f >= 0.1:
            return SkillCall.walk("slow")
        return SkillCall.side_step("left" if lat > 0 else "right", 0.1)
