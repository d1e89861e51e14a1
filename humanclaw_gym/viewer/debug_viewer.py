"""The browser debug viewer: a viser page showing one live ``FindNavInteractEnv`` episode.

Threads (see ``docs/viewer.md``):

* **viser's threads** serve the page and run GUI callbacks. A callback only turns the
  click into a :class:`~humanclaw_gym.viewer.control.ControlRequest` and puts it on the
  viewer's queue; it never touches the env, the policy or the episode bookkeeping.
* **the simulation thread** is whichever thread calls :meth:`DebugViewer.run` (or the
  one :meth:`DebugViewer.start` creates). It alone resets and steps the env, calls the
  policy, applies queued requests in order, and pushes the new scene, body pose, ego
  image and status to viser. The env is also closed there: GL contexts and the physics
  client belong to the thread that built them on the first reset.

Frames: the viewer tells viser that +Y is up, so world coordinates (Y up, metres) go to
viser unchanged; :mod:`humanclaw_gym.viewer.geometry` holds the few convention changes
(quaternion order, cylinder axis, frustum axes).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import numpy as np

from humanclaw_gym.image_sizes import EGO_SIZE_PX
from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import Choice, Skill, SkillCall, SkillCallError, action_fields
from humanclaw_gym.viewer import geometry
from humanclaw_gym.viewer.control import (
    ControlQueue,
    ControlRequest,
    ViewerClosedError,
    ViewerState,
)

__all__ = ["ALLOWED_HOSTS", "DebugViewer", "ViewerUnavailableError", "check_host"]

#: Host names the viewer accepts; both bind 127.0.0.1 (loopback only).
ALLOWED_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost")
_BIND_ADDRESS = "127.0.0.1"

_BODY_RGB = (0.93, 0.52, 0.18)
_EGO_FRUSTUM_RGB = (0.1, 0.35, 0.9)
_TARGET_LABEL_LIFT_M = 0.25
_WALL_CATEGORIES = frozenset({"wall"})
_IDLE_POLL_S = 0.25
_JOIN_TIMEOUT_S = 30.0
_CAMERA_BEHIND_M = 3.0
_CAMERA_ABOVE_M = 3.2


class ViewerUnavailableError(ImportError):
    """viser is not installed (``pip install 'humanclaw-gym[viewer]'``)."""


def check_host(host: str) -> str:
    """The address to bind for ``host``: loopback only.

    Raises:
        ValueError: ``host`` is not one of :data:`ALLOWED_HOSTS`.
    """
    if host not in ALLOWED_HOSTS:
        raise ValueError(
            f"host={host!r} is refused: the debug viewer binds loopback only (allowed:"
            f" {', '.join(ALLOWED_HOSTS)}); reach it from another machine through an SSH"
            " tunnel (ssh -L 8080:127.0.0.1:8080 HOST)"
        )
    return _BIND_ADDRESS


def _import_viser() -> Any:
    try:
        import viser
    except ImportError as exc:
        raise ViewerUnavailableError(
            "the debug viewer needs viser: pip install 'humanclaw-gym[viewer]'"
        ) from exc
    return viser


class _SceneObserver:
    """Env observer (runs on the simulation thread inside reset/step): keeps the latest
    scene, episode, realized pose and dynamic object poses for drawing."""

    def __init__(self) -> None:
        self.scene: Any = None
        self.episode: Any = None
        self.realized_frame: np.ndarray | None = None
        self.object_ids: tuple[int, ...] = ()
        self.object_poses: np.ndarray | None = None
        self.ego_rgb: np.ndarray | None = None

    def on_reset(self, event: Any) -> None:
        self.scene = event.scene
        self.episode = event.episode
        self.realized_frame = np.asarray(event.realized_frame, dtype=np.float64)
        self.object_ids = tuple(int(i) for i in event.object_ids)
        self.object_poses = np.asarray(event.object_poses, dtype=np.float64)
        self.ego_rgb = event.ego_rgb

    def on_frame(self, event: Any) -> None:
        self.realized_frame = np.asarray(event.realized, dtype=np.float64)
        self.object_poses = np.asarray(event.object_poses, dtype=np.float64)

    def on_step(self, event: Any) -> None:
        self.ego_rgb = event.observation


class DebugViewer:
    """Serve a live episode of a HumanClaw env in the browser, with run controls.

    The page shows the scene (every part as a viser box / cylinder / sphere), the humanoid
    (one primitive per link, or a body asset's visual mesh per link as the renderer draws
    it, placed from the realized pose after every step), the dynamic
    objects at their simulated poses, labels on the target instances, the ego camera as
    a frustum carrying the current ego image, and a panel with the instruction, the
    current ego image, the last executed skill, the step count and the controls: pause /
    resume, single step, reset (optionally to an episode id), and *choose skill* (a
    dropdown of the 8 skills with their parameters, or the SkillCall text form).

    Nothing happens until :meth:`run` (blocking, on the calling thread) or :meth:`start`
    (a background thread): that thread becomes the simulation thread, resets the env
    and then, while not paused, steps it with ``policy`` at most ``fps`` decisions per
    second. Ended episodes are reset before the next step.

    Args:
        env: a ``FindNavInteractEnv`` (wrappers allowed). The viewer registers an observer
            on ``env.unwrapped``; nothing hidden reaches the policy.
        policy: drives the env while running: anything with ``reset(info)`` and
            ``act(obs, info)`` returning a Decision or SkillCall. Policies with
            ``requires_privileged = True`` (the oracle) need an env made with
            ``privileged=True`` and receive it through ``attach_env``. ``None``: manual
            control only (skills chosen in the GUI or through :meth:`request_skill`).
        agent_name: name shown in the GUI (default: the policy's class name, or "manual").
        host: ``"127.0.0.1"`` or ``"localhost"``; anything else is refused.
        port: TCP port (0 picks a free one; if the port is taken viser moves on to the
            next free one). :attr:`port` / :attr:`url` tell the port actually bound.
        fps: maximum decision steps per second while running (> 0). Each decision is 0.5 s
            of motion, so 2.0 is real time.
        paused: start paused (single steps and chosen skills still work).
        episode_id: the first episode (default: the env's first one).
        seed: passed to the first ``env.reset``.
        close_env: close the env (on the simulation thread) when the viewer closes.
        wall_opacity: opacity of wall parts in ``(0, 1]``; below 1 the rooms stay visible
            from an oblique camera.

    Raises:
        ValueError: bad ``host``, ``port``, ``fps`` or ``wall_opacity``.
        PermissionError: a privileged policy with an env made without ``privileged=True``.
        ViewerUnavailableError: viser is not installed.
    """

    def __init__(
        self,
        env: Any,
        policy: Any = None,
        *,
        agent_name: str | None = None,
        host: str = "127.0.0.1",
        port: int = 8080,
        fps: float = 2.0,
        paused: bool = False,
        episode_id: str | None = None,
        seed: int | None = None,
        close_env: bool = True,
        wall_opacity: float = 0.35,
    ) -> None:
        bind = check_host(host)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port={port!r} is invalid: allowed an int 0..65535")
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0.0:
            raise ValueError(f"fps={fps!r} is invalid: allowed a finite number > 0")
        if not math.isfinite(float(fps)):
            raise ValueError(f"fps={fps!r} is invalid: allowed a finite number > 0")
        if not 0.0 < float(wall_opacity) <= 1.0:
            raise ValueError(f"wall_opacity={wall_opacity!r} is invalid: allowed 0 < x <= 1")
        unwrapped = env.unwrapped
        if episode_id is not None:
            known = sorted(ep.episode_id for ep in unwrapped.episodes)
            if str(episode_id) not in known:
                raise ValueError(
                    f"episode_id={episode_id!r} is not in this env's episodes"
                    f" ({len(known)} known, e.g. {known[:3]})"
                )
        if policy is not None and getattr(policy, "requires_privileged", False):
            if not getattr(unwrapped, "privileged", False):
                raise PermissionError(
                    f"{type(policy).__name__} needs privileged state; make the env with"
                    " privileged=True"
                )
            policy.attach_env(env)
        viser = _import_viser()

        self._env = env
        self._unwrapped = unwrapped
        self._policy = policy
        self._agent = agent_name or ("manual" if policy is None else type(policy).__name__)
        self._period_s = 1.0 / float(fps)
        self._paused = bool(paused)
        self._first_episode_id = episode_id
        self._seed = seed
        self._close_env = bool(close_env)
        self._wall_opacity = float(wall_opacity)

        self._queue = ControlQueue()
        self._state_lock = threading.Lock()
        self._state = ViewerState(paused=self._paused, agent=self._agent)
        self._stop = threading.Event()
        self._loop_done = threading.Event()
        self._loop_active = False
        self._loop_thread: threading.Thread | None = None
        self._loop_error: BaseException | None = None
        self._closed = False
        self._close_lock = threading.Lock()

        # episode bookkeeping: simulation thread only
        self._obs: np.ndarray | None = None
        self._info: dict[str, Any] = {}
        self._done = True
        self._end_reason: str | None = None
        self._last_skill: str | None = None
        self._last_source: str | None = None
        self._total_steps = 0
        self._episodes_started = 0
        self._error: str | None = None
        self._sim_thread_id: int | None = None
        self._step_thread_id: int | None = None

        # drawing state: simulation thread only
        self._drawn_scene_id: str | None = None
        self._scene_handles: list[Any] = []
        self._dynamic_frames: dict[int, Any] = {}
        self._target_handles: list[Any] = []
        self._link_frames: list[Any] = []
        self._ego_frustum: Any = None

        self._observer = _SceneObserver()
        self._observer_handle = unwrapped.add_observer(self._observer, needs=())

        self._server: Any = None
        try:
            self._server = viser.ViserServer(
                host=bind, port=port, label="humanclaw view", verbose=False
            )
            self._server.scene.set_up_direction("+y")
            self._build_gui()
        except BaseException:
            unwrapped.remove_observer(self._observer_handle)
            if self._server is not None:
                self._server.stop()
            raise

    # ------------------------------------------------------------------------------------
    # public API (any thread)
    # ------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The TCP port the page is served on."""
        return int(self._server.get_port())

    @property
    def url(self) -> str:
        """The page URL (loopback)."""
        return f"http://{_BIND_ADDRESS}:{self.port}/"

    @property
    def server(self) -> Any:
        """The underlying ``viser.ViserServer`` (for adding extra debug drawings)."""
        return self._server

    @property
    def gui_handles(self) -> dict[str, Any]:
        """The panel's viser GUI handles by name (``"pause"``, ``"step"``, ``"reset"``,
        ``"skill"``, ``"param_angle_deg"``, ``"execute_skill"``, ``"skill_text"``,
        ``"execute_text"``, ``"status"``, ``"ego_image"``, ...), for scripting and tests.
        Setting a button's ``value = True`` clicks it."""
        return dict(self._gui_handles)

    def state(self) -> ViewerState:
        """The latest snapshot published by the simulation thread."""
        with self._state_lock:
            return self._state

    def request_step(self) -> Future[ViewerState]:
        """Ask for one decision step by the policy (resets first if the episode ended).

        Returns:
            A future completed with the state after the step; without a policy the state
            carries an ``error`` instead (never an exception).
        """
        return self._submit(ControlRequest("step"))

    def request_reset(self, episode_id: str | None = None) -> Future[ViewerState]:
        """Ask for a reset to ``episode_id`` (``None``: the env's next episode).

        An unknown id is reported in ``state().error`` and the GUI, not raised.
        """
        return self._submit(ControlRequest("reset", episode_id=episode_id))

    def request_skill(self, skill: str | SkillCall) -> Future[ViewerState]:
        """Ask to execute one skill now: a :class:`SkillCall` or its text form
        (``"Turn<left><30>"``, parsed with :meth:`SkillCall.parse` on the simulation thread).

        Invalid text is reported in ``state().error`` and the GUI, not raised.
        """
        if not isinstance(skill, (str, SkillCall)):
            raise TypeError(
                f"request_skill expects SkillCall text or a SkillCall, got {type(skill).__name__}"
            )
        return self._submit(ControlRequest("skill", skill=skill))

    def pause(self) -> Future[ViewerState]:
        """Stop stepping the policy automatically (controls keep working)."""
        return self._submit(ControlRequest("pause"))

    def resume(self) -> Future[ViewerState]:
        """Step the policy automatically again, at most ``fps`` decisions per second."""
        return self._submit(ControlRequest("resume"))

    def run(self, duration_s: float | None = None) -> ViewerState:
        """Run the simulation loop on the calling thread (which becomes the sim thread).

        Returns when :meth:`close` is called, after ``duration_s`` seconds, or raises what
        the env or the policy raised (also ``KeyboardInterrupt``); in every case the server
        and (with ``close_env``) the env are closed before it returns.

        Returns:
            The final state.
        """
        if duration_s is not None and not (
            isinstance(duration_s, (int, float)) and duration_s > 0.0
        ):
            raise ValueError(f"duration_s={duration_s!r} is invalid: allowed None or a number > 0")
        with self._close_lock:
            if self._closed:
                raise ViewerClosedError("run() called on a closed viewer")
            if self._loop_active:
                raise RuntimeError("the simulation loop is already running")
            self._loop_active = True
        self._sim_thread_id = threading.get_ident()
        try:
            self._loop(duration_s)
        finally:
            self._shutdown()
        return self.state()

    def start(self, duration_s: float | None = None) -> DebugViewer:
        """Run the simulation loop on a new background thread; returns ``self``.

        Use :meth:`join` to wait for it and to re-raise an error that ended it.
        """
        if self._loop_thread is not None:
            raise RuntimeError("start() was already called")

        def target() -> None:
            try:
                self.run(duration_s)
            except BaseException as exc:  # surfaced by join()
                self._loop_error = exc

        self._loop_thread = threading.Thread(target=target, name="humanclaw-view-sim", daemon=True)
        self._loop_thread.start()
        return self

    def join(self, timeout_s: float | None = None) -> ViewerState:
        """Wait for the background loop of :meth:`start` to end; re-raise its error."""
        if self._loop_thread is not None:
            self._loop_thread.join(timeout_s)
            if self._loop_thread.is_alive():
                raise TimeoutError(f"the viewer loop did not end within {timeout_s} s")
        if self._loop_error is not None:
            raise self._loop_error
        return self.state()

    def close(self) -> None:
        """Stop the loop, then close the server and (with ``close_env``) the env.

        Idempotent and callable from any thread. When the loop runs on another thread the
        cleanup happens there (this call waits for it); otherwise it happens here.
        """
        self._stop.set()
        with self._close_lock:
            if self._closed:
                return
            active = self._loop_active
        if active and threading.get_ident() != self._sim_thread_id:
            self._queue.put(ControlRequest("wake"))
            if not self._loop_done.wait(_JOIN_TIMEOUT_S):
                raise TimeoutError(f"the viewer loop did not stop within {_JOIN_TIMEOUT_S} s")
            return
        if not active:
            self._shutdown()

    def __enter__(self) -> DebugViewer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------
    # simulation thread
    # ------------------------------------------------------------------------------------
    def _submit(self, request: ControlRequest) -> Future[ViewerState]:
        if self._closed or self._stop.is_set():
            future: Future[ViewerState] = Future()
            future.set_exception(ViewerClosedError("the viewer is closed"))
            return future
        return self._queue.put(request)

    def _loop(self, duration_s: float | None) -> None:
        start = time.monotonic()
        deadline = None if duration_s is None else start + float(duration_s)
        try:
            self._reset(self._first_episode_id, seed=self._seed)
        except _Reported as report:  # pragma: no cover - the constructor checked the id
            self._error = str(report)
        self._publish()
        next_tick = time.monotonic() + self._period_s
        while not self._stop.is_set():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            auto = not self._paused and self._policy is not None
            timeout = (next_tick - now) if auto else _IDLE_POLL_S
            if deadline is not None:
                timeout = min(timeout, deadline - now)
            item = self._queue.get(max(timeout, 0.0))
            if item is not None:
                self._apply(*item)
                continue
            if auto and not self._stop.is_set() and time.monotonic() >= next_tick:
                self._tick()
                next_tick = max(next_tick + self._period_s, time.monotonic())

    def _apply(self, request: ControlRequest, future: Future[ViewerState]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            if request.kind != "wake":
                self._error = None
                self._handle(request)
        except _Reported as report:
            self._error = str(report)
        except BaseException as exc:
            future.set_exception(exc)
            raise
        future.set_result(self._publish())

    def _handle(self, request: ControlRequest) -> None:
        kind = request.kind
        if kind == "pause":
            self._paused = True
        elif kind == "resume":
            self._paused = False
        elif kind == "reset":
            self._reset(request.episode_id)
        elif kind == "step":
            if self._policy is None:
                raise _Reported(
                    "no policy to step (agent 'manual'): choose a skill or start the viewer"
                    " with --agent oracle|random"
                )
            self._execute(None, self._agent)
        elif kind == "skill":
            call = request.skill
            if isinstance(call, str):
                try:
                    call = SkillCall.parse(call)
                except SkillCallError as exc:
                    raise _Reported(str(exc)) from None
            self._execute(call, request.source)

    def _tick(self) -> None:
        """One automatic iteration while running: reset an ended episode, else step."""
        if self._done:
            self._reset(None)
        else:
            self._execute(None, self._agent)
        self._publish()

    def _reset(self, episode_id: str | None, seed: int | None = None) -> None:
        options = None
        if episode_id is not None:
            known = sorted(ep.episode_id for ep in self._unwrapped.episodes)
            if str(episode_id) not in known:
                raise _Reported(
                    f"episode_id={episode_id!r} is not in this env's episodes"
                    f" ({len(known)} known, e.g. {known[:3]})"
                )
            options = {"episode_id": str(episode_id)}
        obs, info = self._env.reset(seed=seed, options=options)
        self._obs, self._info = obs, dict(info)
        if self._policy is not None:
            self._policy.reset(dict(info))
        self._done = False
        self._end_reason = None
        self._last_skill = None
        self._last_source = None
        self._episodes_started += 1
        self._draw_scene()
        self._draw_state()

    def _execute(self, call: SkillCall | None, source: str) -> None:
        if self._done:
            self._reset(None)
        if call is None:
            out = self._policy.act(self._obs, self._info)
            if isinstance(out, SkillCall):
                out = Decision(action=out)
            if not isinstance(out, Decision):
                raise TypeError(
                    f"policy.act must return a Decision or a SkillCall, got {type(out).__name__}"
                )
            decision = out
        else:
            decision = Decision(action=call, extras={"source": source})
        self._step_thread_id = threading.get_ident()
        obs, _reward, terminated, truncated, info = self._env.step(decision)
        self._obs, self._info = obs, dict(info)
        self._total_steps += 1
        self._last_skill = str(decision.action)
        self._last_source = source
        if terminated or truncated:
            self._done = True
            self._end_reason = "stop" if terminated else "truncated"
        self._draw_state()

    # ------------------------------------------------------------------------------------
    # drawing (simulation thread)
    # ------------------------------------------------------------------------------------
    def _draw_scene(self) -> None:
        scene = self._observer.scene
        if scene is None:
            return
        api = self._server.scene
        if scene.scene_id != self._drawn_scene_id:
            for handle in self._scene_handles:
                handle.remove()
            self._scene_handles = []
            self._dynamic_frames = {}
            for obj in scene.objects:
                frame = api.add_frame(
                    f"/scene/{obj.name}",
                    show_axes=False,
                    position=tuple(obj.position),
                    wxyz=geometry.object_frame_wxyz(obj.yaw_rad),
                )
                self._scene_handles.append(frame)
                if obj.dynamic:
                    self._dynamic_frames[obj.object_id] = frame
                opacity = self._wall_opacity if obj.category in _WALL_CATEGORIES else None
                if opacity is not None and opacity >= 1.0:
                    opacity = None
                for k, part in enumerate(geometry.part_placements(obj)):
                    self._add_part(f"/scene/{obj.name}/part_{k}", part, opacity)
            lo, hi = scene.bounds()
            center = 0.5 * (lo + hi)
            self._scene_handles.append(
                api.add_grid(
                    "/grid",
                    width=float(hi[0] - lo[0]) + 2.0,
                    height=float(hi[2] - lo[2]) + 2.0,
                    plane="xz",
                    position=(float(center[0]), float(lo[1]) - 0.001, float(center[2])),
                    cell_size=0.5,
                    section_size=1.0,
                )
            )
            self._drawn_scene_id = scene.scene_id
        for handle in self._target_handles:
            handle.remove()
        self._target_handles = []
        episode = self._observer.episode
        for k, goal in enumerate(getattr(episode, "goals", ())):
            top = float(goal.aabb_max[1]) + _TARGET_LABEL_LIFT_M
            self._target_handles.append(
                api.add_label(
                    f"/targets/goal_{k}",
                    f"target: {goal.category} ({goal.object_name})",
                    position=(float(goal.position[0]), top, float(goal.position[2])),
                    anchor="bottom-center",
                )
            )
        self._place_camera()

    def _add_part(self, name: str, part: geometry.PartPlacement, opacity: float | None) -> None:
        api = self._server.scene
        common = {
            "color": part.color,
            "position": part.position_m,
            "wxyz": part.wxyz,
            "opacity": opacity,
            "cast_shadow": False,
            "receive_shadow": False,
        }
        if part.shape == "box":
            api.add_box(name, dimensions=part.dimensions_m, **common)
        elif part.shape == "cylinder":
            api.add_cylinder(
                name, radius=part.dimensions_m[0], height=part.dimensions_m[1], **common
            )
        elif part.shape == "mesh":
            api.add_mesh_simple(name, part.vertices, part.faces, **common)
        else:
            api.add_icosphere(name, radius=part.dimensions_m[0], subdivisions=2, **common)

    def _body_asset(self) -> Any:
        """The env's body asset (a :class:`~humanclaw_gym.body.asset.BodyAsset`), or None for
        the built-in body."""
        simulation = getattr(self._unwrapped, "simulation", None)
        return getattr(simulation, "body_asset", None)

    def _ensure_body(self) -> None:
        if self._link_frames:
            return
        api = self._server.scene
        asset = self._body_asset()
        if asset is not None:  # drawn from its own meshes, as the renderer draws it
            meshes = {j: (v, f) for j, v, f in geometry.asset_link_meshes(asset)}
            for j in range(asset.num_links):
                frame = api.add_frame(f"/body/link_{j:02d}", show_axes=False)
                self._link_frames.append(frame)
                if j in meshes:
                    vertices, faces = meshes[j]
                    api.add_mesh_simple(
                        f"/body/link_{j:02d}/mesh", vertices, faces, color=_BODY_RGB
                    )
        for link in () if asset is not None else geometry.link_placements():
            frame = api.add_frame(f"/body/link_{link.joint:02d}", show_axes=False)
            self._link_frames.append(frame)
            name = f"/body/link_{link.joint:02d}/shape"
            common = {"color": _BODY_RGB, "position": link.position_m, "wxyz": link.wxyz}
            if link.kind == "capsule":
                vertices, faces = geometry.capsule_mesh(link.radius_m, link.half_length_m)
                api.add_mesh_simple(name, vertices, faces, **common)
            elif link.kind == "box":
                api.add_box(name, dimensions=tuple(2.0 * v for v in link.half_extents_m), **common)
            else:
                api.add_icosphere(name, radius=link.radius_m, subdivisions=2, **common)
        self._ego_frustum = api.add_camera_frustum(
            "/ego_camera",
            fov=math.radians(90.0),
            aspect=1.0,
            scale=0.25,
            color=tuple(int(255 * c) for c in _EGO_FRUSTUM_RGB),
        )

    def _draw_state(self) -> None:
        """Body links, dynamic objects and the ego frustum from the latest observer data."""
        frame = self._observer.realized_frame
        if frame is None:
            return
        from humanclaw_gym.render.cameras import ego_camera
        from humanclaw_gym.replay.render import link_poses_from_frames

        self._ensure_body()
        asset = self._body_asset()
        if asset is not None:
            from humanclaw_gym.render.cameras import body_asset_ego_camera

            poses = geometry.asset_link_poses(asset, frame)
            poses_xyzw = np.concatenate([poses[:, :3], poses[:, 4:7], poses[:, 3:4]], 1)
            camera = body_asset_ego_camera(asset, poses_xyzw)
        else:
            poses_xyzw = link_poses_from_frames(frame)
            camera = ego_camera(poses_xyzw)
            poses = np.concatenate(
                [poses_xyzw[:, :3], geometry.wxyz_from_xyzw(poses_xyzw[:, 3:])], 1
            )
        with self._server.atomic():
            for handle, pose in zip(self._link_frames, poses, strict=True):
                handle.position = pose[:3]
                handle.wxyz = pose[3:7]
            object_poses = self._observer.object_poses
            if object_poses is not None:
                for object_id, pose in zip(self._observer.object_ids, object_poses, strict=True):
                    handle = self._dynamic_frames.get(object_id)
                    if handle is not None:
                        handle.position = pose[:3]
                        handle.wxyz = geometry.wxyz_from_xyzw(pose[3:7])
            self._ego_frustum.position = np.asarray(camera.position)
            self._ego_frustum.wxyz = geometry.frustum_wxyz(
                np.asarray(camera.forward), np.asarray(camera.up)
            )
            if self._obs is not None:
                self._ego_frustum.image = self._obs
        if self._obs is not None:
            self._gui_image.image = self._obs
        if self._gui_follow.value:
            self._move_client_cameras()

    def _place_camera(self) -> None:
        """After a reset: the camera of new tabs and of every open tab goes behind and above
        the body at its start pose, looking at it."""
        position, look_at = self._camera_pose()
        if position is None:
            return
        self._server.initial_camera.position = position
        self._server.initial_camera.look_at = look_at
        self._move_client_cameras()

    def _move_client_cameras(self) -> None:
        """Move every connected browser's camera behind the body (simulation thread)."""
        position, look_at = self._camera_pose()
        if position is None:
            return
        for client in self._server.get_clients().values():
            client.camera.position = position
            client.camera.look_at = look_at

    def _camera_pose(
        self,
    ) -> tuple[tuple[float, float, float] | None, tuple[float, float, float] | None]:
        frame = self._observer.realized_frame
        if frame is None:
            return None, None
        from humanclaw_gym.body import heading_yaw

        return _chase_camera(frame[:3], float(heading_yaw(frame[3:6])))

    # ------------------------------------------------------------------------------------
    # state publishing (simulation thread)
    # ------------------------------------------------------------------------------------
    def _publish(self) -> ViewerState:
        frame = self._observer.realized_frame
        root = yaw = None
        if frame is not None:
            from humanclaw_gym.body import heading_yaw

            root = tuple(float(v) for v in frame[:3])
            yaw = float(heading_yaw(frame[3:6]))
        info: Mapping[str, Any] = self._info
        state = ViewerState(
            started=self._episodes_started > 0,
            paused=self._paused,
            closed=self._closed,
            agent=self._agent,
            episode_id=info.get("episode_id"),
            scene_id=info.get("scene_id"),
            instruction=info.get("instruction"),
            step=int(info.get("step", 0)),
            max_steps=int(info.get("max_steps", 0)),
            last_skill=self._last_skill,
            last_skill_source=self._last_source,
            episode_done=self._done and self._episodes_started > 0,
            end_reason=self._end_reason,
            total_steps=self._total_steps,
            episodes_started=self._episodes_started,
            error=self._error,
            root_position_m=root,  # type: ignore[arg-type]
            yaw_rad=yaw,
            sim_thread_id=self._sim_thread_id,
            step_thread_id=self._step_thread_id,
        )
        with self._state_lock:
            self._state = state
        self._update_gui(state)
        return state

    def _shutdown(self) -> None:
        """Release everything (simulation thread, or the caller when no loop runs)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        errors: list[BaseException] = []
        try:
            self._queue.fail_pending(ViewerClosedError("the viewer closed before the request ran"))
        except BaseException as exc:  # pragma: no cover - keep closing
            errors.append(exc)
        try:
            self._unwrapped.remove_observer(self._observer_handle)
        except BaseException as exc:  # pragma: no cover - keep closing
            errors.append(exc)
        try:
            self._server.stop()
        except BaseException as exc:  # pragma: no cover - keep closing
            errors.append(exc)
        if self._close_env:
            try:
                self._env.close()
            except BaseException as exc:
                errors.append(exc)
        with self._state_lock:
            self._state = replace(self._state, closed=True)
        self._loop_done.set()
        if errors:
            raise errors[0]

    # ------------------------------------------------------------------------------------
    # GUI (built on the constructing thread; callbacks run on viser's threads)
    # ------------------------------------------------------------------------------------
    def _build_gui(self) -> None:
        gui = self._server.gui
        self._gui_instruction = gui.add_markdown("**Instruction:** (starting...)")
        self._gui_status = gui.add_markdown("")
        self._gui_error = gui.add_markdown("")
        self._gui_image = gui.add_image(
            np.zeros((EGO_SIZE_PX, EGO_SIZE_PX, 3), dtype=np.uint8), label="ego view", format="jpeg"
        )

        with gui.add_folder("Run"):
            self._gui_pause = gui.add_button("Pause" if not self._paused else "Resume")
            step_button = gui.add_button("Single step")
            self._gui_episode = gui.add_text("Episode id", "", hint="blank: the env's next episode")
            reset_button = gui.add_button("Reset")
            look_button = gui.add_button("Camera to body")
            self._gui_follow = gui.add_checkbox(
                "Follow body", False, hint="move every browser's camera behind the body each step"
            )

        with gui.add_folder("Choose skill"):
            names = [skill.display_name for skill in Skill]
            self._gui_skill = gui.add_dropdown("Skill", names, initial_value=names[0])
            self._gui_params: dict[str, Any] = {}
            for entry in action_fields():  # one input per action-space entry
                rule = entry.rule
                if isinstance(rule, Choice):
                    self._gui_params[entry.key] = gui.add_dropdown(
                        entry.key, list(rule.values), initial_value=str(entry.neutral)
                    )
                else:
                    step = 0.05 if rule.unit == "m" else None
                    self._gui_params[entry.key] = gui.add_number(
                        entry.key, float(entry.neutral), min=rule.low, max=rule.high, step=step
                    )
            execute_button = gui.add_button("Execute skill")
            self._gui_text = gui.add_text("SkillCall text", "Turn<left><30>")
            text_button = gui.add_button("Execute text")
        self._show_skill_params()
        self._gui_handles: dict[str, Any] = {
            "instruction": self._gui_instruction,
            "status": self._gui_status,
            "error": self._gui_error,
            "ego_image": self._gui_image,
            "pause": self._gui_pause,
            "step": step_button,
            "episode_id": self._gui_episode,
            "reset": reset_button,
            "camera_to_body": look_button,
            "follow_body": self._gui_follow,
            "skill": self._gui_skill,
            **{f"param_{key}": handle for key, handle in self._gui_params.items()},
            "execute_skill": execute_button,
            "skill_text": self._gui_text,
            "execute_text": text_button,
        }

        @self._gui_pause.on_click
        def _(_event: Any) -> None:
            kind = "resume" if self.state().paused else "pause"
            self._submit(ControlRequest(kind, source="gui"))

        @step_button.on_click
        def _(_event: Any) -> None:
            self._submit(ControlRequest("step", source="gui"))

        @reset_button.on_click
        def _(_event: Any) -> None:
            episode_id = self._gui_episode.value.strip() or None
            self._submit(ControlRequest("reset", episode_id=episode_id, source="gui"))

        @look_button.on_click
        def _(event: Any) -> None:
            st = self.state()
            if st.root_position_m is None or st.yaw_rad is None or event.client is None:
                return
            position, look_at = _chase_camera(np.asarray(st.root_position_m), st.yaw_rad)
            event.client.camera.position = position
            event.client.camera.look_at = look_at

        @self._gui_skill.on_update
        def _(_event: Any) -> None:
            self._show_skill_params()

        @execute_button.on_click
        def _(_event: Any) -> None:
            self._submit(ControlRequest("skill", skill=self._skill_from_form(), source="gui"))

        @text_button.on_click
        def _(_event: Any) -> None:
            self._submit(ControlRequest("skill", skill=self._gui_text.value, source="gui"))

    def _selected_skill(self) -> Skill:
        return Skill.from_name(self._gui_skill.value)

    def _show_skill_params(self) -> None:
        """Show only the inputs the selected skill reads (GUI-only, any thread)."""
        wanted = set(self._selected_skill().spec.action_keys.values())
        for key, handle in self._gui_params.items():
            handle.visible = key in wanted

    def _skill_from_form(self) -> str:
        """The SkillCall text form of the dropdown + parameter inputs (validated later, on
        the simulation thread, by :meth:`SkillCall.parse`)."""
        spec = self._selected_skill().spec
        parts = [spec.text_name]
        for slot in spec.slots:
            if slot not in spec.params:  # a literal word, e.g. Walk's <forward>
                parts.append(f"<{slot}>")
            elif slot in spec.action_keys:
                parts.append(f"<{self._gui_params[spec.action_keys[slot]].value}>")
            else:  # a parameter with one allowed value (the stairs' speed)
                parts.append(f"<{spec.params[slot].values[0]}>")
        return "".join(parts)

    def _update_gui(self, state: ViewerState) -> None:
        """Write a published state into the panel (simulation thread)."""
        if state.instruction is not None:
            self._gui_instruction.content = f"**Instruction:** {_md(state.instruction)}"
        if state.paused:
            run = "paused"
        elif self._policy is None:
            run = "running (manual: waiting for chosen skills)"
        else:
            run = "running"
        ended = ""
        if state.episode_done:
            ended = f" | **episode ended: {state.end_reason}** (next step resets)"
        last = "none yet"
        if state.last_skill is not None:
            # a code span shows its text literally (SkillCall text never holds a backtick)
            last = f"`{state.last_skill}` ({_md(str(state.last_skill_source))})"
        self._gui_status.content = (
            f"**Agent:** {_md(str(state.agent))} | **{run}**  \n"
            f"**Episode:** {_md(str(state.episode_id))} ({_md(str(state.scene_id))})  \n"
            f"**Step:** {state.step} / {state.max_steps}{ended}  \n"
            f"**Last skill:** {last}  \n"
            f"**Total steps:** {state.total_steps} | **episodes:** {state.episodes_started}"
        )
        self._gui_error.content = "" if state.error is None else f"**Error:** {_md(state.error)}"
        self._gui_pause.label = "Resume" if state.paused else "Pause"


def _md(text: str) -> str:
    """``text`` as literal Markdown text: every ASCII punctuation character backslash-escaped
    (viser's Markdown passes raw HTML through, so ``Turn<left><500>`` would lose its
    ``<...>`` parts as unknown tags), line breaks as spaces."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", " ".join(str(text).splitlines()))


def _chase_camera(
    pelvis_m: np.ndarray, yaw_rad: float
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """Camera position and look-at point behind and above a body facing ``yaw_rad``."""
    pelvis = np.asarray(pelvis_m, dtype=np.float64)
    forward = np.array([math.sin(yaw_rad), 0.0, math.cos(yaw_rad)])
    position = pelvis - _CAMERA_BEHIND_M * forward + np.array([0.0, _CAMERA_ABOVE_M, 0.0])
    return (
        (float(position[0]), float(position[1]), float(position[2])),
        (float(pelvis[0]), float(pelvis[1]), float(pelvis[2])),
    )


class _Reported(Exception):
    """A user-facing problem with a control request: shown in the GUI, never raised."""
