"""Artifact lists and safe artifact reads for the benchmark server.

When ``finish`` closes an episode, the regular files of its directory are listed with
their size and SHA-256 and that list is frozen. ``read_artifact`` then serves only paths
of a frozen list, and only if the path is still a regular file (no symlink anywhere on
the way, no directory) whose content still has the frozen hash.

Paths on the wire are relative POSIX paths below the server's output directory, e.g.
``hc_val_003_ephc_val_003_000_chair/metrics.json``. Absolute paths, ``..``/``.`` parts,
empty parts, backslashes and characters outside ``[A-Za-z0-9._-]`` are refused before
the file system is consulted.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

__all__ = ["ArtifactPathError", "check_relative_path", "list_artifacts", "read_regular_file"]

_PART_RE = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
_MAX_PATH_CHARS = 512
_CHUNK = 1 << 16


class ArtifactPathError(ValueError):
    """A requested artifact path is not acceptable (the message says why; no server paths)."""


def check_relative_path(path: Any) -> tuple[str, ...]:
    """Validate a wire path and split it into parts.

    Args:
        path: the client's ``path`` parameter.

    Returns:
        The path parts, e.g. ``("ep_dir", "metrics.json")``.

    Raises:
        ArtifactPathError: not a str, too long, absolute, traversal, odd characters.
    """
    if not isinstance(path, str):
        raise ArtifactPathError(f"path must be a string, got {type(path).__name__}")
    if not path or len(path) > _MAX_PATH_CHARS:
        raise ArtifactPathError(f"path must have 1..{_MAX_PATH_CHARS} characters")
    if path.startswith("/") or "\\" in path or "\x00" in path:
        raise ArtifactPathError(
            "path must be relative to the output directory (no '/', '\\' prefix)"
        )
    parts = tuple(path.split("/"))
    for part in parts:
        if part in ("", ".", ".."):
            raise ArtifactPathError("path must not contain empty, '.' or '..' parts")
        if not _PART_RE.match(part):
            raise ArtifactPathError("path parts may only use the characters A-Z a-z 0-9 . _ -")
    return parts


def _sha256_fd(fd: int) -> tuple[str, bytes]:
    digest = hashlib.sha256()
    chunks = []
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        digest.update(chunk)
        chunks.append(chunk)
    return digest.hexdigest(), b"".join(chunks)


def read_regular_file(root: Path, parts: tuple[str, ...], max_bytes: int) -> tuple[bytes, str]:
    """Read ``root/parts...`` if every directory on the way is a real directory and the
    last part is a regular file (no symlinks anywhere), without following links.

    Args:
        root: the output directory (trusted, absolute).
        parts: validated parts from :func:`check_relative_path`.
        max_bytes: refuse larger files.

    Returns:
        ``(content, sha256_hex)``.

    Raises:
        ArtifactPathError: a symlink, a directory, a special file, or too large.
        FileNotFoundError: the path does not exist.
    """
    current = Path(root)
    for i, part in enumerate(parts):
        current = current / part
        info = os.lstat(current)  # FileNotFoundError propagates
        last = i == len(parts) - 1
        if stat.S_ISLNK(info.st_mode):
            raise ArtifactPathError("symbolic links are not served")
        if not last and not stat.S_ISDIR(info.st_mode):
            raise ArtifactPathError("a path part is not a directory")
        if last and not stat.S_ISREG(info.st_mode):
            raise ArtifactPathError("only regular files are served")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(current, flags)
    except OSError as exc:  # ELOOP: swapped for a link after the check
        raise ArtifactPathError("the file could not be opened as a regular file") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactPathError("only regular files are served")
        if info.st_size > max_bytes:
            raise ArtifactPathError(f"the file is larger than {max_bytes} bytes")
        sha, content = _sha256_fd(fd)
    finally:
        os.close(fd)
    return content, sha


def list_artifacts(root: Path, directory: Path) -> list[dict[str, Any]]:
    """The regular files directly inside ``directory`` (sorted; hidden and temporary files
    and symlinks skipped) with their path relative to ``root``, size and SHA-256.

    Args:
        root: the output directory.
        directory: an episode directory below ``root``.

    Returns:
        ``[{"path": "dir/name", "size_bytes": int, "sha256": hex}, ...]``.
    """
    out: list[dict[str, Any]] = []
    if not directory.is_dir():
        return out
    rel_dir = directory.relative_to(root).as_posix()
    for child in sorted(directory.iterdir(), key=lambda p: p.name):
        name = child.name
        if name.startswith(".") or name.endswith(".tmp") or not _PART_RE.match(name):
            continue
        info = os.lstat(child)
        if not stat.S_ISREG(info.st_mode):
            continue
        digest = hashlib.sha256()
        with open(child, "rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(_CHUNK), b""):
                digest.update(chunk)
        out.append(
            {
                "path": f"{rel_dir}/{name}",
                "size_bytes": int(info.st_size),
                "sha256": digest.hexdigest(),
            }
        )
    return out
