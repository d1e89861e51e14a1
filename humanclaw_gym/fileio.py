"""Atomic file writes: the one place that knows how a file is replaced safely.

Every file the package persists (episode results, metrics, replay bundles, images, run
state, datasets) is written here or through :func:`atomic_path`: the bytes go to a hidden
temporary file beside the target (``.<name>.<random>.tmp``), are flushed and fsynced, and
the temporary file is renamed onto the target with ``os.replace``. A reader therefore sees
the old file or the new one, never a partial one, and a failure (an exception, a full disk)
removes the temporary file and leaves the target as it was.

Permissions: by default the new file gets the permissions of an ordinary new file (``0666``
minus the process umask), not ``mkstemp``'s ``0600``. ``private=True`` keeps ``0600`` (run
state that may reveal an evaluation plan). Parent directories are created as needed.

Reading a file a user hands in (episodes, configs, subsets) goes through
:func:`read_bytes_limited`, :func:`gunzip_limited` and :func:`loads_json`: only regular
files (a FIFO or device where a file is expected would block or never end), at most a
stated number of bytes before and after decompression (a gzip bomb is refused, not
inflated), and JSON whose nesting or numbers the interpreter cannot take is a
:class:`FileContentError`, not a ``RecursionError``. A path that a user's file names
relative to its folder goes through :func:`path_inside`.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import stat
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "FileContentError",
    "atomic_path",
    "gunzip_limited",
    "loads_json",
    "SYSTEM_DIRS",
    "path_inside",
    "read_bytes_limited",
    "json_default",
    "write_json_record",
    "temp_path",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]


def _ordinary_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temp_path(directory: str | os.PathLike[str], name: str, *, private: bool = False) -> Path:
    """Create an empty hidden temp file ``.<name>.<random>.tmp`` in ``directory``.

    For writers that stream into a file over time (a video encoder) and rename it
    themselves; everything else uses :func:`atomic_path` or the ``write_*`` helpers.

    Args:
        directory: where the target will live (the rename must stay on one filesystem).
        name: the target's file name (used in the temp name only).
        private: keep mode ``0600`` instead of an ordinary file's permissions.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        if not private:
            os.fchmod(fd, _ordinary_mode())
    finally:
        os.close(fd)
    return Path(tmp)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, private: bool = False) -> Iterator[Path]:
    """Yield a temp path to write the new content of ``path`` into; rename on success.

    Use it for writers that want a file name (``np.savez``, ``PIL.Image.save``)::

        with atomic_path(out / "image.png") as tmp:
            Image.fromarray(rgb).save(tmp, format="PNG")

    The temp file is fsynced and renamed onto ``path`` when the block exits normally; on
    an exception it is removed and ``path`` is unchanged.

    Args:
        path: the target file; its parent directory is created if missing.
        private: give the file mode ``0600`` (default: an ordinary file's permissions).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(target.parent, target.name, private=private)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable (best effort: some filesystems refuse a directory fsync)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, private: bool = False) -> Path:
    """Replace ``path`` with ``data`` atomically; returns the path."""
    with atomic_path(path, private=private) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike[str], text: str, *, private: bool = False) -> Path:
    """Replace ``path`` with UTF-8 ``text`` atomically; returns the path."""
    return write_bytes_atomic(path, text.encode("utf-8"), private=private)


def write_json_atomic(
    path: str | os.PathLike[str], data: Any, *, private: bool = False, **dump_kwargs: Any
) -> Path:
    """Replace ``path`` with ``data`` as JSON (indent 2, final newline) atomically.

    Args:
        path: the target file.
        data: anything ``json.dumps`` accepts with ``dump_kwargs``.
        private: give the file mode ``0600``.
        **dump_kwargs: passed to ``json.dumps`` (``sort_keys``, ``default``,
            ``ensure_ascii``, ``allow_nan``, ...); ``indent`` defaults to 2.

    Raises:
        TypeError / ValueError: ``data`` cannot be serialised (nothing is written).
    """
    dump_kwargs.setdefault("indent", 2)
    text = json.dumps(data, **dump_kwargs) + "\n"
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (e.g. from a model reply) with ensure_ascii=False
        dump_kwargs["ensure_ascii"] = True  # the same JSON value, with \\u escapes
        encoded = (json.dumps(data, **dump_kwargs) + "\n").encode("ascii")
    return write_bytes_atomic(path, encoded, private=private)


def json_default(obj: Any) -> Any:
    """``json.dumps(default=...)`` for numpy scalars/arrays and paths."""
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json_record(path: str | os.PathLike[str], data: Any, *, private: bool = False) -> Path:
    """Write a run-state record (results, plans, ledgers): JSON with sorted keys, numpy
    values as plain numbers, atomically. ``private=True`` keeps the file ``0600``."""
    return write_json_atomic(path, data, private=private, sort_keys=True, default=json_default)


# ---------------------------------------------------------------------------------------
# reading files a user hands in
# ---------------------------------------------------------------------------------------
class FileContentError(ValueError):
    """A file cannot be read as what it should be (not a regular file, too large, not valid
    gzip or JSON); the message names the file and what is allowed."""


def read_bytes_limited(path: str | os.PathLike[str], max_bytes: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes.

    The file is opened without blocking (``O_NONBLOCK``), so a FIFO is refused at once
    instead of waiting for a writer.

    Raises:
        FileNotFoundError: the path does not exist.
        FileContentError: not a regular file (directory, FIFO, device, socket), larger
            than ``max_bytes``, or unreadable.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such {what}") from None
    except OSError as exc:
        raise FileContentError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            if stat.S_ISFIFO(info.st_mode):
                kind = "a FIFO (named pipe)"
            raise FileContentError(f"{p}: the {what} is {kind}; allowed: a regular file")
        if info.st_size > max_bytes:
            raise FileContentError(
                f"{p}: the {what} has {info.st_size} bytes; allowed at most {max_bytes}"
            )
        chunks = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise FileContentError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if size > max_bytes:  # it grew while being read
        raise FileContentError(f"{p}: the {what} has more than {max_bytes} bytes; refused")
    return b"".join(chunks)


def gunzip_limited(data: bytes, max_bytes: int, where: str = "<memory>") -> bytes:
    """Decompress gzip ``data`` (all members) to at most ``max_bytes`` bytes.

    Decompression stops one byte past the limit, so a gzip bomb costs the time of
    ``max_bytes``, not of its full size.

    Raises:
        FileContentError: not valid gzip (truncated, corrupt) or more than ``max_bytes``
            bytes once decompressed.
    """
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as archive:
            out = archive.read(max_bytes + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as exc:
        raise FileContentError(f"{where}: not a valid gzip file ({exc})") from None
    if len(out) > max_bytes:
        raise FileContentError(
            f"{where}: decompresses to more than {max_bytes} bytes (allowed at most "
            f"{max_bytes}); refused as a possible gzip bomb"
        )
    return out


def loads_json(data: bytes | str, where: str = "<memory>") -> Any:
    """Parse UTF-8 JSON text; every failure is a :class:`FileContentError` naming ``where``.

    Covers what ``json.loads`` lets escape as other errors: invalid UTF-8, nesting deeper
    than the interpreter's recursion limit (``RecursionError``) and integers past its digit
    limit (a bare ``ValueError``).
    """
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise FileContentError(
            f"{where} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    except json.JSONDecodeError as exc:
        raise FileContentError(f"{where} is not valid JSON ({exc})") from None
    except RecursionError:
        raise FileContentError(
            f"{where} holds JSON nested too deeply to read (allowed: a few hundred levels)"
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise FileContentError(f"{where} holds a JSON value that cannot be read ({exc})") from None


#: Kernel filesystems no path a user's file names may lead into, symbolic links resolved
#: (``/dev/shm``, a memory-backed folder of ordinary files, excepted).
SYSTEM_DIRS: tuple[str, ...] = ("/proc", "/sys", "/dev")
_SHARED_MEMORY_DIR = "/dev/shm"


def path_inside(
    root: str | os.PathLike[str],
    relative: Any,
    where: str,
    base: str | os.PathLike[str] | None = None,
) -> Path:
    """``base / relative`` for a path a user's file names (a mesh, a config folder, a glob).

    As written it must stay inside ``root``: relative, no ``..`` leading out, no drive or
    URL. A symbolic link inside ``root`` may lead elsewhere (a dataset links the licensed
    meshes it was prepared from), but never into :data:`SYSTEM_DIRS` (``/dev/shm``
    excepted).

    Args:
        root: the folder the file belongs to (a dataset's folder).
        relative: the path as the file gives it.
        where: the file and field, for messages.
        base: the folder ``relative`` is relative to (default ``root``; e.g. the folder of
            the config file naming it), inside ``root``.

    Returns:
        The path, absolute and normalised (symbolic links kept).

    Raises:
        FileContentError: naming ``where``, the path and what is allowed.
    """
    relative_to = base
    base = Path(os.path.abspath(root))
    text = repr(relative)
    if len(text) > 120:
        text = f"{text[:100]}... ({len(text)} characters)"
    if not isinstance(relative, str) or not relative or "\0" in relative:
        raise FileContentError(f"{where}: the path {text} is not a file path")
    if os.path.isabs(relative) or "://" in relative or relative.startswith("~"):
        raise FileContentError(
            f"{where}: the path {text} must be relative to {base} and stay inside it"
        )
    start = base if relative_to is None else Path(os.path.abspath(relative_to))
    target = Path(os.path.normpath(start / relative))
    if target != base and base not in target.parents:
        raise FileContentError(f"{where}: the path {text} leaves {base}; allowed: inside it")
    real = os.path.realpath(target)
    inside = [d for d in SYSTEM_DIRS if real == d or real.startswith(d + os.sep)]
    if inside and not real.startswith(_SHARED_MEMORY_DIR + os.sep):
        raise FileContentError(
            f"{where}: the path {text} leads into {real} (symbolic links resolved); allowed: "
            f"files outside {', '.join(SYSTEM_DIRS)}"
        )
    return target
