"""The env's action space and its batched form for vector envs.

:class:`SkillActionSpace` is the ``Dict`` encoding of a SkillCall (:func:`humanclaw_gym.
skills.action_space`, unchanged). Being its own class only changes how Gymnasium batches
it for a vector env: :func:`~gymnasium.vector.utils.batch_space` turns it into a
:class:`BatchedSkillActionSpace`, whose :func:`~gymnasium.vector.utils.iterate` accepts
either the batched ``Dict`` (each entry stacked along a first axis of length N) or a
list/tuple of N per-sub-env actions (SkillCalls, texts, JSON or ``Dict`` encodings, or
policy Decisions), every entry validated before any sub-env steps. Both registrations are
made when this module is imported, which the env does, so they hold in every vectorization
mode (this package's vector entry point and Gymnasium's own ``"sync"`` / ``"async"``).

This module imports Gymnasium; :mod:`humanclaw_gym.skills` does not import it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, iterate

from humanclaw_gym.skills.call import SkillCall, action_space
from humanclaw_gym.skills.errors import SkillCallError, SkillCallTypeError

__all__ = [
    "BatchedSkillActionSpace",
    "SkillActionSpace",
    "per_env_actions",
    "skill_action_space",
    "validated_action",
]


class SkillActionSpace(spaces.Dict):
    """The env's action space: the ``Dict`` encoding of a SkillCall
    (:func:`humanclaw_gym.skills.action_space`, unchanged). Being its own class only changes
    how vector envs batch it: into a :class:`BatchedSkillActionSpace`."""


class BatchedSkillActionSpace(spaces.Dict):
    """The action space of a vector env of N HumanClaw envs: the batched ``Dict`` (entries
    stacked along a first axis of length N); ``iterate`` also accepts a list/tuple of N
    per-sub-env actions (SkillCalls, texts, Decisions or per-env Dict encodings)."""

    num_envs: int = 1


def skill_action_space(seed: int | None = None) -> SkillActionSpace:
    """A new :class:`SkillActionSpace` with the entries of the skill table."""
    base = action_space()
    return SkillActionSpace(dict(base.spaces), seed=seed, sort_keys=False)


@batch_space.register(SkillActionSpace)
def _batch_skill_space(space: SkillActionSpace, n: int = 1) -> BatchedSkillActionSpace:
    batched = BatchedSkillActionSpace(
        {key: batch_space(sub, n=n) for key, sub in space.spaces.items()}, sort_keys=False
    )
    batched.num_envs = int(n)
    return batched


@iterate.register(BatchedSkillActionSpace)
def _iterate_skill_actions(space: BatchedSkillActionSpace, items: Any) -> Any:
    if isinstance(items, (list, tuple)) or (
        isinstance(items, np.ndarray) and items.dtype == object and items.ndim == 1
    ):
        return iter(per_env_actions(items, space.num_envs))
    return iterate.dispatch(spaces.Dict)(space, items)


def validated_action(action: Any) -> Any:
    """One env action, validated: a :class:`SkillCall`, or a policy ``Decision`` as it is.

    A Decision (:class:`humanclaw_gym.policy.Decision`, recognised as an object whose
    ``action`` attribute is a SkillCall) was validated when it was made; every other form
    goes through :meth:`SkillCall.coerce`. The env and the vector envs call this once per
    action; what they pass on is never validated again.

    Raises:
        SkillCallError: an invalid action; ``SkillCallTypeError`` (also a ``TypeError``)
            for an object of an unsupported type.
    """
    if isinstance(getattr(action, "action", None), SkillCall):
        return action
    return SkillCall.coerce(action)


def per_env_actions(items: Any, num_envs: int) -> list[Any]:
    """Validate a list of per-sub-env actions; returns one SkillCall or Decision per sub-env.

    Raises:
        ValueError: the list does not hold exactly ``num_envs`` actions.
        SkillCallError: an invalid action (the message names its index); for an entry of
            an unsupported type a ``SkillCallTypeError`` (also a ``TypeError``).
    """
    items = list(items)
    if len(items) != num_envs:
        raise ValueError(
            f"a list of actions needs one action per sub-env: {num_envs} expected, got {len(items)}"
        )
    out: list[Any] = []
    for i, item in enumerate(items):
        try:
            out.append(validated_action(item))
        except SkillCallError as exc:
            cls = SkillCallTypeError if isinstance(exc, TypeError) else SkillCallError
            raise cls(
                exc.field, exc.value, exc.allowed, skill=exc.skill, message=f"actions[{i}]: {exc}"
            ) from exc
    return out
