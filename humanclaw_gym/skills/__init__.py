"""The action schema: eight whole-body skills and the validated :class:`SkillCall`.

Every decision of a HumanClaw policy is one :class:`SkillCall`: a :class:`Skill` plus the few
parameters that skill takes. The motion generator turns it into 0.5 s of motion (15 frames at
30 Hz). This module owns the three public forms of a call and the range checks behind them:

* the **text form** used by language-model agents, e.g. ``Turn<left><30>``
  (:meth:`SkillCall.parse` / ``str(call)``);
* the **Gymnasium encoding**, a :class:`gymnasium.spaces.Dict` (:func:`action_space`,
  :meth:`SkillCall.to_action` / :meth:`SkillCall.from_action`), in which **every element of
  the space decodes to a valid SkillCall**, so random samples (``check_env``, exploration
  in RL libraries) never fail validation;
* the **JSON form** used by logs and the benchmark server
  (:meth:`SkillCall.to_dict` / :meth:`SkillCall.from_dict`).

Skills and parameters (ranges are inclusive; values outside them are rejected, never
clipped; clamping is the agent's business, not the environment's):

* 0 Walk forward: ``speed`` slow / normal / fast = 0.2 / 0.4 / 0.6 m per chunk;
  ``Walk<forward><normal>``.
* 1 Stop/Stand: no parameters; ends the episode (the active stop); ``Stop/Stand``.
* 2 Turn in place: ``direction`` left / right, ``angle_deg`` 10..120; ``Turn<left><30>``.
* 3 Climb upstairs: ``speed`` normal only; ``Climb upstairs<normal>``.
* 4 Sit down: ``height_m`` 0.15..0.85 (default 0.5); ``Sit down<0.45>``.
* 5 Step back: ``distance_m`` 0.1..0.6, facing kept; ``Step back<0.25>``.
* 6 Side step: ``direction`` left / right, ``distance_m`` 0.1..0.5, facing kept;
  ``Side step<right><0.25>``.
* 7 Walk downstairs: ``speed`` normal only; ``Walk downstairs<normal>``.

In the Gymnasium encoding each parameter entry has exactly the range of the one skill that
reads it: Step back and Side step have their own distance entries (``step_back_m`` and
``side_step_m``, both stored in :attr:`SkillCall.distance_m`), and ``speed`` is read by Walk
only (the stair skills' single speed needs no entry).

Degrees appear only here, at the text/action boundary; :attr:`SkillCall.condition` hands the
motion generator SI units (metres, radians) in the Y-up world convention.

Every skill is one :class:`SkillSpec` record in :mod:`humanclaw_gym.skills.catalog`; the
text grammar, the Gymnasium encoding, the server's action spec (:func:`describe_skills`),
agent prompts and the debug viewer read that table. :func:`register_skill` adds a custom
skill (see docs/architecture.md, "Add a skill").

Importing this package is cheap: Gymnasium is imported only when :func:`action_space` is
called.
"""

from __future__ import annotations

from humanclaw_gym.skills.call import SkillCall, action_space
from humanclaw_gym.skills.catalog import (
    BUILTIN_MOTION_KEYS,
    CLIMB_SPEEDS,
    DIRECTIONS,
    NUM_SKILLS,
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_DEFAULT_HEIGHT_M,
    SIT_HEIGHT_RANGE_M,
    SPEEDS,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    WALK_SPEED_M,
    Skill,
    action_fields,
    register_skill,
    skill_spec,
    skill_specs,
    unregister_skill,
)
from humanclaw_gym.skills.describe import describe_skills, skill_table_rows
from humanclaw_gym.skills.errors import (
    SkillCallError,
    SkillCallParseError,
    SkillCallTypeError,
    SkillNotExecutableError,
)
from humanclaw_gym.skills.spec import ActionField, Choice, Range, SkillSpec

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
    "ActionField",
    "Choice",
    "Range",
    "Skill",
    "SkillCall",
    "SkillCallError",
    "SkillCallParseError",
    "SkillCallTypeError",
    "SkillNotExecutableError",
    "SkillSpec",
    "action_fields",
    "action_space",
    "describe_skills",
    "register_skill",
    "skill_spec",
    "skill_specs",
    "skill_table_rows",
    "unregister_skill",
]
