"""The record that describes one skill (:class:`SkillSpec`) and its parameter rules.

A skill is fully described by one frozen :class:`SkillSpec`: its names, the slots of its
text form, the rule of each parameter, the Gymnasium action entries it reads, its aliases,
what it means, an example, and the key of the motion planner that executes it. Every other
description of the skills (text grammar, action-space encoding, the benchmark server's
action spec, the agent prompt's skill table, the debug viewer's controls, the procedural
motion dispatch) is derived from these records (see :mod:`humanclaw_gym.skills.catalog`).

This module has no dependency beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["WALK_WORD", "ActionField", "Choice", "Range", "SkillSpec", "format_number"]

WALK_WORD = "forward"
"""The literal word of Walk's first text slot (``Walk<forward><normal>``)."""

PARAM_FIELDS = ("speed", "direction", "angle_deg", "distance_m", "height_m")
"""The parameter fields of a :class:`~humanclaw_gym.skills.SkillCall`. A skill's
parameters are a subset of these; a new kind of parameter is a change to SkillCall."""


def format_number(value: float) -> str:
    """Shortest exact text for a finite float: ``30.0 -> "30"``, ``0.45 -> "0.45"``."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


@dataclass(frozen=True)
class Choice:
    """A word parameter: one of ``values`` (exact match), ``default`` when omitted (None:
    required)."""

    values: tuple[str, ...]
    default: str | None = None

    def allowed(self, field: str) -> str:
        """Human-readable allowed values, e.g. ``"'left' | 'right'"``."""
        return " | ".join(repr(v) for v in self.values)

    def usage(self) -> str:
        """Text-grammar slot content, e.g. ``"left|right"``."""
        return "|".join(self.values)


@dataclass(frozen=True)
class Range:
    """A number parameter: ``low <= value <= high`` (inclusive, never clipped), in ``unit``
    (``"m"`` or ``"deg"``); ``default`` when omitted (None: required)."""

    low: float
    high: float
    default: float | None = None
    unit: str = ""

    def allowed(self, field: str) -> str:
        """Human-readable range, e.g. ``"10 <= angle_deg <= 120"``."""
        return f"{format_number(self.low)} <= {field} <= {format_number(self.high)}"

    def usage(self) -> str:
        """Text-grammar slot content, e.g. ``"10..120"``."""
        return f"{format_number(self.low)}..{format_number(self.high)}"


Rule = Choice | Range


@dataclass(frozen=True)
class ActionField:
    """One entry of the Gymnasium ``Dict`` action space (besides ``skill``).

    Attributes:
        key: the entry's name, e.g. ``"step_back_m"``.
        rule: its values: a :class:`Choice` becomes ``Discrete(len(values))`` (index into
            ``values``), a :class:`Range` a float64 ``Box(low, high, (1,))``.
        neutral: the value written by ``SkillCall.to_action`` when the skill does not read
            this entry (a word for a Choice, a number for a Range).
        index_meaning: for a Choice, the index legend shown in errors (``"0 left, 1 right"``).
    """

    key: str
    rule: Rule
    neutral: str | float
    index_meaning: str = ""


@dataclass(frozen=True)
class SkillSpec:
    """Everything the library knows about one skill.

    Attributes:
        name: the constant name, e.g. ``"SIDE_STEP"`` (``Skill.SIDE_STEP``).
        display_name: the benchmark table's name, e.g. ``"Side step"``.
        text_name: the name in the text form, e.g. ``"Side step"`` in ``Side step<left><0.25>``.
        slots: the ``<...>`` slots of the text form in order: parameter field names, or
            :data:`WALK_WORD` for Walk's literal ``<forward>``.
        params: rule of each parameter (field name of SkillCall -> :class:`Choice` /
            :class:`Range`), in text order.
        action_keys: SkillCall field -> action-space entry it is read from. A parameter
            missing here has a single allowed value that the constructor fills in.
        aliases: further accepted names besides ``text_name``, ``display_name`` and the
            key (upstream motion-skill names, synonyms).
        meaning: one line on what the skill does (server spec, prompts, docs).
        example: a valid text form, e.g. ``"Side step<right><0.25>"``.
        motion_key: the motion planner that executes it (upstream motion-skill names such
            as ``"side_walk"``); None for a skill that produces no motion (Stop/Stand).
        condition: SkillCall parameters -> numeric conditioning for the motion generator in
            SI units (see ``SkillCall.condition``).
        terminal: the skill ends the episode (the active stop) instead of moving.
        id: the action id (the ``skill`` entry of the action space); built-in ids are the
            upstream ones, ``0 .. NUM_SKILLS - 1``. Leave it out (None) and
            :func:`~humanclaw_gym.skills.register_skill` gives the next free id; a spec
            read back from the table always has its id.
    """

    name: str
    display_name: str
    text_name: str
    slots: tuple[str, ...]
    params: Mapping[str, Rule]
    action_keys: Mapping[str, str]
    meaning: str
    example: str
    motion_key: str | None
    condition: Callable[[Mapping[str, Any]], dict[str, float]] = field(
        default=lambda params: {}, compare=False, repr=False
    )
    aliases: tuple[str, ...] = ()
    terminal: bool = False
    id: int | None = None

    @property
    def key(self) -> str:
        """Lower-case identifier used by the JSON form, e.g. ``"side_step"``."""
        return self.name.lower()

    def usage(self) -> str:
        """The text grammar of this skill, e.g. ``"Turn<left|right><10..120>"``."""
        parts = [self.text_name]
        for slot in self.slots:
            parts.append(
                f"<{WALK_WORD}>" if slot == WALK_WORD else f"<{self.params[slot].usage()}>"
            )
        return "".join(parts)
