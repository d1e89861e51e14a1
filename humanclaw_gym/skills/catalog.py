"""The skill table: the eight built-in skills as :class:`SkillSpec` records, the
:class:`Skill` identifiers, the action-space entries, and :func:`register_skill`.

This is the one place where a skill is defined. To add a skill to the library, add its
``SkillSpec`` to ``_BUILTIN_SPECS`` here (and a motion planner for its ``motion_key``); a
package of your own can instead call :func:`register_skill` at import time. Everything else
(text grammar, action space, server spec, prompt tables, viewer controls, the random agent,
motion dispatch, the skill counts) reads this table. Every skill is also an entry of kind
``"skill"`` of :mod:`humanclaw_gym.registry` (named by its key), so ``humanclaw doctor``
lists it.

:class:`Skill` behaves like an ``IntEnum`` of the registered skills (``Skill.TURN == 2``,
``Skill(2) is Skill.TURN``, ``list(Skill)``, ``len(Skill)``, pickling by id), and it can
grow: :func:`register_skill` adds a member. Register custom skills before making an env (its
action space is built from the table at construction) and in every process that uses them
(a module the async vector env's workers import).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np

from humanclaw_gym import registry
from humanclaw_gym.skills.errors import SkillCallError
from humanclaw_gym.skills.spec import PARAM_FIELDS, WALK_WORD, ActionField, Choice, Range, SkillSpec

__all__ = [
    "BUILTIN_MOTION_KEYS",
    "CLIMB_SPEEDS",
    "DIRECTIONS",
    "NUM_SKILLS",
    "SIDE_STEP_DISTANCE_RANGE_M",
    "SIT_DEFAULT_HEIGHT_M",
    "SIT_HEIGHT_RANGE_M",
    "SPEEDS",
    "STEP_BACK_DISTANCE_RANGE_M",
    "TURN_ANGLE_RANGE_DEG",
    "WALK_SPEED_M",
    "Skill",
    "action_fields",
    "register_skill",
    "skill_spec",
    "skill_specs",
]

# --------------------------------------------------------------------------------------
# Public constants of the built-in skills (the motion generator and agents read these)
# --------------------------------------------------------------------------------------

SPEEDS: tuple[str, ...] = ("slow", "normal", "fast")
"""Speed words, in action-space index order (0 slow, 1 normal, 2 fast)."""

CLIMB_SPEEDS: tuple[str, ...] = ("normal",)
"""The only speed the two stair skills accept."""

DIRECTIONS: tuple[str, ...] = ("left", "right")
"""Direction words, in action-space index order (0 left, 1 right)."""

WALK_SPEED_M: dict[str, float] = {"slow": 0.2, "normal": 0.4, "fast": 0.6}
"""Forward distance (m) covered by one 0.5 s Walk chunk, per speed word."""

TURN_ANGLE_RANGE_DEG: tuple[float, float] = (10.0, 120.0)
"""Inclusive range of the Turn angle per chunk, in degrees."""

STEP_BACK_DISTANCE_RANGE_M: tuple[float, float] = (0.1, 0.6)
"""Inclusive range of the Step back distance per chunk, in metres."""

SIDE_STEP_DISTANCE_RANGE_M: tuple[float, float] = (0.1, 0.5)
"""Inclusive range of the Side step distance per chunk, in metres."""

SIT_HEIGHT_RANGE_M: tuple[float, float] = (0.15, 0.85)
"""Inclusive range of the Sit down target surface height, in metres."""

SIT_DEFAULT_HEIGHT_M = 0.5
"""Sit down height used when none is given."""


# --------------------------------------------------------------------------------------
# Skill: enum-like identifiers of the registered skills
# --------------------------------------------------------------------------------------


class _SkillTable(type):
    """Metaclass giving :class:`Skill` the container behaviour of an ``IntEnum``."""

    _members: list[Skill]
    _specs: list[SkillSpec]

    def __iter__(cls) -> Iterator[Skill]:
        return iter(list(cls._members))

    def __len__(cls) -> int:
        return len(cls._members)

    def __contains__(cls, value: object) -> bool:
        return isinstance(value, cls) and value in cls._members

    def __getitem__(cls, name: str) -> Skill:
        for member in cls._members:
            if member.name == name:
                return member
        raise KeyError(name)

    def __call__(cls, value: Any) -> Skill:  # Skill(2) -> Skill.TURN, like an enum
        if isinstance(value, cls):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            index = int(value)
            if 0 <= index < len(cls._members):
                return cls._members[index]
        raise ValueError(f"{value!r} is not a valid Skill")


class Skill(int, metaclass=_SkillTable):
    """A registered skill; its int value is the action id (upstream ids 0..7 built in).

    Members: ``WALK`` (0), ``STOP`` (1), ``TURN`` (2), ``CLIMB_UP`` (3), ``SIT`` (4),
    ``STEP_BACK`` (5), ``SIDE_STEP`` (6), ``CLIMB_DOWN`` (7), then any registered with
    :func:`register_skill`. Members are singletons: compare with ``is``.
    """

    __slots__ = ()

    WALK: ClassVar[Skill]
    STOP: ClassVar[Skill]
    TURN: ClassVar[Skill]
    CLIMB_UP: ClassVar[Skill]
    SIT: ClassVar[Skill]
    STEP_BACK: ClassVar[Skill]
    SIDE_STEP: ClassVar[Skill]
    CLIMB_DOWN: ClassVar[Skill]

    @property
    def spec(self) -> SkillSpec:
        """The skill's :class:`SkillSpec`."""
        return type(self)._specs[int(self)]

    @property
    def name(self) -> str:
        """Constant name, e.g. ``"SIDE_STEP"``."""
        return self.spec.name

    @property
    def value(self) -> int:
        """The action id."""
        return int(self)

    @property
    def display_name(self) -> str:
        """Human-readable name from the benchmark's action table, e.g. ``"Turn in place"``."""
        return self.spec.display_name

    @property
    def text_name(self) -> str:
        """Name used in the text form, e.g. ``"Turn"`` in ``Turn<left><30>``."""
        return self.spec.text_name

    @property
    def key(self) -> str:
        """Lower-case identifier used by the JSON form, e.g. ``"side_step"``."""
        return self.spec.key

    @property
    def params(self) -> tuple[str, ...]:
        """Names of the :class:`SkillCall` fields this skill takes, in text order."""
        return tuple(self.spec.params)

    @classmethod
    def from_name(cls, name: str | int) -> Skill:
        """Look a skill up by a loose name or its id.

        Accepts the text name (``"Turn"``), the display name (``"Turn in place"``), the key
        (``"side_step"``), the upstream motion-skill name (``"step_climb_up"``), a few common
        synonyms (``"stop"``, ``"sit"``), or the id as an int or digit string. Case, ``_``,
        ``-`` and repeated spaces do not matter.

        Raises:
            SkillCallError: ``field="skill"`` when nothing matches.
        """
        if isinstance(name, Skill):
            return name
        if isinstance(name, (int, np.integer)) and not isinstance(name, (bool, np.bool_)):
            if 0 <= int(name) < len(cls):
                return cls(int(name))
            raise SkillCallError("skill", name, skill_id_allowed(), reason="is not a skill id")
        if isinstance(name, str):
            norm = normalize_name(name)
            # The id as digits; the length check comes first: int() refuses more than
            # 4,300 digits with a ValueError, and no skill id has more than a few.
            if re.fullmatch(r"[0-9]+", norm) and len(norm) <= 6 and int(norm) < len(cls):
                return cls(int(norm))
            aliases = _alias_table()
            if norm in aliases:
                return aliases[norm]
            raise SkillCallError("skill", name, skill_name_allowed(), reason="is not a skill name")
        raise SkillCallError(
            "skill", name, skill_name_allowed(), reason="is neither a skill name nor an id"
        )

    def __repr__(self) -> str:
        return f"<Skill.{self.name}: {int(self)}>"

    __str__ = int.__repr__  # like IntEnum: str(Skill.TURN) == "2"
    __format__ = int.__format__

    def __reduce__(self) -> tuple[Any, ...]:
        return (Skill, (int(self),))

    def __copy__(self) -> Skill:
        return self

    def __deepcopy__(self, memo: dict) -> Skill:
        return self


Skill._members = []
Skill._specs = []

# --------------------------------------------------------------------------------------
# Action-space entries (order = order of the Dict space; new entries append)
# --------------------------------------------------------------------------------------

_ACTION_FIELDS: list[ActionField] = [
    ActionField("speed", Choice(SPEEDS), "normal", "0 slow, 1 normal, 2 fast"),
    ActionField("direction", Choice(DIRECTIONS), "left", "0 left, 1 right"),
    ActionField("angle_deg", Range(*TURN_ANGLE_RANGE_DEG, unit="deg"), 30.0),
    ActionField("step_back_m", Range(*STEP_BACK_DISTANCE_RANGE_M, unit="m"), 0.25),
    ActionField("side_step_m", Range(*SIDE_STEP_DISTANCE_RANGE_M, unit="m"), 0.25),
    ActionField("height_m", Range(*SIT_HEIGHT_RANGE_M, unit="m"), SIT_DEFAULT_HEIGHT_M),
]


# --------------------------------------------------------------------------------------
# The built-in skills
# --------------------------------------------------------------------------------------


def _sign(params: Mapping[str, Any]) -> float:
    """+1 for ``direction="left"`` (counter-clockwise seen from above / towards +X), else -1."""
    return 1.0 if params["direction"] == "left" else -1.0


_WALK_MEANING = (
    "walk forward " + ", ".join(f"{WALK_SPEED_M[s]:g} m ({s})" for s in SPEEDS) + " in one action"
)

_BUILTIN_SPECS: tuple[SkillSpec, ...] = (
    SkillSpec(
        id=0,
        name="WALK",
        display_name="Walk forward",
        text_name="Walk",
        slots=(WALK_WORD, "speed"),
        params={"speed": Choice(SPEEDS, default="normal")},
        action_keys={"speed": "speed"},
        aliases=("walk_forward",),
        meaning=_WALK_MEANING,
        example="Walk<forward><normal>",
        motion_key="walk_forward",
        condition=lambda p: {"distance_m": WALK_SPEED_M[p["speed"]]},
    ),
    SkillSpec(
        id=1,
        name="STOP",
        display_name="Stop/Stand",
        text_name="Stop/Stand",
        slots=(),
        params={},
        action_keys={},
        aliases=("stop", "stand", "stop stand"),
        meaning="active stop: ends the episode, executes no motion",
        example="Stop/Stand",
        motion_key=None,
        terminal=True,
    ),
    SkillSpec(
        id=2,
        name="TURN",
        display_name="Turn in place",
        text_name="Turn",
        slots=("direction", "angle_deg"),
        params={
            "direction": Choice(DIRECTIONS),
            "angle_deg": Range(*TURN_ANGLE_RANGE_DEG, unit="deg"),
        },
        action_keys={"direction": "direction", "angle_deg": "angle_deg"},
        aliases=("turn",),
        meaning="turn in place about the vertical axis",
        example="Turn<left><30>",
        motion_key="turn",
        condition=lambda p: {"angle_rad": _sign(p) * math.radians(p["angle_deg"])},
    ),
    SkillSpec(
        id=3,
        name="CLIMB_UP",
        display_name="Climb upstairs",
        text_name="Climb upstairs",
        slots=("speed",),
        params={"speed": Choice(CLIMB_SPEEDS, default="normal")},
        action_keys={},
        aliases=("climb up", "step_climb_up"),
        meaning="one stair step up, facing the stair",
        example="Climb upstairs<normal>",
        motion_key="step_climb_up",
        condition=lambda p: {"stair_steps": 1.0},
    ),
    SkillSpec(
        id=4,
        name="SIT",
        display_name="Sit down",
        text_name="Sit down",
        slots=("height_m",),
        params={"height_m": Range(*SIT_HEIGHT_RANGE_M, default=SIT_DEFAULT_HEIGHT_M, unit="m")},
        action_keys={"height_m": "height_m"},
        aliases=("sit",),
        meaning="sit on a surface this high above the floor",
        example="Sit down<0.45>",
        motion_key="sit",
        condition=lambda p: {"height_m": p["height_m"]},
    ),
    SkillSpec(
        id=5,
        name="STEP_BACK",
        display_name="Step back",
        text_name="Step back",
        slots=("distance_m",),
        params={"distance_m": Range(*STEP_BACK_DISTANCE_RANGE_M, unit="m")},
        action_keys={"distance_m": "step_back_m"},
        aliases=("step_back",),
        meaning="step backwards, keeping the facing direction",
        example="Step back<0.25>",
        motion_key="step_back",
        condition=lambda p: {"distance_m": p["distance_m"]},
    ),
    SkillSpec(
        id=6,
        name="SIDE_STEP",
        display_name="Side step",
        text_name="Side step",
        slots=("direction", "distance_m"),
        params={
            "direction": Choice(DIRECTIONS),
            "distance_m": Range(*SIDE_STEP_DISTANCE_RANGE_M, unit="m"),
        },
        action_keys={"direction": "direction", "distance_m": "side_step_m"},
        aliases=("side_walk", "sidestep"),
        meaning="step sideways, keeping the facing direction",
        example="Side step<right><0.25>",
        motion_key="side_walk",
        condition=lambda p: {"lateral_m": _sign(p) * p["distance_m"]},
    ),
    SkillSpec(
        id=7,
        name="CLIMB_DOWN",
        display_name="Walk downstairs",
        text_name="Walk downstairs",
        slots=("speed",),
        params={"speed": Choice(CLIMB_SPEEDS, default="normal")},
        action_keys={},
        aliases=("climb down", "climb downstairs", "step_climb_down"),
        meaning="one stair step down",
        example="Walk downstairs<normal>",
        motion_key="step_climb_down",
        condition=lambda p: {"stair_steps": -1.0},
    ),
)


NUM_SKILLS = len(_BUILTIN_SPECS)
"""Number of built-in skills (the benchmark's action ids ``0 .. NUM_SKILLS - 1``), counted
from the table; ``len(Skill)`` counts registered custom skills too."""

BUILTIN_MOTION_KEYS: frozenset[str] = frozenset(
    s.motion_key for s in _BUILTIN_SPECS if s.motion_key is not None
)
"""The motion keys of the built-in skills: what a motion generator executes unless it
declares otherwise (:class:`~humanclaw_gym.backends.protocols.MotionCapabilities`)."""


# --------------------------------------------------------------------------------------
# Registration and derived tables
# --------------------------------------------------------------------------------------

_ALIASES: dict[str, Skill] = {}
_FIELDS_ADDED: list[int] = []  # action entries each registration appended


def normalize_name(name: str) -> str:
    """Lower case, ``_``/``-``/runs of spaces -> one space, no spaces around ``/``."""
    text = re.sub(r"[_\-\s]+", " ", name.strip().lower())
    return re.sub(r"\s*/\s*", "/", text)


def _names_of(spec: SkillSpec) -> tuple[str, ...]:
    return (spec.text_name, spec.display_name, spec.key, *spec.aliases)


def _check_spec(spec: SkillSpec, new_fields: tuple[ActionField, ...]) -> None:
    """Raise ValueError when ``spec`` cannot join the table (nothing is changed)."""
    where = f"SkillSpec {spec.name!r}"
    if spec.id is not None and spec.id != len(Skill._members):
        raise ValueError(
            f"{where}: id={spec.id} is invalid: allowed {len(Skill._members)} (the next id) "
            "or None (given by register_skill)"
        )
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", spec.name) or spec.name in Skill.__dict__:
        raise ValueError(f"{where}: name must be a new UPPER_CASE identifier")
    unknown = [p for p in spec.params if p not in PARAM_FIELDS]
    if unknown:
        raise ValueError(f"{where}: params {unknown} are not SkillCall fields {PARAM_FIELDS}")
    slots = [s for s in spec.slots if s != WALK_WORD]
    if sorted(slots) != sorted(spec.params) or len(set(slots)) != len(slots):
        raise ValueError(f"{where}: slots {spec.slots} must name each parameter once")
    fields = {f.key: f for f in (*_ACTION_FIELDS, *new_fields)}
    for param, key in spec.action_keys.items():
        if param not in spec.params or key not in fields or key == "skill":
            raise ValueError(f"{where}: action_keys {param!r} -> {key!r} is not a known entry")
        if fields[key].rule != _without_default(spec.params[param]):
            raise ValueError(
                f"{where}: parameter {param!r} has rule {spec.params[param]} but action entry "
                f"{key!r} has {fields[key].rule}; an entry must have exactly the skill's range"
            )
    for param, rule in spec.params.items():
        single = isinstance(rule, Choice) and len(rule.values) == 1
        if param not in spec.action_keys and not single:
            raise ValueError(f"{where}: parameter {param!r} needs an action entry")
    if spec.terminal != (spec.motion_key is None):
        raise ValueError(f"{where}: exactly the terminal skill has motion_key None")
    for raw in _names_of(spec):
        norm = normalize_name(raw)
        if norm in _ALIASES or re.fullmatch(r"[0-9]+", norm):
            raise ValueError(f"{where}: name or alias {raw!r} is taken or numeric")


def _without_default(rule: Choice | Range) -> Choice | Range:
    if isinstance(rule, Choice):
        return Choice(rule.values)
    return Range(rule.low, rule.high, unit=rule.unit)


def register_skill(spec: SkillSpec, action_fields: tuple[ActionField, ...] = ()) -> Skill:
    """Add a skill to the table and return its new :class:`Skill` member.

    Args:
        spec: the skill; its ``id`` is given here (the next free one, ``len(Skill)``; a spec
            that names one must name that), its names and aliases must be new, its
            parameters SkillCall fields.
        action_fields: new action-space entries the skill reads (appended after the
            existing ones). Entries may be shared with other skills when the ranges match.

    Returns:
        The member, also reachable as ``Skill.<spec.name>``.

    Raises:
        ValueError: naming the problem; the table is unchanged.
    """
    new_keys = [f.key for f in action_fields]
    taken = {f.key for f in _ACTION_FIELDS} | {"skill"}
    if len(set(new_keys)) != len(new_keys) or taken & set(new_keys):
        raise ValueError(f"action_fields {new_keys} repeat an existing entry {sorted(taken)}")
    _check_spec(spec, tuple(action_fields))
    spec = dataclasses.replace(spec, id=len(Skill._members))
    member = int.__new__(Skill, spec.id)
    Skill._members.append(member)
    Skill._specs.append(spec)
    setattr(Skill, spec.name, member)
    _ACTION_FIELDS.extend(action_fields)
    _FIELDS_ADDED.append(len(action_fields))
    for raw in _names_of(spec):
        _ALIASES[normalize_name(raw)] = member
    registry.register_skill_entry(spec.key, member, description=spec.meaning, replace=True)
    return member


def unregister_skill(skill: Skill) -> None:
    """Remove the most recently registered custom skill (tests; built-ins stay).

    Raises:
        ValueError: ``skill`` is a built-in or not the last registered skill.
    """
    if int(skill) < NUM_SKILLS or skill is not Skill._members[-1]:
        raise ValueError(f"only the last custom skill can be removed, not {skill!r}")
    spec = skill.spec
    for _ in range(_FIELDS_ADDED.pop()):
        _ACTION_FIELDS.pop()
    Skill._members.pop()
    Skill._specs.pop()
    delattr(Skill, spec.name)
    for raw in _names_of(spec):
        _ALIASES.pop(normalize_name(raw), None)
    registry.unregister("skill", spec.key)


def _alias_table() -> dict[str, Skill]:
    return _ALIASES


def skill_spec(skill: Skill | int | str) -> SkillSpec:
    """The :class:`SkillSpec` of a skill given as a member, id or any accepted name."""
    return Skill.from_name(skill).spec


def skill_specs() -> tuple[SkillSpec, ...]:
    """Every registered skill's spec, in id order."""
    return tuple(Skill._specs)


def action_fields() -> tuple[ActionField, ...]:
    """The action-space entries after ``skill``, in the Dict's order."""
    return tuple(_ACTION_FIELDS)


def skill_id_allowed() -> str:
    return f"an id 0..{len(Skill) - 1}"


def skill_name_allowed() -> str:
    names = ", ".join(repr(s.text_name) for s in Skill._specs)
    return f"one of {names} (or {skill_id_allowed()})"


for _spec in _BUILTIN_SPECS:
    register_skill(_spec)
del _spec
