"""The browser debug viewer: geometry, the control API, threading, the CLI, the page.

The viewer is driven headless through its programmatic API (and its GUI handles, which
call the same callbacks a browser click does); the page itself is checked in headless
Chromium when a Chromium binary is installed (slow test).
"""

from __future__ import annotations

import importlib.util
import math
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
from humanclaw_gym.skills import Skill, SkillCall
from humanclaw_gym.viewer import (
    DebugViewer,
    ViewerClosedError,
    geometry,
    resolve_viewer_policy,
    run_viewer,
)
from humanclaw_gym.viewer.control import ControlQueue, ControlRequest, ViewerState

needs_viser = pytest.mark.skipif(
    importlib.util.find_spec("viser") is None,
    reason="viser is not installed (pip install 'humanclaw-gym[viewer]')",
)


def _first_val100_episode() -> Any:
    from humanclaw_gym.episodes import load_split

    return load_split("val100")[0]


_EPISODE = _first_val100_episode().episode_id
_TIMEOUT_S = 60.0


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
class _ThreadRecorder(gym.Wrapper):
    """Records the thread of every reset/step (the viewer must use its sim thread only)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.reset_threads: list[int] = []
        self.step_threads: list[int] = []

    def reset(self, **kwargs: Any):
        self.reset_threads.append(threading.get_ident())
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        self.step_threads.append(threading.get_ident())
        return self.env.step(action)


class _TurnPolicy:
    """Deterministic, never stops; records the threads it is called on."""

    def __init__(self) -> None:
        self.act_threads: list[int] = []
        self.resets = 0

    def reset(self, episode_info: Any) -> None:
        self.resets += 1

    def act(self, observation: np.ndarray, info: Any) -> SkillCall:
        self.act_threads.append(threading.get_ident())
        return SkillCall.turn("left", 30)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_for(predicate: Any, timeout_s: float = _TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def _result(future: Future[ViewerState]) -> ViewerState:
    return future.result(timeout=_TIMEOUT_S)


def _plain(markdown: str) -> str:
    """Markdown text with its backslash escapes removed (what the panel displays)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _make_env(**kwargs: Any) -> FindNavInteractEnv:
    return FindNavInteractEnv(episode_ids=[_EPISODE], **kwargs)


def test_importing_the_viewer_is_cheap() -> None:
    code = (
        "import sys, humanclaw_gym.viewer as v, humanclaw_gym.cli.view_cmd;"
        "v.DebugViewer; v.run_viewer;"
        "heavy = [m for m in ('viser', 'pybullet', 'moderngl', 'torch') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------------------
# geometry (no server)
# ----------------------------------------------------------------------------------------
def _rotate(wxyz: Any, v: Any) -> np.ndarray:
    w, x, y, z = (float(c) for c in wxyz)
    q = np.array([x, y, z])
    v = np.asarray(v, dtype=np.float64)
    return v + 2.0 * np.cross(q, np.cross(q, v) + w * v)


def test_cylinder_turn_maps_viser_axis_onto_scene_axis() -> None:
    assert np.allclose(_rotate(geometry.CYLINDER_Y_FROM_Z_WXYZ, [0, 0, 1]), [0, 1, 0])


def test_object_frame_is_yaw_about_plus_y() -> None:
    yaw = 0.7
    # Scene convention: yaw 0 faces +Z, yaw psi faces (sin psi, 0, cos psi).
    front = _rotate(geometry.object_frame_wxyz(yaw), [0, 0, 1])
    assert np.allclose(front, [math.sin(yaw), 0.0, math.cos(yaw)])


def test_quaternion_reorder_and_matrix() -> None:
    assert np.allclose(geometry.wxyz_from_xyzw([0.1, 0.2, 0.3, 0.9]), [0.9, 0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="quat_xyzw"):
        geometry.wxyz_from_xyzw([1.0, 0.0, 0.0])
    c, s = math.cos(0.4), math.sin(0.4)
    yaw = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    assert np.allclose(_rotate(geometry.wxyz_from_matrix(yaw), [0, 0, 1]), yaw[:, 2])


def test_part_placements_match_the_scene_spec() -> None:
    from humanclaw_gym.episodes import load_scene

    scene = load_scene(_first_val100_episode().scene_id)
    shapes = set()
    for obj in scene.objects:
        for part, placed in zip(obj.parts, geometry.part_placements(obj), strict=True):
            shapes.add(part.shape)
            assert placed.position_m == part.offset
            if part.shape == "box":
                assert np.allclose(placed.dimensions_m, 2.0 * np.asarray(part.size))
            elif part.shape == "cylinder":
                assert placed.dimensions_m[:2] == (part.size[0], 2.0 * part.size[1])
                assert placed.wxyz == geometry.CYLINDER_Y_FROM_Z_WXYZ
            else:
                assert placed.dimensions_m[0] == part.size[0]
    assert shapes == {"box", "cylinder", "sphere"}


def test_capsule_mesh_is_closed_outward_and_sized() -> None:
    radius, half = 0.05, 0.12
    vertices, faces = geometry.capsule_mesh(radius, half, segments=24, rings=6)
    assert vertices.dtype == np.float32 and faces.dtype == np.uint32
    assert np.isclose(vertices[:, 2].max(), half + radius, atol=1e-6)
    assert np.isclose(vertices[:, 2].min(), -(half + radius), atol=1e-6)
    tri = vertices[faces].astype(np.float64)
    signed_volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    exact = math.pi * radius**2 * (2 * half) + 4.0 / 3.0 * math.pi * radius**3
    assert signed_volume > 0.0  # outward winding
    assert abs(signed_volume - exact) / exact < 0.05
    with pytest.raises(ValueError, match="radius_m"):
        geometry.capsule_mesh(0.0, 0.1)


def test_body_link_poses_follow_the_realized_frame() -> None:
    frame = np.zeros(75)
    frame[:3] = (1.0, 0.95, 2.0)
    frame[3:6] = (0.0, 0.5, 0.0)  # yaw 0.5 rad
    poses = geometry.body_link_poses(frame)
    assert poses.shape == (24, 7)
    assert np.allclose(poses[0, :3], frame[:3])
    assert np.allclose(poses[0, 3:], [math.cos(0.25), 0.0, math.sin(0.25), 0.0])
    assert len(geometry.link_placements()) == 24
    with pytest.raises(ValueError, match="realized_frame"):
        geometry.body_link_poses(np.zeros(74))


def test_frustum_looks_along_forward_with_rows_down() -> None:
    forward, up = np.array([0.3, -0.2, 0.9]), np.array([0.0, 1.0, 0.0])
    wxyz = geometry.frustum_wxyz(forward, up)
    assert np.allclose(_rotate(wxyz, [0, 0, 1]), forward / np.linalg.norm(forward))
    assert _rotate(wxyz, [0, 1, 0])[1] < 0.0  # image rows go down
    with pytest.raises(ValueError, match="parallel"):
        geometry.frustum_wxyz(up, up)


def test_control_queue_and_request_validation() -> None:
    q = ControlQueue()
    future = q.put(ControlRequest("step"))
    assert len(q) == 1
    assert q.fail_pending(ViewerClosedError("closed")) == 1
    with pytest.raises(ViewerClosedError):
        future.result(timeout=1)
    assert q.get(0.0) is None
    with pytest.raises(ValueError, match="kind"):
        ControlRequest("jump")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="skill"):
        ControlRequest("skill")


# ----------------------------------------------------------------------------------------
# the viewer, headless
# ----------------------------------------------------------------------------------------
@needs_viser
def test_refuses_non_loopback_hosts_before_serving() -> None:
    env = _make_env()
    try:
        with pytest.raises(ValueError, match="loopback"):
            DebugViewer(env, host="0.0.0.0", port=0)
        with pytest.raises(ValueError, match="port"):
            DebugViewer(env, port=70000)
        with pytest.raises(ValueError, match="episode_id"):
            DebugViewer(env, port=0, episode_id="no_such_episode")
    finally:
        env.close()


@needs_viser
def test_privileged_policy_needs_privileged_env() -> None:
    policy, name, kwargs = resolve_viewer_policy(None, {})
    assert name == "oracle" and kwargs["privileged"] is True
    env = _make_env()
    try:
        with pytest.raises(PermissionError, match="privileged"):
            DebugViewer(env, policy, port=0)
    finally:
        env.close()
    _, name, _ = resolve_viewer_policy(None, {"privileged": False})
    assert name == "random"
    assert resolve_viewer_policy("manual", {})[0] is None
    with pytest.raises(ValueError, match="privileged"):
        resolve_viewer_policy("oracle", {"privileged": False})
    with pytest.raises(ValueError, match="no_such_agent"):
        resolve_viewer_policy("no_such_agent", {})


@needs_viser
def test_control_api_runs_everything_on_the_sim_thread() -> None:
    env = _ThreadRecorder(_make_env())
    policy = _TurnPolicy()
    viewer = DebugViewer(env, policy, port=0, paused=True, fps=50.0)
    port = viewer.port
    assert port > 0 and viewer.url == f"http://127.0.0.1:{port}/"
    assert viewer.state().started is False
    viewer.start()
    main = threading.get_ident()
    try:
        # a step requested from this (non-sim) thread runs on the sim thread
        state = _result(viewer.request_step())
        sim = state.sim_thread_id
        assert sim is not None and sim != main
        assert state.started and state.paused and state.error is None
        assert state.step == 1 and state.total_steps == 1
        assert state.last_skill == "Turn<left><30>" and state.last_skill_source == "_TurnPolicy"
        assert state.episode_id == _EPISODE
        assert state.instruction == _first_val100_episode().instruction
        assert set(env.step_threads) == {sim} and set(env.reset_threads) == {sim}
        assert set(policy.act_threads) == {sim}

        # a request from yet another thread, too
        box: list[Future[ViewerState]] = []
        worker = threading.Thread(
            target=lambda: box.append(viewer.request_skill("Walk<forward><slow>"))
        )
        worker.start()
        worker.join()
        state = _result(box[0])
        assert state.last_skill == "Walk<forward><slow>" and state.last_skill_source == "api"
        assert state.step == 2 and set(env.step_threads) == {sim}

        # a SkillCall object works as well as text
        state = _result(viewer.request_skill(SkillCall.side_step("right", 0.2)))
        assert state.last_skill == "Side step<right><0.2>" and state.step == 3

        # bad skill text is reported, not raised, and changes nothing
        state = _result(viewer.request_skill("Turn<left><500>"))
        assert state.error is not None and "angle_deg" in state.error and "500" in state.error
        assert state.step == 3
        assert "angle_deg" in _plain(viewer.gui_handles["error"].content)
        state = _result(viewer.request_skill("Fly<up>"))
        assert state.error is not None and "unknown skill name" in state.error
        state = _result(viewer.request_step())  # a good request clears the error
        assert state.error is None and state.step == 4

        # the panel shows what the state says
        status = viewer.gui_handles["status"].content
        assert "Step:** 4 / 100" in status and "Turn<left><30>" in status
        ego = viewer.gui_handles["ego_image"].image
        assert ego.shape == (448, 448, 3) and ego.std() > 0

        # reset: unknown id reported; known/next id resets
        state = _result(viewer.request_reset("no_such_episode"))
        assert state.error is not None and "no_such_episode" in state.error and state.step == 4
        state = _result(viewer.request_reset())
        assert state.step == 0 and state.episodes_started == 2 and state.last_skill is None
        assert policy.resets == 2

        # Stop ends the episode; the next step resets first, then steps
        state = _result(viewer.request_skill("Stop/Stand"))
        assert state.episode_done and state.end_reason == "stop" and state.step == 1
        state = _result(viewer.request_step())
        assert not state.episode_done and state.step == 1 and state.episodes_started == 3

        # resume: the policy steps by itself; pause: it stops
        _result(viewer.resume())
        _wait_for(lambda: viewer.state().total_steps >= state.total_steps + 3)
        paused = _result(viewer.pause())
        assert paused.paused
        time.sleep(0.3)
        assert viewer.state().total_steps == paused.total_steps
        assert set(env.step_threads) == {sim} and set(policy.act_threads) == {sim}
    finally:
        viewer.close()
    final = viewer.join(_TIMEOUT_S)
    assert final.closed
    # the env was closed (on the sim thread), the port released, requests refused
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()
    assert _port_free(port)
    with pytest.raises(ViewerClosedError):
        viewer.request_step().result(timeout=1)
    viewer.close()  # idempotent


@needs_viser
def test_gui_clicks_only_enqueue_and_apply_on_the_sim_thread() -> None:
    env = _ThreadRecorder(_make_env(max_steps=3))
    viewer = DebugViewer(env, None, port=0, paused=True)
    handles = viewer.gui_handles
    viewer.start()
    try:
        _wait_for(lambda: viewer.state().started)
        sim = viewer.state().sim_thread_id
        clicker = threading.get_ident()

        # manual agent: 'Single step' has no policy to ask -> reported
        handles["step"].value = True  # a click; the callback runs on this thread
        _wait_for(lambda: viewer.state().error is not None)
        assert "no policy" in viewer.state().error

        # the dropdown + parameters form: every skill builds valid text
        for skill in Skill:
            handles["skill"].value = skill.display_name
            SkillCall.parse(viewer._skill_from_form())
        handles["skill"].value = Skill.TURN.display_name
        assert handles["param_angle_deg"].visible and not handles["param_height_m"].visible
        handles["param_direction"].value = "right"
        handles["param_angle_deg"].value = 45.0
        handles["execute_skill"].value = True
        _wait_for(lambda: viewer.state().step == 1)
        assert viewer.state().last_skill == "Turn<right><45>"
        assert viewer.state().last_skill_source == "gui"

        handles["skill_text"].value = "Side step<left><9>"
        handles["execute_text"].value = True
        _wait_for(lambda: viewer.state().error is not None)
        assert "distance_m" in viewer.state().error and viewer.state().step == 1

        # the step limit (3) truncates; the next skill resets first
        handles["skill_text"].value = "Walk<forward><slow>"
        handles["execute_text"].value = True
        handles["execute_text"].value = True
        _wait_for(lambda: viewer.state().episode_done)
        assert viewer.state().end_reason == "truncated" and "episode ended" in (
            handles["status"].content
        )
        handles["execute_text"].value = True
        _wait_for(lambda: viewer.state().episodes_started == 2)
        assert viewer.state().step == 1

        # pause/resume button toggles through the queue
        handles["pause"].value = True
        _wait_for(lambda: not viewer.state().paused)
        assert handles["pause"].label == "Pause"

        handles["episode_id"].value = _EPISODE
        handles["reset"].value = True
        _wait_for(lambda: viewer.state().episodes_started == 3)
        assert sim != clicker and set(env.step_threads) == {sim}
        assert set(env.reset_threads) == {sim}
    finally:
        viewer.close()
    viewer.join(_TIMEOUT_S)


@needs_viser
def test_switching_scenes_replaces_the_drawn_scene() -> None:
    from humanclaw_gym.episodes import load_scene

    env = FindNavInteractEnv()
    first = env.episodes[0]
    other = next(ep for ep in env.episodes if ep.scene_id != first.scene_id)
    old_names = {o.name for o in load_scene(first.scene_id).objects}
    new_scene = load_scene(other.scene_id)
    only_old = sorted(old_names - {o.name for o in new_scene.objects})
    viewer = DebugViewer(env, None, port=0, paused=True).start()
    try:
        _wait_for(lambda: viewer.state().started)
        api = viewer.server.scene
        assert api.get_handle_by_name(f"/scene/{new_scene.objects[0].name}/part_0") is not None
        assert only_old and api.get_handle_by_name(f"/scene/{only_old[0]}") is not None
        state = _result(viewer.request_reset(other.episode_id))
        assert state.scene_id == other.scene_id and state.error is None
        assert api.get_handle_by_name(f"/scene/{only_old[0]}") is None
        assert api.get_handle_by_name(f"/scene/{only_old[0]}/part_0") is None
        for obj in new_scene.objects:
            assert api.get_handle_by_name(f"/scene/{obj.name}/part_{len(obj.parts) - 1}")
        labels = [f"/targets/goal_{k}" for k in range(len(other.goals))]
        assert all(api.get_handle_by_name(name) is not None for name in labels)
    finally:
        viewer.close()
    viewer.join(_TIMEOUT_S)


@needs_viser
def test_run_viewer_stops_after_duration_and_cleans_up() -> None:
    ready: list[Any] = []
    state = run_viewer(
        {"episode_ids": [_EPISODE]},
        port=0,
        policy="random",
        fps=20.0,
        duration_s=2.0,
        seed=3,
        on_ready=ready.append,
    )
    assert state.closed and state.agent == "random"
    assert state.total_steps >= 1 and state.episodes_started >= 1
    viewer = ready[0]
    assert _port_free(viewer.port)
    with pytest.raises(ViewerClosedError):
        viewer.run()


@needs_viser
def test_run_viewer_closes_on_policy_error() -> None:
    class Broken:
        def reset(self, info: Any) -> None:
            pass

        def act(self, obs: Any, info: Any) -> SkillCall:
            raise RuntimeError("policy exploded")

    ready: list[Any] = []
    with pytest.raises(RuntimeError, match="policy exploded"):
        run_viewer({"episode_ids": [_EPISODE]}, port=0, policy=Broken(), on_ready=ready.append)
    assert ready[0].state().closed and _port_free(ready[0].port)


@needs_viser
def test_cli_view_runs_and_validates(capsys: pytest.CaptureFixture[str]) -> None:
    from humanclaw_gym.cli import main

    code = main(
        ["view", "--port", "0", "--agent", "manual", "--episode-id", _EPISODE, "--duration-s", "1"]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "serving http://127.0.0.1:" in err and "agent=manual" in err
    assert main(["view", "--host", "0.0.0.0"]) == 2
    assert "loopback" in capsys.readouterr().err
    assert main(["view", "--agent", "oracle", "--episode-id", "nope", "--duration-s", "1"]) == 2
    assert "nope" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------
# the page in headless Chromium
# ----------------------------------------------------------------------------------------
@pytest.mark.slow
@needs_viser
def test_page_renders_in_headless_chromium(tmp_path: Any) -> None:
    from PIL import Image

    from humanclaw_gym.viewer.screenshot import capture_page, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium is not installed")
    policy, name, kwargs = resolve_viewer_policy("oracle", {"episode_ids": [_EPISODE]})
    viewer = DebugViewer(FindNavInteractEnv(**kwargs), policy, agent_name=name, port=0, paused=True)
    viewer.start()
    try:
        for _ in range(3):
            _result(viewer.request_step())
        shot = capture_page(viewer.url, tmp_path / "viewer.png", wait_s=10.0)
        # software WebGL on a loaded machine may need longer than 10 s for the first frame
        deadline = time.monotonic() + 60.0
        while _canvas_std(shot) <= 10.0 and time.monotonic() < deadline:
            shot = capture_page(viewer.url, tmp_path / "viewer.png", wait_s=20.0)
    finally:
        viewer.close()
    viewer.join(_TIMEOUT_S)
    image = np.asarray(Image.open(shot).convert("RGB"), dtype=np.float64)
    assert image.shape == (800, 1280, 3)
    scene = image[:, :900]  # left of the control panel: the WebGL canvas
    assert scene.std() > 10.0, "the 3-D canvas looks blank"
    # the humanoid's orange (body colour) is somewhere in the canvas
    r, g, b = scene[..., 0], scene[..., 1], scene[..., 2]
    assert np.count_nonzero((r > 180) & (g > 90) & (g < 170) & (b < 110)) > 50


def test_missing_viser_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from humanclaw_gym.cli import main
    from humanclaw_gym.viewer import ViewerUnavailableError

    monkeypatch.setitem(sys.modules, "viser", None)  # makes `import viser` fail
    env = _make_env()
    try:
        with pytest.raises(ViewerUnavailableError, match=r"humanclaw-gym\[viewer\]"):
            DebugViewer(env, port=0)
    finally:
        env.close()
    assert main(["view", "--agent", "manual", "--episode-id", _EPISODE]) == 2
    assert "pip install" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------
# the panel's text and the camera after resets
# ----------------------------------------------------------------------------------------
def _two_distant_episodes() -> list[str]:
    """Two val100 episodes of one scene whose start points are more than 3 m apart."""
    from humanclaw_gym.episodes import load_split

    episodes = load_split("val100")
    first = episodes[0]
    for other in episodes[1:]:
        gap = np.subtract(other.start_position, first.start_position)
        if other.scene_id == first.scene_id and float(np.hypot(gap[0], gap[2])) > 3.0:
            return [first.episode_id, other.episode_id]
    raise AssertionError("no two distant episodes in one scene")


class _FakeCamera:
    position: Any = None
    look_at: Any = None


class _FakeClient:
    """A connected browser tab as the viewer sees it (its camera)."""

    def __init__(self) -> None:
        self.camera = _FakeCamera()


@needs_viser
def test_panel_shows_error_text_literally() -> None:
    viewer = DebugViewer(_make_env(), None, port=0, paused=True)
    viewer.start()
    try:
        _result(viewer.request_skill("Turn<left><500>"))
        content = viewer.gui_handles["error"].content
        assert "SkillCall.text='Turn<left><500>'" in _plain(content)
        assert re.search(r"(?<!\\)[<>&]", content) is None  # no raw HTML reaches the page
    finally:
        viewer.close()
    viewer.join(_TIMEOUT_S)


@needs_viser
def test_every_reset_moves_open_tabs_behind_the_body(monkeypatch: pytest.MonkeyPatch) -> None:
    from humanclaw_gym.viewer.debug_viewer import _chase_camera

    ids = _two_distant_episodes()
    viewer = DebugViewer(FindNavInteractEnv(episode_ids=ids), None, port=0, paused=True)
    tab = _FakeClient()
    monkeypatch.setattr(viewer.server, "get_clients", lambda: {7: tab})
    viewer.start()
    try:
        for episode_id in (ids[1], ids[0], None):  # an explicit reset, and the env's next one
            tab.camera.position = tab.camera.look_at = (99.0, 99.0, 99.0)
            state = _result(viewer.request_reset(episode_id))
            expected = _chase_camera(np.asarray(state.root_position_m), state.yaw_rad)
            np.testing.assert_allclose(tab.camera.position, expected[0], atol=1e-6)
            np.testing.assert_allclose(tab.camera.look_at, expected[1], atol=1e-6)
        # an automatic reset (the step after an ended episode) as well
        _result(viewer.request_skill("Stop/Stand"))
        tab.camera.position = (99.0, 99.0, 99.0)
        state = _result(viewer.request_skill("Turn<left><30>"))
        assert state.episodes_started == 5 and state.step == 1  # start, 3 resets, automatic
        assert tab.camera.position != (99.0, 99.0, 99.0)
    finally:
        viewer.close()
    viewer.join(_TIMEOUT_S)


def _canvas_std(png: Any) -> float:
    from PIL import Image

    return float(np.asarray(Image.open(png).convert("RGB"), dtype=np.float64)[:, :900].std())


def _body_pixels(png: Any) -> int:
    """Pixels of the viewer's body colour in the middle of the 3-D canvas."""
    from PIL import Image

    image = np.asarray(Image.open(png).convert("RGB"), dtype=np.float64)
    middle = image[200:600, 200:700]  # the canvas is left of the 1280 px page's panel
    r, g, b = middle[..., 0], middle[..., 1], middle[..., 2]
    return int(np.count_nonzero((r > 180) & (g > 90) & (g < 170) & (b < 110)))


@pytest.mark.slow
@needs_viser
def test_panel_text_and_reset_camera_in_headless_chromium(tmp_path: Any) -> None:
    """In a real browser: the error text keeps its <...> parts, and a reset brings a camera
    that was looking away back to the body."""
    from humanclaw_gym.viewer.screenshot import ChromiumPage, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium is not installed")
    ids = _two_distant_episodes()
    viewer = DebugViewer(FindNavInteractEnv(episode_ids=ids), None, port=0, paused=True)
    viewer.start()
    try:
        state = _result(viewer.request_reset(ids[0]))
        with ChromiumPage(1280, 800) as page:
            page.navigate(viewer.url)
            _wait_for(lambda: len(viewer.server.get_clients()) == 1, 60.0)
            _result(viewer.request_skill("Turn<left><500>"))
            page.wait_for("document.body.innerText.includes('Turn<left><500>')", 60.0)
            assert "SkillCall.text='Turn<left><500>'" in page.evaluate("document.body.innerText")
            # the page draws the body behind the start pose
            _poll_screenshots(page, tmp_path / "start.png", lambda png: _body_pixels(png) > 50)
            # look away from the body (far outside the home), then reset
            (client,) = viewer.server.get_clients().values()
            root = np.asarray(state.root_position_m)
            client.camera.position = tuple(root + [40.0, 3.0, 40.0])
            client.camera.look_at = tuple(root + [80.0, 0.0, 80.0])
            _poll_screenshots(page, tmp_path / "away.png", lambda png: _body_pixels(png) < 20)
            _result(viewer.request_reset(ids[1]))
            _poll_screenshots(page, tmp_path / "back.png", lambda png: _body_pixels(png) > 50)
    finally:
        viewer.close()
    viewer.join(_TIMEOUT_S)


def _poll_screenshots(page: Any, path: Any, ok: Any, timeout_s: float = 90.0) -> None:
    """Screenshot the page every 2 s until ``ok(png)`` (software WebGL is slow)."""
    deadline = time.monotonic() + timeout_s
    while True:
        time.sleep(2.0)
        png = page.screenshot(path)
        if ok(png):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the page never showed what was expected: see {png}")


def test_asset_link_meshes_and_poses_are_the_body_assets(tmp_path: Any) -> None:
    from humanclaw_gym.body.asset import load_body_asset
    from humanclaw_gym.body.synthetic import write_synthetic_body_asset

    asset = load_body_asset(write_synthetic_body_asset(tmp_path / "body"))
    meshes = geometry.asset_link_meshes(asset)
    assert [j for j, _, _ in meshes] == [j for j, parts in enumerate(asset.visual) if parts]
    for j, vertices, faces in meshes:
        np.testing.assert_array_equal(vertices, asset.visual[j][0].vertices)
        assert faces.dtype == np.int32 and faces.max() < len(vertices)
    frame = np.zeros(75)
    frame[:3] = (1.0, 0.95, 2.0)
    frame[3:6] = (0.0, 0.5, 0.0)
    poses = geometry.asset_link_poses(asset, frame)
    xyzw = asset.link_poses_from_frame(frame)
    assert poses.shape == (asset.num_links, 7)
    np.testing.assert_allclose(poses[:, :3], xyzw[:, :3])
    np.testing.assert_allclose(poses[:, 3:], np.concatenate([xyzw[:, 6:7], xyzw[:, 3:6]], 1))
    with pytest.raises(ValueError, match="realized_frame"):
        geometry.asset_link_poses(asset, np.zeros(74))


@needs_viser
def test_a_body_asset_is_drawn_from_its_meshes(tmp_path: Any) -> None:
    """With a body asset the page draws the asset's visual mesh on each link frame (as the
    renderer does), placed where physics has the links, instead of the primitives."""
    from humanclaw_gym.body.synthetic import write_synthetic_body_asset

    folder = write_synthetic_body_asset(tmp_path / "body")
    env = _make_env(body_asset=str(folder))
    viewer = DebugViewer(env, _TurnPolicy(), port=0, paused=True).start()
    try:
        state = _result(viewer.request_step())
        assert state.error is None and state.step == 1
        asset = env.simulation.body_asset
        api = viewer.server.scene
        drawn = 0
        for j, vertices, _ in geometry.asset_link_meshes(asset):
            handle = api.get_handle_by_name(f"/body/link_{j:02d}/mesh")
            assert handle is not None
            np.testing.assert_allclose(handle.vertices, vertices, atol=1e-6)
            drawn += 1
        assert drawn == sum(1 for parts in asset.visual if parts) == 25  # fingers: none
        assert api.get_handle_by_name("/body/link_00/shape") is None  # no primitives
        physics = env.simulation.physics.link_poses()  # (L, 7) xyzw
        for j in range(asset.num_links):
            frame = api.get_handle_by_name(f"/body/link_{j:02d}")
            np.testing.assert_allclose(frame.position, physics[j, :3], atol=1e-6)
            q = np.concatenate([physics[j, 6:7], physics[j, 3:6]])
            assert abs(abs(float(np.dot(frame.wxyz, q))) - 1.0) < 1e-6
    finally:
        viewer.close()
    viewer.join(_TIMEOUT_S)
