"""Demonstration data: recorder budget/atomicity, verified readers, shards, window batches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym import Decision, SkillCall
from humanclaw_gym.data import (
    SCHEMA,
    DatasetError,
    EpisodeReadOptions,
    EpisodeRecorder,
    RecorderFailedError,
    list_episode_files,
    read_episodes,
    window_batches,
)
from humanclaw_gym.data import recorder as recorder_mod
from humanclaw_gym.data.schema import marker_path, write_episode_file
from humanclaw_gym.envs import ENV_ID

_SHAPE = (8, 8, 3)


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------


def _info(episode_id: str, step: int, scene_id: str = "hc_val_000", category: str = "chair"):
    return {
        "instruction": f"Find the {category}.",
        "episode_id": episode_id,
        "scene_id": scene_id,
        "target_category": category,
        "interact": False,
        "step": step,
        "max_steps": 100,
        "executed_skill": None,
    }


def _frames(seed: int, n: int, shape=_SHAPE) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]


def _calls(n: int) -> list[SkillCall]:
    pool = [
        SkillCall.walk("slow"),
        SkillCall.turn("left", 30),
        SkillCall.side_step("right", 0.25),
        SkillCall.step_back(0.3),
        SkillCall.sit(0.45),
        SkillCall.turn("right", 95.5),
    ]
    return [pool[i % len(pool)] for i in range(n)]


def _record_episode(
    rec: EpisodeRecorder,
    episode_id: str,
    num_steps: int,
    seed: int,
    *,
    end: str = "terminated",
    shape=_SHAPE,
    category: str = "chair",
) -> list[np.ndarray]:
    """Record one synthetic single-env episode; returns its num_steps + 1 frames."""
    frames = _frames(seed, num_steps + 1, shape)
    calls = _calls(num_steps)
    rec.begin(frames[0], _info(episode_id, 0, category=category))
    for t in range(num_steps):
        last = t == num_steps - 1
        rec.record(
            frames[t],
            _info(episode_id, t, category=category),
            calls[t],
            frames[t + 1],
            terminated=last and end == "terminated",
            truncated=last and end == "truncated",
            text=f"step {t}: I see a {category}" if t % 2 else None,
        )
    return frames


def _make_dataset(directory: Path, num_episodes: int, num_steps: int = 3) -> list[str]:
    ids = [f"ep_{i:02d}" for i in range(num_episodes)]
    with EpisodeRecorder(directory, env_id=ENV_ID) as rec:
        for i, episode_id in enumerate(ids):
            _record_episode(rec, episode_id, num_steps + (i % 2), seed=100 + i)
    return ids


def _batched(calls: list[SkillCall]) -> dict[str, np.ndarray]:
    encoded = [c.to_action() for c in calls]
    return {k: np.stack([np.asarray(e[k]) for e in encoded]) for k in encoded[0]}


def _vector_infos(rows: list[dict]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if isinstance(values[0], str) or values[0] is None:
            out[key] = np.array(values, dtype=object)
        else:
            out[key] = np.array(values)
        out[f"_{key}"] = np.ones(len(rows), dtype=bool)
    return out


def _rewrite(path: Path, **changes: np.ndarray) -> None:
    """Re-publish an episode file with some arrays replaced (fresh, matching marker)."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {k: archive[k] for k in archive.files if k != "metadata"}
        metadata = json.loads(str(archive["metadata"][()]))
    arrays.update(changes)
    write_episode_file(path, arrays, metadata)


def _data_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != "run.json")


# ----------------------------------------------------------------------------------------
# recorder: round trips
# ----------------------------------------------------------------------------------------


def test_single_env_round_trip_and_run_json(tmp_path):
    rec = EpisodeRecorder(tmp_path, max_buffer_bytes=1 << 20, env_id=ENV_ID)
    frames = _record_episode(rec, "ep_a", 4, seed=1, end="truncated")
    assert rec.buffered_bytes == 0 and len(rec.published_paths) == 1
    rec.close()
    rec.close()  # idempotent

    run = json.loads((tmp_path / "run.json").read_text())
    assert run["schema"] == SCHEMA
    assert run["max_buffer_bytes"] == 1 << 20
    assert run["env_id"] == ENV_ID
    assert [f["key"] for f in run["action_layout"]] == [f.key for f in rec.action_layout]

    (episode,) = read_episodes(tmp_path)
    assert episode.episode_id == "ep_a" and episode.scene_id == "hc_val_000"
    assert episode.complete and episode.metadata["ended_by"] == "truncated"
    assert episode.instruction == "Find the chair."
    assert len(episode) == 4
    np.testing.assert_array_equal(episode.observations["ego_rgb"], np.stack(frames[:4]))
    np.testing.assert_array_equal(episode.next_observations["ego_rgb"], np.stack(frames[1:]))
    assert episode.skill_calls() == _calls(4)
    assert episode.action_text == tuple(str(c) for c in _calls(4))
    assert episode.policy_text[0] is None and episode.policy_text[1] == "step 1: I see a chair"
    assert episode.truncated.tolist() == [False, False, False, True]
    assert not episode.terminated.any()
    # flattened fixed arrays: one int64 column per Discrete entry, float64 per Box entry
    assert episode.actions["skill"].dtype == np.int64
    assert episode.actions["skill"].shape == (4,)
    action_space = humanclaw_gym.action_space()
    for t in range(4):
        assert action_space.contains(episode.action(t))


def test_real_env_random_policy_round_trip(tmp_path):
    env = gym.make(ENV_ID, split="val100", max_steps=3)
    env.action_space.seed(3)
    sent: list[SkillCall] = []
    frames: list[np.ndarray] = []
    try:
        with EpisodeRecorder(tmp_path, env=env) as rec:
            obs, info = env.reset(seed=0)
            rec.begin(obs, info)
            frames.append(obs)
            while True:
                sample = env.action_space.sample()
                try:
                    call = SkillCall.from_action(sample)
                except ValueError:  # an invalid sample: fall back to a constructor
                    call = SkillCall.turn("left", 20)
                if call.is_stop and not sent:
                    call = SkillCall.walk()  # keep at least one motion step
                sent.append(call)
                next_obs, _, terminated, truncated, next_info = env.step(
                    Decision(call, visible_state="a hallway")
                )
                rec.record(
                    obs,
                    info,
                    Decision(call, visible_state="a hallway"),
                    next_obs,
                    terminated,
                    truncated,
                )
                frames.append(next_obs)
                if terminated or truncated:
                    break
                obs, info = next_obs, next_info
    finally:
        env.close()
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["env_id"] == ENV_ID
    (episode,) = read_episodes(tmp_path)
    assert episode.skill_calls() == sent
    assert len(episode) == len(sent) <= 3
    assert episode.observations["ego_rgb"].shape == (len(sent), 448, 448, 3)
    assert episode.observations["ego_rgb"].dtype == np.uint8
    np.testing.assert_array_equal(episode.observations["ego_rgb"], np.stack(frames[:-1]))
    assert episode.policy_text == ("a hallway",) * len(sent)
    assert episode.episode_id == info["episode_id"]


def test_vector_env_records_across_autoreset(tmp_path):
    envs = gym.make_vec(ENV_ID, num_envs=2, split="val100", max_steps=2)
    seen_ids: set[tuple[str, str]] = set()
    try:
        rec = EpisodeRecorder(tmp_path, env=envs)
        obs, infos = envs.reset(seed=0)
        calls = [SkillCall.turn("left", 20), SkillCall.side_step("left", 0.2)]
        for _ in range(5):  # 2 steps, autoreset step, 2 steps
            seen_ids |= set(zip(infos["scene_id"], infos["episode_id"], strict=True))
            actions = _batched(calls)
            next_obs, _, terminated, truncated, next_infos = envs.step(actions)
            rec.record_batch(
                obs, infos, actions, next_obs, terminated, truncated, texts=["left view", None]
            )
            obs, infos = next_obs, next_infos
        assert rec.open_episodes == {}
        rec.close()
    finally:
        envs.close()
    episodes = list(read_episodes(tmp_path))
    assert len(episodes) == 4
    assert {(e.scene_id, e.episode_id) for e in episodes} == seen_ids
    for episode in episodes:
        assert len(episode) == 2 and episode.complete
        assert episode.truncated.tolist() == [False, True]
        assert [str(c) for c in episode.skill_calls()] in ([str(calls[0])] * 2, [str(calls[1])] * 2)
        assert episode.observations["ego_rgb"].shape == (2, 448, 448, 3)


def test_vector_autoreset_rows_are_not_recorded(tmp_path):
    """Synthetic NEXT_STEP rows: row 0 ends after 1 step, row 1 after 3 steps."""
    rec = EpisodeRecorder(tmp_path)
    f0, f0b, f1 = _frames(1, 4), _frames(2, 4), _frames(3, 4)
    call = [SkillCall.walk(), SkillCall.turn("right", 45)]
    obs = np.stack([f0[0], f1[0]])
    infos = _vector_infos([_info("a", 0), _info("b", 0)])
    # step 1: row 0 terminates
    nxt = np.stack([f0[1], f1[1]])
    rec.record_batch(
        obs, infos, _batched(call), nxt, np.array([True, False]), np.array([False, False])
    )
    # step 2: row 0 is the autoreset transition (action ignored, next obs is the reset obs)
    obs, infos = nxt, _vector_infos([_info("a", 1), _info("b", 1)])
    nxt = np.stack([f0b[0], f1[2]])
    rec.record_batch(
        obs, infos, _batched(call), nxt, np.array([False, False]), np.array([False, False])
    )
    assert rec.open_episodes == {1: ("hc_val_000", "b", 2)}
    # step 3: row 0 starts episode "c" from its reset obs, row 1 truncates
    obs, infos = nxt, _vector_infos([_info("c", 0), _info("b", 2)])
    nxt = np.stack([f0b[1], f1[3]])
    rec.record_batch(
        obs,
        infos,
        [call[0], Decision(call[1], visible_state="tv")],
        nxt,
        np.array([False, False]),
        np.array([False, True]),
    )
    assert rec.open_episodes == {0: ("hc_val_000", "c", 1)}
    # step 4: row 1 is autoresetting, but the caller reset the envs explicitly instead:
    # both rows are real first steps of new episodes ("c" is abandoned as partial)
    g = _frames(4, 4)
    rec.record_batch(
        np.stack(g[:2]),
        _vector_infos([_info("d", 0), _info("e", 0)]),
        _batched(call),
        np.stack(g[2:]),
        np.array([False, True]),
        np.array([False, False]),
    )
    assert rec.open_episodes == {0: ("hc_val_000", "d", 1)}
    assert [p.name.split("_")[2] for p in rec.partial_paths] == ["c"]
    rec.close()
    by_id = {e.episode_id: e for e in read_episodes(tmp_path)}
    assert sorted(by_id) == ["a", "b", "e"]
    assert len(by_id["a"]) == 1 and len(by_id["b"]) == 3
    assert by_id["b"].policy_text == (None, None, "tv")
    partial = list(read_episodes(tmp_path, EpisodeReadOptions(include_partial=True)))
    assert sorted(e.episode_id for e in partial) == ["a", "b", "c", "d", "e"]
    ended_by = {e.episode_id: e.metadata["ended_by"] for e in partial if not e.complete}
    assert ended_by == {"c": "abandoned", "d": "closed"}


# ----------------------------------------------------------------------------------------
# recorder: budget, input errors, failures, close
# ----------------------------------------------------------------------------------------


def test_budget_overflow_writes_nothing_and_recorder_keeps_working(tmp_path):
    rec = EpisodeRecorder(tmp_path, max_buffer_bytes=2000)
    big = _frames(5, 2, (32, 32, 3))  # 2 rows x (obs + next) x 3072 B > 2000 B
    infos = _vector_infos([_info("big0", 0), _info("big1", 0)])
    with pytest.raises(BufferError, match="max_buffer_bytes=2000"):
        rec.record_batch(
            np.stack(big),
            infos,
            _batched(_calls(2)),
            np.stack(big[::-1]),
            np.array([True, True]),
            np.array([False, False]),
        )  # would even finish both episodes: the budget is still checked first
    assert rec.buffered_bytes == 0 and rec.open_episodes == {}
    assert _data_files(tmp_path) == []
    # later, smaller batches are accepted
    small = _frames(6, 4)
    obs = np.stack(small[:2])
    rec.record_batch(
        obs,
        _vector_infos([_info("s0", 0), _info("s1", 0)]),
        _batched(_calls(2)),
        np.stack(small[2:]),
        np.array([False, False]),
        np.array([False, False]),
    )
    held = rec.buffered_bytes
    assert 1000 < held <= 2000
    # an over-budget batch in the middle of open episodes leaves them untouched
    with pytest.raises(BufferError):
        rec.record_batch(
            np.stack(small[2:]),
            _vector_infos([_info("s0", 1), _info("s1", 1)]),
            _batched(_calls(2)),
            np.stack(small[2:]),
            np.array([True, True]),
            np.array([False, False]),
        )
    assert rec.buffered_bytes == held
    assert rec.open_episodes == {0: ("hc_val_000", "s0", 1), 1: ("hc_val_000", "s1", 1)}
    # give up one episode; the other one finishes within the budget
    assert rec.discard(1)
    last = _frames(7, 2)
    rec.record_batch(
        np.stack(small[2:]),
        _vector_infos([_info("s0", 1), _info("s1", 1)]),
        _batched(_calls(2)),
        np.stack(last),
        np.array([True, True]),
        np.array([False, False]),
    )
    rec.close()
    (episode,) = read_episodes(tmp_path)
    assert episode.episode_id == "s0" and len(episode) == 2


def test_invalid_row_rejects_the_whole_batch(tmp_path):
    rec = EpisodeRecorder(tmp_path)
    f = _frames(8, 4)
    obs, nxt = np.stack(f[:2]), np.stack(f[2:])
    infos = _vector_infos([_info("x", 0), _info("y", 0)])
    with pytest.raises(ValueError, match="angle_deg"):
        rec.record_batch(
            obs,
            infos,
            [SkillCall.walk(), "Turn<left><500>"],
            nxt,
            np.array([False, False]),
            np.array([False, False]),
        )
    assert rec.open_episodes == {} and rec.buffered_bytes == 0
    bad_infos = _vector_infos([_info("x", 0), _info("y", 3)])
    with pytest.raises(ValueError, match="start at step 0"):
        rec.record_batch(
            obs,
            bad_infos,
            _batched(_calls(2)),
            nxt,
            np.array([False, False]),
            np.array([False, False]),
        )
    assert rec.open_episodes == {}
    # the corrected call succeeds
    rec.record_batch(
        obs, infos, _batched(_calls(2)), nxt, np.array([False, False]), np.array([False, False])
    )
    assert set(rec.open_episodes) == {0, 1}
    # a step that does not continue the previous next_obs is rejected
    with pytest.raises(ValueError, match="not the next_obs"):
        rec.record_batch(
            obs,
            _vector_infos([_info("x", 1), _info("y", 1)]),
            _batched(_calls(2)),
            nxt,
            np.array([False, False]),
            np.array([False, False]),
        )
    assert [s for _, _, s in rec.open_episodes.values()] == [1, 1]
    with pytest.raises(RuntimeError, match="record_batch"):
        rec.record(f[0], _info("z", 0), SkillCall.walk(), f[1], False, False)


def test_single_env_input_checks(tmp_path):
    rec = EpisodeRecorder(tmp_path)
    f = _frames(9, 3)
    rec.begin(f[0], _info("e", 0))
    with pytest.raises(ValueError, match="begin"):
        rec.record(f[1], _info("e", 0), SkillCall.walk(), f[2], False, False)
    with pytest.raises(ValueError, match="instruction"):
        rec.record(
            f[0], {**_info("e", 0), "instruction": None}, SkillCall.walk(), f[1], False, False
        )
    with pytest.raises(TypeError, match="terminated"):
        rec.record(f[0], _info("e", 0), SkillCall.walk(), f[1], 1, False)
    with pytest.raises(ValueError, match="does not continue"):
        rec.record(f[0], _info("e", 2), SkillCall.walk(), f[1], False, False)
    rec.record(f[0], _info("e", 0), "Walk<forward><fast>", f[1], False, False)
    assert rec.open_episodes == {0: ("hc_val_000", "e", 1)}
    with pytest.raises(ValueError):
        EpisodeRecorder(tmp_path, image_key="rgb")  # run.json of another layout
    with pytest.raises(ValueError, match="max_buffer_bytes"):
        EpisodeRecorder(tmp_path / "other", max_buffer_bytes=0)


def test_write_error_puts_recorder_in_failed_state(tmp_path, monkeypatch):
    rec = EpisodeRecorder(tmp_path)
    _record_episode(rec, "ok", 2, seed=10)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recorder_mod, "write_episode_file", broken)
    f = _frames(11, 3)
    rec.record(f[0], _info("full", 0), SkillCall.walk(), f[1], False, False)
    with pytest.raises(OSError, match="No space"):
        rec.record(f[1], _info("full", 1), SkillCall.stop(), f[1], True, False)
    assert rec.failed
    with pytest.raises(RecorderFailedError) as excinfo:
        rec.begin(f[2], _info("next", 0))
    assert isinstance(excinfo.value.__cause__, OSError)
    rec.close()  # the original error was already raised: close does not raise again
    (episode,) = read_episodes(tmp_path)
    assert episode.episode_id == "ok"


def test_close_writes_unfinished_episodes_as_partial(tmp_path):
    rec = EpisodeRecorder(tmp_path)
    _record_episode(rec, "done", 2, seed=12)
    f = _frames(13, 3)
    rec.begin(f[0], _info("open", 0))
    rec.record(f[0], _info("open", 0), SkillCall.walk(), f[1], False, False)
    rec.close()
    rec.close()
    assert len(rec.partial_paths) == 1 and rec.partial_paths[0].name.endswith(".partial.npz")
    assert [e.episode_id for e in read_episodes(tmp_path)] == ["done"]
    marker = json.loads(marker_path(rec.partial_paths[0]).read_text())
    assert marker["complete"] is False
    with pytest.raises(RuntimeError, match="closed"):
        rec.record(f[1], _info("open", 1), SkillCall.walk(), f[2], False, False)


def test_kill_during_recording_leaves_only_complete_episodes(tmp_path):
    out = tmp_path / "demos"
    script = tmp_path / "record_forever.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import numpy as np
            from humanclaw_gym import SkillCall
            from humanclaw_gym.data import EpisodeRecorder

            rec = EpisodeRecorder({str(out)!r})
            rng = np.random.default_rng(0)
            for e in range(10_000):
                info = dict(episode_id=f"ep{{e:05d}}", scene_id="s", instruction="Find the tv.",
                            target_category="tv", interact=False, step=0)
                obs = rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)
                rec.begin(obs, info)
                for t in range(6):
                    nxt = rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)
                    rec.record(obs, dict(info, step=t), SkillCall.turn("left", 30), nxt,
                               t == 5, False)
                    obs = nxt
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if out.exists() and len(list(out.glob("*.done"))) >= 3:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the recording subprocess published nothing")
        time.sleep(0.037)  # land somewhere inside a later episode or write
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    markers = {p.name[: -len(".done")] for p in out.glob("*.done")}
    episodes = list(read_episodes(out))
    assert len(episodes) == len(markers) >= 3
    assert all(e.complete and len(e) == 6 for e in episodes)
    assert {e.path.name for e in episodes} == markers


# ----------------------------------------------------------------------------------------
# reader: validation, options, shards
# ----------------------------------------------------------------------------------------


def test_reader_rejects_tampered_file(tmp_path):
    _make_dataset(tmp_path, 1)
    (path,) = list_episode_files(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="sha256") as excinfo:
        list(read_episodes(tmp_path))
    assert excinfo.value.field == "sha256" and excinfo.value.path == path


def test_reader_without_hashing_names_empty_truncated_and_corrupt_files(tmp_path):
    """With ``verify_sha256=False`` nothing stops a damaged file before numpy reads it:
    every way it fails (zlib.error, EOFError, BadZipFile, ...) must surface as a
    DatasetError naming the file, never as a raw decoder error."""
    _make_dataset(tmp_path, 1, num_steps=3)
    (path,) = list_episode_files(tmp_path)
    original = path.read_bytes()
    options = EpisodeReadOptions(verify_sha256=False)
    rng = np.random.default_rng(17)
    damaged = [b"", original[:1], original[:64], original[: len(original) // 2], original[:-1]]
    for _ in range(150):  # flipped bytes all over the archive (compressed members included)
        data = bytearray(original)
        for pos in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
            data[pos] ^= int(rng.integers(1, 256))
        damaged.append(bytes(data))
    refused = 0
    for data in damaged:
        path.write_bytes(data)
        try:
            list(read_episodes(tmp_path, options))
        except DatasetError as exc:
            assert exc.path == path and path.name in str(exc)
            refused += 1
    assert refused >= len(damaged) // 2  # most damage is caught (some bytes are slack)
    path.write_bytes(b"")
    with pytest.raises(DatasetError, match="ends early") as excinfo:
        list(read_episodes(tmp_path, options))
    assert excinfo.value.field == "npz"


def test_reader_rejects_gap_in_step_order(tmp_path):
    _make_dataset(tmp_path, 1, num_steps=3)
    (path,) = list_episode_files(tmp_path)
    _rewrite(path, step=np.array([0, 1, 3], dtype=np.int64))
    with pytest.raises(DatasetError, match=r"step\[2\]=3, expected 2"):
        list(read_episodes(tmp_path))


def test_reader_rejects_broken_continuity(tmp_path):
    _make_dataset(tmp_path, 1, num_steps=3)
    (path,) = list_episode_files(tmp_path)
    with np.load(path) as archive:
        obs = archive["obs_ego_rgb"].copy()
    obs[2] = 255 - obs[2]
    _rewrite(path, obs_ego_rgb=obs)
    with pytest.raises(DatasetError, match=r"next_obs\[1\] differs from obs\[2\]"):
        list(read_episodes(tmp_path))
    # the same file reads fine when the image is not selected
    (episode,) = read_episodes(tmp_path, EpisodeReadOptions(observation_keys=()))
    assert episode.observations == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"terminated": np.array([True, False, True])}, "step 0 is terminal"),
        ({"terminated": np.array([False, False, False])}, "neither terminated nor truncated"),
        ({"episode_id": np.array(["ep_00", "other", "ep_00"])}, "one episode per file"),
        ({"action_text": np.array(["Stop/Stand"] * 3)}, "differs from the decoded action"),
    ],
)
def test_reader_rejects_broken_boundaries_and_identity(tmp_path, change, message):
    _make_dataset(tmp_path, 1, num_steps=3)
    (path,) = list_episode_files(tmp_path)
    _rewrite(path, **change)
    with pytest.raises(DatasetError, match=message):
        list(read_episodes(tmp_path))


def test_unfinished_file_without_marker_is_ignored(tmp_path):
    _make_dataset(tmp_path, 2)
    first = list_episode_files(tmp_path)[0]
    marker_path(first).unlink()  # as if killed between the NPZ rename and the marker
    assert [e.path for e in read_episodes(tmp_path)] == list_episode_files(tmp_path)
    assert len(list_episode_files(tmp_path)) == 1


def test_shards_are_disjoint_cover_and_chosen_before_opening(tmp_path):
    ids = _make_dataset(tmp_path, 7)
    shards = [
        [
            e.episode_id
            for e in read_episodes(tmp_path, EpisodeReadOptions(shard_index=i, num_shards=3))
        ]
        for i in range(3)
    ]
    flat = [i for shard in shards for i in shard]
    assert sorted(flat) == ids and len(set(flat)) == len(flat)
    assert [len(s) for s in shards] == [3, 2, 2]
    # damage an episode of shard 1: shard 0 never opens it
    victim = list_episode_files(tmp_path, EpisodeReadOptions(shard_index=1, num_shards=3))[0]
    victim.write_bytes(b"not a zip")
    assert len(list(read_episodes(tmp_path, EpisodeReadOptions(shard_index=0, num_shards=3)))) == 3
    with pytest.raises(DatasetError):
        list(read_episodes(tmp_path, EpisodeReadOptions(shard_index=1, num_shards=3)))


def test_read_options_validation(tmp_path):
    _make_dataset(tmp_path, 1)
    with pytest.raises(ValueError, match="shard_index"):
        EpisodeReadOptions(shard_index=3, num_shards=3)
    with pytest.raises(TypeError, match="observation_keys"):
        EpisodeReadOptions(observation_keys="ego_rgb")
    with pytest.raises(TypeError, match="num_shards"):
        EpisodeReadOptions(num_shards=True)
    options = EpisodeReadOptions(observation_keys=["ego_rgb"])
    assert options.observation_keys == ("ego_rgb",)
    with pytest.raises(DatasetError, match="'depth' is not recorded"):
        list(read_episodes(tmp_path, EpisodeReadOptions(observation_keys=("depth",))))
    with pytest.raises(FileNotFoundError):
        list(read_episodes(tmp_path / "missing"))


# ----------------------------------------------------------------------------------------
# window batches
# ----------------------------------------------------------------------------------------


def _signature(batches) -> list[tuple]:
    return [tuple(zip(b.episode_id, b.step.tolist(), strict=True)) for b in batches]


def test_window_batches_are_reproducible_per_seed_and_epoch(tmp_path):
    _make_dataset(tmp_path, 6, num_steps=4)
    kwargs = dict(history=3, batch_size=4, shuffle_buffer=8, seed=7)
    a = list(window_batches(tmp_path, epoch=0, **kwargs))
    b = list(window_batches(tmp_path, epoch=0, **kwargs))
    c = list(window_batches(tmp_path, epoch=1, **kwargs))
    assert _signature(a) == _signature(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.frames, y.frames)
        np.testing.assert_array_equal(x.frame_mask, y.frame_mask)
        for key in x.actions:
            np.testing.assert_array_equal(x.actions[key], y.actions[key])
    assert _signature(a) != _signature(c)
    total = sum(len(batch) for batch in a)
    assert total == sum(4 + (i % 2) for i in range(6))
    assert sorted(s for sig in _signature(a) for s in sig) == sorted(
        s for sig in _signature(c) for s in sig
    )
    state = np.random.get_state()[1].copy()
    list(window_batches(tmp_path, epoch=2, **kwargs))
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # global RNG untouched


def test_window_contents_padding_and_targets(tmp_path):
    _make_dataset(tmp_path, 2, num_steps=3)  # episodes of 3 and 4 steps, file order kept
    episodes = list(read_episodes(tmp_path))
    batches = list(window_batches(tmp_path, history=2, batch_size=3))
    assert [len(b) for b in batches] == [3, 3, 1]
    assert len(list(window_batches(tmp_path, history=2, batch_size=3, drop_last=True))) == 2
    first = batches[0]
    assert first.frames.shape == (3, 2, *_SHAPE) and first.frames.dtype == np.uint8
    assert first.frame_mask.tolist() == [[False, True], [True, True], [True, True]]
    frames = episodes[0].observations["ego_rgb"]
    np.testing.assert_array_equal(first.frames[0, 0], frames[0])  # padding repeats frame 0
    np.testing.assert_array_equal(first.frames[2], frames[1:3])
    assert first.step.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(first.skill, episodes[0].actions["skill"][:3])
    assert first.action_text == episodes[0].action_text
    assert first.instruction == ("Find the chair.",) * 3
    assert first.target_category == ("chair",) * 3 and first.category_index.tolist() == [0, 0, 0]
    first.frames[:] = 0  # batches own their arrays
    again = next(iter(window_batches(tmp_path, history=2, batch_size=3)))
    assert again.frames.any()


def test_window_batches_validate_arguments_before_reading(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(TypeError, match="history"):
        window_batches(missing, history=True, batch_size=2)
    with pytest.raises(TypeError, match="history"):
        window_batches(missing, history=2.0, batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        window_batches(missing, history=1, batch_size=0)
    with pytest.raises(ValueError, match="image_key"):
        window_batches(
            missing, history=1, batch_size=1, options=EpisodeReadOptions(observation_keys=())
        )


def test_data_package_does_not_import_torch():
    code = (
        "import sys, humanclaw_gym.data, humanclaw_gym.data.batching;"
        "print(sorted(m for m in ('torch', 'pybullet', 'moderngl') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
