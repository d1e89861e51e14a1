"""Behaviour cloning: oracle demos on a training scene, training, checkpoints, the policy."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gymnasium import spaces  # noqa: E402

from humanclaw_agents import bc_policy  # noqa: E402
from humanclaw_agents.bc_policy import (  # noqa: E402
    BCConfig,
    BCPolicy,
    CheckpointError,
    load_checkpoint,
    load_checkpoint_policy,
)
from humanclaw_gym.data import read_episodes  # noqa: E402
from humanclaw_gym.skills import Skill, SkillCall, action_space  # noqa: E402

_SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
_SCENE_INDEX = 3
_MAX_STEPS = 4


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"_bc_test_{name}", _SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


record_demos = _script("record_demos")
train_bc = _script("train_bc")


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    """Two short oracle demos on hc_train_003, recorded by the script's main()."""
    out = tmp_path_factory.mktemp("bc") / "demos"
    record_demos.main(
        record_demos.Args(
            output=out,
            num_scenes=1,
            first_scene=_SCENE_INDEX,
            episodes_per_scene=2,
            max_steps=_MAX_STEPS,
            metrics=False,
            quiet=True,
        )
    )
    return out


@pytest.fixture(scope="module")
def trained(demos: Path, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("bc_ckpt") / "bc.pt"
    summary = train_bc.main(
        train_bc.Args(
            dataset=demos,
            output=out,
            image_size=32,
            channels=(8, 16),
            hidden=32,
            dropout=0.0,
            batch_size=8,
            lr=3e-3,
            max_steps=40,
            max_minutes=2.0,
            keep="all",
            holdout_fraction=0.0,
            augment=False,
            log_every=1,
            quiet=True,
        )
    )
    return out, summary


# ----------------------------------------------------------------------------------------
# demos
# ----------------------------------------------------------------------------------------
def test_training_plan_spreads_episodes_round_robin():
    cats = ("chair", "bed", "tv")
    assert record_demos.training_category_plan(cats, 5, rotation=1) == {
        "bed": 2,
        "tv": 2,
        "chair": 1,
    }
    assert record_demos.training_category_plan((), 3, 0) == {}
    with pytest.raises(ValueError, match="num_episodes"):
        record_demos.training_category_plan(cats, -1, 0)


def test_training_episodes_are_seeded_and_on_training_scenes():
    a = record_demos.make_training_episodes(_SCENE_INDEX, 3, seed=0)
    b = record_demos.make_training_episodes(_SCENE_INDEX, 3, seed=0)
    c = record_demos.make_training_episodes(_SCENE_INDEX, 3, seed=1)
    assert [e.episode_id for e in a] == [e.episode_id for e in b]
    assert [e.start_position for e in a] == [e.start_position for e in b]
    assert [e.start_position for e in a] != [e.start_position for e in c]
    assert all(e.scene_id == f"hc_train_{_SCENE_INDEX:03d}" for e in a)


def test_record_demos_writes_a_verified_dataset_with_visibility_labels(demos: Path):
    episodes = list(read_episodes(demos))
    assert len(episodes) == 2
    summary = record_demos._load_summary(demos / record_demos.SUMMARY_FILE)
    assert sorted(summary["episodes"]) == sorted(e.episode_id for e in episodes)
    for ep in episodes:
        assert ep.scene_id == f"hc_train_{_SCENE_INDEX:03d}"
        assert 1 <= len(ep) <= _MAX_STEPS
        assert ep.observations["ego_rgb"].shape[1:] == (448, 448, 3)
        name = ep.target_category.replace("_", " ")
        for text in ep.policy_text:
            assert text in (f"I can see the {name}.", f"The {name} is not in view.")
        row = summary["episodes"][ep.episode_id]
        assert row["steps"] == len(ep) and row["success"] is None  # metrics were off


def test_demo_success_reads_the_task_metric():
    assert record_demos.demo_success(None) is None
    assert record_demos.demo_success({"interact": False, "nav_success_20cm": True})
    assert not record_demos.demo_success(
        {"interact": True, "nav_success_20cm": True, "interact_success": False}
    )


def test_record_refuses_to_mix_runs_without_resume(demos: Path):
    with pytest.raises(ValueError, match="--resume"):
        record_demos.main(record_demos.Args(output=demos, num_scenes=1, quiet=True))


def test_keep_selects_demos_by_outcome(tmp_path):
    rows = {
        "a": {"success": True, "ended_by": "stop", "final_distance_m": 0.1},
        "b": {"success": False, "ended_by": "stop", "final_distance_m": 0.0},
        "c": {"success": False, "ended_by": "truncated", "final_distance_m": 0.0},
        "d": {"success": False, "ended_by": "stop", "final_distance_m": 0.5},
        "e": {"success": None, "ended_by": "stop", "final_distance_m": None},
    }
    (tmp_path / "demos_summary.json").write_text(json.dumps({"episodes": rows}))
    assert train_bc.kept_episode_ids(tmp_path, "success") == {"a"}
    assert train_bc.kept_episode_ids(tmp_path, "nav") == {"a", "b"}
    assert train_bc.kept_episode_ids(tmp_path, "all") is None
    with pytest.raises(FileNotFoundError, match="--keep all"):
        train_bc.kept_episode_ids(tmp_path / "nowhere", "nav")
    with pytest.raises(ValueError, match="keep"):
        train_bc.kept_episode_ids(tmp_path, "best")


def test_skill_weights():
    skill = np.array([0] * 16 + [2] * 4 + [1])
    assert np.array_equal(train_bc.skill_weights(skill, balance=False), np.ones(8))
    weights = train_bc.skill_weights(skill, balance=True)
    assert weights[3] == 0 and weights[7] == 0
    assert np.isclose(weights[[0, 1, 2]].mean(), 1.0)
    assert np.isclose(weights[2] / weights[0], 2.0)


# ----------------------------------------------------------------------------------------
# preprocessing and decoding
# ----------------------------------------------------------------------------------------
def test_downsample_is_area_average():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (448, 448, 3), dtype=np.uint8)
    small = bc_policy.downsample_frames(frame, 112)
    expected = frame.reshape(112, 4, 112, 4, 3).astype(np.float64).mean(axis=(1, 3))
    assert small.dtype == np.uint8 and small.shape == (112, 112, 3)
    assert np.abs(small.astype(np.float64) - expected).max() <= 0.5 + 1e-6
    with pytest.raises(ValueError, match="uint8"):
        bc_policy.downsample_frames(frame.astype(np.float32), 112)


def test_condition_vector_layout():
    cond = bc_policy.build_condition(
        np.array([2]), np.array([True]), np.array([-1]), np.array([250]), np.array([[0, 1]])
    )
    assert cond.shape == (1, bc_policy.NUM_CONDITION_BASE + 2)
    assert cond[0, 2] == 1 and cond[0, 6] == 1 and cond[0, 7] == 1 and cond[0, 16] == 1.0
    assert list(cond[0, -2:]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="category_index"):
        bc_policy.build_condition(
            np.array([6]), np.array([0]), np.array([0]), np.array([0]), np.ones((1, 1))
        )


@pytest.mark.parametrize("skill", list(Skill))
def test_decoding_clamps_every_skill_into_a_valid_call(skill: Skill):
    policy = BCPolicy(None, BCConfig(), bc_policy.current_env_spec())
    logits = np.full(8, -5.0)
    logits[int(skill)] = 5.0
    for regression in (np.array([1.7, -0.4, 2.0, -3.0]), np.array([-1.0, 9.0, -2.0, 4.0])):
        heads = {
            "skill": logits,
            "speed": np.array([0.0, 2.0, 1.0]),
            "direction": np.array([1.0, 0.0]),
            "regression": regression,
        }
        call, probs = policy._decode(heads)
        assert call.skill == skill and abs(probs.sum() - 1) < 1e-9
        assert SkillCall.parse(str(call)) == call
        assert action_space().contains(call.to_action())


# ----------------------------------------------------------------------------------------
# training and checkpoints
# ----------------------------------------------------------------------------------------
def test_training_loss_decreases(trained):
    _, summary = trained
    totals = [row["loss_total"] for row in summary["loss_history"]]
    assert summary["steps"] == 40 and summary["stop_reason"] == "max_steps"
    assert np.mean(totals[-5:]) < 0.7 * np.mean(totals[:3])


def test_keep_best_writes_the_epoch_with_the_lowest_holdout_loss(demos, tmp_path):
    import zlib

    ids = sorted(e.episode_id for e in read_episodes(demos))
    buckets = sorted(zlib.crc32(e.encode()) % 1000 for e in ids)
    assert buckets[0] < buckets[1]
    summary = train_bc.main(
        train_bc.Args(
            dataset=demos,
            output=tmp_path / "best.pt",
            image_size=32,
            channels=(8,),
            hidden=16,
            batch_size=2,
            max_steps=6,
            keep="all",
            holdout_fraction=(buckets[0] + 1) / 1000,  # holds out exactly one episode
            quiet=True,
        )
    )
    assert summary["holdout_windows"] > 0 and summary["train_windows"] > 0
    losses = [r["holdout_loss_total"] for r in summary["epoch_results"]]
    assert summary["selected"]["epoch"] == int(np.argmin(losses))
    _, _, metadata = load_checkpoint(tmp_path / "best.pt")
    assert metadata["training"]["selected"] == summary["selected"]


def test_checkpoint_round_trip(trained, tmp_path):
    path, summary = trained
    model, config, metadata = load_checkpoint(path)
    assert metadata["schema"] == bc_policy.SCHEMA
    assert config == BCConfig(image_size=32, channels=(8, 16), hidden=32, dropout=0.0)
    assert metadata["env_spec"] == bc_policy.current_env_spec()
    assert metadata["training"]["steps"] == summary["steps"]
    again = tmp_path / "again.pt"
    meta2 = bc_policy.save_checkpoint(again, model, config, metadata["env_spec"])
    assert meta2["weights_sha256"] == metadata["weights_sha256"]
    model2, _, _ = load_checkpoint(again)
    images = torch.rand(2, 3 * config.history, 32, 32)
    cond = torch.rand(2, config.condition_dim)
    with torch.no_grad():
        a, b = model(images, cond), model2(images, cond)
    for key in a:
        assert torch.equal(a[key], b[key])
    assert not list(tmp_path.glob(".*.tmp"))


def test_tampered_checkpoint_is_refused(trained, tmp_path):
    path, _ = trained
    payload = torch.load(path, weights_only=True)
    name = sorted(payload["state_dict"])[0]
    payload["state_dict"][name] = payload["state_dict"][name] + 1e-3
    bad = tmp_path / "weights.pt"
    torch.save(payload, bad)
    with pytest.raises(CheckpointError, match="weights_sha256") as info:
        load_checkpoint_policy(bad)
    assert info.value.field == "weights_sha256"

    payload = torch.load(path, weights_only=True)
    payload["metadata"]["env_spec"]["observation"]["shape"] = [224, 224, 3]
    bad = tmp_path / "metadata.pt"
    torch.save(payload, bad)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(bad)
    assert info.value.field == "metadata_sha256"

    payload = torch.load(path, weights_only=True)
    payload["schema"] = "something_else"
    torch.save(payload, bad)
    with pytest.raises(CheckpointError, match="schema"):
        load_checkpoint(bad)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="file"):
        load_checkpoint(tmp_path / "junk.pt")
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")


class _FakeEnv:
    def __init__(self, observation_space, action_space):
        self.observation_space = observation_space
        self.action_space = action_space
        self.spec = None


def test_incompatible_env_is_refused(trained, tmp_path):
    path, _ = trained
    small = _FakeEnv(spaces.Box(0, 255, (224, 224, 3), dtype=np.uint8), action_space())
    with pytest.raises(CheckpointError, match=r"observation\.shape") as info:
        load_checkpoint_policy(path, env=small)
    assert info.value.field == "env_spec.observation.shape"

    narrow = action_space()
    narrow.spaces["angle_deg"] = spaces.Box(10.0, 90.0, (1,), dtype=np.float64)
    ok_obs = spaces.Box(0, 255, (448, 448, 3), dtype=np.uint8)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint_policy(path, env=_FakeEnv(ok_obs, narrow))
    assert info.value.field == "env_spec.action_layout.angle_deg.high"

    # a correctly hashed checkpoint trained for another spec is refused by the current env
    model, config, metadata = load_checkpoint(path)
    other = dict(metadata["env_spec"], env_id="SomethingElse-v0")
    bc_policy.save_checkpoint(tmp_path / "other.pt", model, config, other)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint_policy(tmp_path / "other.pt")
    assert info.value.field == "env_spec.env_id"

    policy = load_checkpoint_policy(path)
    policy.reset({"target_category": "chair", "interact": False})
    with pytest.raises(CheckpointError, match="observation"):
        policy.act(np.zeros((224, 224, 3), dtype=np.uint8), {"step": 0})


def test_loaded_policy_acts_in_the_env(trained, demos, monkeypatch):
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
    from humanclaw_gym.evaluation import run_episode
    from humanclaw_gym.evaluation.policies import load_policy

    path, _ = trained
    monkeypatch.setenv(bc_policy.CHECKPOINT_ENV_VAR, str(path))
    policy = load_policy("humanclaw_agents.bc_policy:policy_from_env", seed=3)
    assert isinstance(policy, BCPolicy)
    episodes = record_demos.make_training_episodes(_SCENE_INDEX, 1, seed=0)
    env = FindNavInteractEnv(episodes=episodes, max_steps=3)
    try:
        policy.check_env(env)
        result = run_episode(env, policy, episode_id=episodes[0].episode_id)
    finally:
        env.close()
    assert 1 <= result.steps <= 3
    name = episodes[0].object_category.replace("_", " ")
    for record in result.actions:
        call = SkillCall.parse(record.action)
        assert action_space().contains(call.to_action())
        assert record.visible_state in (f"I can see the {name}.", f"The {name} is not in view.")
        assert len(record.extras["bc"]["skill_probs"]) == 8


def test_checkpoint_agent_spec_resolves_to_the_loader(trained, monkeypatch):
    """``--agent checkpoint:PATH`` with the entry point pyproject declares for the loader
    (an agent entry of the registry, read from the entry-point group)."""
    from humanclaw_gym import registry
    from humanclaw_gym.evaluation import policies

    entry = registry.get("agent", "checkpoint")
    assert entry.target == "humanclaw_agents.bc_policy:load_checkpoint_policy"
    assert entry.source == "entry point"
    path, _ = trained
    policy = policies.load_policy(f"checkpoint:{path}", seed=1)
    assert isinstance(policy, BCPolicy) and not policy.requires_privileged


def test_policy_from_env_needs_the_variable(monkeypatch):
    monkeypatch.delenv(bc_policy.CHECKPOINT_ENV_VAR, raising=False)
    with pytest.raises(ValueError, match=bc_policy.CHECKPOINT_ENV_VAR):
        bc_policy.policy_from_env()
