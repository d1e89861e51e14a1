"""Action adapters for learning libraries: the skill table as a ``Discrete`` or
``MultiDiscrete`` action space.

The env's own action space is a Gymnasium ``Dict`` (every element a valid SkillCall), which
most RL libraries cannot use (Stable-Baselines3 takes Box, Discrete, MultiDiscrete and
MultiBinary only). These wrappers put a finite menu of SkillCalls in front of it:

* :class:`DiscreteSkills`: ``Discrete(N)``, action ``i`` is ``menu[i]``. The default menu
  (:func:`skill_menu`) has every registered skill with every word parameter value and
  each number parameter on an evenly spaced grid from its low to its high end (both ends
  included; ``points=3`` by default), so it covers every skill, custom ones included.
  With the built-in skills and ``points=3`` it has 24 entries: Walk slow/normal/fast,
  Stop/Stand, Turn left/right 10/65/120 degrees, Climb upstairs, Sit down 0.15/0.5/0.85 m,
  Step back 0.1/0.35/0.6 m, Side step left/right 0.1/0.3/0.5 m, Walk downstairs. Or give
  your own list of SkillCalls / texts.
* :class:`MultiDiscreteSkills`: ``MultiDiscrete([skills, *entries])``: the skill id and one
  index per entry of the env's ``Dict`` action space (word entries: one index per word;
  number entries: ``bins`` evenly spaced values, ends included). Like the ``Dict`` space,
  each skill reads only its own entries, so every element is a valid action.

Both translate an action to a :class:`~humanclaw_gym.skills.SkillCall` before the env sees
it (:meth:`to_skill_call`), translate back (:meth:`from_skill_call`, exact: a call that is
not on the menu or grid raises instead of being snapped), and list the menu in the reset
``info`` under ``"action_menu"``. Invalid actions raise
:class:`~humanclaw_gym.skills.SkillCallError` (a ``ValueError``) naming the field and the
allowed range, before the env changes. The menus are read from the skill table
(:func:`~humanclaw_gym.skills.skill_specs`, :func:`~humanclaw_gym.skills.action_fields`)
when the wrapper is made: register custom skills first.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from humanclaw_gym.skills import (
    Choice,
    Range,
    Skill,
    SkillCall,
    SkillCallError,
    action_fields,
    skill_specs,
)

__all__ = ["DiscreteSkills", "MultiDiscreteSkills", "parameter_grid", "skill_menu"]

_DECIMALS = 6  # grid values are rounded so that their text form stays short and exact


def parameter_grid(rule: Choice | Range, points: int) -> tuple[Any, ...]:
    """The values of one parameter rule on a menu: every word of a :class:`Choice`;
    ``points`` evenly spaced numbers of a :class:`Range` from ``low`` to ``high`` (both
    included, rounded to 6 decimals; ``points=1`` gives the rule's default, or its
    middle)."""
    if isinstance(rule, Choice):
        return tuple(rule.values)
    if points == 1:
        middle = rule.default if rule.default is not None else 0.5 * (rule.low + rule.high)
        return (round(float(middle), _DECIMALS),)
    return tuple(round(float(v), _DECIMALS) for v in np.linspace(rule.low, rule.high, points))


def _check_points(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} is invalid: allowed an int >= 1")
    return int(value)


def skill_menu(points: int = 3) -> tuple[SkillCall, ...]:
    """The default menu of :class:`DiscreteSkills`: every registered skill, in id order,
    with every combination of its parameters on :func:`parameter_grid` (``points`` values
    per number parameter).

    Raises:
        ValueError: ``points`` is not an int >= 1.
    """
    points = _check_points("points", points)
    menu: list[SkillCall] = []
    for spec in skill_specs():
        names = list(spec.params)
        grids = [parameter_grid(spec.params[name], points) for name in names]
        for values in itertools.product(*grids):
            menu.append(SkillCall(Skill(spec.id), **dict(zip(names, values, strict=True))))
    return tuple(menu)


def _index(field: str, value: Any, count: int) -> int:
    """An integer action index in ``0..count-1`` (Python/numpy int or a 1-element int array)."""
    allowed = f"an integer in 0..{count - 1}"
    if isinstance(value, (bool, np.bool_)):
        raise SkillCallError(field, value, allowed, reason="is a bool, not an integer")
    array = np.asarray(value) if not isinstance(value, int) else None
    if array is not None:
        if array.size != 1 or array.dtype.kind not in "iu":
            raise SkillCallError(field, value, allowed, reason="is not an integer scalar")
        value = int(array.reshape(()))
    if not 0 <= value < count:
        raise SkillCallError(field, value, allowed, reason="is out of range")
    return int(value)


class DiscreteSkills(gym.ActionWrapper):
    """``Discrete(len(menu))`` actions: action ``i`` executes ``menu[i]``.

    Args:
        env: a ``HumanClawFindNavInteract-v0`` env (or a wrapper of it).
        menu: SkillCalls or their text forms; default :func:`skill_menu` with ``points``.
        points: values per number parameter of the default menu.

    Attributes:
        menu: the SkillCalls, index = action.

    Raises:
        ValueError: an empty menu, an entry listed twice, ``points`` < 1.
        SkillCallError: an invalid menu entry (naming its index).
    """

    def __init__(
        self, env: gym.Env, menu: Sequence[SkillCall | str] | None = None, points: int = 3
    ) -> None:
        super().__init__(env)
        if menu is None:
            calls = skill_menu(points)
        else:
            if isinstance(menu, (str, SkillCall)) or not isinstance(menu, Sequence):
                raise ValueError("menu must be a list of SkillCalls or texts")
            calls = []
            for i, entry in enumerate(menu):
                try:
                    calls.append(SkillCall.coerce(entry))
                except (SkillCallError, TypeError) as exc:
                    raise SkillCallError(
                        "menu", entry, "a SkillCall or its text", message=f"menu[{i}]: {exc}"
                    ) from exc
            calls = tuple(calls)
        if not calls:
            raise ValueError("menu must hold at least one SkillCall")
        seen: dict[SkillCall, int] = {}
        for i, call in enumerate(calls):
            if call in seen:
                raise ValueError(f"menu[{i}]={str(call)!r} repeats menu[{seen[call]}]")
            seen[call] = i
        self.menu: tuple[SkillCall, ...] = tuple(calls)
        self._index_of = seen
        self.action_space = spaces.Discrete(len(self.menu))

    def to_skill_call(self, action: Any) -> SkillCall:
        """The SkillCall of a ``Discrete`` action.

        Raises:
            SkillCallError: ``field="action"`` for anything but an integer in range.
        """
        return self.menu[_index("action", action, len(self.menu))]

    def from_skill_call(self, call: SkillCall | str) -> int:
        """The action of a SkillCall (or its text) on the menu.

        Raises:
            SkillCallError: the call is not on the menu.
        """
        call = SkillCall.coerce(call)
        if call not in self._index_of:
            raise SkillCallError(
                "action", str(call), f"one of the {len(self.menu)} menu entries (info['action_menu'])",
                reason="is not on the menu",
            )  # fmt: skip
        return self._index_of[call]

    def action(self, action: Any) -> SkillCall:
        return self.to_skill_call(action)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        info = dict(info)
        info["action_menu"] = tuple(str(call) for call in self.menu)
        return obs, info


class MultiDiscreteSkills(gym.ActionWrapper):
    """``MultiDiscrete`` actions ``[skill, entry_1, ..., entry_K]`` (see the module docstring).

    Dimension 0 is the skill id; dimension ``k >= 1`` indexes the values of the env's
    ``Dict`` action entry :attr:`dims` ``[k]`` (``speed``, ``direction``, ``angle_deg``,
    ``step_back_m``, ``side_step_m``, ``height_m`` for the built-in skills). A skill reads
    only its own entries; the others are ignored.

    Args:
        env: a ``HumanClawFindNavInteract-v0`` env (or a wrapper of it).
        bins: values per number entry (evenly spaced, ends included).

    Attributes:
        dims: the name of each dimension (``"skill"`` first).
        grids: the values of each dimension (skill text names for ``"skill"``).
    """

    def __init__(self, env: gym.Env, bins: int = 5) -> None:
        super().__init__(env)
        bins = _check_points("bins", bins)
        self.bins = bins
        self._specs = skill_specs()
        dims = ["skill"]
        grids: list[tuple[Any, ...]] = [tuple(spec.text_name for spec in self._specs)]
        for entry in action_fields():
            dims.append(entry.key)
            grids.append(parameter_grid(entry.rule, bins))
        self.dims: tuple[str, ...] = tuple(dims)
        self.grids: tuple[tuple[Any, ...], ...] = tuple(grids)
        self._dim_of = {name: k for k, name in enumerate(dims)}
        self.action_space = spaces.MultiDiscrete([len(g) for g in grids])

    def to_skill_call(self, action: Any) -> SkillCall:
        """The SkillCall of a ``MultiDiscrete`` action.

        Raises:
            SkillCallError: a wrong shape (``field="action"``) or an index out of range
                (``field`` = the dimension's name).
        """
        array = np.asarray(action)
        if array.shape != (len(self.dims),) or array.dtype.kind not in "iu":
            raise SkillCallError(
                "action", action, f"an integer array of shape ({len(self.dims)},)",
                reason="has the wrong shape or dtype",
            )  # fmt: skip
        k_skill = _index("skill", array[0], len(self.grids[0]))
        spec = self._specs[k_skill]
        kwargs: dict[str, Any] = {}
        for param, key in spec.action_keys.items():
            k = self._dim_of[key]
            kwargs[param] = self.grids[k][_index(key, array[k], len(self.grids[k]))]
        return SkillCall(Skill(spec.id), **kwargs)

    def from_skill_call(self, call: SkillCall | str) -> np.ndarray:
        """The action of a SkillCall (or its text); entries the skill does not read are 0.

        Raises:
            SkillCallError: a parameter value that is not on the grid (naming the entry and
                the grid's values); nothing is snapped.
        """
        call = SkillCall.coerce(call)
        out = np.zeros(len(self.dims), dtype=np.int64)
        out[0] = int(call.skill)
        for param, key in call.skill.spec.action_keys.items():
            k = self._dim_of[key]
            value = getattr(call, param)
            matches = [i for i, v in enumerate(self.grids[k]) if v == value]
            if not matches:
                raise SkillCallError(
                    key, value, "one of " + ", ".join(str(v) for v in self.grids[k]),
                    reason="is not on the grid", skill=call.skill,
                )  # fmt: skip
            out[k] = matches[0]
        return out

    def action(self, action: Any) -> SkillCall:
        return self.to_skill_call(action)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        info = dict(info)
        info["action_menu"] = dict(zip(self.dims, self.grids, strict=True))
        return obs, info
