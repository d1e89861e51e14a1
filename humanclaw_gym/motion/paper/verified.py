"""What the paper motion's files were found to be, worked out once per process per file state.

A run with ``motion="paper"`` names a weight manifest, the weight files it pins and a seed
state. Several parts of a process check them: the paper profile's pre-check
(:func:`humanclaw_gym.profiles.resolve_profile`), ``BackendConfig.check()`` (the weights'
record), the generator when it is built, and every further env of the process. Each asks
here, so each file is read and checked once: the manifest parsed and validated
(:func:`~.manifest.read_manifest`), every weight file's SHA-256 (:func:`file_sha256`), each
payload's check against the manifest's architecture (:mod:`.weights`) and the seed state read
and checked (:mod:`.generator`).

"Once per file state": a record is keyed by what it is about (the kind of record, the
resolved path and, for a payload check, the manifest and skill it was checked against) and
kept with the file's state when it was worked out: size, modification time (ns), change
time (ns) and inode. A later question about a file whose state differs (rewritten, touched,
replaced) works it out again; one that failed is not kept (the next question fails the same
way, naming the file); one whose file changed while it was worked out is not kept either.

Records live in this process only: a run's driver process and its worker processes each
work them out once (see ``docs/paper.md``). Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["clear_verified_cache", "file_sha256", "file_state", "once"]

T = TypeVar("T")
_CHUNK_BYTES = 1 << 20
#: ``(resolved path, size, mtime_ns, ctime_ns, inode)``.
_State = tuple[str, int, int, int, int]
_RECORDS: dict[tuple[Hashable, ...], tuple[_State, Any]] = {}
_LOCK = threading.RLock()


def file_state(path: str | os.PathLike[str]) -> _State | None:
    """The file's state as a record is kept with: resolved path, size, modification and
    change times (ns) and inode; None when it cannot be read (gone, not a file)."""
    real = os.path.realpath(os.fspath(path))
    try:
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def once(kind: str, path: str | os.PathLike[str], work: Callable[[], T], *about: Hashable) -> T:
    """``work()``'s result for the file at ``path`` in its current state: worked out the first
    time and whenever the file changed since, else the kept result (see the module
    docstring). ``kind`` and ``about`` say what the result is (e.g. ``"sha256"``, or a
    payload check against a manifest and skill)."""
    before = file_state(path)
    if before is None:  # gone or unreadable: work() reports it (nothing is kept)
        return work()
    key = (kind, before[0], *about)
    with _LOCK:
        held = _RECORDS.get(key)
        if held is not None and held[0] == before:
            return held[1]
        value = work()
        if file_state(path) == before:  # unchanged while it was worked out
            _RECORDS[key] = (before, value)
        else:
            _RECORDS.pop(key, None)
        return value


def _hash_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read once per process per file state.

    Raises:
        OSError: the file cannot be read.
    """
    return once("sha256", path, lambda: _hash_file(path))


def clear_verified_cache() -> None:
    """Forget every record (the next question reads and checks its file again)."""
    with _LOCK:
        _RECORDS.clear()
