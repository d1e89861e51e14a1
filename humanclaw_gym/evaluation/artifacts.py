"""Moving an episode folder from the node that ran it to the driver's output directory.

A remote episode (the Ray executor) runs in node-local scratch, so nothing it writes lands
on a disk the driver may not share. Its folder then travels as data: a manifest (every
file's relative path, size and SHA-256) followed by the files' bytes in chunks of at most
:data:`CHUNK_BYTES` (a chunk never spans two files; empty files send none). The driver
writes the chunks into a hidden staging folder beside the target and renames it into place
only when every file has arrived whole and verifies, so the driver's copy is the complete
folder or nothing: a worker that dies mid-episode, a transfer that breaks, a file that
arrives short or altered leave no file at the driver (:class:`ArtifactTransferError`).

Sender side::

    manifest = folder_manifest(directory)
    yield manifest
    yield from folder_chunks(directory, manifest)

Receiver side::

    with FolderReceiver(target, manifest) as receiver:
        for chunk in chunks:
            receiver.write(chunk)
    # committed on a clean exit, removed on an exception

The manifest is an in-memory message (``schema`` ``humanclaw_episode_artifacts_v1``), not a
file: a receiver refuses another schema, e.g. from a node with another package version.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = [
    "ARTIFACTS_SCHEMA",
    "CHUNK_BYTES",
    "ArtifactTransferError",
    "FolderReceiver",
    "folder_chunks",
    "folder_manifest",
]

ARTIFACTS_SCHEMA = "humanclaw_episode_artifacts_v1"
CHUNK_BYTES = 8 * 1024 * 1024
"""Largest chunk of file bytes in one message (videos of long episodes span several)."""

_READ_BYTES = 1024 * 1024


class ArtifactTransferError(RuntimeError):
    """An episode folder did not reach the driver whole; the driver kept nothing of it."""


# ---------------------------------------------------------------------------------------
# sender
# ---------------------------------------------------------------------------------------
def folder_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of every regular file under ``directory`` (sorted relative paths).

    Returns:
        ``{"schema": ARTIFACTS_SCHEMA, "files": [{"path": "metrics.json", "size": int,
        "sha256": hex}, ...]}``; paths use ``/`` and are relative to ``directory``.

    Raises:
        ArtifactTransferError: the folder holds a link or another non-regular entry (it
            would not arrive as what it is).
    """
    root = Path(directory)
    files = []
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        rel = path.relative_to(root).as_posix()
        if not stat.S_ISREG(mode):
            raise ArtifactTransferError(
                f"{path}: not a regular file (a link or special file); an episode folder "
                "travels as plain files only"
            )
        digest = hashlib.sha256()
        size = 0
        with open(path, "rb") as fh:
            while block := fh.read(_READ_BYTES):
                digest.update(block)
                size += len(block)
        files.append({"path": rel, "size": size, "sha256": digest.hexdigest()})
    return {"schema": ARTIFACTS_SCHEMA, "files": files}


def folder_chunks(
    directory: str | os.PathLike[str],
    manifest: Mapping[str, Any],
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[bytes]:
    """The bytes of the manifest's files, in its order, in chunks of ``<= chunk_bytes``.

    Raises:
        ValueError: ``chunk_bytes < 1``.
    """
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    root = Path(directory)
    for entry in manifest["files"]:
        with open(root / entry["path"], "rb") as fh:
            while chunk := fh.read(chunk_bytes):
                yield chunk


# ---------------------------------------------------------------------------------------
# receiver
# ---------------------------------------------------------------------------------------
def _checked_entries(manifest: Any) -> list[tuple[PurePosixPath, int, str]]:
    """The manifest's files, each path checked to stay inside the target folder."""
    if not isinstance(manifest, Mapping) or manifest.get("schema") != ARTIFACTS_SCHEMA:
        found = manifest.get("schema") if isinstance(manifest, Mapping) else type(manifest)
        raise ArtifactTransferError(
            f"artifact manifest of schema {found!r}; allowed {ARTIFACTS_SCHEMA!r} (do all "
            "nodes run the same humanclaw-gym version?)"
        )
    entries = []
    seen: set[str] = set()
    for entry in manifest.get("files", []):
        raw = str(entry.get("path", ""))
        rel = PurePosixPath(raw)
        if (
            not raw
            or rel.is_absolute()
            or "\\" in raw
            or any(part in ("", ".", "..") for part in raw.split("/"))
            or raw in seen
        ):
            raise ArtifactTransferError(
                f"artifact path {raw[:120]!r} is not allowed: a relative path inside the "
                "episode folder, listed once"
            )
        seen.add(raw)
        size, digest = entry.get("size"), entry.get("sha256")
        if not isinstance(size, int) or size < 0 or not isinstance(digest, str):
            raise ArtifactTransferError(f"artifact {raw!r}: size and sha256 are required")
        entries.append((rel, size, digest))
    return entries


class FolderReceiver:
    """Writes a transferred folder into ``target`` atomically (a context manager).

    The files are written into ``.<target name>.<random>.incoming`` beside ``target`` (the
    same filesystem, so the final rename is atomic). On a clean exit of the ``with`` block
    every file must have arrived with its size and SHA-256; then the folder replaces
    ``target``. An existing ``target`` is replaced by a rename when ``clear_target`` (called
    with it) leaves it empty; otherwise (a user's own files in it) each file is moved in,
    ``last`` (default ``episode_result.json``) at the end, so that a reader never sees a
    result file without the files it describes. On any exception the staging folder is
    removed and ``target`` is left as it was.

    Args:
        target: the episode folder at the driver.
        manifest: from :func:`folder_manifest` on the sending node.
        clear_target: removes the files a previous run left in an existing ``target``
            (the evaluator's own outputs only) before the new folder moves in.
        last: the file moved in last when files are moved one by one.

    Raises:
        ArtifactTransferError: a malformed manifest (on construction), a chunk that does
            not fit the manifest, a file that arrived short or altered (on exit).
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        manifest: Mapping[str, Any],
        *,
        clear_target: Callable[[Path], None] | None = None,
        last: str = "episode_result.json",
    ) -> None:
        self.target = Path(target)
        self._entries = _checked_entries(manifest)
        self._clear_target = clear_target
        self._last = last
        self._staging: Path | None = None
        self._index = 0
        self._written = 0
        self._digest = hashlib.sha256()
        self._fh: Any = None

    def __enter__(self) -> FolderReceiver:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self._staging = Path(
            tempfile.mkdtemp(
                prefix=f".{self.target.name}.", suffix=".incoming", dir=self.target.parent
            )
        )
        os.chmod(self._staging, 0o777 & ~_umask())  # an ordinary folder, not mkdtemp's 0700
        self._open_next()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                self._finish()
                self._commit()
        finally:
            self._close_file()
            if self._staging is not None and self._staging.exists():
                shutil.rmtree(self._staging, ignore_errors=True)

    # -- writing ---------------------------------------------------------------------------
    def _open_next(self) -> None:
        """Open the next file that expects bytes (empty files are created on the way)."""
        while self._index < len(self._entries):
            rel, size, _ = self._entries[self._index]
            path = self._staging_path(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "xb")  # noqa: SIM115 - closed in _close_file
            self._written = 0
            self._digest = hashlib.sha256()
            if size > 0:
                return
            self._end_file()

    def _staging_path(self, rel: PurePosixPath) -> Path:
        assert self._staging is not None
        return self._staging.joinpath(*rel.parts)

    def write(self, chunk: bytes) -> None:
        """Append the next chunk (it belongs to the current file and must fit its size)."""
        if self._fh is None:
            raise ArtifactTransferError(
                f"{self.target}: {len(chunk)} byte(s) arrived after the last listed file"
            )
        rel, size, _ = self._entries[self._index]
        if self._written + len(chunk) > size:
            raise ArtifactTransferError(
                f"{self.target / rel}: more bytes arrived than the {size} listed"
            )
        self._fh.write(chunk)
        self._digest.update(chunk)
        self._written += len(chunk)
        if self._written == size:
            self._end_file()
            self._open_next()

    def _end_file(self) -> None:
        rel, _, digest = self._entries[self._index]
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._close_file()
        if self._digest.hexdigest() != digest:
            raise ArtifactTransferError(f"{self.target / rel}: SHA-256 differs from the sender's")
        self._index += 1

    def _close_file(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _finish(self) -> None:
        if self._index < len(self._entries):
            rel, size, _ = self._entries[self._index]
            raise ArtifactTransferError(
                f"{self.target / rel}: the transfer ended after {self._written} of {size} "
                f"byte(s) ({len(self._entries) - self._index} file(s) incomplete)"
            )

    # -- committing ------------------------------------------------------------------------
    def _commit(self) -> None:
        assert self._staging is not None
        if self.target.exists() and self._clear_target is not None:
            self._clear_target(self.target)
        try:
            self.target.rmdir()  # absent, or empty after clearing: the folder moves in whole
        except FileNotFoundError:
            pass
        except OSError:  # files a user put there stay; ours move in one by one
            self._move_files_in()
            return
        os.rename(self._staging, self.target)
        _fsync_directory(self.target.parent)

    def _move_files_in(self) -> None:
        assert self._staging is not None
        order = sorted(
            (rel for rel, _, _ in self._entries), key=lambda rel: rel.as_posix() == self._last
        )
        for rel in order:
            destination = self.target.joinpath(*rel.parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self._staging_path(rel), destination)
        _fsync_directory(self.target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
