"""Reproducible, shuffled training batches of ego-frame windows (plain numpy, no torch).

:func:`window_batches` turns a recorded dataset into :class:`WindowBatch` objects: for each
recorded step ``t`` a window of the ``history`` ego frames ending at ``t`` (padded at the
episode start by repeating the first frame, with a mask saying which frames are real) and
the targets of step ``t``: the action-space columns of its SkillCall, its text, and the
episode's instruction and target category.

Reproducibility: with the same files, read options and arguments the batches are
identical. All randomness comes from one local ``numpy.random.Generator`` seeded from
``(seed, epoch, shard_index, num_shards)``; the global NumPy RNG is never touched. A
different ``epoch`` gives a different stream (small datasets may still happen to produce
the same order). Tensor conversion, device transfer and tokenisation belong to the training
adapter.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from humanclaw_gym.data.reader import (
    Episode,
    EpisodeReadOptions,
    list_episode_files,
    load_episode,
)
from humanclaw_gym.data.schema import DEFAULT_IMAGE_KEY, DatasetError

__all__ = ["WindowBatch", "window_batches"]


@dataclass(frozen=True)
class WindowBatch:
    """A batch of ``B`` windows; every array is freshly allocated and owned by the caller.

    Attributes:
        frames: ``[B, history, *frame_shape]`` (``uint8 [B, history, 448, 448, 3]`` for the
            ego camera); oldest frame first, the decision frame last.
        frame_mask: ``bool [B, history]``; False marks padding (a repeat of the episode's
            first frame before the episode started).
        actions: ``{action key: [B] or [B, *shape]}``, the decision's action columns.
        action_text: the decision's SkillCall text per sample.
        instruction: the episode instruction per sample.
        target_category: the episode's target category per sample.
        category_index: ``int64 [B]``, index of ``target_category`` in
            :data:`humanclaw_gym.scenes.spec.TARGET_CATEGORIES`.
        episode_id / scene_id: where each sample comes from.
        step: ``int64 [B]``, the step index of the decision inside its episode.
    """

    frames: np.ndarray
    frame_mask: np.ndarray
    actions: Mapping[str, np.ndarray]
    action_text: tuple[str, ...]
    instruction: tuple[str, ...]
    target_category: tuple[str, ...]
    category_index: np.ndarray
    episode_id: tuple[str, ...]
    scene_id: tuple[str, ...]
    step: np.ndarray

    def __len__(self) -> int:
        return int(self.frames.shape[0])

    @property
    def skill(self) -> np.ndarray:
        """``int64 [B]``: the skill id of each decision (``actions["skill"]``)."""
        return self.actions["skill"]


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}={value!r} must be an int >= {minimum}")
    if value < minimum:
        raise ValueError(f"{name}={value!r} is out of range: allowed {name} >= {minimum}")
    return int(value)


def window_batches(
    path: str | os.PathLike[str],
    history: int,
    batch_size: int,
    shuffle_buffer: int = 0,
    seed: int = 0,
    epoch: int = 0,
    drop_last: bool = False,
    options: EpisodeReadOptions | None = None,
    *,
    image_key: str = DEFAULT_IMAGE_KEY,
) -> Iterator[WindowBatch]:
    """Yield batches of frame windows and skill targets from a recorded dataset.

    Args:
        path: dataset directory (or one episode file).
        history: frames per window (>= 1); the last one is the decision frame.
        batch_size: samples per batch (>= 1).
        shuffle_buffer: 0 keeps file and step order. A positive value shuffles the order
            of this shard's episode files and then mixes windows through a buffer holding
            at most that many windows: a bounded shuffle, uniform only when the buffer can
            hold the whole shard. Memory: up to ``shuffle_buffer + batch_size`` windows of
            ``history`` frames plus one decoded episode.
        seed / epoch: together with the shard they seed the local random generator.
        drop_last: drop this shard's final batch when it is smaller than ``batch_size``.
        options: read options (sharding, partial files). ``observation_keys`` ``None``
            becomes ``(image_key,)``; an explicit selection must contain ``image_key``.
        image_key: the observation key the frames come from.

    Raises:
        TypeError / ValueError: an argument is invalid (checked before any file access).
        DatasetError: a file breaks the contract, misses ``image_key``, has an unknown
            target category, or its frames differ in shape/dtype from the batch's.
    """
    history = _check_int("history", history, 1)
    batch_size = _check_int("batch_size", batch_size, 1)
    shuffle_buffer = _check_int("shuffle_buffer", shuffle_buffer, 0)
    seed = _check_int("seed", seed, 0)
    epoch = _check_int("epoch", epoch, 0)
    if not isinstance(drop_last, bool):
        raise TypeError(f"drop_last={drop_last!r} must be a bool")
    if not isinstance(image_key, str) or not image_key:
        raise TypeError(f"image_key={image_key!r} must be a non-empty str")
    options = options or EpisodeReadOptions()
    if options.observation_keys is None:
        options = replace(options, observation_keys=(image_key,))
    elif image_key not in options.observation_keys:
        raise ValueError(
            f"options.observation_keys={options.observation_keys!r} must contain "
            f"image_key={image_key!r}"
        )
    return _generate(
        path, history, batch_size, shuffle_buffer, seed, epoch, drop_last, options, image_key
    )


def _generate(
    path: str | os.PathLike[str],
    history: int,
    batch_size: int,
    shuffle_buffer: int,
    seed: int,
    epoch: int,
    drop_last: bool,
    options: EpisodeReadOptions,
    image_key: str,
) -> Iterator[WindowBatch]:
    rng = np.random.default_rng([seed, epoch, options.shard_index, options.num_shards])
    files = list_episode_files(path, options)
    if shuffle_buffer > 0:
        files = [files[int(i)] for i in rng.permutation(len(files))]

    def samples() -> Iterator[dict[str, Any]]:
        for file in files:
            yield from _episode_windows(load_episode(file, options), history, image_key)

    stream = samples() if shuffle_buffer == 0 else _shuffled(samples(), shuffle_buffer, rng)
    pending: list[dict[str, Any]] = []
    for sample in stream:
        pending.append(sample)
        if len(pending) == batch_size:
            yield _collate(pending)
            pending = []
    if pending and not drop_last:
        yield _collate(pending)


def _shuffled(
    source: Iterator[dict[str, Any]], capacity: int, rng: np.random.Generator
) -> Iterator[dict[str, Any]]:
    """Bounded shuffle: emit a random buffered sample for each new one, then drain randomly."""
    buffer: list[dict[str, Any]] = []
    for sample in source:
        if len(buffer) < capacity:
            buffer.append(sample)
            continue
        j = int(rng.integers(capacity))
        yield buffer[j]
        buffer[j] = sample
    for j in rng.permutation(len(buffer)):
        yield buffer[int(j)]


def _episode_windows(episode: Episode, history: int, image_key: str) -> Iterator[dict[str, Any]]:
    from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

    category = episode.target_category
    if category not in TARGET_CATEGORIES:
        raise DatasetError(
            episode.path,
            "metadata.target_category",
            f"{category!r} is not one of {TARGET_CATEGORIES}",
        )
    category_index = TARGET_CATEGORIES.index(category)
    frames = episode.observations[image_key]
    offsets = np.arange(-history + 1, 1)
    for t in range(len(episode)):
        indices = t + offsets
        yield {
            "frames": frames[np.maximum(indices, 0)],  # fancy indexing copies
            "mask": indices >= 0,
            "actions": {k: np.array(v[t]) for k, v in episode.actions.items()},
            "action_text": episode.action_text[t],
            "instruction": episode.instruction,
            "target_category": category,
            "category_index": category_index,
            "episode_id": episode.episode_id,
            "scene_id": episode.scene_id,
            "step": int(episode.step[t]),
            "path": episode.path,
        }


def _collate(samples: list[dict[str, Any]]) -> WindowBatch:
    first = samples[0]
    for sample in samples[1:]:
        a, b = first["frames"], sample["frames"]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise DatasetError(
                sample["path"],
                "frames",
                f"windows of {b.dtype}{b.shape} cannot share a batch with {a.dtype}{a.shape} "
                f"from {first['path'].name}",
            )
        if sorted(sample["actions"]) != sorted(first["actions"]):
            raise DatasetError(
                sample["path"],
                "actions",
                f"action keys {sorted(sample['actions'])} differ from {sorted(first['actions'])} "
                f"of {first['path'].name}",
            )
    return WindowBatch(
        frames=np.stack([s["frames"] for s in samples]),
        frame_mask=np.stack([s["mask"] for s in samples]),
        actions={k: np.stack([s["actions"][k] for s in samples]) for k in first["actions"]},
        action_text=tuple(s["action_text"] for s in samples),
        instruction=tuple(s["instruction"] for s in samples),
        target_category=tuple(s["target_category"] for s in samples),
        category_index=np.array([s["category_index"] for s in samples], dtype=np.int64),
        episode_id=tuple(s["episode_id"] for s in samples),
        scene_id=tuple(s["scene_id"] for s in samples),
        step=np.array([s["step"] for s in samples], dtype=np.int64),
    )
