"""Planner prompts of the PSV agent, the semantic history they show, and JSON reply parsing.

A prompt version is a complete, self-contained template: changing a prompt means adding a
new version, never editing an old one, so that recorded runs stay reproducible. Templates
use :class:`string.Template` placeholders (``$instruction``, ``$step``, ``$max_steps``,
``$history``, ``$skills``).

The planner answers with one JSON object holding :data:`PLANNER_FIELDS`; see
:func:`extract_json_object` for how leniently replies are read.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from humanclaw_gym.skills import (
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_DEFAULT_HEIGHT_M,
    SIT_HEIGHT_RANGE_M,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    WALK_SPEED_M,
)

__all__ = [
    "DEFAULT_PROMPT_VERSION",
    "PLANNER_FIELDS",
    "PLANNER_PROMPTS",
    "HistoryItem",
    "ResponseFormatError",
    "extract_json_object",
    "format_history",
    "render_planner_prompt",
    "resolve_prompt_version",
    "skill_table",
]

DEFAULT_PROMPT_VERSION = "v1"

PLANNER_FIELDS: tuple[str, ...] = (
    "visible_state",
    "mid_level_progress_analysis",
    "mid_level_goal",
    "low_level_action_reasoning",
    "action_id",
    "action_name",
    "additional_info",
)
"""Keys of the planner's JSON reply, in the order the prompt lists them."""

_NOTE_CHARS = 200
_FENCE_RE = re.compile(r"^```[A-Za-z0-9_-]*\s*(?P<body>.*?)\s*```$", re.DOTALL)


class ResponseFormatError(ValueError):
    """A model reply could not be read as the JSON object a stage expects."""


# ---- semantic history --------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryItem:
    """One past decision as the planner sees it: small semantic fields only.

    No image, no raw provider text and no token counts are ever stored here.

    Attributes:
        step: decision index.
        action: text form of the executed action, e.g. ``"Turn<left><30>"``.
        mid_level_goal: the planner's mid-level goal at that step ("" if unknown).
        progress_note: a short progress note (truncated to 200 characters).
        replaced: text form of the planner proposal when the verifier replaced it, else None.
    """

    step: int
    action: str
    mid_level_goal: str = ""
    progress_note: str = ""
    replaced: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mid_level_goal", _clip(self.mid_level_goal))
        object.__setattr__(self, "progress_note", _clip(self.progress_note))

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "step": self.step,
            "action": self.action,
            "mid_level_goal": self.mid_level_goal,
            "progress_note": self.progress_note,
            "replaced": self.replaced,
        }


def _clip(text: Any, limit: int = _NOTE_CHARS) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= limit else value[: limit - 3].rstrip() + "..."


def format_history(history: Sequence[HistoryItem | Mapping[str, Any]]) -> str:
    """Render history items as one line each, oldest first.

    Args:
        history: :class:`HistoryItem` objects or mappings with the same keys.

    Returns:
        The text block, or a sentence saying there is no history yet.
    """
    if not history:
        return "(none yet: this is the first decision of the episode)"
    lines = []
    for raw in history:
        item = raw if isinstance(raw, HistoryItem) else HistoryItem(**dict(raw))
        line = f"- step {item.step}: executed {item.action}"
        if item.replaced:
            line += f" (the check replaced your proposal {item.replaced})"
        if item.mid_level_goal:
            line += f"; goal then: {item.mid_level_goal}"
        if item.progress_note:
            line += f"; note: {item.progress_note}"
        lines.append(line)
    return "\n".join(lines)


# ---- skill table --------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return f"{value:g}"


def skill_table() -> str:
    """The eight skills with ids, text forms and parameter ranges, one per line."""
    turn_lo, turn_hi = TURN_ANGLE_RANGE_DEG
    sit_lo, sit_hi = SIT_HEIGHT_RANGE_M
    back_lo, back_hi = STEP_BACK_DISTANCE_RANGE_M
    side_lo, side_hi = SIDE_STEP_DISTANCE_RANGE_M
    speeds = " / ".join(f"{name} {_fmt(dist)} m" for name, dist in WALK_SPEED_M.items())
    rows = [
        f"0 | Walk forward | Walk<forward><slow|normal|fast> | one stride straight ahead: {speeds}",
        "1 | Stop/Stand | Stop/Stand | ends the episode for good; only when the task is done",
        f"2 | Turn in place | Turn<left|right><{_fmt(turn_lo)}..{_fmt(turn_hi)}> | rotate on the "
        "spot by that many degrees",
        "3 | Climb upstairs | Climb upstairs<normal> | go up one stair step that is right in front",
        f"4 | Sit down | Sit down<{_fmt(sit_lo)}..{_fmt(sit_hi)}> | sit onto a surface this many "
        f"metres high (about {_fmt(SIT_DEFAULT_HEIGHT_M)} for an ordinary seat)",
        f"5 | Step back | Step back<{_fmt(back_lo)}..{_fmt(back_hi)}> | move backwards this many "
        "metres, keep facing the same way",
        f"6 | Side step | Side step<left|right><{_fmt(side_lo)}..{_fmt(side_hi)}> | move sideways "
        "this many metres, keep facing the same way",
        "7 | Walk downstairs | Walk downstairs<normal> | go down one stair step",
    ]
    return "id | name | action_name text form | effect\n" + "\n".join(rows)


# ---- planner prompt versions ------------------------------------------------------------------

_PLANNER_V1 = """\
You are the mind of a humanoid body standing in an indoor home. The attached picture is \
what your own head camera sees at this moment: an egocentric, first-person 448x448 RGB \
view. Blue humanoid limbs, hands, legs or feet in the picture are parts of YOUR body, not \
another person.

Task: $instruction

This is decision $step of at most $max_steps. Each decision runs exactly one skill, which \
becomes half a second of whole-body motion. Gravity and collisions are real: walking into \
furniture or walls stops you and can knock objects over, so keep clear of obstacles.

Available skills:
$skills

How to decide:
1. visible_state: describe what the camera shows right now (room type, furniture, doors, \
open floor, obstacles close to you). Name the target category only in a sentence that \
says it is visible; if it is not visible, say so plainly.
2. mid_level_progress_analysis: judge how far the task has come, using the picture and the \
history below (what you already scanned, where you came from, whether the last goal was \
reached).
3. mid_level_goal: a short sub-goal you expect to finish within about 6 decisions, such as \
"turn to scan the right side of the room" or "walk through the doorway ahead". Keep the \
previous goal until it is reached or proven impossible.
4. low_level_action_reasoning: why the one skill you pick now serves that sub-goal.
5. action_id and action_name: the chosen skill; write action_name in the text form with \
its parameters filled in, e.g. Turn<left><45>, Walk<forward><normal>, Sit down<0.45>.

Search the home by turning on the spot to look around before walking, and leave a room \
that clearly does not contain the target. Approach the target until it is within arm's \
reach (about 20 cm from your body), then choose Stop/Stand; stopping early or far away \
counts as failure and cannot be undone. If the task asks you to sit on the target, walk up \
to it, turn so that your back faces the seat (mark such turns with \
"additional_info": {"turn_for_sit": true}), choose Sit down with your estimate of the \
seat height, and after sitting choose Stop/Stand with \
"additional_info": {"stop_after_sit": true}. Otherwise use "additional_info": {}.

Recent decisions (oldest first):
$history

Answer with a single JSON object and nothing else (no markdown), using exactly these keys:
{"visible_state": "...", "mid_level_progress_analysis": "...", "mid_level_goal": "...", \
"low_level_action_reasoning": "...", "action_id": 0, "action_name": "Walk<forward><normal>", \
"additional_info": {}}
"""

PLANNER_PROMPTS: dict[str, str] = {"v1": _PLANNER_V1}
"""Planner prompt templates by version. Never edit a released version; add a new one."""


def resolve_prompt_version(version: str) -> str:
    """Return the template of a planner prompt version.

    Raises:
        ValueError: unknown version, naming the known ones.
    """
    try:
        return PLANNER_PROMPTS[version]
    except (KeyError, TypeError):
        raise ValueError(
            f"prompt_version={version!r} is unknown: allowed one of {sorted(PLANNER_PROMPTS)}"
        ) from None


def render_planner_prompt(
    version: str,
    instruction: str,
    step: int,
    max_steps: int,
    history: Sequence[HistoryItem | Mapping[str, Any]],
) -> str:
    """Compose the planner prompt for one decision.

    Args:
        version: key of :data:`PLANNER_PROMPTS`.
        instruction: the task text, e.g. ``"Find the couch and sit on it."``.
        step: 0-based decision index.
        max_steps: the episode's decision limit.
        history: bounded semantic history, oldest first.

    Returns:
        The complete prompt text (the image is attached separately).
    """
    template = resolve_prompt_version(version)
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError(f"instruction={instruction!r} is invalid: allowed a non-empty string")
    return string.Template(template).substitute(
        instruction=instruction.strip(),
        step=int(step),
        max_steps=int(max_steps),
        skills=skill_table(),
        history=format_history(history),
    )


# ---- reply parsing ----------------------------------------------------------------------------


def extract_json_object(text: Any) -> dict[str, Any]:
    """Read a model reply as one JSON object.

    Accepts the object alone, wrapped in a Markdown code fence, or surrounded by other
    text (then the span from the first ``{`` to the last ``}`` is tried).

    Raises:
        ResponseFormatError: no JSON object could be read.
    """
    if not isinstance(text, str):
        raise ResponseFormatError(f"reply must be text, got {type(text).__name__}")
    body = text.strip()
    fenced = _FENCE_RE.match(body)
    if fenced:
        body = fenced.group("body")
    candidates = [body]
    start, end = body.find("{"), body.rfind("}")
    if 0 <= start < end and (start, end) != (0, len(body) - 1):
        candidates.append(body[start : end + 1])
    error: Exception | None = None
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            error = exc
            continue
        if isinstance(value, dict):
            return value
        error = ResponseFormatError(f"reply is JSON but a {type(value).__name__}, not an object")
    preview = body if len(body) <= 120 else body[:117] + "..."
    raise ResponseFormatError(f"reply is not a JSON object ({error}): {preview!r}")
