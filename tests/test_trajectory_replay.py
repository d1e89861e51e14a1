"""TrajectoryWrapper, replay bundles, delayed render and forward replay.

Part 1 runs the real ``FindNavInteractEnv`` with small deterministic fake backends
registered in the backend registry (fast, no simulator). Part 2 runs real short episodes
with the pybullet physics, a real renderer and the procedural motion when they are
installed (skipped otherwise).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanclaw_gym.backends import registry
from humanclaw_gym.backends.protocols import (
    MotionCapabilities,
    PhysicsCapabilities,
    RenderCapabilities,
    RenderResult,
)
from humanclaw_gym.replay import (
    AFTER_FILE,
    BEFORE_FILE,
    MANIFEST_FILE,
    REPLAY_SCHEMA,
    ReplayBundleError,
    ReplayIntegrityError,
    count_mp4_frames,
    flat_dir,
    forward_replay,
    link_poses_from_frames,
    load_bundle,
    render_saved_trajectory,
)
from humanclaw_gym.replay.render import find_rollout_dirs, render_saved_batch
from humanclaw_gym.skills import SkillCall
from humanclaw_gym.wrappers.trajectory import TrajectoryWrapper
from humanclaw_gym.wrappers.video import VideoWrapper

_F = 15
_PHYS, _RENDER, _MOTION = "fake_replay_phys", "fake_replay_render", "fake_replay_motion"


# ----------------------------------------------------------------------------------------
# fake backends (deterministic, numpy only)
# ----------------------------------------------------------------------------------------
class FakeScene:
    scene_id = "fake_scene"

    def __init__(self, salt: str = "") -> None:
        self.salt = salt

    def content_hash(self) -> str:
        import hashlib

        return hashlib.sha256(f"fake{self.salt}".encode()).hexdigest()


@dataclass(frozen=True)
class FakeEpisode:
    episode_id: str
    scene_id: str = "fake_scene"
    start_position: tuple[float, float, float] = (1.0, 0.0, 2.0)
    start_yaw_rad: float = 0.3
    instruction: str = "Find the bed."
    object_category: str = "bed"
    interact: bool = False
    max_steps: int = 100


class FakePhysics:
    capabilities = PhysicsCapabilities(name=_PHYS)
    instances = 0

    def __init__(self, solver_iterations: int = 10) -> None:
        type(self).instances += 1
        self.solver_iterations = solver_iterations
        self._frame = np.zeros(75)
        self._objects = np.zeros((2, 7))

    def contract(self) -> dict[str, Any]:
        return {"backend": _PHYS, "solver_iterations": self.solver_iterations, "substeps": 4}

    def build(self, scene: Any) -> None:
        self.scene = scene

    def reset(self, frame_75: np.ndarray) -> None:
        self._frame = np.asarray(frame_75, dtype=np.float64).copy()
        self._frame[1] -= 0.01  # "settles" on the floor
        self._objects = np.array([[2.0, 0.4, 2.0, 0, 0, 0, 1.0], [3.0, 0.4, 1.0, 0, 0, 0, 1.0]])

    def step_frame(self, frame_75: np.ndarray) -> None:
        self._frame = 0.7 * np.asarray(frame_75) + 0.3 * self._frame
        self._objects[:, 0] += 0.001 * np.sin(self._frame[0] * 13.0)

    def realized_frame(self) -> np.ndarray:
        return self._frame.copy()

    def link_poses(self) -> np.ndarray:
        return link_poses_from_frames(self._frame)

    def link_origins(self) -> np.ndarray:
        poses = self.link_poses()
        return np.concatenate([poses[:1, :3], poses[:, :3]])

    @property
    def dynamic_object_ids(self) -> tuple[int, ...]:
        return (4, 9)

    def object_poses(self) -> np.ndarray:
        return self._objects.copy()

    def close(self) -> None:
        pass


class FakeRenderer:
    capabilities = RenderCapabilities(name=_RENDER)

    def __init__(self) -> None:
        self.pose = np.zeros((24, 7))

    def build(self, scene: Any) -> None:
        pass

    def set_body_pose(self, link_poses: np.ndarray) -> None:
        self.pose = np.asarray(link_poses)

    def set_object_poses(self, object_ids: Any, poses: np.ndarray) -> None:
        assert len(object_ids) == len(poses)

    def render(self, camera: Any, modes: Any = frozenset({"rgb"})) -> RenderResult:
        shade = int(abs(self.pose[0, 0] * 100)) % 256
        rgb = np.full((camera.height, camera.width, 3), shade, dtype=np.uint8)
        return RenderResult(rgb=rgb)

    def close(self) -> None:
        pass


class FakeMotion:
    capabilities = MotionCapabilities(name=_MOTION)

    def reset(self, start_position: np.ndarray, start_yaw_rad: float, seed: int = 0) -> np.ndarray:
        frame = np.zeros(75)
        frame[0:3] = np.asarray(start_position) + [0.0, 0.9, 0.0]
        frame[4] = start_yaw_rad
        self._hist = np.tile(frame, (5, 1))
        self._rng = np.random.default_rng(seed)
        return self._hist.copy()

    def generate(self, call: SkillCall) -> np.ndarray:
        last = self._hist[-1]
        t = np.arange(1, _F + 1)[:, None]
        frames = np.tile(last, (_F, 1))
        frames[:, 2:3] += 0.02 * t
        frames[:, 6:] += 0.01 * self._rng.standard_normal((_F, 69))
        self._hist = frames[-5:].copy()
        return frames

    def history(self) -> np.ndarray:
        return self._hist.copy()


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch):
    """A factory of real FindNavInteractEnv instances running the fake backends."""
    import humanclaw_gym.episodes as episodes_mod
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

    registry.register_physics(_PHYS, f"{__name__}:FakePhysics")
    registry.register_render(_RENDER, f"{__name__}:FakeRenderer")
    registry.register_motion(_MOTION, f"{__name__}:FakeMotion")
    monkeypatch.setattr(episodes_mod, "load_scene", lambda scene_id: FakeScene(), raising=False)
    made = []

    def make(max_steps: int = 3) -> FindNavInteractEnv:
        env = FindNavInteractEnv(
            episodes=[FakeEpisode("e1"), FakeEpisode("e2", start_yaw_rad=-1.0)],
            physics=_PHYS,
            renderer=_RENDER,
            motion=_MOTION,
            max_steps=max_steps,
        )
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _run(env: Any, actions: list[str], episode_id: str = "e1") -> None:
    env.reset(options={"episode_id": episode_id})
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return


# ----------------------------------------------------------------------------------------
# part 1: fakes
# ----------------------------------------------------------------------------------------
def test_bundle_contents_match_the_episode(fake_env, tmp_path: Path) -> None:
    base = fake_env(max_steps=5)
    seen: dict[str, list] = {"realized": [], "generated": []}

    class Spy:
        def on_frame(self, event: Any) -> None:
            seen["realized"].append(event.realized)
            seen["generated"].append(event.generated)

    env = TrajectoryWrapper(base, tmp_path, episode_dir_fn=flat_dir)
    base.add_observer(Spy())
    _run(env, ["Walk<forward><normal>", "Turn<left><30>", "Stop/Stand"])
    assert env.last_bundle_dir == tmp_path
    assert _files(tmp_path) == sorted([MANIFEST_FILE, AFTER_FILE, BEFORE_FILE])
    umask = os.umask(0)
    os.umask(umask)
    for path in tmp_path.iterdir():  # ordinary permissions, not mkstemp's 0600
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    bundle = load_bundle(tmp_path)
    m = bundle.manifest
    assert m["schema"] == REPLAY_SCHEMA
    assert (m["ended_by"], m["complete"], m["error"]) == ("stop", True, None)
    assert (m["steps"], m["motion_steps"], m["frames"], m["video_frames"]) == (3, 2, 30, 31)
    assert m["scene_id"] == "fake_scene" and m["episode_id"] == "e1"
    assert m["scene_content_hash"] == FakeScene().content_hash()
    assert m["physics"] == {"backend": _PHYS, "solver_iterations": 10, "substeps": 4}
    assert m["physics_contract_source"] == "backend"
    assert m["renderer"] == _RENDER
    assert m["episode"]["start_yaw_rad"] == 0.3
    assert bundle.generated.shape == (30, 75) and bundle.generated.dtype == np.float64
    np.testing.assert_array_equal(bundle.generated, np.stack(seen["generated"]))
    np.testing.assert_array_equal(bundle.realized, np.stack(seen["realized"]))
    assert bundle.step_start_frame.tolist() == [0, 15]
    assert bundle.step_index.tolist() == [0, 1]
    assert bundle.skill_id.tolist() == [0, 2]
    assert bundle.skill_text.tolist() == ["Walk<forward><normal>", "Turn<left><30>"]
    assert bundle.frame_step.tolist() == [0] * 15 + [1] * 15
    assert bundle.object_ids.tolist() == [4, 9]
    assert bundle.object_poses.shape == (30, 2, 7)
    assert bundle.seed_history.shape == (5, 75)
    assert bundle.initial_realized[1] == pytest.approx(bundle.seed_history[-1, 1] - 0.01)
    assert bundle.initial_object_poses.shape == (2, 7)
    assert (bundle.fps, bundle.frames_per_step) == (30.0, 15)
    env.close()


def test_bundles_per_episode_and_truncation(fake_env, tmp_path: Path) -> None:
    env = TrajectoryWrapper(fake_env(max_steps=2), tmp_path)
    _run(env, ["Walk<forward><slow>"] * 5, "e1")
    _run(env, ["Walk<forward><slow>"] * 5, "e2")
    env.close()
    dirs = find_rollout_dirs(tmp_path)
    assert [d.name for d in dirs] == ["0000_fake_scene_e1", "0001_fake_scene_e2"]
    for d in dirs:
        b = load_bundle(d)
        assert (b.ended_by, b.complete, b.num_frames, b.manifest["steps"]) == (
            "truncated",
            True,
            30,
            2,
        )
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_error_mid_episode_leaves_incomplete_bundle_and_closed_videos(
    fake_env, tmp_path: Path
) -> None:
    base = fake_env(max_steps=10)

    class Boom:
        def on_frame(self, event: Any) -> None:
            if event.step == 1 and event.frame_index == 6:
                raise RuntimeError("observer exploded")

    env = VideoWrapper(
        TrajectoryWrapper(base, tmp_path, flat_dir), tmp_path, episode_dir_fn=flat_dir
    )
    base.add_observer(Boom())
    env.reset(options={"episode_id": "e1"})
    env.step("Walk<forward><normal>")
    with pytest.raises(RuntimeError, match="observer exploded"):
        env.step("Side step<right><0.3>")
    bundle = load_bundle(tmp_path)
    m = bundle.manifest
    assert (m["ended_by"], m["complete"]) == ("error", False)
    assert "observer exploded" in m["error"]
    assert m["steps"] == 1  # the failing step did not complete
    assert bundle.num_frames == 15 + 7  # both wrappers saw frame 6 before the failing observer
    assert bundle.generated.shape == (30, 75)  # the whole generated chunk of the failed step
    assert count_mp4_frames(tmp_path / "ego.mp4") == 1 + 15 + 7
    assert count_mp4_frames(tmp_path / "exo.mp4") == 1 + 15 + 7
    env.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [MANIFEST_FILE, AFTER_FILE, BEFORE_FILE, "ego.mp4", "exo.mp4"]
    )
    # forward replay of the incomplete bundle compares the realized prefix
    report = forward_replay(tmp_path, physics=_PHYS, scene=FakeScene())
    assert report.frames == 22 and report.max_abs_deviation == 0.0


def test_flush_and_context_manager_force_the_bundle(fake_env, tmp_path: Path) -> None:
    env = TrajectoryWrapper(fake_env(max_steps=10), tmp_path / "a", flat_dir)
    env.reset(options={"episode_id": "e1"})
    env.step("Walk<forward><normal>")
    try:
        raise TimeoutError("provider down")
    except TimeoutError as exc:
        assert env.flush(exc) == tmp_path / "a"
    assert env.flush() is None  # nothing pending any more
    m = load_bundle(tmp_path / "a").manifest
    assert (m["ended_by"], m["complete"], m["frames"]) == ("error", False, 15)
    assert "provider down" in m["error"]
    env.close()

    with pytest.raises(ValueError, match="policy bug"):
        with TrajectoryWrapper(fake_env(max_steps=10), tmp_path / "b", flat_dir) as env2:
            env2.reset(options={"episode_id": "e2"})
            env2.step("Turn<right><90>")
            env2.step("Turn<right><90>")
            raise ValueError("policy bug")
    m = load_bundle(tmp_path / "b").manifest
    assert (m["ended_by"], m["frames"], m["steps"]) == ("error", 30, 2)

    env3 = TrajectoryWrapper(fake_env(max_steps=10), tmp_path / "c", flat_dir)
    env3.reset(options={"episode_id": "e1"})
    env3.step("Walk<forward><normal>")
    env3.close()
    m = load_bundle(tmp_path / "c").manifest
    assert (m["ended_by"], m["complete"]) == ("abandoned", False)


def test_tampered_and_corrupt_bundles_are_refused(fake_env, tmp_path: Path) -> None:
    env = TrajectoryWrapper(fake_env(max_steps=1), tmp_path, flat_dir)
    _run(env, ["Walk<forward><fast>"])
    env.close()
    load_bundle(tmp_path)
    for name in (BEFORE_FILE, AFTER_FILE):
        path = tmp_path / name
        original = path.read_bytes()
        data = bytearray(original)
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(ReplayIntegrityError) as info:
            load_bundle(tmp_path)
        msg = str(info.value)
        assert name in msg and info.value.expected in msg and info.value.actual in msg
        path.write_bytes(original[: len(original) // 2])  # truncated
        with pytest.raises(ReplayIntegrityError, match=name):
            load_bundle(tmp_path)
        # corrupt zip whose hash was "fixed up": a clear NPZ error, not a crash
        path.write_bytes(b"not a zip archive")
        with pytest.raises(ReplayBundleError, match="not a readable NPZ"):
            load_bundle(tmp_path, verify=False)
        path.write_bytes(original)
    load_bundle(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    manifest["schema"] = "other_v9"
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(ReplayBundleError, match="schema must be 'humanclaw_replay_v1'"):
        load_bundle(tmp_path)
    (tmp_path / MANIFEST_FILE).unlink()
    with pytest.raises(ReplayBundleError, match="no replay_manifest.json"):
        load_bundle(tmp_path)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("frames", 31, "'frames'"),
        ("frames", "30", "'frames'"),
        ("generated_frames", 15, "'generated_frames'"),
        ("video_frames", 30, "'video_frames'"),
        ("motion_steps", 3, "'motion_steps'"),
        ("steps", 7, "'steps'"),
        ("steps", True, "'steps'"),
        ("ended_by", "exploded", "'ended_by'"),
        ("ended_by", "abandoned", "'complete'"),  # abandoned cannot be complete
        ("complete", False, "'complete'"),
        ("complete", "yes", "'complete'"),
        ("episode.episode_id", "someone_else", "episode.episode_id"),
        ("episode", None, "'episode'"),
    ],
)
def test_manifest_fields_are_checked_on_load(
    fake_env, tmp_path: Path, field: str, value: Any, named: str
) -> None:
    """Each counted, ending and identity field of the manifest must agree with the arrays
    (docs/replay.md); the NPZ hashes do not cover the manifest itself."""
    env = TrajectoryWrapper(fake_env(max_steps=5), tmp_path, flat_dir)
    _run(env, ["Walk<forward><normal>", "Turn<left><30>", "Stop/Stand"])
    env.close()
    path = tmp_path / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    assert (manifest["frames"], manifest["steps"], manifest["complete"]) == (30, 3, True)
    load_bundle(tmp_path)
    if "." in field:
        outer, inner = field.split(".")
        manifest[outer][inner] = value
    else:
        manifest[field] = value
    path.write_text(json.dumps(manifest))
    with pytest.raises(ReplayBundleError, match=named.replace(".", r"\.")):
        load_bundle(tmp_path)


def test_manifest_of_an_error_bundle_counts_the_failed_step(fake_env, tmp_path: Path) -> None:
    """An error may come after the failing step's motion was generated: ``steps`` may then
    be one less than ``motion_steps``, never more, never two less."""
    env = TrajectoryWrapper(fake_env(max_steps=5), tmp_path, flat_dir)
    env.reset(options={"episode_id": "e1"})
    env.step("Walk<forward><normal>")
    env.step("Turn<left><30>")
    env.flush(RuntimeError("provider down"))
    path = tmp_path / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    assert (manifest["ended_by"], manifest["motion_steps"], manifest["steps"]) == ("error", 2, 2)
    for steps, ok in ((2, True), (1, True), (0, False), (3, False)):
        path.write_text(json.dumps({**manifest, "steps": steps}))
        if ok:
            load_bundle(tmp_path)
        else:
            with pytest.raises(ReplayBundleError, match="'steps'"):
                load_bundle(tmp_path)
    env.close()


def test_forward_replay_exact_and_detects_changes(fake_env, tmp_path: Path) -> None:
    env = TrajectoryWrapper(fake_env(max_steps=3), tmp_path, flat_dir)
    _run(env, ["Walk<forward><normal>", "Turn<left><60>", "Walk<forward><normal>"], "e2")
    env.close()
    report = forward_replay(tmp_path, physics=_PHYS, scene=FakeScene())
    assert report.frames == 45
    assert report.max_abs_deviation == 0.0 and report.exact
    assert report.first_divergent_frame is None
    assert report.contract_matches is True
    with pytest.raises(ReplayBundleError, match="content hash"):
        forward_replay(tmp_path, physics=_PHYS, scene=FakeScene(salt="changed"))

    class DriftingPhysics(FakePhysics):
        capabilities = PhysicsCapabilities(name="fake_replay_drift")

        def step_frame(self, frame_75: np.ndarray) -> None:
            super().step_frame(frame_75)
            self._frame[0] += 1e-9

    registry.register_physics("fake_replay_drift", f"{__name__}:_Drifting")
    globals()["_Drifting"] = DriftingPhysics
    drift = forward_replay(tmp_path, physics="fake_replay_drift", scene=FakeScene())
    assert drift.first_divergent_frame == 0 and 0.0 < drift.max_abs_deviation < 1e-6


def test_delayed_render_builds_no_physics(fake_env, tmp_path: Path, monkeypatch) -> None:
    rollout = tmp_path / "rollout"
    base = fake_env(max_steps=2)
    env = VideoWrapper(TrajectoryWrapper(base, rollout, flat_dir), rollout, episode_dir_fn=flat_dir)
    _run(env, ["Walk<forward><normal>", "Turn<left><30>"])
    env.close()
    built = FakePhysics.instances

    def no_physics(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("delayed render must not build a physics backend")

    monkeypatch.setattr(FakePhysics, "__init__", no_physics)
    monkeypatch.setattr(registry, "create", no_physics)
    out = tmp_path / "render"
    report = render_saved_trajectory(rollout, out, renderer=_RENDER, scene=FakeScene())
    assert FakePhysics.instances == built
    assert report.frames == 31 and report.renderer == _RENDER
    assert count_mp4_frames(out / "ego.mp4") == 31
    assert count_mp4_frames(out / "exo.mp4") == 31
    saved = json.loads((out / "render_report.json").read_text())
    assert saved["frames"] == 31 and saved["ms_per_frame"] >= 0.0
    assert _files(out) == ["ego.mp4", "exo.mp4", "render_report.json"]
    # the delayed videos show the same pictures as the live ones (same poses, same renderer)
    import imageio.v3 as iio

    live = iio.imread(rollout / "exo.mp4", plugin="FFMPEG")
    late = iio.imread(out / "exo.mp4", plugin="FFMPEG")
    assert live.shape == late.shape == (31, 512, 512, 3)
    assert np.abs(live.astype(int) - late.astype(int)).max() <= 2
    report2 = render_saved_trajectory(
        rollout, out / "ego_only", renderer=_RENDER, exo=False, scene=FakeScene()
    )
    assert set(report2.videos) == {"ego"}
    with pytest.raises(ReplayBundleError, match="content hash"):
        render_saved_trajectory(rollout, out, renderer=_RENDER, scene=FakeScene("x"))


def test_fk_link_poses_match_the_link_frame_convention() -> None:
    rng = np.random.default_rng(0)
    frames = np.zeros((3, 75))
    frames[:, 0:3] = [[0.0, 0.9, 0.0], [1.0, 0.95, -2.0], [0.5, 0.5, 0.5]]
    frames[:, 3:] = 0.4 * rng.standard_normal((3, 72))
    poses = link_poses_from_frames(frames)
    assert poses.shape == (3, 24, 7)
    from humanclaw_gym.body.skeleton import forward_kinematics
    from humanclaw_gym.render.transforms import quat_xyzw_to_matrix

    pos, rot = forward_kinematics(frames)
    np.testing.assert_allclose(poses[..., :3], pos)
    np.testing.assert_allclose(quat_xyzw_to_matrix(poses[..., 3:]), rot, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(poses[..., 3:], axis=-1), 1.0)
    assert np.all(poses[..., 6] >= 0.0)


def test_batch_reports_failures_per_job(tmp_path: Path) -> None:
    bad = tmp_path / "runs" / "bad"
    bad.mkdir(parents=True)
    (bad / MANIFEST_FILE).write_text("{}")
    assert find_rollout_dirs(tmp_path / "runs") == [bad]
    results = render_saved_batch([bad], tmp_path / "out", workers=1, progress=False)
    assert len(results) == 1 and not results[0].ok
    assert "schema" in results[0].error
    with pytest.raises(ValueError, match="workers"):
        render_saved_batch([bad], tmp_path / "out", workers=0)
    from humanclaw_gym.cli.render_cmd import batch_main, main

    # a corrupt bundle and a missing root are user errors (2); a failed job in a batch is 1
    assert main(["--rollout-dir", str(bad), "--output-dir", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
    assert (
        batch_main(["--root", str(tmp_path / "runs"), "--output-root", str(tmp_path / "o2")]) == 1
    )
    assert (
        batch_main(["--root", str(tmp_path / "nothing"), "--output-root", str(tmp_path / "o3")])
        == 2
    )


# ----------------------------------------------------------------------------------------
# part 2: real pybullet physics + real renderer on a hand-made scene (fake motion/episodes)
# ----------------------------------------------------------------------------------------
def _have_pybullet_physics() -> str | None:
    try:
        import humanclaw_gym.physics.pybullet_backend  # noqa: F401
        import humanclaw_gym.render.tiny_backend  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the tree
        return f"pybullet physics/renderer not available: {exc!r}"
    return None


_PB_SKIP = _have_pybullet_physics()
needs_pybullet = pytest.mark.skipif(_PB_SKIP is not None, reason=str(_PB_SKIP))


def _small_scene() -> Any:
    from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec

    return SceneSpec(
        scene_id="replay_test_room",
        rooms=(Room(1, "living_room", (-3.0, -3.0), (3.0, 3.0)),),
        objects=(
            SceneObject(1, "floor", "floor", (0.0, -0.05, 0.0), 0.0, (Part("box", (3.0, 0.05, 3.0)),)),
            SceneObject(2, "wall", "wall", (0.0, 1.2, 3.0), 0.0, (Part("box", (3.0, 1.2, 0.05)),)),
            SceneObject(
                3, "box_1", "box", (0.0, 0.15, 0.6), 0.0, (Part("box", (0.15, 0.15, 0.15)),),
                dynamic=True, mass_kg=2.0,
            ),
            SceneObject(
                4, "cup_1", "cup", (0.8, 0.05, 0.3), 0.0, (Part("cylinder", (0.04, 0.05, 0.0)),),
                dynamic=True, mass_kg=0.3,
            ),
        ),
    )  # fmt: skip


class StandingMotion(FakeMotion):
    """FakeMotion whose seed stands on the floor (pelvis at standing height, facing +Z)."""

    capabilities = MotionCapabilities(name="fake_replay_standing")

    def reset(self, start_position: np.ndarray, start_yaw_rad: float, seed: int = 0) -> np.ndarray:
        from humanclaw_gym.body import STANDING_PELVIS_HEIGHT_M

        hist = super().reset(start_position, start_yaw_rad, seed)
        hist[:, 1] = float(start_position[1]) + STANDING_PELVIS_HEIGHT_M
        hist[:, 3:6] = [0.0, start_yaw_rad, 0.0]
        self._hist = hist.copy()
        return hist


@pytest.fixture(scope="module")
def pybullet_rollouts(tmp_path_factory):
    """Two 3-step episodes in one scene (physics reused), with bundles and live videos."""
    import humanclaw_gym.episodes as episodes_mod
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

    scene = _small_scene()
    registry.register_motion("fake_replay_standing", f"{__name__}:StandingMotion")
    root = tmp_path_factory.mktemp("pybullet_rollouts")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(episodes_mod, "load_scene", lambda scene_id: scene, raising=False)
        env = FindNavInteractEnv(
            episodes=[
                FakeEpisode("e1", scene.scene_id, (0.0, 0.0, 0.0), 0.0),
                FakeEpisode("e2", scene.scene_id, (0.2, 0.0, 0.0), 0.2),
            ],
            physics="pybullet",
            renderer="auto",
            motion="fake_replay_standing",
            max_steps=3,
        )
        wrapped = TrajectoryWrapper(VideoWrapper(env, root), root)
        dirs = []
        for ep in ("e1", "e2"):
            _run(wrapped, ["Walk<forward><normal>"] * 3, ep)
            dirs.append(wrapped.last_bundle_dir)
        wrapped.close()
    return scene, root, dirs


@needs_pybullet
def test_pybullet_bundles_and_live_videos(pybullet_rollouts) -> None:
    _, root, dirs = pybullet_rollouts
    for d in dirs:
        bundle = load_bundle(d)
        assert (bundle.ended_by, bundle.num_frames) == ("truncated", 45)
        assert bundle.object_ids.tolist() == [3, 4]
        assert count_mp4_frames(d / "ego.mp4") == 46
        assert count_mp4_frames(d / "exo.mp4") == 46
    moved = (
        load_bundle(dirs[0]).object_poses[-1, 0, :3]
        - load_bundle(dirs[0]).initial_object_poses[0, :3]
    )
    assert np.linalg.norm(moved) > 0.05  # the humanoid walked into the box
    assert not list(root.rglob("*.tmp"))


@needs_pybullet
def test_pybullet_forward_replay_exact(pybullet_rollouts) -> None:
    scene, _, dirs = pybullet_rollouts
    report = forward_replay(dirs[0], scene=scene)
    assert report.frames == 45
    assert report.max_abs_deviation == 0.0, report


@needs_pybullet
def test_pybullet_forward_replay_exact_after_an_earlier_episode(pybullet_rollouts) -> None:
    """The second episode ran on a physics that had already run one; a fresh physics must
    reproduce it (PhysicsBackend.reset: "must not depend on earlier episodes")."""
    scene, _, dirs = pybullet_rollouts
    report = forward_replay(dirs[1], scene=scene)
    assert report.max_abs_deviation == 0.0, report


@needs_pybullet
def test_pybullet_fk_link_poses_match_physics(pybullet_rollouts) -> None:
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics
    from humanclaw_gym.render.transforms import quat_xyzw_to_matrix

    scene, _, dirs = pybullet_rollouts
    bundle = load_bundle(dirs[0])
    physics = PybulletHalfPhysics()
    try:
        physics.build(scene)
        physics.reset(bundle.seed_history[-1])
        checked = 0
        for i in range(bundle.num_frames):
            physics.step_frame(bundle.generated[i])
            if i % 7:
                continue
            fk = link_poses_from_frames(physics.realized_frame())
            ref = physics.link_poses()
            np.testing.assert_allclose(fk[:, :3], ref[:, :3], atol=1e-6)
            np.testing.assert_allclose(
                quat_xyzw_to_matrix(fk[:, 3:]), quat_xyzw_to_matrix(ref[:, 3:]), atol=1e-6
            )
            checked += 1
    finally:
        physics.close()
    assert checked >= 6


@needs_pybullet
def test_pybullet_delayed_render_builds_no_physics(
    pybullet_rollouts, tmp_path: Path, monkeypatch
) -> None:
    from humanclaw_gym.physics import pybullet_backend

    def no_physics(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("delayed render must not build a physics backend")

    monkeypatch.setattr(pybullet_backend.PybulletHalfPhysics, "__init__", no_physics)
    scene, _, dirs = pybullet_rollouts
    report = render_saved_trajectory(dirs[0], tmp_path, scene=scene)
    assert report.frames == 46
    assert count_mp4_frames(tmp_path / "ego.mp4") == 46
    assert count_mp4_frames(tmp_path / "exo.mp4") == 46
    import imageio.v3 as iio

    live = iio.imread(dirs[0] / "exo.mp4", plugin="FFMPEG").astype(int)
    late = iio.imread(tmp_path / "exo.mp4", plugin="FFMPEG").astype(int)
    # same renderer, link poses by FK instead of pybullet's: visually identical
    assert np.abs(live - late).mean() < 1.0


@needs_pybullet
def test_pybullet_render_cli_with_check_replay(
    pybullet_rollouts, tmp_path: Path, monkeypatch, capsys
) -> None:
    import humanclaw_gym.episodes as episodes_mod
    from humanclaw_gym.cli import main as humanclaw

    scene, _, dirs = pybullet_rollouts
    monkeypatch.setattr(episodes_mod, "load_scene", lambda scene_id: scene, raising=False)
    argv = ["render", "--rollout-dir", str(dirs[0]), "--output-dir", str(tmp_path), "--no-exo"]
    assert humanclaw([*argv, "--check-replay"]) == 0
    out = capsys.readouterr().out
    assert '"max_abs_deviation": 0.0' in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ego.mp4", "render_report.json"]
    assert json.loads((tmp_path / "render_report.json").read_text())["frames"] == 46


# ----------------------------------------------------------------------------------------
# part 3: the real env (physics, renderer, motion, episodes)
# ----------------------------------------------------------------------------------------
def _real_env_available() -> str | None:
    try:
        import humanclaw_gym.episodes as episodes_mod
        import humanclaw_gym.motion.procedural  # noqa: F401
        import humanclaw_gym.physics.pybullet_backend  # noqa: F401
        import humanclaw_gym.render.tiny_backend  # noqa: F401

        if not hasattr(episodes_mod, "load_split") or not hasattr(episodes_mod, "load_scene"):
            return "humanclaw_gym.episodes has no load_split/load_scene yet"
        episodes_mod.load_split("val100")
    except Exception as exc:  # pragma: no cover - depends on the tree
        return f"real backends not available: {exc!r}"
    return None


_REAL_SKIP = _real_env_available()
real = pytest.mark.skipif(_REAL_SKIP is not None, reason=str(_REAL_SKIP))


@pytest.fixture(scope="module")
def real_rollouts(tmp_path_factory):
    """Two short real episodes of the same scene with trajectory + video wrappers."""
    import gymnasium as gym

    import humanclaw_gym  # noqa: F401  (registers the env)
    from humanclaw_gym.episodes import load_split

    root = tmp_path_factory.mktemp("real")
    episodes = list(load_split("val100"))
    scene_id = episodes[0].scene_id
    same_scene = [e for e in episodes if e.scene_id == scene_id][:2]
    env = gym.make("HumanClawFindNavInteract-v0", split="val100", max_steps=3)
    env = VideoWrapper(TrajectoryWrapper(env, root), root)
    dirs = []
    actions = [["Walk<forward><normal>", "Turn<left><30>", "Stop/Stand"], ["Turn<right><45>"] * 3]
    for ep, acts in zip(same_scene, actions, strict=False):
        _run(env, acts, ep.episode_id)
        dirs.append(env.env.last_bundle_dir)
    env.close()
    return root, dirs


@real
def test_real_videos_and_bundles(real_rollouts) -> None:
    root, dirs = real_rollouts
    first, second = (load_bundle(d) for d in dirs)
    assert (first.ended_by, first.num_frames, first.manifest["steps"]) == ("stop", 30, 3)
    assert (second.ended_by, second.num_frames) == ("truncated", 45)
    assert count_mp4_frames(dirs[0] / "ego.mp4") == 31
    assert count_mp4_frames(dirs[1] / "exo.mp4") == 46
    assert not list(root.rglob("*.tmp"))


@real
def test_real_forward_replay_is_exact(real_rollouts) -> None:
    _, dirs = real_rollouts
    for d in dirs:  # the second episode ran on a physics that had already run one
        report = forward_replay(d)
        assert report.frames > 0
        assert report.max_abs_deviation == 0.0, report


@real
def test_real_fk_link_poses_match_physics(real_rollouts) -> None:
    from humanclaw_gym.episodes import load_scene
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics
    from humanclaw_gym.render.transforms import quat_xyzw_to_matrix

    _, dirs = real_rollouts
    bundle = load_bundle(dirs[0])
    physics = PybulletHalfPhysics()
    try:
        physics.build(load_scene(bundle.scene_id))
        physics.reset(bundle.seed_history[-1])
        for i in range(12):
            physics.step_frame(bundle.generated[i])
        fk = link_poses_from_frames(physics.realized_frame())
        ref = physics.link_poses()
    finally:
        physics.close()
    np.testing.assert_allclose(fk[:, :3], ref[:, :3], atol=1e-6)
    np.testing.assert_allclose(
        quat_xyzw_to_matrix(fk[:, 3:]), quat_xyzw_to_matrix(ref[:, 3:]), atol=1e-6
    )


@real
def test_real_delayed_render_builds_no_physics(real_rollouts, tmp_path: Path, monkeypatch) -> None:
    from humanclaw_gym.physics import pybullet_backend

    def no_physics(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("delayed render must not build a physics backend")

    monkeypatch.setattr(pybullet_backend.PybulletHalfPhysics, "__init__", no_physics)
    _, dirs = real_rollouts
    report = render_saved_trajectory(dirs[0], tmp_path)
    assert report.frames == 31
    assert count_mp4_frames(tmp_path / "ego.mp4") == 31
    assert count_mp4_frames(tmp_path / "exo.mp4") == 31


@real
@pytest.mark.slow
def test_real_render_batch_and_cli(real_rollouts, tmp_path: Path) -> None:
    root, dirs = real_rollouts
    proc = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "render-batch", "--root", str(root),
         "--output-root", str(tmp_path), "--workers", "2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["rendered"] == 2
    for job in summary["jobs"]:
        assert count_mp4_frames(Path(job["output_dir"]) / "ego.mp4") == job["report"]["frames"]
