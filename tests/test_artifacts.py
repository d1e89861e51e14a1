"""An episode folder travels as a manifest plus chunks and lands at the driver whole or not
at all (humanclaw_gym.evaluation.artifacts)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from humanclaw_gym.evaluation.artifacts import (
    ArtifactTransferError,
    FolderReceiver,
    folder_chunks,
    folder_manifest,
)


def _episode_folder(root: Path) -> Path:
    folder = root / "scratch" / "rollout_00"
    (folder / "frames").mkdir(parents=True)
    (folder / "metrics.json").write_text('{"schema": "humanclaw_metrics_v1"}\n')
    (folder / "ego.mp4").write_bytes(os.urandom(10_000))  # several chunks below
    (folder / "empty.json").write_bytes(b"")
    (folder / "frames" / "000.png").write_bytes(b"\x89PNG" + bytes(range(256)))
    (folder / "episode_result.json").write_text('{"ended_by": "stop"}\n')
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def _no_staging_left(parent: Path) -> bool:
    return not [p for p in parent.iterdir() if p.name.endswith(".incoming")]


def test_a_folder_arrives_byte_for_byte_in_small_chunks(tmp_path):
    source = _episode_folder(tmp_path)
    manifest = folder_manifest(source)
    assert [f["path"] for f in manifest["files"]] == [
        "ego.mp4",
        "empty.json",
        "episode_result.json",
        "frames/000.png",
        "metrics.json",
    ]
    chunks = list(folder_chunks(source, manifest, chunk_bytes=4096))
    assert max(len(c) for c in chunks) == 4096 and len(chunks) == 3 + 1 + 1 + 1  # no empty chunk
    target = tmp_path / "driver" / "ep" / "rollout_00"
    with FolderReceiver(target, manifest) as receiver:
        for chunk in chunks:
            receiver.write(chunk)
    assert _files(target) == _files(source)
    assert _no_staging_left(target.parent)
    mode = stat.S_IMODE(target.stat().st_mode)
    assert mode & 0o055 == 0o055 & ~_umask()  # an ordinary folder, readable by others


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("fault", ["short", "altered", "extra", "raised"])
def test_a_broken_transfer_leaves_nothing_at_the_driver(tmp_path, fault):
    source = _episode_folder(tmp_path)
    manifest = folder_manifest(source)
    chunks = list(folder_chunks(source, manifest, chunk_bytes=4096))
    if fault == "short":
        chunks = chunks[:-1]
    elif fault == "altered":
        chunks[1] = bytes(len(chunks[1]))
    elif fault == "extra":
        chunks.append(b"x")
    target = tmp_path / "driver" / "ep" / "rollout_00"
    with pytest.raises((ArtifactTransferError, ConnectionError)):
        with FolderReceiver(target, manifest) as receiver:
            for i, chunk in enumerate(chunks):
                if fault == "raised" and i == 2:
                    raise ConnectionError("the worker died")
                receiver.write(chunk)
    assert not target.exists()
    assert _no_staging_left(target.parent)


def test_an_earlier_result_is_replaced_and_a_users_file_kept(tmp_path):
    source = _episode_folder(tmp_path)
    manifest = folder_manifest(source)
    target = tmp_path / "driver" / "ep" / "rollout_00"
    target.mkdir(parents=True)
    (target / "metrics.json").write_text("old")
    (target / "step007_verifier.json").write_text("old, from a longer run")

    def clear(folder: Path) -> None:  # the evaluator's own outputs only
        for p in folder.iterdir():
            if p.name.endswith(".json"):
                p.unlink()

    with FolderReceiver(target, manifest, clear_target=clear) as receiver:
        for chunk in folder_chunks(source, manifest):
            receiver.write(chunk)
    assert _files(target) == _files(source)  # replaced whole (the old folder was emptied)

    (target / "notes.txt").write_text("a user's own file")
    (source / "metrics.json").write_text('{"schema": "humanclaw_metrics_v1", "rerun": 1}\n')
    manifest = folder_manifest(source)
    with FolderReceiver(target, manifest, clear_target=clear) as receiver:
        for chunk in folder_chunks(source, manifest):
            receiver.write(chunk)
    assert _files(target) == {**_files(source), "notes.txt": b"a user's own file"}
    assert _no_staging_left(target.parent)


@pytest.mark.parametrize("path", ["../escape.json", "/etc/passwd", "a//b", "./x", "a\\b", ""])
def test_a_manifest_path_outside_the_folder_is_refused(tmp_path, path):
    manifest = {
        "schema": "humanclaw_episode_artifacts_v1",
        "files": [{"path": path, "size": 0, "sha256": "e3b0"}],
    }
    with pytest.raises(ArtifactTransferError, match="not allowed"):
        FolderReceiver(tmp_path / "t", manifest)


def test_another_schema_and_links_are_refused(tmp_path):
    with pytest.raises(ArtifactTransferError, match="same humanclaw-gym version"):
        FolderReceiver(tmp_path / "t", {"schema": "humanclaw_episode_artifacts_v0", "files": []})
    folder = _episode_folder(tmp_path)
    (folder / "link.json").symlink_to(folder / "metrics.json")
    with pytest.raises(ArtifactTransferError, match="not a regular file"):
        folder_manifest(folder)


def test_a_run_whose_artifacts_are_not_at_the_driver_fails(tmp_path, monkeypatch):
    """An executor that reports success for a folder the driver cannot see (written on
    another machine's disk) makes the episode, and so the run, fail; it never exits 0."""
    from humanclaw_gym.evaluation import batch

    elsewhere = tmp_path / "another_machine"

    def run_elsewhere(spec, config):
        from dataclasses import replace

        return real(spec, replace(config, output=str(elsewhere)))

    real = batch.run_one_episode
    monkeypatch.setattr(batch, "run_one_episode", run_elsewhere)
    specs = batch.list_episode_specs("val100")[:1]
    config = batch.RunConfig(agent="random", output=str(tmp_path / "out"), max_steps=1)
    summary = batch.run_batch(specs, config, workers=1, progress=False)
    assert (summary.completed, summary.failed) == (0, 1)
    assert "did not reach the driver" in summary.results[0]["error"]
    assert (batch.rollout_dir(elsewhere, specs[0]) / "episode_result.json").is_file()
