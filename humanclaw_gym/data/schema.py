"""On-disk schema ``humanclaw_demos_v1`` shared by the recorder and the readers.

One NPZ file holds one episode. Every per-step array has the step axis first (length
``T >= 1``); ``<key>`` below is an observation key (``ego_rgb`` for the env's image) or an
action-space key (whatever :func:`humanclaw_gym.skills.action_space` declares, read at run
time so that a renamed action entry needs no change here).

* ``obs_<key>``: the observation the decision of step t was made on, ``[T, ...]``, dtype
  as recorded (``uint8 [T, 448, 448, 3]`` for ``ego_rgb``);
* ``next_obs_<key>``: the observation that step returned, same shape and dtype;
* ``action_<key>``: one action-space entry per step: ``int64 [T]`` for a Discrete entry,
  ``float64 [T]`` for a Box of shape ``(1,)``, ``float64 [T, *shape]`` for other Boxes;
* ``action_text``: ``str [T]``, the SkillCall's text form (``Turn<left><30>``);
* ``policy_text`` / ``has_policy_text``: ``str [T]`` / ``bool [T]``, the policy's
  ``visible_state`` (``''`` and ``False`` when it gave none);
* ``step``: ``int64 [T]``, the env's decision-step counter, ``0 .. T-1``;
* ``terminated`` / ``truncated``: ``bool [T]``, only the last step may be True;
* ``episode_id`` / ``scene_id``: ``str [T]``, identity read from ``info`` at every step;
* ``metadata``: a 0-d ``str`` array holding JSON (schema, ids, instruction, target
  category, ``complete``, ``ended_by``, observation and action layouts, env id, ...).

Beside every published file ``episode_<scene>_<id>_<uuid>.npz`` sits its marker
``<file>.done``: a small JSON with the file's SHA-256 and size, written *after* the NPZ
is in place, so a file without a marker was never finished. Episodes that did not reach a
terminal step are written only as ``*.partial.npz`` (``complete: false``).

Everything here is plain numpy + the standard library; nothing imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from humanclaw_gym import fileio

__all__ = [
    "DEFAULT_IMAGE_KEY",
    "MARKER_SUFFIX",
    "PARTIAL_SUFFIX",
    "RUN_FILE",
    "SCHEMA",
    "ActionField",
    "DatasetError",
    "action_layout",
    "decode_action",
    "encode_action",
]

SCHEMA = "humanclaw_demos_v1"
"""Schema id written into every episode file, marker and ``run.json``."""

DEFAULT_IMAGE_KEY = "ego_rgb"
"""Observation key under which a plain-array observation (the ego image) is stored."""

RUN_FILE = "run.json"
MARKER_SUFFIX = ".done"
PARTIAL_SUFFIX = ".partial.npz"
EPISODE_PREFIX = "episode_"

_KEY_RE = re.compile(r"^[A-Za-z0-9_]+$")
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9.-]+")
_HASH_CHUNK_BYTES = 1 << 20


class DatasetError(ValueError):
    """A recorded episode file (or its marker) breaks the ``humanclaw_demos_v1`` contract.

    Attributes:
        path: the offending file.
        field: the array or metadata field that is wrong (``"sha256"``, ``"step"``, ...).
    """

    def __init__(self, path: str | os.PathLike[str], field: str, detail: str) -> None:
        self.path = Path(path)
        self.field = field
        super().__init__(f"{self.path.name}: {field}: {detail}")


# --------------------------------------------------------------------------------------
# Action layout: the action space flattened into fixed per-step columns
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActionField:
    """One entry of the action space as it is stored on disk.

    Attributes:
        key: action-space key (the array is ``action_<key>``).
        kind: ``"discrete"`` or ``"box"``.
        dtype: stored dtype name, ``"int64"`` or ``"float64"``.
        space_shape: shape of the entry inside the action space (``()`` for Discrete).
        stored_shape: per-step shape on disk: ``()`` for Discrete and for Box entries of
            shape ``(1,)``, else ``space_shape``.
        low / high: inclusive bounds (Discrete: ``0`` and ``n - 1``).
    """

    key: str
    kind: str
    dtype: str
    space_shape: tuple[int, ...]
    stored_shape: tuple[int, ...]
    low: float
    high: float

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "dtype": self.dtype,
            "space_shape": list(self.space_shape),
            "stored_shape": list(self.stored_shape),
            "low": self.low,
            "high": self.high,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ActionField:
        return cls(
            key=str(data["key"]),
            kind=str(data["kind"]),
            dtype=str(data["dtype"]),
            space_shape=tuple(int(v) for v in data["space_shape"]),
            stored_shape=tuple(int(v) for v in data["stored_shape"]),
            low=float(data["low"]),
            high=float(data["high"]),
        )


def action_layout() -> tuple[ActionField, ...]:
    """The stored columns of the current :func:`~humanclaw_gym.skills.action_space`.

    Read from the space itself (never from a hard-coded key list), in the space's key order.

    Raises:
        TypeError: the action space holds an entry that is neither Discrete nor Box.
    """
    from gymnasium import spaces

    from humanclaw_gym.skills import action_space

    space = action_space()
    fields: list[ActionField] = []
    for key, sub in space.spaces.items():
        if not _KEY_RE.match(key):
            raise ValueError(f"action-space key {key!r} is not usable as an array name")
        if isinstance(sub, spaces.Discrete):
            start = int(sub.start)
            fields.append(
                ActionField(
                    key, "discrete", "int64", (), (), float(start), float(start + sub.n - 1)
                )
            )
        elif isinstance(sub, spaces.Box):
            shape = tuple(int(v) for v in sub.shape)
            stored = () if shape == (1,) else shape
            fields.append(
                ActionField(
                    key,
                    "box",
                    "float64",
                    shape,
                    stored,
                    float(np.min(sub.low)),
                    float(np.max(sub.high)),
                )
            )
        else:
            raise TypeError(
                f"action-space entry {key!r} is {type(sub).__name__}; the recorder stores "
                "Discrete and Box entries only"
            )
    return tuple(fields)


def encode_action(call: Any, layout: tuple[ActionField, ...]) -> dict[str, np.ndarray]:
    """Flatten ``call.to_action()`` into one fixed-shape array per layout entry.

    Args:
        call: a :class:`~humanclaw_gym.skills.SkillCall`.
        layout: from :func:`action_layout`.

    Returns:
        ``{key: array}`` with each array of the entry's ``stored_shape`` and ``dtype``.

    Raises:
        ValueError: ``to_action()`` produced keys that differ from the layout.
    """
    encoded = call.to_action()
    want = [f.key for f in layout]
    if sorted(encoded) != sorted(want):
        raise ValueError(
            f"SkillCall.to_action() keys {sorted(encoded)} differ from the action space keys "
            f"{sorted(want)}; create the recorder after the action encoding is settled"
        )
    out: dict[str, np.ndarray] = {}
    for field in layout:
        value = np.asarray(encoded[field.key], dtype=field.dtype)
        out[field.key] = value.reshape(field.stored_shape)
    return out


def decode_action(
    columns: Mapping[str, np.ndarray], t: int, layout: tuple[ActionField, ...]
) -> dict[str, Any]:
    """Rebuild the action-space element of step ``t`` from stored columns.

    Discrete entries become ``np.int64`` scalars, Box entries arrays of ``space_shape``, so
    the result can be passed to :meth:`SkillCall.from_action` or ``action_space().contains``.
    """
    out: dict[str, Any] = {}
    for field in layout:
        value = columns[field.key][t]
        if field.kind == "discrete":
            out[field.key] = np.int64(value)
        else:
            out[field.key] = np.asarray(value, dtype=np.float64).reshape(field.space_shape)
    return out


# --------------------------------------------------------------------------------------
# Names and files
# --------------------------------------------------------------------------------------


def check_key(name: str, what: str) -> str:
    """Return ``name`` if it is a usable array-name part, else raise ValueError."""
    if not isinstance(name, str) or not _KEY_RE.match(name):
        raise ValueError(
            f"{what}={name!r} is not allowed: use a non-empty name of letters, digits and '_'"
        )
    return name


def safe_name_part(text: str) -> str:
    """Make an id usable inside a file name (runs of unsafe characters become ``-``)."""
    cleaned = _UNSAFE_NAME_CHARS.sub("-", str(text)).strip("-.")
    return cleaned[:80] or "x"


def marker_path(npz_path: Path) -> Path:
    """The completion marker beside an episode file."""
    return npz_path.with_name(npz_path.name + MARKER_SUFFIX)


def is_partial_name(name: str) -> bool:
    return name.endswith(PARTIAL_SUFFIX)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write a file through ``write(handle)`` atomically (see :mod:`humanclaw_gym.fileio`):
    on any error the target is left as it was and no temp file remains."""
    with fileio.atomic_path(path) as tmp, open(tmp, "wb") as handle:
        write(handle)


def atomic_write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON (sorted keys) atomically (temp file + rename)."""
    fileio.write_json_atomic(path, data, sort_keys=True)


def write_episode_file(
    path: Path,
    arrays: Mapping[str, np.ndarray],
    metadata: Mapping[str, Any],
    *,
    compress: bool = True,
) -> dict[str, Any]:
    """Publish one episode file and then its marker; return the marker contents.

    The NPZ is written to a temp file, fsynced and renamed into place; only then is its
    SHA-256 computed from disk and the ``.done`` marker written (atomically as well). A
    crash at any point leaves either nothing, a temp file, or an NPZ without a marker;
    readers ignore all three.
    """
    members = dict(arrays)
    members["metadata"] = np.array(json.dumps(dict(metadata), sort_keys=True))
    saver = np.savez_compressed if compress else np.savez
    atomic_write(path, lambda handle: saver(handle, **members))
    marker = {
        "schema": SCHEMA,
        "file": path.name,
        "sha256": sha256_file(path),
        "size_bytes": path.stat().st_size,
        "episode_id": metadata.get("episode_id"),
        "scene_id": metadata.get("scene_id"),
        "num_steps": metadata.get("num_steps"),
        "complete": bool(metadata.get("complete")),
    }
    atomic_write_json(marker_path(path), marker)
    return marker
