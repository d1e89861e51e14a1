"""The release's body in the env (rendered, scored by its links) and the paper profile
(humanclaw_gym/profiles.py): refusals naming every missing part, the physics options read
from the release's files, and the records fingerprints and manifests keep.

Every release file here is synthetic (tests/paper_release_synthetic.py,
humanclaw_gym/body/synthetic.py, humanclaw_gym/scenes/hssd/synthetic.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from paper_release_synthetic import write_release_checkout

from humanclaw_gym.body.asset import load_body_asset
from humanclaw_gym.body.synthetic import write_synthetic_body_asset
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.metrics.collision import CollisionTracker, collision_body_group
from humanclaw_gym.physics.types import CONTACT_DTYPE, HUMAN_ID
from humanclaw_gym.profiles import ProfileError, paper_physics, resolve_profile

try:
    import mujoco  # noqa: F401

    _HAVE_MUJOCO = True
except ImportError:  # pragma: no cover
    _HAVE_MUJOCO = False

PHYSICS = [
    "pybullet",
    pytest.param("mujoco", marks=pytest.mark.skipif(not _HAVE_MUJOCO, reason="no mujoco")),
]


@pytest.fixture(scope="module")
def body_dir(tmp_path_factory) -> Path:
    return write_synthetic_body_asset(tmp_path_factory.mktemp("body") / "merged")


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    return write_synthetic_dataset(tmp_path_factory.mktemp("hssd") / "humanclaw-hssd-synth")


# --------------------------------------------------------------------------------------
# the body in the env
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("physics", PHYSICS)
def test_env_runs_draws_and_scores_the_body(body_dir, physics) -> None:
    """gym.make(body_asset=...): physics builds the 55-link body, the renderer draws its
    meshes (the exo image has humanoid pixels), and the metrics' final distance is taken
    over every link origin of that body (root included)."""
    from humanclaw_gym.metrics.geometry import body_to_target_aabb_distance
    from humanclaw_gym.wrappers import MetricsWrapper

    env = MetricsWrapper(
        gym.make(ENV_ID, body_asset=str(body_dir), physics=physics, privileged=True)
    )
    try:
        env.reset(seed=0)
        sim = env.unwrapped.simulation
        assert sim.physics.body.num_links == 55 and sim.body_links[0] == "pelvis"
        exo = sim.render("exo", 128, modes=("rgb", "instance"))
        assert (exo["instance"] == 0).sum() > 50  # the humanoid's pixels
        _, _, _, _, info = env.step("Walk<forward><slow>")
        _, _, terminated, _, info = env.step("Stop/Stand")
        assert terminated
        metrics = info["metrics"]
        state = env.unwrapped.privileged_state()
        points = sim.physics.link_origins()
        assert points.shape == (56, 3)
        scene = state.scene
        boxes = [np.stack(scene.object_by_id(g.object_id).aabb()) for g in state.episode.goals]
        assert metrics["final_distance_m"] == pytest.approx(
            body_to_target_aabb_distance(points, boxes), abs=1e-9
        )
        info_backends = env.unwrapped.backend_info
        assert info_backends["body_asset"]["sha256"] == load_body_asset(body_dir).sha256
    finally:
        env.close()


def test_replay_records_the_body_and_redraws_it_from_its_meshes(body_dir, tmp_path) -> None:
    """The replay manifest names the body asset (path, SHA-256); the delayed render draws
    that body from the saved 75-D frames (forward kinematics over its links equals the
    physics' link poses) and refuses a body folder whose files changed."""
    from humanclaw_gym.replay import load_bundle
    from humanclaw_gym.replay.bundle import ReplayBundleError
    from humanclaw_gym.replay.render import render_saved_trajectory
    from humanclaw_gym.wrappers import TrajectoryWrapper

    body = load_body_asset(body_dir)
    env = TrajectoryWrapper(gym.make(ENV_ID, body_asset=str(body_dir)), tmp_path / "out")
    try:
        env.reset(seed=0)
        env.step("Turn<left><30>")
        physics = env.unwrapped.simulation.physics
        np.testing.assert_allclose(
            body.link_poses_from_frame(physics.realized_frame())[:, :3],
            physics.link_poses()[:, :3],
            atol=1e-6,
        )
        env.step("Stop/Stand")
    finally:
        env.close()
    rollout = env.last_bundle_dir
    manifest = load_bundle(rollout).manifest
    assert manifest["physics"]["body"]["sha256"] == body.sha256
    assert manifest["backends"]["body_asset"]["sha256"] == body.sha256
    report = render_saved_trajectory(rollout, tmp_path / "video", renderer="tiny", exo=False)
    assert report.frames == 16 and Path(report.videos["ego"]).stat().st_size > 0
    moved = tmp_path / "moved"
    import shutil

    shutil.copytree(body_dir, moved)
    (moved / "metadata.json").write_text('{"name": "changed"}')
    with pytest.raises(ReplayBundleError, match="its files changed"):
        render_saved_trajectory(rollout, tmp_path / "video2", renderer="tiny", body_asset=moved)


def test_ego_camera_sits_where_the_release_puts_it(body_dir) -> None:
    from humanclaw_gym.render.cameras import body_asset_ego_camera

    body = load_body_asset(body_dir)
    poses = np.zeros((body.num_links, 7))
    poses[:, 6] = 1.0
    poses[:, :3] = body.rest_link_origins_m + [0.0, 1.0, 0.0]
    cam = body_asset_ego_camera(body, poses, width=64, height=64)
    eyes = [body.link_index(n) for n in ("left_eye_smplhf", "right_eye_smplhf")]
    expected = 0.5 * (poses[eyes[0], :3] + poses[eyes[1], :3]) + [0.0, 0.0, 0.02]
    np.testing.assert_allclose(cam.position, expected, atol=1e-12)
    # looking 0.6 forward + 0.4 down of the head: atan(0.4 / 0.6) = 33.7 degrees below
    pitch = math.degrees(math.atan2(-cam.forward[1], cam.forward[2]))
    assert pitch == pytest.approx(math.degrees(math.atan2(0.4, 0.6)))
    assert abs(np.dot(cam.forward, cam.up)) < 1e-12
    with pytest.raises(ValueError, match="'head' link"):
        body_asset_ego_camera(body, poses[:3])


def test_collision_groups_come_from_the_body_links(body_dir) -> None:
    body = load_body_asset(body_dir)
    tracker = CollisionTracker((), 0.0, rules="paper", link_names=body.links)
    rows = np.zeros(2, dtype=CONTACT_DTYPE)
    rows["a"] = HUMAN_ID
    rows["b"] = 5
    rows["link_a"] = [body.link_index("left_index2"), body.link_index("jaw")]
    rows["pos_b"][:, 1] = 1.0
    assert tracker.record_frame(0, rows)
    by_group = tracker.summary()["collision_steps_by_group"]
    assert by_group == {"arm/hand": 1, "torso": 0, "leg/foot": 0, "head": 1}
    # names of the skeleton follow the rules; others the release's name rule
    assert collision_body_group("neck", "paper") == "torso"
    assert collision_body_group("neck", "strict") == "head"
    assert collision_body_group("right_thumb3", "strict") == "arm/hand"
    # a row naming a link the body does not have is refused
    rows["link_a"][0] = 55
    with pytest.raises(ValueError, match=r"link 0\.\.54"):
        tracker.record_frame(1, rows)


def test_body_asset_config_checks(body_dir, tmp_path) -> None:
    from humanclaw_gym.backends.config import BackendConfig

    with pytest.raises(ValueError, match="pass the body folder as body_asset="):
        BackendConfig(physics_options={"body_asset": str(body_dir)})
    with pytest.raises(ValueError, match="give one"):
        BackendConfig(body_asset=str(body_dir), body_model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="does not exist"):
        BackendConfig(body_asset=str(tmp_path / "none")).check()
    assert BackendConfig(body_asset=str(body_dir)).check().body_asset == str(body_dir)


# --------------------------------------------------------------------------------------
# the paper profile
# --------------------------------------------------------------------------------------
def test_physics_options_are_read_from_the_release_files(tmp_path) -> None:
    release = write_release_checkout(tmp_path / "release")
    body, options = paper_physics(release)
    assert body.num_links == 55 and body.total_mass_kg == pytest.approx(125.03)
    assert options == {
        "pjsc_gains": {
            "left_ankle": 0.1,
            "right_ankle": 0.1,
            "left_shoulder": 0.03,
            "right_shoulder": 0.03,
            "left_wrist": 0.1,
            "right_wrist": 0.1,
        },
        "human_friction": 0.4,
        "root_friction": 0.5,  # the pelvis: the URDF readers' default, no <contact> given
        "root_gravity_mode": "midpoint",
        "root_gravity_scale": 1.0,
        "inherit_downward_root_y_velocity": True,
        "release_arithmetic": True,
    }
    # another value in the release's files is another option
    other = write_release_checkout(tmp_path / "other", physics={"friction": 0.6})
    assert paper_physics(other)[1]["human_friction"] == 0.6
    # the release forces its shoulder and wrist gains over its profile's; ours reads them
    odd = {"pjsc_lambda_by_link": {"left_shoulder": 0.5, "left_ankle": 0.2}}
    other = write_release_checkout(tmp_path / "odd", physics=odd)
    gains = paper_physics(other)[1]["pjsc_gains"]
    assert gains["left_shoulder"] == 0.03 and gains["left_ankle"] == 0.2
    ours = paper_physics(other, release_arithmetic=False)[1]
    assert ours["pjsc_gains"] == {"left_shoulder": 0.5, "left_ankle": 0.2}
    assert ours["release_arithmetic"] is False


def test_a_contract_difference_is_refused_naming_it(tmp_path) -> None:
    release = write_release_checkout(
        tmp_path / "release",
        physics={"pjsc_substeps": 8, "root_linear_xz_command_substeps": [0, 1, 2]},
    )
    with pytest.raises(ProfileError) as info:
        paper_physics(release)
    message = str(info.value)
    assert "\n" not in message and info.value.parts == ("physics profile", "physics profile")
    assert "pjsc_substeps 8" in message and "[0, 1, 2]" in message


def test_profile_refuses_every_missing_part_at_once(tmp_path, synth) -> None:
    """A release checkout without the weights download and without HSSD: one message that
    names both and where they come from; a missing body is named as well."""
    release = write_release_checkout(
        tmp_path / "release", episodes_dir=synth.episodes_dir.parent, body=False
    )
    with pytest.raises(ProfileError) as info:
        resolve_profile("paper", release)
    message = str(info.value)
    assert "\n" not in message
    assert info.value.parts == ("body", "motion weights", "scene dataset")
    assert "--motion-weights" in message or "motion='paper'" in message
    assert "--scene-dataset" in message and "prepare-hssd" in message
    with pytest.raises(ProfileError) as info:
        resolve_profile("paper", None)
    assert info.value.parts[0] == "release"
    # a scene dataset that lacks an episode's scene is named with the scene
    from types import SimpleNamespace

    from humanclaw_gym import profiles

    lacking = [SimpleNamespace(scene_id="unknown_home")]
    with pytest.raises(profiles._Missing, match=r"lacks 1 scene\(s\) of the episodes"):
        profiles._check_scenes(synth.root, lacking, defaulted=False)


def test_env_profile_arguments_are_checked(tmp_path) -> None:
    with pytest.raises(TypeError, match="read with profile='paper'"):
        gym.make(ENV_ID, release_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"sets \['motion'\] itself"):
        gym.make(ENV_ID, profile="paper", release_dir=str(tmp_path), motion="procedural")
    with pytest.raises(ValueError, match="split must be one of"):
        gym.make(ENV_ID, profile="paper", release_dir=str(tmp_path), split="val7")
    with pytest.raises(ProfileError, match="release profile"):
        gym.make(ENV_ID, profile="paper", release_dir=str(tmp_path))


def test_cli_profile_refusals_are_one_line(tmp_path, synth, capsys) -> None:
    """``humanclaw run --profile paper``: a flag the profile sets is refused by name, a
    release without weights and HSSD is refused naming both, before any episode runs."""
    from humanclaw_gym.cli.run_cmd import RunArgs, run

    release = write_release_checkout(tmp_path / "release", episodes_dir=synth.episodes_dir.parent)
    args = RunArgs(profile="paper", output=tmp_path / "out", quiet=True)
    args.backend.release = release
    args.backend.motion = "flow"
    assert run(args) == 2
    assert "--profile paper sets --motion itself" in capsys.readouterr().err
    args.backend.motion = "procedural"
    assert run(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "motion weights:" in err and "scene dataset:" in err and "--scene-dataset" in err
    assert not (tmp_path / "out").exists()


def test_fingerprint_records_the_body_asset(body_dir) -> None:
    from humanclaw_gym.evaluation.batch import RunConfig
    from humanclaw_gym.evaluation.fingerprint import fingerprint_differences, run_fingerprint

    config = RunConfig(body_asset=str(body_dir))
    record = run_fingerprint(config, {"selection": "x", "sha256": "0"})
    assert record["settings"]["body_asset"]["sha256"] == load_body_asset(body_dir).sha256
    assert record["settings"]["profile"] is None
    plain = run_fingerprint(RunConfig(), {"selection": "x", "sha256": "0"})
    fields = [k for k, _, _ in fingerprint_differences(plain, record)]
    assert "body_asset" in fields and "backend.body_asset" in fields


# --------------------------------------------------------------------------------------
# the whole chain: profile, proxy scenes, random weights in the release's layout, oracle,
# metrics, fingerprint and manifests
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def paper_release(tmp_path_factory, synth) -> Path:
    pytest.importorskip("torch")
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    root = tmp_path_factory.mktemp("release") / "HumanCLAW"
    write_release_checkout(root, episodes_dir=synth.episodes_dir.parent)
    write_synthetic_release(root, seed=3, hidden_dim=32, num_layers=2, num_heads=2, nfe_steps=6)
    return root


def test_the_paper_chain_runs_two_episodes_end_to_end(
    paper_release, synth, tmp_path, capsys
) -> None:
    """``humanclaw run --profile paper`` with the synthetic release, its random weights and
    the proxy HSSD dataset: two episodes with the oracle and metrics; the fingerprint and
    every replay manifest record the profile, the body and the weights."""
    import json

    from humanclaw_gym.cli.run_cmd import RunArgs, run
    from humanclaw_gym.motion.paper import clear_model_cache
    from humanclaw_gym.replay import load_bundle

    out = tmp_path / "run"
    args = RunArgs(profile="paper", agent="oracle", metrics=True, limit=2, max_steps=3,
                   output=out, quiet=True)  # fmt: skip
    args.backend.release = paper_release
    args.backend.scene_dataset = synth.root
    try:
        assert run(args) == 0
    finally:
        clear_model_cache()
    settings = json.loads((out / "run_fingerprint.json").read_text())["settings"]
    profile = settings["profile"]
    body = load_body_asset(paper_release / "resources/agent/neutral_beta0_handmerged")
    assert profile["profile"] == "paper" and profile["body"]["sha256"] == body.sha256
    assert profile["release"]["files"]["configs/paper_fullval_v1.json"]
    assert (
        profile["motion_weights"]["manifest_sha256"]
        == settings["motion_weights"]["manifest_sha256"]
    )
    assert profile["scene_dataset"]["path"] == str(synth.root)
    assert profile["physics_options"]["root_friction"] == 0.5
    assert settings["backend"]["motion"] == "paper" and settings["metric_rules"] == "paper"
    rollouts = sorted(out.glob("*/rollout_00"))
    assert len(rollouts) == 2
    for rollout in rollouts:
        manifest = load_bundle(rollout).manifest
        assert manifest["backends"]["profile"] == profile
        assert manifest["physics"]["body"]["sha256"] == body.sha256
        assert manifest["physics"]["root_gravity_mode"] == "midpoint"
        metrics = json.loads((rollout / "metrics.json").read_text())
        assert metrics["rules"] == "paper" and metrics["steps"] >= 1
    # the same run again is the same settings; another weight download is refused by name
    assert run(args) == 0
    manifest = paper_release / "resources/weights/paper_fullval_v1.json"
    text = manifest.read_text()
    try:
        manifest.write_text(text.replace('"checkpoint_step": 0', '"checkpoint_step": 1'))
        capsys.readouterr()
        assert run(args) == 2
        error = capsys.readouterr().err
        assert "differing field" in error and "profile.motion_weights.manifest_sha256" in error
    finally:
        manifest.write_text(text)
        clear_model_cache()
