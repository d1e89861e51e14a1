"""The find -> navigate -> interact task: which episode, how it starts, when it ends.

:class:`FindNavInteractTask` owns the episode side of an env: the episode list and its order
(:class:`~humanclaw_gym.episodes.order.EpisodeOrder`), the reset options that choose an
episode, resolving an episode's goals against the loaded scene, the decision-step clock and
its limit, the public ``info`` and the ending rule (Stop ends the episode as an active stop
and executes no motion; the step limit truncates it). It knows nothing of physics,
rendering, observers or Gymnasium spaces: the env composes it with the simulation layer
(:class:`~humanclaw_gym.envs.simulation.Simulation`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from humanclaw_gym.episodes.instructions import apply_instruction_template
from humanclaw_gym.episodes.order import EpisodeOrder
from humanclaw_gym.episodes.resolve import resolve_episode
from humanclaw_gym.id_lists import check_id_list

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.episodes import Episode
    from humanclaw_gym.episodes.schema import InstructionTemplate
    from humanclaw_gym.scenes.spec import SceneSpec
    from humanclaw_gym.skills import SkillCall

__all__ = ["DEFAULT_MAX_STEPS", "RESET_OPTIONS", "FindNavInteractTask", "load_episodes"]

#: Decision steps of an episode that declares no limit of its own.
DEFAULT_MAX_STEPS = 100

#: Keys ``env.reset(options=...)`` accepts.
RESET_OPTIONS: tuple[str, ...] = ("episode_id", "scene_id")


def load_episodes(
    split: str | os.PathLike[str],
    episodes: Sequence[Episode] | str | os.PathLike[str] | None = None,
    episode_ids: Sequence[str] | None = None,
    instruction_template: InstructionTemplate | None = None,
) -> list[Episode]:
    """The episode list of an env: ``episodes`` (records, or a split path like ``split``)
    or the split ``split``, restricted to ``episode_ids`` in their order, with every
    instruction written by ``instruction_template`` when one is given.

    Raises:
        ValueError: an id not in the split, ``episode_ids`` not a list of id strings (a
            bare string is refused, not read as one id per character), or no episode.
    """
    from humanclaw_gym import episodes as episodes_mod

    if isinstance(episodes, (str, os.PathLike)):  # a split path: same as split=
        split, episodes = episodes, None
    chosen = list(episodes) if episodes is not None else episodes_mod.load_split(split)
    if episode_ids is not None:
        wanted = check_id_list(episode_ids, "episode_ids")
        by_id = {ep.episode_id: ep for ep in chosen}
        missing = [e for e in wanted if e not in by_id]
        if missing:
            raise ValueError(f"episode_ids not in split {split!r}: {missing[:5]}")
        chosen = [by_id[e] for e in wanted]
    if not chosen:
        raise ValueError(f"split {split!r} has no episodes")
    return apply_instruction_template(chosen, instruction_template)


class FindNavInteractTask:
    """Episode order, episode start, step clock and ending rule of one env.

    Args:
        episodes: the episodes this env may play (all shards).
        num_shards / shard_index: see :class:`~humanclaw_gym.episodes.order.EpisodeOrder`.
        max_steps: decision steps per episode; None takes each episode's own limit
            (``Episode.max_steps``, else :data:`DEFAULT_MAX_STEPS`).

    Raises:
        ValueError: ``max_steps`` is not an int >= 1, or the sharding is invalid.
    """

    def __init__(
        self,
        episodes: Sequence[Episode],
        num_shards: int = 1,
        shard_index: int | None = None,
        max_steps: int | None = None,
    ) -> None:
        if max_steps is not None and (
            not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
        ):
            raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
        self.order = EpisodeOrder(list(episodes), num_shards, shard_index)
        self._max_steps = max_steps
        self.episode: Episode | None = None
        self.step_count = 0
        self.last_call: SkillCall | None = None

    # ------------------------------------------------------------------------------------
    # choosing and starting an episode
    # ------------------------------------------------------------------------------------
    def choose(self, seed: int | None, options: Mapping[str, Any] | None) -> Episode:
        """The next episode for ``reset(seed=..., options=...)``.

        Raises:
            ValueError: options that are not a mapping of :data:`RESET_OPTIONS`, or an
                unknown episode / scene; nothing changed then.
        """
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(
                "reset options must be a mapping with keys from "
                f"{list(RESET_OPTIONS)}, e.g. {{'episode_id': 'hc_val_003_000'}}; "
                f"got {type(options).__name__} {options!r:.80}"
            )
        options = dict(options or {})
        unknown = set(options) - set(RESET_OPTIONS)
        if unknown:
            raise ValueError(
                f"unknown reset options {sorted(unknown)}; allowed: {', '.join(RESET_OPTIONS)}"
            )
        return self.order.next(seed, options)

    @staticmethod
    def resolve(episode: Episode, scene: SceneSpec) -> Episode:
        """``episode`` as played in its loaded ``scene``: the goals of imported episodes
        matched to the scene's objects (see :func:`~humanclaw_gym.episodes.resolve.
        resolve_episode`); changes nothing."""
        return resolve_episode(episode, scene)

    def begin(self, episode: Episode) -> None:
        """Make the (resolved) ``episode`` the current one, the step clock at 0."""
        self.episode = episode
        self.step_count = 0
        self.last_call = None

    @staticmethod
    def episode_seed(episode: Episode) -> int:
        """A stable per-episode seed for stochastic generators (independent of history)."""
        return zlib.crc32(f"{episode.scene_id}/{episode.episode_id}".encode())

    # ------------------------------------------------------------------------------------
    # the clock and the ending rule
    # ------------------------------------------------------------------------------------
    @staticmethod
    def executes_motion(call: SkillCall) -> bool:
        """Whether ``call`` runs motion: Stop is an active stop and executes none."""
        return not call.is_stop

    def advance(self, call: SkillCall) -> tuple[bool, bool]:
        """Count one executed decision.

        Returns:
            ``(terminated, truncated)``: terminated on Stop; truncated when the step limit
            is reached without a Stop.
        """
        self.step_count += 1
        self.last_call = call
        terminated = call.is_stop
        truncated = (not terminated) and self.step_count >= self.max_steps
        return terminated, truncated

    @property
    def max_steps(self) -> int:
        """Decision steps of the current episode."""
        if self._max_steps is not None:
            return self._max_steps
        return int(getattr(self.episode, "max_steps", DEFAULT_MAX_STEPS))

    def info(self) -> dict[str, Any]:
        """The public ``info`` of the current state (never hidden state)."""
        ep = self.episode
        if ep is None:
            raise RuntimeError("no episode has started")
        return {
            "instruction": ep.instruction,
            "episode_id": ep.episode_id,
            "scene_id": ep.scene_id,
            "target_category": ep.object_category,
            "interact": bool(ep.interact),
            "step": self.step_count,
            "max_steps": self.max_steps,
            "executed_skill": None if self.last_call is None else str(self.last_call),
        }
