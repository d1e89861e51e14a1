"""The reference release's episode files: its subset file (val100.json) and episode folder
(the header episodes/val/val.json.gz, holding no episodes, and
episodes/val/content/*.json.gz), read with every field kept; a scene that is not installed
fails with a message naming it. Fixtures written by hand in the reference layout."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym import SkillCall
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.episodes import (
    SCENE_DIR_ENV,
    EpisodeFormatError,
    InstructionTemplate,
    SceneNotInstalledError,
    habitat_quat_to_yaw,
    instruction_for,
    load_scene,
    load_split,
    read_shard,
    reference_yaw_to_ours,
    write_shard,
)
from humanclaw_gym.episodes.io import assets_dir
from humanclaw_gym.episodes.selection import select_episodes

FIXTURE = Path(__file__).parent / "fixtures" / "reference_benchmark"
SCENE = "104348028_171512877"


#: The split header as the reference ships it: category tables, no episodes.
_HEADER = {
    "episodes": [],
    "category_to_task_category_id": {"chair": 0, "couch": 1},
    "category_to_scene_annotation_category_id": {"chair": 0, "couch": 1},
}


def _write_gz_json(path: Path, doc: object) -> None:
    path.write_bytes(gzip.compress(json.dumps(doc).encode("utf-8")))


@pytest.fixture
def benchmark(tmp_path: Path) -> Path:
    """The fixture in the reference layout: val100.json + the split header
    episodes/val/val.json.gz (no episodes) + episodes/val/content/<scene>.json.gz."""
    root = tmp_path / "benchmark"
    content = root / "episodes" / "val" / "content"
    content.mkdir(parents=True)
    shutil.copy(FIXTURE / "val100.json", root / "val100.json")
    _write_gz_json(content.parent / "val.json.gz", _HEADER)
    for src in (FIXTURE / "episodes" / "val" / "content").glob("*.json"):
        (content / f"{src.stem}.json.gz").write_bytes(gzip.compress(src.read_bytes()))
    return root


@pytest.fixture
def scene_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A converted scene for the reference scene id (one of our homes under its name)."""
    directory = tmp_path / "scenes"
    directory.mkdir()
    shutil.copy(assets_dir() / "scenes" / "hc_val_003.json.gz", directory / f"{SCENE}.json.gz")
    monkeypatch.setenv(SCENE_DIR_ENV, str(directory))
    load_scene.cache_clear()
    yield directory
    load_scene.cache_clear()  # leave no stand-in scene cached for other tests


def test_subset_file_selects_its_episodes_in_order(benchmark):
    eps = load_split(benchmark / "val100.json")
    assert [e.episode_id for e in eps] == [f"{SCENE}_11", f"{SCENE}_1"]
    assert [e.object_category for e in eps] == ["chair", "couch"]
    selected = select_episodes(str(benchmark / "val100.json"))
    assert [ep.episode_id for _, ep in selected] == [f"{SCENE}_11", f"{SCENE}_1"]
    assert {split for split, _ in selected} == {str(benchmark / "val100.json")}


def test_episode_folder_loads_directly(benchmark):
    for folder in (benchmark / "episodes" / "val", benchmark / "episodes" / "val" / "content"):
        eps = load_split(folder)
        assert [e.episode_id for e in eps] == [f"{SCENE}_1", f"{SCENE}_11", f"{SCENE}_12"]
    assert [ep.episode_id for _, ep in select_episodes(str(benchmark / "episodes" / "val"))][
        0
    ] == f"{SCENE}_1"


def test_header_and_content_layout_reads_every_shard(benchmark):
    """The release's folder: a header holding no episodes beside content/; every shard is
    read, whether the folder or its header file is named."""
    folder = benchmark / "episodes" / "val"
    doc = json.loads((FIXTURE / "episodes" / "val" / "content" / f"{SCENE}.json").read_text())
    other = "900000001_900000002"
    text = json.dumps(doc).replace(SCENE, other)
    (folder / "content" / f"{other}.json.gz").write_bytes(gzip.compress(text.encode()))
    expected = [f"{s}_{n}" for s in (SCENE, other) for n in (1, 11, 12)]
    for split in (folder, folder / "val.json.gz"):
        assert [e.episode_id for e in load_split(split)] == expected
    assert [ep.episode_id for _, ep in select_episodes(str(folder))] == expected
    assert [ep.episode_id for _, ep in select_episodes(str(folder / "val.json.gz"))] == expected
    shard = folder / "content" / f"{other}.json.gz"
    assert [ep.episode_id for _, ep in select_episodes(str(shard))] == expected[3:]
    assert load_split(folder / "content" / f"{other}.json.gz")[0].scene_id == other


def test_a_split_without_episodes_is_an_error(benchmark):
    folder = benchmark / "episodes" / "val"
    for shard in (folder / "content").glob("*.json.gz"):
        shard.unlink()
    with pytest.raises(EpisodeFormatError, match=r"no episodes in 1 header file\(s\) and 0 shard"):
        load_split(folder)
    with pytest.raises(EpisodeFormatError, match="no episodes"):
        load_split(folder / "val.json.gz")  # the header names the same empty folder
    with pytest.raises(ValueError, match="no episodes"):
        select_episodes(str(folder))
    with pytest.raises(EpisodeFormatError, match="no episodes"):  # the subset's folder
        load_split(benchmark / "val100.json")
    _write_gz_json(folder / "content" / f"{SCENE}.json.gz", {**_HEADER, "goals_by_category": {}})
    with pytest.raises(EpisodeFormatError, match="1 shard"):
        load_split(folder)
    with pytest.raises(EpisodeFormatError, match="the shard holds no episodes"):
        load_split(folder / "content" / f"{SCENE}.json.gz")
    (folder / "val.json.gz").rename(folder / "content" / "flat.json.gz")
    with pytest.raises(EpisodeFormatError, match="hold no episodes"):  # shards, no header
        load_split(folder / "content")


def test_imported_episodes_keep_every_field(benchmark, tmp_path):
    ep = {e.episode_id: e for e in load_split(benchmark / "episodes" / "val")}[f"{SCENE}_1"]
    ref = ep.reference
    assert ref is not None and ref.episode_id == "1"
    assert ref.init_offset == (-2.975123456789, 2.025987654321, 0.0)  # in full
    assert ref.init_yaw_deg == 107.67
    assert ref.scene_dataset_config == (
        "data/scene_datasets/hssd-hab/hssd-hab.scene_dataset_config.json"
    )
    assert [vp["iou"] for vp in ref.view_points["21"]] == [0.52, 0.31]
    assert ref.episode["additional_obj_config_paths"] == [] and ref.episode["start_room"] is None
    assert ep.scene_id == SCENE and ep.goals[0].object_id == 21
    # the record survives our own shard format unchanged
    write_shard(tmp_path / "ours.json.gz", SCENE, [ep])
    again = read_shard(tmp_path / "ours.json.gz")[0]
    assert again == ep and again.reference.data == ref.data
    # a record without init_offset gets the reference's default (-x, z, 0)
    chair = {e.episode_id: e for e in load_split(benchmark / "episodes" / "val")}[f"{SCENE}_11"]
    assert chair.reference.init_offset == (-1.625, 2.425, 0.0)
    assert chair.reference.init_yaw_deg is None


def test_init_yaw_convention(benchmark):
    """init_yaw (degrees) is the Habitat heading minus 180: our yaw = radians(init_yaw) + pi."""
    eps = {e.episode_id: e for e in load_split(benchmark / "episodes" / "val")}
    couch = eps[f"{SCENE}_1"]
    assert couch.start_yaw_rad == pytest.approx(math.radians(107.67) - math.pi)
    # the record's start_rotation is the same heading: both readings agree
    assert habitat_quat_to_yaw([0.0, 0.8074, 0.0, 0.59]) == pytest.approx(
        couch.start_yaw_rad, abs=1e-3
    )
    # without init_yaw the heading comes from start_rotation
    assert eps[f"{SCENE}_11"].start_yaw_rad == pytest.approx(
        habitat_quat_to_yaw([0.0, -0.4129, 0.0, 0.9108])
    )
    # init_yaw takes precedence over start_rotation, as in the reference
    assert eps[f"{SCENE}_12"].start_yaw_rad == pytest.approx(math.radians(-2.5) + math.pi)
    # fixed points: init_yaw 0 faces -Z (our yaw -pi), 90 faces -X (our -pi/2), 180 faces +Z
    assert reference_yaw_to_ours(0.0) == pytest.approx(-math.pi)
    assert reference_yaw_to_ours(90.0) == pytest.approx(-math.pi / 2)
    assert reference_yaw_to_ours(180.0) == pytest.approx(0.0)
    for theta in (-2.0, -0.3, 0.0, 1.0, 3.0):  # a Habitat rotation by theta about +Y
        q = [0.0, math.sin(theta / 2), 0.0, math.cos(theta / 2)]
        forward = (-math.sin(theta), -math.cos(theta))  # R(q) applied to (0, 0, -1)
        init_yaw = math.degrees(math.atan2(*forward)) - 180.0  # the reference's definition
        ours = reference_yaw_to_ours(init_yaw)
        assert (math.sin(ours), math.cos(ours)) == pytest.approx(forward)
        assert ours == pytest.approx(habitat_quat_to_yaw(q))


def test_instructions_say_what_the_reference_asks(benchmark):
    eps = {e.episode_id: e for e in load_split(benchmark / "episodes" / "val")}
    couch, chair = eps[f"{SCENE}_1"].instruction, eps[f"{SCENE}_11"].instruction
    for text in (couch, chair):
        assert "touches it at zero distance" in text
    assert "sit down on the couch" in couch and "sit" not in chair
    assert instruction_for("tv", False, "touch").startswith("Find the TV ")
    assert instruction_for("bed") == "Find the bed and sit on it."  # our splits: unchanged
    own = InstructionTemplate(find="Go to the {noun}.", sit="Sit on it.")
    assert instruction_for("toilet", None, own) == "Go to the toilet. Sit on it."
    with pytest.raises(ValueError, match="instruction version"):
        instruction_for("bed", True, "v9")


def test_subset_errors_name_the_file(benchmark):
    subset = benchmark / "val100.json"
    doc = json.loads(subset.read_text())
    doc["episodes"][0]["episode_id"] = "99"
    subset.write_text(json.dumps(doc))
    with pytest.raises(EpisodeFormatError, match=rf"{SCENE}_99"):
        load_split(subset)
    doc["episodes"][0].update(episode_id="11", object_category="bed")
    subset.write_text(json.dumps(doc))
    with pytest.raises(EpisodeFormatError, match="object_category 'bed'"):
        load_split(subset)
    with pytest.raises(ValueError, match="object_category"):
        select_episodes(str(subset))


def test_missing_scene_fails_at_make_naming_scene_dataset_and_option(benchmark, monkeypatch):
    monkeypatch.delenv(SCENE_DIR_ENV, raising=False)
    with pytest.raises(SceneNotInstalledError) as info:
        gym.make(ENV_ID, split=str(benchmark / "val100.json"))
    message = str(info.value)
    assert f"scene '{SCENE}'" in message
    assert "hssd-hab.scene_dataset_config.json" in message
    assert SCENE_DIR_ENV in message
    assert isinstance(info.value, KeyError)  # callers catching KeyError keep working


def test_reference_episodes_run_end_to_end_with_an_installed_scene(benchmark, scene_dir):
    env = gym.make(ENV_ID, split=str(benchmark / "val100.json"), max_steps=2)
    try:
        obs, info = env.reset(options={"episode_id": f"{SCENE}_1"})
        assert obs.shape == (448, 448, 3)
        assert "touches it at zero distance" in info["instruction"]
        _, _, terminated, _, _ = env.step(SkillCall.stop())
        assert terminated
    finally:
        env.close()


def test_missing_scene_at_reset_names_the_episode(benchmark, scene_dir, monkeypatch):
    env = gym.make(ENV_ID, split=str(benchmark / "val100.json"), max_steps=2)
    try:
        monkeypatch.setenv(SCENE_DIR_ENV, str(scene_dir.parent / "elsewhere"))
        with pytest.raises(SceneNotInstalledError, match=rf"episode '{SCENE}_1' needs scene"):
            env.reset(options={"episode_id": f"{SCENE}_1"})
    finally:
        env.close()
