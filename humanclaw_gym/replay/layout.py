"""Where the recording wrappers put the files of each episode.

:class:`~humanclaw_gym.wrappers.VideoWrapper` and
:class:`~humanclaw_gym.wrappers.TrajectoryWrapper` write one set of files per episode. An
``episode_dir_fn(episode, index) -> path`` decides the directory: ``episode`` is the
episode record of the ``ResetEvent``, ``index`` counts the episodes this wrapper saw
(0-based). A relative result is taken relative to the wrapper's ``output_dir``.

* Default (:func:`per_episode_dir`): ``<output_dir>/<index:04d>_<scene_id>_<episode_id>``,
  so an ``output_dir`` reused for many episodes never mixes or overwrites them. Both
  wrappers on the same env with the same ``output_dir`` pick the same subdirectory.
* :func:`flat_dir`: ``<output_dir>`` itself, for callers that make one directory per
  rollout (each new episode overwrites the previous one's files).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["EpisodeDirFn", "flat_dir", "per_episode_dir", "resolve_episode_dir", "safe_name"]

EpisodeDirFn = Callable[[Any, int], "str | os.PathLike[str]"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: Any) -> str:
    """A file-name-safe version of ``text`` (runs of other characters become ``_``)."""
    cleaned = _UNSAFE.sub("_", str(text)).strip("._")
    return cleaned or "unnamed"


def per_episode_dir(episode: Any, index: int) -> str:
    """``<index:04d>_<scene_id>_<episode_id>`` (the default layout)."""
    scene = safe_name(getattr(episode, "scene_id", "scene"))
    ep = safe_name(getattr(episode, "episode_id", "episode"))
    return f"{index:04d}_{scene}_{ep}"


def flat_dir(episode: Any, index: int) -> str:
    """Every episode writes straight into ``output_dir``."""
    return "."


def resolve_episode_dir(
    output_dir: str | os.PathLike[str], fn: EpisodeDirFn | None, episode: Any, index: int
) -> Path:
    """Apply ``fn`` (default :func:`per_episode_dir`) and anchor a relative result at
    ``output_dir``."""
    chosen = Path((fn or per_episode_dir)(episode, index))
    path = chosen if chosen.is_absolute() else Path(output_dir) / chosen
    return Path(os.path.normpath(path))
