"""The PSV planner prompt of image-goal navigation (the ``image_goal`` task).

The planner receives two pictures per call, in this order: the current view of the head
camera and the goal picture (the view from the goal place, facing the goal direction). The
prompt keeps the ``v2`` planner's frame, skill list and answer format (the same JSON fields,
read by the same reader, the same history rows), and replaces the object-search rules with
the image-goal ones: recognise the place the goal picture shows, walk there, stop within
about a metre of it. Like every prompt version it is a complete template; a change is a new
version.

Placeholders: ``$actions`` and ``$forms`` (the skill table of
:func:`humanclaw_agents.prompts.action_space_text`), ``$action_ids`` and ``$input_json``
(task, step count, recent steps), filled by
:func:`humanclaw_agents.prompts.fill_planner_template` (:func:`render_imagegoal_prompt`).
"""

from __future__ import annotations

from collections.abc import Sequence

from humanclaw_agents.prompts import SYSTEM_FRAME, HistoryRow, fill_planner_template

__all__ = [
    "DEFAULT_IMAGEGOAL_PROMPT",
    "IMAGEGOAL_PROMPTS",
    "render_imagegoal_prompt",
]

DEFAULT_IMAGEGOAL_PROMPT = "imagegoal_v1"

_IMAGEGOAL_V1 = (
    SYSTEM_FRAME
    + """

This task has a goal picture instead of a named object. Two pictures are attached, in this \
order:
1. the current picture: your own head camera now;
2. the goal picture: what your head camera would show if you stood at the goal place and \
faced the goal direction.
Your task is to walk to the place where the goal picture was taken and to stop there. You \
succeed when you choose Stop/Stand with your body within about 1 metre of that place; your \
facing direction does not matter for success. Shorter routes are better.

You choose both the plan and the skill for this humanoid. At every step, first set a \
mid-level goal for roughly the next 2-3 seconds, then pick exactly one low-level action \
for the next 0.5 seconds. The recent steps in the input (if any) are your memory.

Actions you can choose from (each lasts 0.5 seconds):
$actions

How to set the mid-level goal:
- Compare the two pictures: which furniture, doors, rugs, wall colours and floor patterns \
of the goal picture do you see now, and where? The goal place is where those things would \
appear as they do in the goal picture.
- If nothing of the goal picture is in view, scan by turning in ONE direction and keep to \
that direction; then head for the doorway or room that most likely leads to the goal \
place, instead of turning on the spot again.
- A closed door is a wall unless you can see that it is open.
- Anchor the goal to landmarks you can see, e.g. "walk to the rug in front of the green \
couch, where the goal picture was taken".
- Do not bump into things: keep to the middle of open floor and clear passages.
- When the current picture looks like the goal picture (the same things at about the same \
places and sizes, perhaps seen from a slightly different direction), you have arrived: set \
mid_level_goal to Stop/Stand and choose Stop/Stand.

How to pick the low-level action:
- If the lane straight ahead is clear and leads towards the goal place, Walk<forward> is \
the default; slow near the goal or in tight spots, fast only in a wide clear lane.
- Turn to bring the goal place or its landmarks ahead; do not alternate left and right \
turns.
- Side step or Step back to get around an obstacle at your feet.
- This task needs no sitting and no stairs unless the goal picture shows another floor.

Write action_name in exactly one of these forms: $forms.

The two pictures are attached (current first, goal second).

Input:
$input_json

Answer with exactly this JSON object:
{
  "visible_state": "From left to right I see <object or area>, about <distance> m from me; \
...; and <object or area>, about <distance> m from me. <Say which landmarks of the goal \
picture are in view and whether the current picture matches the goal picture. Say whether \
the lane right in front of my body is clear or blocked.>",
  "mid_level_progress_analysis": "<From the goal picture, visible_state and history, \
briefly analyse where the goal place is and which mid-level goal to complete in the next \
2-3 seconds; say whether you keep or change the previous goal, and why.>",
  "mid_level_goal": "<One very short sentence: the mid-level goal for the next 2-3 \
seconds.>",
  "low_level_action_reasoning": "<From mid_level_goal, visible_state and history, briefly \
say why this exact action with these parameters is right for the next 0.5 seconds.>",
  "action_id": $action_ids,
  "action_name": "<the action, in one of the forms above>",
  "additional_info": {}
}
"""
)

#: The image-goal planner prompts by version.
IMAGEGOAL_PROMPTS: dict[str, str] = {"imagegoal_v1": _IMAGEGOAL_V1}


def render_imagegoal_prompt(
    instruction: str,
    step: int,
    history: Sequence[HistoryRow],
    *,
    version: str = DEFAULT_IMAGEGOAL_PROMPT,
) -> str:
    """Compose the image-goal planner prompt for one decision.

    The input block is JSON: ``task`` (the episode's instruction), ``pictures`` (which
    attached picture is which), ``steps_taken`` (the 0-based decision index) and
    ``recent_steps`` (the :class:`~humanclaw_agents.prompts.HistoryRow` records, oldest
    first).

    Args:
        instruction: the task text (``info["instruction"]``).
        step: 0-based decision index.
        history: the rows to show, oldest first.
        version: a key of :data:`IMAGEGOAL_PROMPTS`.

    Raises:
        ValueError: an unknown version or an empty instruction.
        TypeError: history rows that are not :class:`HistoryRow` records.
    """
    if version not in IMAGEGOAL_PROMPTS:
        raise ValueError(
            f"image-goal prompt version {version!r} is unknown: allowed one of "
            f"{sorted(IMAGEGOAL_PROMPTS)}"
        )
    return fill_planner_template(
        IMAGEGOAL_PROMPTS[version],
        instruction,
        step,
        history,
        {"pictures": ["current view (attached first)", "goal picture (attached second)"]},
    )
