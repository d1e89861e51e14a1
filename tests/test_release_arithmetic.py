"""The reference release's per-frame arithmetic (humanclaw_gym/physics/release.py) on both
physics backends and under the paper profile, and partial scene datasets for the profile.

Everything release-shaped here is synthetic (tests/paper_release_synthetic.py,
humanclaw_gym/body/synthetic.py, humanclaw_gym/scenes/hssd/synthetic.py,
humanclaw_gym/motion/paper/synthetic.py).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from paper_release_synthetic import write_release_checkout

from humanclaw_gym.body.skeleton import JOINT_INDEX
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.physics.contract import FRAMES_PER_CHUNK, MAX_DRIVE_PER_FRAME_RAD
from humanclaw_gym.physics.release import joint_drive, release_spawn_frame, zero_neck_head
from humanclaw_gym.rotations import quat_conj, quat_exp, quat_log, quat_mul
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec

try:
    import mujoco  # noqa: F401

    _HAVE_MUJOCO = True
except ImportError:  # pragma: no cover
    _HAVE_MUJOCO = False

PHYSICS = [
    "pybullet",
    pytest.param("mujoco", marks=pytest.mark.skipif(not _HAVE_MUJOCO, reason="no mujoco")),
]
_NECK = 3 + 3 * JOINT_INDEX["neck"]


def _open_floor() -> SceneSpec:
    floor = SceneObject(1, "floor", "floor", (0.0, -0.05, 0.0), 0.0, (Part("box", (20, 0.05, 20)),))
    return SceneSpec("open", (Room(0, "living_room", (-20, -20), (20, 20)),), (floor,))


def _backend(name: str, **options):
    from humanclaw_gym.backends import registry

    physics = registry.entry("physics", name).load()(**options)
    physics.build(_open_floor())
    return physics


# --------------------------------------------------------------------------------------
# the arithmetic itself
# --------------------------------------------------------------------------------------
def test_joint_drive_is_the_capped_arc_and_the_uncapped_path() -> None:
    """A joint 90 degrees behind (about x) and one 10 degrees behind (about y): the velocity
    is the shortest arc capped at 30 degrees per frame; the motor targets walk k/4 of the
    *uncapped* arc from the realized rotation (67.5 degrees before substep 3)."""
    real = np.array([[0.0, 0.0, 0.0, 1.0], quat_exp(np.array([0.0, 0.3, 0.0]))])
    arcs = np.array([[math.pi / 2, 0.0, 0.0], [0.0, math.radians(10.0), 0.0]])
    gen = quat_mul(real, quat_exp(arcs))
    velocity, targets = joint_drive(real, gen, 1.0 / 30.0)
    np.testing.assert_allclose(velocity[0], [MAX_DRIVE_PER_FRAME_RAD * 30.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(velocity[1], arcs[1] * 30.0, atol=1e-12)
    assert targets.shape == (4, 2, 4)
    np.testing.assert_allclose(targets[0], real, atol=1e-15)
    for k in range(4):
        reached = quat_log(quat_mul(quat_conj(real), targets[k]))
        np.testing.assert_allclose(reached, arcs * k / 4.0, atol=1e-12)
    # q and -q are the same rotation: the arc is the short one either way
    v_neg, _ = joint_drive(real, -gen, 1.0 / 30.0)
    np.testing.assert_allclose(v_neg, velocity, atol=1e-12)


def test_spawn_frame_turns_the_shift_in_the_world_not_with_the_body() -> None:
    """Root link = Z-up-to-Habitat rotation of shift.npy row 0 + the half-turned SMPL
    translation, whatever the body's heading; orientation half-turned; neck/head zeroed."""
    start = np.zeros(75)
    start[0:3] = (1.0, 1.15, 2.0)
    start[_NECK : _NECK + 3] = 0.4
    hand = 3 + 3 * JOINT_INDEX["left_hand"]
    start[hand : hand + 3] = 0.3
    shift0 = np.array([0.003, -0.35, 0.012])
    for yaw in (0.0, 1.0, -2.5):
        start[3:6] = (0.0, yaw, 0.0)
        frame = release_spawn_frame(start, shift0)
        # (x, y, z) -> (-x, z, y) for the shift; (x, y, z) -> (-x, y, -z) for the motion
        np.testing.assert_allclose(
            frame[0:3], [-0.003 - 1.0, 0.012 + 1.15, -0.35 - 2.0], atol=1e-12
        )
        turned = quat_mul(quat_exp(np.array([0.0, math.pi, 0.0])), quat_exp(start[3:6]))
        assert abs(abs(float(np.dot(quat_exp(frame[3:6]), turned))) - 1.0) < 1e-12
    for column in (_NECK, hand):  # neck, head and the hands: the release's physics input
        assert not frame[column : column + 3].any()
        assert not zero_neck_head(start)[column : column + 3].any()
    with pytest.raises(ValueError, match="shift.npy row 0"):
        release_spawn_frame(start, np.array([0.0, np.nan, 0.0]))


def test_chunk_length_is_the_simulation_s() -> None:
    from humanclaw_gym.envs import simulation

    assert FRAMES_PER_CHUNK == simulation.FRAMES_PER_CHUNK


# --------------------------------------------------------------------------------------
# the backends
# --------------------------------------------------------------------------------------
def _jumping_frames(start: np.ndarray) -> np.ndarray:
    """Two chunks standing still; the second one 0.3 m further along +x from its first
    frame on (a displacement only across the chunk boundary)."""
    frames = np.tile(start, (2 * FRAMES_PER_CHUNK, 1))
    frames[FRAMES_PER_CHUNK:, 0] += 0.3
    return frames


@pytest.mark.parametrize("physics", PHYSICS)
def test_first_frame_of_a_chunk_gets_no_translation_command(physics) -> None:
    """The release drops the displacement of a chunk's first frame: across the boundary
    the root does not move; this package's arithmetic moves it by the generated 0.3 m.
    The frame count survives a snapshot."""
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator

    start = ProceduralMotionGenerator().reset(np.zeros(3), 0.0, seed=0)[-1].copy()
    start[1] += 0.01
    frames = _jumping_frames(start)
    moved = {}
    for release in (False, True):
        backend = _backend(physics, release_arithmetic=release)
        try:
            backend.reset(start)
            for frame in frames[:FRAMES_PER_CHUNK]:
                backend.step_frame(frame)
            x0 = backend.realized_frame()[0]
            snap = backend.get_state()
            backend.step_frame(frames[FRAMES_PER_CHUNK])
            moved[release] = backend.realized_frame()[0] - x0
            backend.set_state(snap)  # the same frame again from the snapshot
            backend.step_frame(frames[FRAMES_PER_CHUNK])
            assert backend.realized_frame()[0] - x0 == moved[release]
            assert backend.contract()["release_arithmetic"] is release
        finally:
            backend.close()
    assert moved[False] > 0.2
    assert abs(moved[True]) < 0.01


@pytest.mark.parametrize("physics", PHYSICS)
def test_neck_and_head_are_zeroed_in_the_physics_input(physics) -> None:
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator

    start = ProceduralMotionGenerator().reset(np.zeros(3), 0.0, seed=0)[-1].copy()
    start[1] += 0.01
    bent = start.copy()
    bent[_NECK : _NECK + 3] = (0.3, 0.0, 0.0)
    neck = {}
    for release in (False, True):
        backend = _backend(physics, release_arithmetic=release)
        try:
            backend.reset(start)
            for _ in range(8):
                backend.step_frame(bent)
            neck[release] = float(np.linalg.norm(backend.realized_frame()[_NECK : _NECK + 3]))
        finally:
            backend.close()
    assert neck[False] > 0.2 and neck[True] < 0.02


def test_pybullet_drives_joints_with_the_release_motors(monkeypatch) -> None:
    """With release_arithmetic the pybullet backend writes the velocity of joint_drive once
    and, before each of the four substeps, aims every joint motor at that substep's target
    with the PJSC gain as position gain, no velocity gain and an unbounded force."""
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
    from humanclaw_gym.physics.contract import REFERENCE_PJSC_GAINS

    gains = dict(REFERENCE_PJSC_GAINS, left_elbow=0.0)
    backend = _backend(
        "pybullet", release_arithmetic=True, pjsc_gains=gains, root_gravity_mode="midpoint"
    )
    try:
        start = ProceduralMotionGenerator().reset(np.zeros(3), 0.0, seed=0)[-1].copy()
        start[1] += 0.01
        backend.reset(start)
        target = start.copy()
        target[3 + 3 * JOINT_INDEX["left_shoulder"] : 6 + 3 * JOINT_INDEX["left_shoulder"]] += 0.4
        real = backend._real_rot.copy()
        calls: list[tuple[str, tuple, dict]] = []
        original = backend._call

        def spy(name, *args, **kwargs):
            calls.append((name, args, kwargs))
            return original(name, *args, **kwargs)

        monkeypatch.setattr(backend, "_call", spy)
        backend.step_frame(target)
    finally:
        monkeypatch.undo()
        backend.close()
    drive = backend._drive_idx
    velocity, targets = joint_drive(
        real[1 + drive], backend.frame_link_rotations(target)[1 + drive], 1.0 / 30.0
    )
    written = [kw["targetVelocities"] for n, _, kw in calls if n == "resetJointStatesMultiDof"]
    assert len(written) == 1
    np.testing.assert_allclose(written[0], velocity, atol=1e-12)
    motors = [kw for n, _, kw in calls if n == "setJointMotorControlMultiDofArray"]
    assert len(motors) == 4
    names = [backend.body.names[1 + j] for j in drive]
    for k, kw in enumerate(motors):
        np.testing.assert_allclose(kw["targetPositions"], targets[k], atol=1e-12)
        assert kw["positionGains"] == [gains.get(n, 1.0) for n in names]
        assert set(kw["velocityGains"]) == {0.0}
        forces = {n: f[0] for n, f in zip(names, kw["forces"], strict=True)}
        assert forces["left_elbow"] == 0.0 and forces["left_knee"] == math.inf


def test_release_arithmetic_needs_the_release_root_drive() -> None:
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics

    with pytest.raises(ValueError, match="root_correction_gain 1.0"):
        PybulletHalfPhysics(release_arithmetic=True, root_correction_gain=0.5)
    with pytest.raises(TypeError, match="release_arithmetic must be a bool"):
        PybulletHalfPhysics(release_arithmetic="yes")


def test_release_spawn_needs_the_paper_motion_and_a_body(tmp_path) -> None:
    with pytest.raises(ValueError, match="needs motion='paper' and body_asset="):
        gym.make(ENV_ID, physics_options={"release_arithmetic": True})


# --------------------------------------------------------------------------------------
# the paper profile: spawn and first frame by default, ours on request
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    return write_synthetic_dataset(tmp_path_factory.mktemp("hssd") / "humanclaw-hssd-synth")


@pytest.fixture(scope="module")
def paper_release(tmp_path_factory, synth) -> Path:
    pytest.importorskip("torch")
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    root = tmp_path_factory.mktemp("release") / "HumanCLAW"
    write_release_checkout(root, episodes_dir=synth.episodes_dir.parent)
    write_synthetic_release(root, seed=3, hidden_dim=32, num_layers=2, num_heads=2, nfe_steps=6)
    return root


def _profile_env(paper_release, synth, **kwargs):
    return gym.make(
        ENV_ID,
        profile="paper",
        release_dir=str(paper_release),
        scene_dataset=str(synth.root),
        privileged=True,
        **kwargs,
    )


def test_profile_spawns_and_steps_with_the_release_arithmetic(paper_release, synth) -> None:
    """Default: the paper motion starts at the episode's init_offset (its height included),
    the root link at the seed's first SMPL translation plus shift.npy row 0 turned by the
    release's Z-up-to-Habitat rotation (not with the body), and a chunk's first frame is not
    driven toward its own displacement. release_arithmetic=False: the pelvis at the frame's
    pelvis, lifted onto the floor; both recorded."""
    from humanclaw_gym.body.asset import load_body_asset
    from humanclaw_gym.motion.paper import clear_model_cache

    shift0 = load_body_asset(paper_release / "resources/agent/neutral_beta0_handmerged").shift_m[0]
    seed = np.asarray(
        __import__("torch").load(
            paper_release / "resources/seeds/natural_beta0_fk_seed.pt", weights_only=True
        )["state"],
        dtype=np.float64,
    )
    roots = {}
    try:
        for release in (True, False):
            env = _profile_env(paper_release, synth, release_arithmetic=release)
            try:
                env.reset(seed=0)
                core = env.unwrapped
                episode = core.privileged_state().episode
                motion, physics = core.simulation.motion, core.simulation.physics
                assert core.backend.physics_options["release_arithmetic"] is release
                assert core.backend_info["profile"]["release_arithmetic"] is release
                assert physics.contract()["release_arithmetic"] is release
                root = physics.realized_frame()[0:3]
                roots[release] = root
                if release:
                    off = episode.reference.init_offset  # (x, z, y) of the motion world
                    yaw = math.radians(episode.reference.init_yaw_deg)
                    c, s = math.cos(yaw), math.sin(yaw)
                    x, y, z = seed[0, 0:3]
                    transl = (c * x + s * z + off[0], y + off[2], -s * x + c * z - off[1])
                    want = (
                        -shift0[0] - transl[0],
                        shift0[2] + transl[1],
                        shift0[1] - transl[2],
                    )
                    np.testing.assert_allclose(root, want, atol=1e-5)
                    assert motion.release_start[1] == pytest.approx(y + off[2], abs=1e-5)
                else:
                    pelvis = core.simulation.motion.history()[-1][0:3]
                    np.testing.assert_allclose(root[[0, 2]], pelvis[[0, 2]], atol=1e-9)
                    assert root[1] >= pelvis[1]
                # a chunk's first frame: the x/z command handed to the substeps
                commands = []
                substeps = physics._root_gravity_substeps

                def spy(frame, v_root_xz, omega, substeps=substeps, commands=commands):
                    commands.append(np.array(v_root_xz))
                    return substeps(frame, v_root_xz, omega)

                physics._root_gravity_substeps = spy
                last = motion.history()[-1]
                frames = motion.generate("Walk<forward><fast>")
                physics.step_frame(frames[0])
                physics.step_frame(frames[1])
                own = (frames[0][[0, 2]] - last[[0, 2]]) * 30.0
                np.testing.assert_allclose(commands[0], 0.0 if release else own, atol=1e-12)
                np.testing.assert_allclose(
                    commands[1], (frames[1][[0, 2]] - frames[0][[0, 2]]) * 30.0, atol=1e-12
                )
                assert np.abs(own).max() > 1e-6  # a displacement that the release drops
            finally:
                env.close()
    finally:
        clear_model_cache()
    # the release's root link starts about 0.35 m toward -Z of ours (the turned shift)
    assert roots[True][2] - roots[False][2] < -0.2


# --------------------------------------------------------------------------------------
# smoke runs on a partial dataset
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_scene_release(tmp_path_factory, synth) -> Path:
    """A release checkout whose episodes live in two scenes, the dataset holding only the
    first (the second is the first's shard under another scene id)."""
    pytest.importorskip("torch")
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    split = tmp_path_factory.mktemp("split") / "val"
    content = split / "content"
    content.mkdir(parents=True)
    header = synth.episodes_dir.parent / "val.json.gz"
    (split / "val.json.gz").write_bytes(header.read_bytes())
    source = synth.episodes_dir / f"{synth.scene_id}.json.gz"
    (content / source.name).write_bytes(source.read_bytes())
    other = "synth_home_99"
    doc = json.loads(gzip.decompress(source.read_bytes()))
    for ep in doc["episodes"]:
        ep["scene_id"] = other
    doc["goals_by_category"] = {
        k.replace(synth.scene_id, other): v for k, v in doc["goals_by_category"].items()
    }
    (content / f"{other}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    root = tmp_path_factory.mktemp("release2") / "HumanCLAW"
    write_release_checkout(root, episodes_dir=split)
    write_synthetic_release(root, seed=3, hidden_dim=32, num_layers=2, num_heads=2, nfe_steps=6)
    return root


def test_profile_checks_only_the_scenes_of_the_episodes_that_run(
    two_scene_release, synth, tmp_path, capsys
) -> None:
    """``--limit 2`` with a dataset holding only those episodes' scene runs, and the
    fingerprint records the narrowed selection; without ``--limit`` the missing scene is
    named; ``gym.make(profile=..., episode_ids=...)`` checks only those episodes."""
    from humanclaw_gym.cli.run_cmd import RunArgs, run
    from humanclaw_gym.episodes.io import load_split
    from humanclaw_gym.motion.paper import clear_model_cache
    from humanclaw_gym.profiles import ProfileError, resolve_profile

    episodes = load_split(two_scene_release / "resources/benchmark/val100.json")
    assert [e.scene_id for e in episodes[:2]] == [synth.scene_id] * 2
    assert "synth_home_99" in {e.scene_id for e in episodes}
    out = tmp_path / "run"
    args = RunArgs(profile="paper", agent="oracle", metrics=True, limit=2, max_steps=2,
                   output=out, quiet=True)  # fmt: skip
    args.backend.release = two_scene_release
    args.backend.scene_dataset = synth.root
    try:
        assert run(args) == 0
        settings = json.loads((out / "run_fingerprint.json").read_text())["settings"]
        selected = settings["profile"]["episodes"]["selected"]
        assert selected == {
            "limit": 2,
            "episode_ids": None,
            "count": 2,
            "scenes": [synth.scene_id],
        }
        assert len(list(out.glob("*/rollout_00/episode_result.json"))) == 2
        # the whole split needs the other scene: refused, naming it
        capsys.readouterr()
        args.limit = None
        args.output = tmp_path / "all"
        assert run(args) == 2
        err = capsys.readouterr().err
        assert "synth_home_99" in err and "scene dataset" in err
        assert not (tmp_path / "all").exists()
        with pytest.raises(ProfileError, match="synth_home_99"):
            resolve_profile("paper", two_scene_release, scene_dataset=synth.root)
        # an env made for two episodes of the first scene
        ids = [episodes[0].episode_id, episodes[1].episode_id]
        env = gym.make(
            ENV_ID,
            profile="paper",
            release_dir=str(two_scene_release),
            scene_dataset=str(synth.root),
            episode_ids=ids,
        )
        try:
            assert [e.episode_id for e in env.unwrapped.episodes] == ids
            assert env.unwrapped.run_profile.record["episodes"]["selected"][
                "episode_ids"
            ] == sorted(ids)
        finally:
            env.close()
        with pytest.raises(ProfileError, match="episode_ids not in the split"):
            resolve_profile(
                "paper", two_scene_release, scene_dataset=synth.root, episode_ids=["nope"]
            )
    finally:
        clear_model_cache()


def test_cli_release_arithmetic_switch_needs_the_profile(tmp_path, capsys) -> None:
    from humanclaw_gym.cli.run_cmd import RunArgs, run

    args = RunArgs(output=tmp_path / "out", quiet=True, release_arithmetic=False)
    assert run(args) == 2
    assert "--no-release-arithmetic applies to --profile paper" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------
# forward replay starts where the env reset the physics
# --------------------------------------------------------------------------------------
def test_forward_replay_starts_from_the_release_spawn(paper_release, synth, tmp_path) -> None:
    """A profile run's bundle keeps the frame the physics was reset to (the release's spawn,
    not the seed's last frame) and forward replay from it is exact; a run of the built-in
    body keeps none (its trajectory files are unchanged)."""
    from humanclaw_gym.motion.paper import clear_model_cache
    from humanclaw_gym.replay import forward_replay, load_bundle
    from humanclaw_gym.scenes.hssd import open_scene_dataset
    from humanclaw_gym.wrappers import TrajectoryWrapper

    env = TrajectoryWrapper(_profile_env(paper_release, synth), tmp_path / "out")
    try:
        env.reset(seed=0)
        spawn = env.unwrapped.simulation.reset_frame.copy()
        env.step("Walk<forward><normal>")
        env.step("Stop/Stand")
    finally:
        env.close()
        clear_model_cache()
    bundle = load_bundle(env.last_bundle_dir)
    np.testing.assert_array_equal(bundle.reset_frame, spawn)
    assert np.abs(bundle.reset_frame[0:3] - bundle.seed_history[-1][0:3]).max() > 0.1
    scene = open_scene_dataset(synth.root).load_scene(bundle.scene_id)
    report = forward_replay(env.last_bundle_dir, scene=scene)
    assert report.contract_matches and report.exact, report

    plain = TrajectoryWrapper(gym.make(ENV_ID), tmp_path / "plain")
    try:
        plain.reset(seed=0)
        plain.step("Stop/Stand")
    finally:
        plain.close()
    with np.load(plain.last_bundle_dir / "trajectory_before.npz") as data:
        assert "reset_frame" not in data.files
    assert np.array_equal(
        load_bundle(plain.last_bundle_dir).reset_frame,
        load_bundle(plain.last_bundle_dir).seed_history[-1],
    )
