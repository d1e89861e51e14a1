"""Planner prompts of the PSV agent, the semantic history they show, and JSON reply parsing.

A prompt version is a complete, self-contained template: changing a prompt means adding a
new version, never editing an old one, so that recorded runs stay reproducible.

* ``v1`` (the ``psv:v1`` agent): our first prompt. Placeholders ``$instruction``, ``$step``,
  ``$max_steps``, ``$history`` (:class:`HistoryItem` lines) and ``$skills``
  (:func:`skill_table`); rendered by :func:`render_planner_prompt`.
* ``v2`` (the default ``psv`` agent): the same rules and the same information as the
  reference release's planner prompt, in our words. Placeholders ``$actions``
  (:func:`action_space_text`) and ``$input_json`` (task, step count and up to the last ten
  :class:`HistoryRow` records); rendered by :func:`render_planner_prompt_v2`.

The planner answers with one JSON object holding :data:`PLANNER_FIELDS`. The ``v1`` agent
reads it with :func:`extract_json_object`; the ``v2`` agent with
:func:`humanclaw_agents.replies.read_reply_json`, which also copes with think blocks and
prose.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from humanclaw_agents.replies import ReplyExtractionError, ResponseFormatError
from humanclaw_gym.skills import (
    SIT_DEFAULT_HEIGHT_M,
    SPEEDS,
    WALK_SPEED_M,
    Choice,
    Skill,
    SkillCall,
)

__all__ = [
    "DEFAULT_PROMPT_VERSION",
    "HISTORY_ROW_LIMITS",
    "PLANNER_FIELDS",
    "PLANNER_PROMPTS",
    "SYSTEM_FRAME",
    "HistoryItem",
    "HistoryRow",
    "ResponseFormatError",
    "action_space_text",
    "extract_json_object",
    "fill_planner_template",
    "format_history",
    "render_planner_prompt",
    "render_planner_prompt_v2",
    "resolve_prompt_version",
    "skill_table",
]

DEFAULT_PROMPT_VERSION = "v2"

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
_FENCE_LANG_RE = re.compile(r"[A-Za-z0-9_-]*")


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


# What each skill does, as the v1 planner and verifier prompts put it (the "effect" column).
# Ids, names and text forms are not written here: skill_table reads them from the skill
# table (humanclaw_gym.skills); a skill without a note here (one registered by a package of
# its own) shows its SkillSpec meaning.
_V1_EFFECTS: dict[Skill, str] = {
    Skill.WALK: "one stride straight ahead: "
    + " / ".join(f"{name} {_fmt(dist)} m" for name, dist in WALK_SPEED_M.items()),
    Skill.STOP: "ends the episode for good; only when the task is done",
    Skill.TURN: "rotate on the spot by that many degrees",
    Skill.CLIMB_UP: "go up one stair step that is right in front",
    Skill.SIT: "sit onto a surface this many metres high "
    f"(about {_fmt(SIT_DEFAULT_HEIGHT_M)} for an ordinary seat)",
    Skill.STEP_BACK: "move backwards this many metres, keep facing the same way",
    Skill.SIDE_STEP: "move sideways this many metres, keep facing the same way",
    Skill.CLIMB_DOWN: "go down one stair step",
}


def skill_table() -> str:
    """Every registered skill with its id, name, text form (grammar with the parameter
    ranges) and effect, one per line, from the skill table."""
    rows = [
        f"{int(skill)} | {skill.display_name} | {skill.spec.usage()} | "
        f"{_V1_EFFECTS.get(skill, skill.spec.meaning)}"
        for skill in Skill
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
"""Planner prompt templates by version (``v1``, ``v2``). Never edit a released version; add a
new one."""


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
    if version in _V2_FAMILY:
        raise ValueError(
            f"prompt_version={version!r} is rendered by render_planner_prompt_v2, "
            "not render_planner_prompt"
        )
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError(f"instruction={instruction!r} is invalid: allowed a non-empty string")
    return string.Template(template).substitute(
        instruction=instruction.strip(),
        step=int(step),
        max_steps=int(max_steps),
        skills=skill_table(),
        history=format_history(history),
    )


# ---- v2: the reference agent's planner ---------------------------------------------------------

HISTORY_ROW_LIMITS: dict[str, int] = {
    "visible_state": 220,
    "mid_level_progress_analysis": 220,
    "mid_level_goal": 160,
    "low_level_action_reasoning": 180,
    "action_name": 80,
    "verifier_rejection": 240,
}
"""Characters kept per :class:`HistoryRow` field (longer text ends in ``...``)."""


@dataclass(frozen=True)
class HistoryRow:
    """One earlier step as the ``v2`` planner sees it: the planner's own reasoning fields,
    the action it proposed, and the verifier's rejection when there was one.

    Only these semantic fields are kept: no image, raw provider text or token counts. Each
    text is folded to one line and clipped to :data:`HISTORY_ROW_LIMITS`.

    Attributes:
        step: decision index.
        visible_state: what the planner said it saw.
        mid_level_progress_analysis: its progress analysis.
        mid_level_goal: its mid-level goal.
        low_level_action_reasoning: why it chose its action.
        action_name: the action as the planner wrote it (its proposal, not necessarily the
            executed action).
        verifier_rejection: ``"Verifier replaced <proposal> with <final> because <reason>"``
            when the verifier replaced the proposal, else ``None``.
    """

    step: int
    visible_state: str = ""
    mid_level_progress_analysis: str = ""
    mid_level_goal: str = ""
    low_level_action_reasoning: str = ""
    action_name: str = ""
    verifier_rejection: str | None = None

    def __post_init__(self) -> None:
        for name, limit in HISTORY_ROW_LIMITS.items():
            value = getattr(self, name)
            if value is None:
                continue
            object.__setattr__(self, name, _clip(value, limit))

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as shown to the planner (``verifier_rejection`` only when present)."""
        data: dict[str, Any] = {
            "step": self.step,
            "visible_state": self.visible_state,
            "mid_level_progress_analysis": self.mid_level_progress_analysis,
            "mid_level_goal": self.mid_level_goal,
            "low_level_action_reasoning": self.low_level_action_reasoning,
            "action_name": self.action_name,
        }
        if self.verifier_rejection:
            data["verifier_rejection"] = self.verifier_rejection
        return data


# What each skill does and when to use it, as the v2 prompts tell the model. Ids, text forms,
# parameter words and ranges are not written here: action_space_text reads them from
# humanclaw_gym.skills.
_SKILL_NOTES: dict[Skill, str] = {
    Skill.WALK: (
        "Walks straight ahead. After one chunk the humanoid should face about the same way "
        "as before. From a standstill (or right after Stop/Stand), take one slow chunk to "
        "get going, then walk normal or fast."
    ),
    Skill.STOP: (
        "Terminal: it ends the episode. Choose it only when the whole instruction has been "
        "carried out, never to pause, wait, think or simply stay where you are."
    ),
    Skill.TURN: (
        "Turns on the spot by that many degrees within the 0.5 seconds; make the angle no "
        "larger than needed."
    ),
    Skill.CLIMB_UP: (
        "Only when the next stair riser is already at the feet and the stairs run in the "
        "direction the humanoid faces; otherwise line up first with Walk and Turn."
    ),
    Skill.SIT: (
        "Sits down where the humanoid stands; the target height is the height of the "
        "surface to sit on."
    ),
    Skill.STEP_BACK: "Steps backwards while still facing forward.",
    Skill.SIDE_STEP: "Steps sideways, like a crab, to the left or right while still facing forward.",
    Skill.CLIMB_DOWN: (
        "Only when the next step down is already at the feet and the stairs run in the "
        "direction the humanoid faces; otherwise line up first with Walk, Turn or Side step."
    ),
}

# Placeholder word of each SkillCall parameter in the text forms the v2 prompts show.
_PARAM_PLACEHOLDERS = {
    "speed": "speed",
    "direction": "direction",
    "angle_deg": "degree",
    "distance_m": "distance",
    "height_m": "target height",
}
# A typical value per numeric parameter, for the example forms (inside every range).
_EXAMPLE_VALUES = {"angle_deg": 30.0, "distance_m": 0.25, "height_m": 0.45}


def _sample_call(skill: Skill) -> SkillCall:
    fields: dict[str, Any] = {}
    for name, rule in skill.spec.params.items():
        if isinstance(rule, Choice):
            if len(rule.values) > 1:
                fields[name] = rule.values[0]
        elif name in _EXAMPLE_VALUES and rule.low <= _EXAMPLE_VALUES[name] <= rule.high:
            fields[name] = _EXAMPLE_VALUES[name]
        else:
            fields[name] = rule.default if rule.default is not None else rule.low
    return SkillCall(skill, **fields)


def _choices(skill: Skill, name: str) -> tuple[str, ...] | None:
    rule = skill.spec.params[name]
    return rule.values if isinstance(rule, Choice) else None


def _text_form(skill: Skill, fixed: dict[str, str] | None = None) -> str:
    """The text form with placeholders (``Turn<direction><degree>``); single-choice words
    and the entries of ``fixed`` are written out."""
    fixed = dict(fixed or {})
    sample = _sample_call(skill)
    values = {name: getattr(sample, name) for name in skill.params}
    pending = list(skill.params)
    parts = []
    for group in re.findall(r"<([^<>]*)>", str(sample)):
        name = pending[0] if pending else None
        if name is not None and group == _fmt_value(values[name]):
            pending.pop(0)
            choices = _choices(skill, name)
            if name in fixed:
                group = fixed[name]
            elif choices is not None and len(choices) == 1:
                group = choices[0]
            else:
                group = _PARAM_PLACEHOLDERS[name]
        parts.append(f"<{group}>")
    return skill.text_name + "".join(parts)


def _fmt_value(value: Any) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def _param_note(skill: Skill, name: str) -> str | None:
    choices = _choices(skill, name)
    if name == "speed" and skill is Skill.WALK:
        return "speed: " + ", ".join(f"<{word}> {_fmt(WALK_SPEED_M[word])} m" for word in SPEEDS)
    if choices is not None:
        return None if len(choices) == 1 else f"{name}: " + " or ".join(f"<{c}>" for c in choices)
    rule = skill.spec.params[name]
    label = {"angle_deg": "degree", "height_m": "target height", "distance_m": "distance"}
    unit = "degrees" if rule.unit == "deg" else rule.unit
    return f"{label.get(name, name)}: {_fmt(rule.low)}-{_fmt(rule.high)} {unit}"


def action_space_text(skills: Sequence[Skill] | None = None, *, style: str = "full") -> str:
    """The skill table of the v2 prompts, built from :mod:`humanclaw_gym.skills`.

    This is the only place the v2 prompts describe skills: ids, names and text forms come
    from :class:`~humanclaw_gym.skills.Skill`, parameter words and ranges from the range
    constants, and only the one-sentence usage notes are written here.

    Args:
        skills: which skills to list, in this order.
        style: ``"full"`` (one block per skill: ``action id N: <form>``, its parameters and
            a usage note), ``"brief"`` (the same without the notes), ``"compact"`` (one
            line: ``0 Walk<forward><speed>; 2 ...``) or ``"forms"`` (every exact
            ``action_name`` form, with examples for numbers).

    Returns:
        The text.

    Raises:
        ValueError: an unknown style, or ``skills`` holding something that is not a Skill.
    """
    chosen = tuple(Skill) if skills is None else tuple(skills)
    for skill in chosen:
        if not isinstance(skill, Skill):
            raise ValueError(f"skills must hold Skill members, got {skill!r}")
    if style == "compact":
        return "; ".join(f"{int(skill)} {_text_form(skill)}" for skill in chosen) + "."
    if style == "forms":
        forms: list[str] = []
        for skill in chosen:
            words = [name for name in skill.params if (_choices(skill, name) or ("",))[1:]]
            numeric = [name for name in skill.params if _choices(skill, name) is None]
            variants: list[dict[str, str]] = [{}]
            for name in words:
                variants = [{**v, name: c} for v in variants for c in _choices(skill, name)]
            for variant in variants:
                form = f"`{_text_form(skill, variant)}`"
                if numeric:
                    sample = _sample_call(skill)
                    if variant:
                        sample = SkillCall(skill, **{**sample.params, **variant})
                    form += f" (e.g. `{sample}`)"
                forms.append(form)
        return ", ".join(forms)
    if style not in ("full", "brief"):
        raise ValueError(
            f"style={style!r} is unknown: allowed 'full', 'brief', 'compact' or 'forms'"
        )
    blocks = []
    for skill in chosen:
        notes = [note for name in skill.params if (note := _param_note(skill, name))]
        head = f"action id {int(skill)}: {_text_form(skill)}"
        if notes:
            head += " - " + "; ".join(notes)
        note = _SKILL_NOTES.get(skill, skill.spec.meaning)  # custom skills: their meaning
        blocks.append(head if style == "brief" else f"{head}\n    {note}")
    return "\n".join(blocks)


SYSTEM_FRAME = (
    "You are the mind of a BLUE humanoid standing in a 3D home. The attached picture comes "
    "from the humanoid's own head camera, an egocentric view. The humanoid's blue body and "
    "feet are at the bottom-centre edge of the picture: that edge is where your body is."
)
"""Opening paragraph shared by the v2 planner and verifier prompts."""

_PLANNER_V2 = (
    SYSTEM_FRAME
    + """

You choose both the plan and the skill for this humanoid.
You receive one high-level instruction. At every step, first set a mid-level goal for \
roughly the next 2-3 seconds, then pick exactly one low-level action for the next 0.5 \
seconds.
The attached current picture is your main evidence. The recent steps in the input (if any) \
are your memory: use them to keep your actions consistent and to decide whether the \
previous mid-level goal still holds. Keep the previous mid-level goal, or set a new one \
once it is done or the picture shows a new situation.

Actions you can choose from (each lasts 0.5 seconds):
$actions

How to set the mid-level goal:
- Anchor it to landmarks you can see, without spelling out every low-level move.
- A closed door is a wall unless you can see that it is open: never plan to go through it \
or to search beyond it.
- While the target is not in view, scan for it by turning in ONE direction and keep to \
that direction. If the scan does not reveal it, use the history and the picture to pick \
the most promising place you can see and head there, instead of turning on the spot \
again.
- Do not spin around repeatedly, and do not keep switching between left and right turns.
- Once the target is in view, plan a clear and safe route to it; walking, turning and side \
stepping may all be needed to get around obstacles.
- Do not bump into things on the way: if you are too close to a wall, a closed door, \
furniture or any other obstacle, first turn towards an open passage you can see, then \
move into it.
- Keep to the middle of open floor and clear passages; stay out of narrow gaps and \
enclosed corners where you could get stuck.
- Do not use vague goals such as "explore systematically" or "search the house".
- A target counts as reached only when your body touches it, at zero distance.
- When the instruction is completely done, set mid_level_goal to Stop/Stand and choose \
Stop/Stand.
- Sitting takes several steps: first get to zero distance from the target (touching it), \
then work out the Turn angle and turn, then Step back for at most two chunks if needed, \
then Sit down for 3-4 chunks.
- A Turn made to get ready for sitting carries additional_info {"turn_for_sit": true}.
- Once you are seated, choose Stop/Stand with additional_info {"stop_after_sit": true}.

How to pick the low-level action:
- Pick the action that serves the current mid-level goal best.
- If the lane straight ahead is clear and the goal, an open path, a doorway, a hallway, a \
passage, a room edge or a stair entrance lies roughly ahead, Walk<forward> is the default.
- Turn when the mid-level goal says to scan, when nearby obstacles force a new route, or \
when the useful direction is not straight ahead. Do not turn continuously and do not \
alternate left and right turns.
- If the history already shows several Turn chunks and the lane ahead is safe, walk into \
that lane instead of turning again.
- If an obstacle blocks your lane, turn towards the clearest open floor you can see rather \
than walking into it.
- Do not walk into a cluster of furniture or a narrow gap while open floor, a doorway, a \
hallway, a passage or a room edge is available.
- Speed: slow for tight spots or an uncertain start, normal for clear progress indoors, \
fast only for a wide lane with nothing in the way.
- The sitting sequence is: touch the target (zero distance), Turn with turn_for_sit, Step \
back at most two chunks if needed, Sit down for 3-4 chunks, then Stop/Stand with \
stop_after_sit.
- Side step moves you left or right onto a clear path around an obstacle at your feet or \
straight ahead; it usually takes two or more chunks.

Write action_name in exactly one of these forms: $forms.

The current picture is attached.

Input:
$input_json

Answer with exactly this JSON object:
{
  "visible_state": "From left to right I see <object or area>, about <distance> m from me; \
...; and <object or area>, about <distance> m from me. <Say whether the target object or \
place is visible. Say whether the lane right in front of my body is clear or blocked.>",
  "mid_level_progress_analysis": "<From the instruction, visible_state and history, \
briefly analyse where things stand and which mid-level goal to complete in the next 2-3 \
seconds; say whether you keep or change the previous goal, and why.>",
  "mid_level_goal": "<One very short sentence: the mid-level goal for the next 2-3 \
seconds.>",
  "low_level_action_reasoning": "<From mid_level_goal, visible_state and history, briefly \
say why this exact action with these parameters is right for the next 0.5 seconds.>",
  "action_id": $action_ids,
  "action_name": "<the action, in one of the forms above>",
  "additional_info": {} | {"turn_for_sit": true} | {"stop_after_sit": true}
}
"""
)


def render_planner_prompt_v2(
    instruction: str,
    step: int,
    history: Sequence[HistoryRow],
    *,
    version: str = "v2",
) -> str:
    """Compose the ``v2`` planner prompt for one decision.

    The input block is JSON: ``task`` (the instruction), ``ego_view`` (a note that the
    image is attached), ``steps_taken`` (the 0-based decision index, which is the number
    of earlier steps) and ``recent_steps`` (the :class:`HistoryRow` records, oldest first).
    The step limit is not shown.

    Args:
        instruction: the task text.
        step: 0-based decision index.
        history: the rows to show (the agent passes its last ten or more), oldest first.
        version: a v2-family key of :data:`PLANNER_PROMPTS`.

    Returns:
        The complete prompt text (the image is attached separately).
    """
    template = resolve_prompt_version(version)
    if version not in _V2_FAMILY:
        raise ValueError(
            f"prompt_version={version!r} is rendered by render_planner_prompt; "
            f"render_planner_prompt_v2 takes one of {sorted(_V2_FAMILY)}"
        )
    return fill_planner_template(
        template, instruction, step, history, {"ego_view": "attached image"}
    )


def fill_planner_template(
    template: str,
    instruction: str,
    step: int,
    history: Sequence[HistoryRow],
    pictures: Mapping[str, Any],
) -> str:
    """Fill a planner template of the ``v2`` frame (placeholders ``$actions``, ``$forms``,
    ``$action_ids``, ``$input_json``) for one decision.

    The input block is JSON: ``task`` (the instruction), the ``pictures`` entries (what
    the attached images are, e.g. ``{"ego_view": "attached image"}``), ``steps_taken``
    (the 0-based decision index) and ``recent_steps`` (the :class:`HistoryRow` records,
    oldest first).

    Raises:
        ValueError: an empty instruction.
        TypeError: history rows that are not :class:`HistoryRow` records.
    """
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError(f"instruction={instruction!r} is invalid: allowed a non-empty string")
    rows = []
    for row in history:
        if not isinstance(row, HistoryRow):
            raise TypeError(f"history must hold HistoryRow records, got {type(row).__name__}")
        rows.append(row.to_dict())
    payload = {
        "task": instruction.strip(),
        **pictures,
        "steps_taken": int(step),
        "recent_steps": rows,
    }
    return string.Template(template).substitute(
        actions=action_space_text(),
        forms=action_space_text(style="forms"),
        action_ids=" | ".join(str(int(skill)) for skill in Skill),
        input_json=json.dumps(payload, ensure_ascii=False, indent=2),
    )


PLANNER_PROMPTS["v2"] = _PLANNER_V2
_V2_FAMILY = frozenset({"v2"})


# ---- reply parsing ----------------------------------------------------------------------------


def _unfenced(body: str) -> str:
    """The content of a reply wrapped in one Markdown fence (```` ```lang ... ``` ````), or
    the reply itself. Linear (the regex this replaces backtracked cubically on long runs of
    whitespace)."""
    if len(body) < 6 or not (body.startswith("```") and body.endswith("```")):
        return body
    inner = body[3:-3]
    return inner[_FENCE_LANG_RE.match(inner).end() :].strip()


def extract_json_object(text: Any) -> dict[str, Any]:
    """Read a model reply as one JSON object.

    Accepts the object alone, wrapped in a Markdown code fence, or surrounded by other
    text (then the span from the first ``{`` to the last ``}`` is tried).

    Raises:
        ResponseFormatError: no JSON object could be read.
    """
    if not isinstance(text, str):
        raise ReplyExtractionError(f"reply must be text, got {type(text).__name__}")
    body = _unfenced(text.strip())
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
        except (RecursionError, ValueError) as exc:  # too deep; an integer of 4,300+ digits
            error = ValueError(f"JSON the decoder cannot take: {type(exc).__name__}")
            continue
        if isinstance(value, dict):
            return value
        error = ResponseFormatError(f"reply is JSON but a {type(value).__name__}, not an object")
    preview = body if len(body) <= 120 else body[:117] + "..."
    raise ReplyExtractionError(f"reply is not a JSON object ({error}): {preview!r}")
