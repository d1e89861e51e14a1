"""One read of a body folder per process: :func:`cached_body_asset`.

:func:`~humanclaw_gym.body.asset.load_body_asset` reads and hashes every file of a body
folder (the release's bodies: dozens of meshes). A configuration names the folder once, but
several parts of a run need the body: the configuration check, the simulation (drawing,
cameras, metrics) and each physics backend it builds, in every env of a process (vector
envs). They all call :func:`cached_body_asset`, which reads a folder once and hands out the
same read-only :class:`~humanclaw_gym.body.asset.BodyAsset` while the folder is unchanged.

"Unchanged" is judged without reading: the key is the path as given (resolved) and the
size, modification time (ns) and inode of the folder and of every file the body is made
of (:attr:`BodyAsset.files`); any difference reads the folder again. A failed read is not
cached (the next call fails the same way, naming the file). The few most recently used
bodies are kept.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.body.asset import BodyAsset

__all__ = ["cached_body_asset", "clear_body_asset_cache"]

#: How many bodies the cache keeps (least recently used dropped first).
_KEEP = 4

_Stamp = tuple[tuple[str, int, int, int], ...]
_CACHE: OrderedDict[str, tuple[BodyAsset, _Stamp]] = OrderedDict()
_LOCK = threading.Lock()


def _stamp(asset: BodyAsset) -> _Stamp | None:
    """Size, mtime and inode of the body's folder and files; None when one is gone."""
    paths = [asset.path, asset.urdf_path, *(asset.path / rel for rel in sorted(asset.files))]
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        out.append((str(path), st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def cached_body_asset(path: str | os.PathLike[str]) -> BodyAsset:
    """The :class:`~humanclaw_gym.body.asset.BodyAsset` of ``path`` (a body folder or its
    URDF), read by :func:`~humanclaw_gym.body.asset.load_body_asset` the first time and
    whenever the folder's files changed since (see the module docstring).

    Raises:
        BodyAssetError: the folder cannot be read (one line naming the file).
    """
    from humanclaw_gym.body import asset as asset_module

    key = os.path.realpath(Path(os.fspath(path)).expanduser())
    with _LOCK:
        held = _CACHE.get(key)
        if held is not None and _stamp(held[0]) == held[1]:
            _CACHE.move_to_end(key)
            return held[0]
        body = asset_module.load_body_asset(path)
        stamp = _stamp(body)
        if stamp is not None:
            _CACHE[key] = (body, stamp)
            _CACHE.move_to_end(key)
            while len(_CACHE) > _KEEP:
                _CACHE.popitem(last=False)
        return body


def clear_body_asset_cache() -> None:
    """Forget every cached body (the next call reads its folder again)."""
    with _LOCK:
        _CACHE.clear()
