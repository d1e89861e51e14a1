"""Our :class:`~humanclaw_gym.skills.SkillCall` as the release's skill and raw condition.

The release's planner turns an action text into one of its eight motion skills and a
condition (then each network kind scales it, see
:func:`~humanclaw_gym.motion.paper.networks.condition_tensor`):

========================  ===================  ==========================================
our call                  release skill        raw condition
========================  ===================  ==========================================
Walk<forward><speed>      ``walk_forward``     ``[0.0, d, 0.0]``, d = 0.2 / 0.4 / 0.6 m
Turn<left|right><deg>     ``turn``             ``+deg`` (left) / ``-deg`` (right)
Climb upstairs            ``step_climb_up``    ``[0.28, 0.30]`` (step height, depth, m)
Sit down<h>               ``sit``              ``h`` (m)
Step back<d>              ``step_back``        ``[0.0, -d]``
Side step<left|right><d>  ``side_walk``        ``+d`` (left) / ``-d`` (right)
Walk downstairs           ``step_climb_down``  ``[0.20, 0.40]``
Stop/Stand                ``stand``            none
========================  ===================  ==========================================

The release's planner clamps numbers into the skill ranges; a SkillCall is already inside
them (out-of-range calls are refused when they are made), so nothing is clamped here.
"""

from __future__ import annotations

from humanclaw_gym.skills import WALK_SPEED_M, Skill, SkillCall

__all__ = ["CLIMB_DOWN_CONDITION", "CLIMB_UP_CONDITION", "release_condition"]

#: The release planner's fixed stair conditions: (step height, step depth) in metres.
CLIMB_UP_CONDITION = (0.28, 0.30)
CLIMB_DOWN_CONDITION = (0.20, 0.40)


def release_condition(call: SkillCall) -> tuple[str, list[float] | None]:
    """``(release skill name, raw condition)`` of a call (see the module docstring).

    Raises:
        ValueError: a skill that is not one of the eight built-in ones.
    """
    skill = call.skill
    if skill is Skill.WALK:
        return "walk_forward", [0.0, float(WALK_SPEED_M[call.speed]), 0.0]
    if skill is Skill.TURN:
        angle = float(call.angle_deg)
        return "turn", [angle if call.direction == "left" else -angle]
    if skill is Skill.CLIMB_UP:
        return "step_climb_up", list(CLIMB_UP_CONDITION)
    if skill is Skill.SIT:
        return "sit", [float(call.height_m)]
    if skill is Skill.STEP_BACK:
        return "step_back", [0.0, -float(call.distance_m)]
    if skill is Skill.SIDE_STEP:
        distance = float(call.distance_m)
        return "side_walk", [distance if call.direction == "left" else -distance]
    if skill is Skill.CLIMB_DOWN:
        return "step_climb_down", list(CLIMB_DOWN_CONDITION)
    if skill is Skill.STOP:
        return "stand", None
    raise ValueError(
        f"SkillCall.skill={skill.name} has no branch in the paper's motion model: allowed the "
        "eight built-in skills"
    )
