"""Which episode comes next: shards, the seeded scene-grouped order, explicit choices.

One rule orders episodes everywhere (the env's resets, the vector env's sub-envs, the
benchmark server's declared plan): scenes, sorted by id, are permuted by
``numpy.random.default_rng(seed)``, and the episodes of one scene stay together in their
split order, so a scene is built once per pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["EpisodeOrder", "scene_grouped_order"]


def scene_grouped_order(scene_ids: Sequence[str], seed: int) -> list[int]:
    """Indices into ``scene_ids`` in play order for ``seed``.

    Scenes (sorted by id) are permuted by ``numpy.random.default_rng(seed)``; the items of
    one scene stay together and keep their input order.

    Args:
        scene_ids: scene id of every item, in split order.
        seed: the order seed (any int >= 0).

    Returns:
        A permutation of ``range(len(scene_ids))``.
    """
    groups: dict[str, list[int]] = {}
    for i, scene in enumerate(scene_ids):
        groups.setdefault(scene, []).append(i)
    keys = sorted(groups)
    rng = np.random.default_rng(seed)
    return [i for k in rng.permutation(len(keys)) for i in groups[keys[int(k)]]]


class EpisodeOrder:
    """The episode order of one env (one shard of a vector env).

    Args:
        episodes: the episode records (anything with ``episode_id`` and ``scene_id``).
        num_shards: how many disjoint shards the list is split into (sub-env count).
        shard_index: this env's shard; ``None`` takes shard ``seed mod num_shards`` at a
            seeded reset (shard 0 before any seed).

    Without a seed, episodes come in split order (of the shard), cycling. ``next(seed=s)``
    restarts at the start of the seeded order. A choice that fails (unknown episode or
    scene) raises ``ValueError`` and changes nothing.
    """

    def __init__(
        self, episodes: Sequence[Any], num_shards: int = 1, shard_index: int | None = None
    ) -> None:
        if not isinstance(num_shards, int) or isinstance(num_shards, bool) or num_shards < 1:
            raise ValueError(f"num_shards must be an int >= 1, got {num_shards!r}")
        if shard_index is not None and not (0 <= shard_index < num_shards):
            raise ValueError(f"shard_index must be in 0..{num_shards - 1}, got {shard_index!r}")
        self._episodes = list(episodes)
        self.num_shards = num_shards
        self.shard_index = shard_index
        self._order: list[int] | None = None
        self._cursor = 0

    @property
    def all_episodes(self) -> list[Any]:
        """Every episode given (all shards), in split order."""
        return self._episodes

    def shard_indices(self, shard: int | None = None) -> list[int]:
        """Indices of the episodes of ``shard`` (default: this env's shard), split order."""
        shard = self.shard_index if shard is None else shard
        idx = list(range(len(self._episodes)))
        if self.num_shards > 1:
            idx = idx[(shard or 0) :: self.num_shards]
        return idx

    def episodes(self) -> tuple[Any, ...]:
        """This shard's episodes in split order."""
        return tuple(self._episodes[i] for i in self.shard_indices())

    def order_for_seed(self, seed: int) -> list[int]:
        """Episode indices, in play order, after a reset with ``seed``: this env's shard
        (``seed mod num_shards`` when no shard index was given), scene-grouped order."""
        shard = self.shard_index
        if shard is None and self.num_shards > 1:
            shard = seed % self.num_shards
        indices = self.shard_indices(shard)
        order = scene_grouped_order([self._episodes[i].scene_id for i in indices], seed)
        return [indices[j] for j in order]

    def episodes_for_seed(self, seed: int) -> tuple[Any, ...]:
        """The episodes, in order, that resets after ``reset(seed=seed)`` will play."""
        return tuple(self._episodes[i] for i in self.order_for_seed(int(seed)))

    def next(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> Any:
        """The episode a reset plays.

        Args:
            seed: restart the seeded order (``None``: continue the current order).
            options: ``episode_id`` (any episode of the list, optionally narrowed by
                ``scene_id``; the order is not advanced) or ``scene_id`` (the first
                episode of that scene in the current order; not advanced).

        Raises:
            ValueError: no episode matches; nothing changed.
        """
        options = options or {}
        episode_id = options.get("episode_id")
        scene_id = options.get("scene_id")
        if episode_id is not None:
            for ep in self._episodes:
                if ep.episode_id == str(episode_id) and scene_id in (None, ep.scene_id):
                    return ep
            raise ValueError(f"options['episode_id']={episode_id!r} is not in this env's episodes")
        if seed is not None:
            order, cursor = self.order_for_seed(int(seed)), 0
        elif self._order is None:
            order, cursor = self.shard_indices(), 0
        else:
            order, cursor = self._order, self._cursor
        if scene_id is not None:
            candidates = [i for i in order if self._episodes[i].scene_id == scene_id]
            if not candidates:
                raise ValueError(f"options['scene_id']={scene_id!r} has no episodes in this env")
            self._order, self._cursor = order, cursor
            return self._episodes[candidates[0]]
        self._order, self._cursor = order, cursor + 1
        return self._episodes[order[cursor % len(order)]]
