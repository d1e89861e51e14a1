"""Demonstration data: recording episodes, verified reading, reproducible window batches.

* :class:`EpisodeRecorder` records single or vector env steps under a fixed byte budget and
  publishes each finished episode atomically as one NPZ file with a ``.done`` marker.
* :func:`read_episodes` yields validated :class:`Episode` objects (identity, step order,
  terminal boundary, observation continuity, SHA-256), optionally one shard of them and
  only the selected observation keys (:class:`EpisodeReadOptions`).
* :func:`window_batches` yields reproducible shuffled :class:`WindowBatch` objects of ego
  frame windows and skill targets.

The on-disk schema ``humanclaw_demos_v1`` is described in :mod:`humanclaw_gym.data.schema`
and ``docs/data.md``. Everything is plain numpy; importing this package loads no simulator
and never torch.
"""

from __future__ import annotations

from humanclaw_gym.data.batching import WindowBatch, window_batches
from humanclaw_gym.data.reader import (
    Episode,
    EpisodeReadOptions,
    list_episode_files,
    load_episode,
    read_episodes,
)
from humanclaw_gym.data.recorder import (
    DEFAULT_MAX_BUFFER_BYTES,
    EpisodeRecorder,
    RecorderFailedError,
)
from humanclaw_gym.data.schema import SCHEMA, ActionField, DatasetError, action_layout

__all__ = [
    "DEFAULT_MAX_BUFFER_BYTES",
    "SCHEMA",
    "ActionField",
    "DatasetError",
    "Episode",
    "EpisodeReadOptions",
    "EpisodeRecorder",
    "RecorderFailedError",
    "WindowBatch",
    "action_layout",
    "list_episode_files",
    "load_episode",
    "read_episodes",
    "window_batches",
]
