"""Episode starts its scene does not hold are refused before any episode runs.

A start 50 m below the floor or beside the home used to pass ``humanclaw run`` and fail
that episode at reset (the run exited 1 with the episode's folder written); now the run
and ``humanclaw rollout`` refuse it first: one line naming the file, the episode and
``start_position``, exit code 2, nothing written to ``--output``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _shard_with(tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A shard of our format holding the first val100 episode, edited as a dict (in a
    folder of its own: splits are cached by path)."""
    from humanclaw_gym.episodes.io import canonical_json, gzip_bytes, load_split

    ep = load_split("val100")[0]
    record = ep.to_dict()
    edit(record)
    doc = {"schema": "humanclaw_episodes_v2", "scene_id": ep.scene_id, "episodes": [record]}
    (tmp_path / name).mkdir()
    path = tmp_path / name / f"{ep.scene_id}.json.gz"
    path.write_bytes(gzip_bytes(canonical_json(doc).encode()))
    return path


def _start(position: list[float]) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.update(start_position=position)


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"humanclaw {command}: error: "), err
    return lines[0]


_CASES = [
    ([4.775, -50.0, 1.825], r"start_position \[4.775, -50, 1.825\] .* is off the scene's floors"),
    ([9000.0, 0.0, 1.825], r"start_position \[9000, 0, 1.825\] .* lies outside the scene"),
    ([1e6, 0.0, 1.825], r"Episode.start_position \[1000000.0, 0.0, 1.825\] is out of range"),
]


@pytest.mark.parametrize(("position", "pattern"), _CASES, ids=["below", "beside", "1e6"])
def test_run_refuses_a_start_outside_its_scene_before_any_episode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], position: list[float], pattern: str
) -> None:
    """Below the floor and 9 km beside the home: each failed its episode (exit 1, the
    episode's folder and the fingerprint written); 1e6 m is refused when the file is read."""
    import re

    from humanclaw_gym.cli import main

    path = _shard_with(tmp_path, "split", _start(position))
    out = tmp_path / "out"
    code = main(["run", "--episodes", str(path), "--output", str(out), "--quiet", "--metrics"])
    err = capsys.readouterr().err
    assert code == 2, err
    line = _one_error_line(err, "run")
    assert re.search(pattern, line), line
    assert "hc_val_003_000" in line and str(path.name) in line
    assert not out.exists()


def test_rollout_refuses_a_start_outside_its_scene(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from humanclaw_gym.cli import main

    path = _shard_with(tmp_path, "split", _start([4.775, -50.0, 1.825]))
    out = tmp_path / "out"
    code = main(["rollout", "--split", str(path), "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    line = _one_error_line(err, "rollout")
    assert "episode 'hc_val_003_000' start_position" in line and "off the scene's floors" in line
    assert not out.exists()


def test_run_batch_refuses_before_the_output_is_made(tmp_path: Path) -> None:
    """The library entry point refuses too (the same check as the CLI), with the
    split named."""
    from humanclaw_gym.episodes.schema import EpisodeFormatError
    from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, run_batch

    path = _shard_with(tmp_path, "split", _start([9000.0, 0.0, 1.825]))
    out = tmp_path / "out"
    with pytest.raises(EpisodeFormatError, match=r"lies outside the scene") as err:
        run_batch(list_episode_specs(str(path)), RunConfig(output=str(out)), progress=False)
    assert str(err.value).startswith(f"{path}: episode 'hc_val_003_000' start_position")
    assert not out.exists()


def test_the_check_reads_each_scene_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over ``val`` (1,218 episodes in 41 homes) every scene is read and its limits
    computed once, and every shipped start passes."""
    from humanclaw_gym.episodes import io, resolve
    from humanclaw_gym.evaluation.batch import RunConfig, check_episode_starts, list_episode_specs

    loads: list[str] = []
    limits: list[str] = []
    real_load, real_limits = io.load_scene, resolve.start_limits

    def load(scene_id: str) -> Any:
        loads.append(scene_id)
        return real_load(scene_id)

    def count(scene: Any) -> Any:
        limits.append(scene.scene_id)
        return real_limits(scene)

    monkeypatch.setattr(io, "load_scene", load)
    monkeypatch.setattr(resolve, "start_limits", count)
    specs = list_episode_specs("val")
    check_episode_starts(specs, RunConfig())
    scenes = sorted({s.scene_id for s in specs})
    assert len(specs) == 1218 and len(scenes) == 41
    assert sorted(loads) == scenes and sorted(limits) == scenes


def test_image_goal_starts_are_checked_too() -> None:
    """Another task's records with a ``start_position`` get the same check (the shipped
    image-goal split passes it)."""
    from dataclasses import replace

    from humanclaw_gym.episodes.imagegoal import load_imagegoal_split
    from humanclaw_gym.episodes.schema import EpisodeFormatError
    from humanclaw_gym.evaluation.batch import RunConfig, check_episode_starts, list_episode_specs
    from humanclaw_gym.tasks.image_goal import ImageGoalTask

    specs = list_episode_specs(None, "image_goal")
    check_episode_starts(specs, RunConfig(task="image_goal"))
    first = load_imagegoal_split()[0]
    bad = [replace(first, start_position=(first.start_position[0], -50.0, 0.0))]

    class _Task(ImageGoalTask):
        @classmethod
        def load_episodes(cls, split, episodes=None, episode_ids=None, instruction_template=None):
            return bad

    with pytest.raises(EpisodeFormatError, match=r"off the scene's floors"):
        check_episode_starts(specs[:1], RunConfig(task=_Task))


def test_training_homes_and_dataset_scenes_are_left_to_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A generated training home costs a generation (about 0.3 s): its episodes are checked
    at reset only, as imported dataset scenes are; no scene is read for them here."""
    from humanclaw_gym.episodes import io
    from humanclaw_gym.evaluation.batch import EpisodeSpec, RunConfig, check_episode_starts

    def refuse(scene_id: str) -> Any:
        raise AssertionError(f"read {scene_id}")

    monkeypatch.setattr(io, "load_scene", refuse)
    check_episode_starts([EpisodeSpec("nowhere", "hc_train_000", "x", "chair")], RunConfig())
