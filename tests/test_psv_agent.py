"""The default PSV agent (``psv``, v2) against the reference release's behaviour.

Every test drives the agent with scripted model replies and checks the reference's outcome:
which action is executed, what the next planner prompt shows as history, what the verifier
was sent, what the step records hold. The sections follow the eight points of the issue:
task guidance, history, verifier input, routes, verifier replies, action parsing, reply
extraction, retries. No test sleeps: back-off goes through an injected ``sleep``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanclaw_agents.actions import action_from_reply, action_text_v2, executed_action_text_v2
from humanclaw_agents.prompts import (
    HISTORY_ROW_LIMITS,
    HistoryRow,
    action_space_text,
    render_planner_prompt_v2,
)
from humanclaw_agents.psv import (
    MIN_HISTORY,
    PSVAgent,
    PSVAgentV1,
    make_psv_agent,
    visible_state_text,
)
from humanclaw_agents.replies import RECOVERIES, ReplyExtractionError, read_reply_json
from humanclaw_agents.stages import REFERENCE_BACKOFF_S
from humanclaw_agents.transports import ModelCallError, ModelReply
from humanclaw_agents.verifier import (
    REPLACEMENT_SKILLS,
    ROUTES_V2,
    read_verdict_v2,
    recent_actions_text,
    render_verifier_prompt_v2,
)
from humanclaw_gym.evaluation.policies import PolicySpecError, load_policy
from humanclaw_gym.policy import Decision, Policy, Usage
from humanclaw_gym.skills import (
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_HEIGHT_RANGE_M,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    WALK_SPEED_M,
    Skill,
    SkillCall,
)

_INSTRUCTION = "Find the couch and sit on it."
_PLANNER_MARKER = "PLANNER-REASONING-MARKER"
_VISIBLE_MARKER = "VISIBLE-STATE-MARKER"


def _image(value: int = 7) -> np.ndarray:
    return np.full((448, 448, 3), value, dtype=np.uint8)


def plan(action_id: Any, action_name: Any, goal: str = "approach the couch", **info: Any) -> str:
    """A planner reply as JSON text."""
    return json.dumps(
        {
            "visible_state": f"A couch to the left. {_VISIBLE_MARKER}",
            "mid_level_progress_analysis": "The couch is in view.",
            "mid_level_goal": goal,
            "low_level_action_reasoning": f"reasoning {_PLANNER_MARKER}",
            "action_id": action_id,
            "action_name": action_name,
            "additional_info": info,
        }
    )


def vreply(
    verdict: Any = "accept", final_id: Any = None, final_name: Any = None, **extra: Any
) -> str:
    """A verifier reply as JSON text (the reference's final_action_* fields)."""
    data: dict[str, Any] = {"verdict": verdict, "reason": extra.pop("reason", "checked")}
    if final_id is not None:
        data["final_action_id"] = final_id
    if final_name is not None:
        data["final_action_name"] = final_name
    data.update(extra)
    return json.dumps(data)


class ScriptedModel:
    """Replies from per-stage scripts; an Exception item is raised instead of answered."""

    def __init__(
        self, planner: Iterable[str | Exception] = (), verifier: Iterable[str | Exception] = ()
    ) -> None:
        self.scripts = {"planner": list(planner), "verifier": list(verifier)}
        self.calls: list[tuple[str, str, np.ndarray | None]] = []

    def add(self, planner: Iterable[Any] = (), verifier: Iterable[Any] = ()) -> None:
        self.scripts["planner"].extend(planner)
        self.scripts["verifier"].extend(verifier)

    def respond(self, prompt: str, image_rgb: np.ndarray | None, stage: str) -> ModelReply:
        self.calls.append((stage, prompt, image_rgb))
        script = self.scripts[stage]
        if not script:
            raise AssertionError(f"unexpected {stage} call")
        item = script.pop(0)
        if isinstance(item, Exception):
            raise item
        usage = Usage(stage=stage, attempt=1, input_tokens=100, output_tokens=10)
        return ModelReply(text=item, usage=usage)

    def stages(self) -> list[str]:
        return [call[0] for call in self.calls]

    def prompts(self, stage: str) -> list[str]:
        return [prompt for name, prompt, _ in self.calls if name == stage]


class Sleeps(list):
    """An injected ``sleep`` that records instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _agent(model: ScriptedModel, out: Path | None = None, **kwargs: Any) -> PSVAgent:
    kwargs.setdefault("sleep", Sleeps())
    agent = PSVAgent(model, output_dir=out, **kwargs)
    agent.reset({"instruction": _INSTRUCTION, "max_steps": 100, "interact": True})
    return agent


def _act(agent: PSVAgent, step: int) -> Decision:
    return agent.act(_image(), {"instruction": _INSTRUCTION, "step": step, "max_steps": 100})


def _input_json(prompt: str) -> dict[str, Any]:
    """The JSON block after ``Input:`` in a v2 prompt."""
    match = re.search(r"\nInput:\n(\{.*?\n\})\n", prompt, re.DOTALL)
    assert match, "the prompt has no Input block"
    return json.loads(match.group(1))


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


# ---- 1. task guidance ---------------------------------------------------------------------------


def test_planner_prompt_carries_the_reference_rules_and_no_step_limit():
    model = ScriptedModel([plan(2, "Turn<left><30>")])
    _act(_agent(model), 4)
    (prompt,) = model.prompts("planner")
    lowered = prompt.lower()
    # touching the target at zero distance, not "about 20 cm"
    assert "touches it, at zero distance" in prompt
    assert "20 cm" not in prompt and "arm's reach" not in lowered
    # the sit sequence, the optional step back, the scan rule, the flags
    assert "step back for at most two chunks" in lowered
    assert "sit down for 3-4 chunks" in lowered
    assert "turning in one direction" in lowered
    assert "do not keep switching between left and right turns" in lowered
    assert '{"turn_for_sit": true}' in prompt and '{"stop_after_sit": true}' in prompt
    assert "set mid_level_goal to Stop/Stand" in prompt
    # no "decision N of at most 100": the step limit is not sent
    assert "at most 100" not in prompt and "of at most" not in prompt
    assert _input_json(prompt) == {
        "task": _INSTRUCTION,
        "ego_view": "attached image",
        "steps_taken": 4,
        "recent_steps": [],
    }
    for field in (
        "visible_state",
        "mid_level_progress_analysis",
        "mid_level_goal",
        "low_level_action_reasoning",
        "action_id",
        "action_name",
        "additional_info",
    ):
        assert f'"{field}":' in prompt
    assert "$" not in prompt


def test_skill_table_comes_from_the_skills_api():
    table = action_space_text()
    for skill in Skill:
        assert f"action id {int(skill)}: {skill.text_name}" in table
    for speed, metres in WALK_SPEED_M.items():
        assert f"<{speed}> {metres:g} m" in table
    for low, high in (TURN_ANGLE_RANGE_DEG, SIT_HEIGHT_RANGE_M):
        assert f"{low:g}-{high:g}" in table
    for low, high in (STEP_BACK_DISTANCE_RANGE_M, SIDE_STEP_DISTANCE_RANGE_M):
        assert f"distance: {low:g}-{high:g} m" in table
    # every example form parses as a valid SkillCall
    forms = action_space_text(style="forms")
    for example in re.findall(r"e\.g\. `([^`]+)`", forms):
        SkillCall.parse(example)
    compact = action_space_text([Skill.WALK, Skill.TURN], style="compact")
    assert compact == "0 Walk<forward><speed>; 2 Turn<direction><degree>."
    with pytest.raises(ValueError, match="style"):
        action_space_text(style="table")


# ---- 2. history ---------------------------------------------------------------------------------


def test_history_shows_the_planner_fields_the_proposal_and_the_rejection():
    model = ScriptedModel(
        [plan(0, "Walk<forward><fast>"), plan(2, "Turn<left><20>"), plan(2, "Turn<left><20>")],
        [vreply("replace", 6, "Side step<right><0.3>", reason="a chair blocks the lane")],
    )
    agent = _agent(model)
    assert str(_act(agent, 0).action) == "Side step<right><0.3>"
    _act(agent, 1)
    _act(agent, 2)
    rows = _input_json(model.prompts("planner")[2])["recent_steps"]
    assert rows[0] == {
        "step": 0,
        "visible_state": f"A couch to the left. {_VISIBLE_MARKER}",
        "mid_level_progress_analysis": "The couch is in view.",
        "mid_level_goal": "approach the couch",
        "low_level_action_reasoning": f"reasoning {_PLANNER_MARKER}",
        "action_name": "Walk<forward><fast>",  # what the planner proposed
        "verifier_rejection": (  # distances shown with two decimals, as the reference does
            "Verifier replaced Walk<forward><fast> with Side step<right><0.30> because a chair "
            "blocks the lane"
        ),
    }
    assert "verifier_rejection" not in rows[1]  # no verifier for a plain turn
    assert [row["step"] for row in rows] == [0, 1]
    assert agent.history[0].verifier_rejection is not None


def test_history_keeps_the_last_ten_rows_clipped_and_semantic_only():
    long_text = "word " * 200
    reply = json.loads(plan(5, "Step back<0.2>"))
    reply["visible_state"] = long_text
    reply["low_level_action_reasoning"] = long_text
    model = ScriptedModel(["<think>private thoughts</think>" + json.dumps(reply)] * 16)
    agent = _agent(model)
    for step in range(16):
        _act(agent, step)
    rows = _input_json(model.prompts("planner")[15])["recent_steps"]
    assert [row["step"] for row in rows] == list(range(5, 15))
    for row in rows:
        for field, limit in HISTORY_ROW_LIMITS.items():
            assert len(row.get(field, "")) <= limit
        assert row["visible_state"].endswith("...")
    assert "private thoughts" not in model.prompts("planner")[15]
    assert len(agent.history) == MIN_HISTORY
    with pytest.raises(ValueError, match="history_size=9"):
        PSVAgent(model, history_size=9)
    assert PSVAgent(model, history_size=12).history_size == 12


def test_history_row_limits_and_render_checks():
    row = HistoryRow(step=1, visible_state="x" * 500, action_name="a\nb")
    assert len(row.visible_state) == HISTORY_ROW_LIMITS["visible_state"]
    assert row.action_name == "a b"
    assert "verifier_rejection" not in row.to_dict()
    with pytest.raises(TypeError, match="HistoryRow"):
        render_planner_prompt_v2(_INSTRUCTION, 0, [{"step": 0}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="render_planner_prompt_v2"):
        from humanclaw_agents.prompts import render_planner_prompt

        render_planner_prompt("v2", _INSTRUCTION, 0, 100, [])


# ---- 3. verifier input --------------------------------------------------------------------------


def test_verifier_sees_only_goal_proposal_and_additional_info():
    model = ScriptedModel(
        [plan(2, "Turn<left><20>"), plan(0, "Walk<forward><normal>", note="hallway")],
        [vreply("accept")],
    )
    agent = _agent(model)
    _act(agent, 0)
    _act(agent, 1)
    (prompt,) = model.prompts("verifier")
    assert _input_json(prompt) == {
        "task": _INSTRUCTION,
        "proposed_action": "Walk<forward><normal>",
        "additional_info": {"note": "hallway"},
    }
    # nothing from the planner's text or the history reaches the verifier
    for text in (_PLANNER_MARKER, _VISIBLE_MARKER, "approach the couch", "Turn<left><20>"):
        assert text not in prompt
    assert model.stages() == ["planner", "planner", "verifier"]
    assert model.calls[2][2] is model.calls[1][2]  # the planner's image, not a new one


def test_verifier_without_additional_info_gets_no_such_key():
    model = ScriptedModel([plan(3, "Climb upstairs<normal>")], [vreply("accept")])
    _act(_agent(model), 0)
    assert _input_json(model.prompts("verifier")[0]) == {
        "task": _INSTRUCTION,
        "proposed_action": "Climb upstairs<normal>",
    }


def test_stop_after_sit_verifier_gets_the_recent_actions():
    model = ScriptedModel(
        [
            plan(2, "Turn<left><90.5>"),
            plan(4, "Sit down<0.456>"),
            plan(4, "Sit down<0.456>"),
            plan(1, "Stop/Stand", stop_after_sit=True),
        ],
        [vreply("accept")],
    )
    agent = _agent(model)
    for step in range(4):
        decision = _act(agent, step)
    assert decision.action.is_stop and decision.extras["verifier_route"] == "stop_after_sit"
    # listed as the reference lists executed actions: whole degrees (halves to even), two
    # decimals, "action id N: " before Sit down, Step back, Side step and Walk downstairs
    assert _input_json(model.prompts("verifier")[0]) == {
        "task": _INSTRUCTION,
        "proposed_action": "Stop/Stand",
        "additional_info": {"stop_after_sit": True},
        "recent_actions": "Turn<left><90> x1; action id 4: Sit down<0.46> x2",
    }
    assert recent_actions_text([]) == "none"


# ---- 4. routes ----------------------------------------------------------------------------------


def test_stop_after_a_sit_without_the_flag_takes_the_plain_stop_route():
    model = ScriptedModel([plan(4, "Sit down<0.45>"), plan(1, "Stop/Stand")], [vreply("accept")])
    agent = _agent(model)
    assert _act(agent, 0).extras["verifier_called"] is False
    decision = _act(agent, 1)
    assert decision.extras["verifier_route"] == "stop"
    assert "Stop/Stand: first work out what the high-level goal is" in model.prompts("verifier")[0]


@pytest.mark.parametrize(
    ("flag", "route"),
    [(True, "stop_after_sit"), ("TRUE ", "stop_after_sit"), (1, "stop"), ("yes", "stop")],
)
def test_flags_are_read_as_the_reference_reads_them(flag: Any, route: str):
    model = ScriptedModel([plan(1, "Stop/Stand", stop_after_sit=flag)], [vreply("accept")])
    assert _act(_agent(model), 0).extras["verifier_route"] == route


def test_turn_for_sit_state_is_cleared_by_a_plain_turn():
    tfs = {"turn_for_sit": True}
    model = ScriptedModel()
    agent = _agent(model)

    model.add([plan(2, "Turn<left><60>", **tfs)], [vreply("accept")])
    assert _act(agent, 0).extras["verifier_route"] == "turn_for_sit"
    assert agent.turn_for_sit_active
    model.add([plan(2, "Turn<left><60>", **tfs)])  # second flagged turn: not verified
    assert _act(agent, 1).extras["verifier_called"] is False
    assert agent.turn_for_sit_active
    model.add([plan(2, "Turn<right><20>")])  # a turn without the flag ends the sequence
    assert _act(agent, 2).extras["verifier_called"] is False
    assert not agent.turn_for_sit_active
    model.add([plan(2, "Turn<left><30>", **tfs)], [vreply("accept")])
    assert _act(agent, 3).extras["verifier_route"] == "turn_for_sit"
    assert model.stages().count("verifier") == 2


def test_turn_for_sit_replaced_by_an_approach_ends_the_sequence():
    tfs = {"turn_for_sit": True}
    model = ScriptedModel(
        [plan(2, "Turn<left><90>", **tfs), plan(2, "Turn<left><90>", **tfs)],
        [vreply("replace", 0, "Walk<forward><slow>"), vreply("replace", 2, "Turn<left><45>")],
    )
    agent = _agent(model)
    assert str(_act(agent, 0).action) == "Walk<forward><slow>"
    assert not agent.turn_for_sit_active
    # replaced by another turn: the sequence counts as verified
    assert str(_act(agent, 1).action) == "Turn<left><45>"
    assert agent.turn_for_sit_active


@pytest.mark.parametrize(
    ("action_id", "name", "route"),
    [
        (0, "Walk<forward><normal>", "walk"),
        (1, "Stop/Stand", "stop"),
        (3, "Climb upstairs<normal>", "climb_up"),
        (2, "Turn<left><30>", None),
        (4, "Sit down<0.45>", None),
        (5, "Step back<0.3>", None),
        (6, "Side step<left><0.2>", None),
        (7, "Walk downstairs<normal>", None),
    ],
)
def test_routes_and_files(tmp_path: Path, action_id: int, name: str, route: str | None):
    model = ScriptedModel([plan(action_id, name)], [vreply("accept")])
    decision = _act(_agent(model, tmp_path), 0)
    assert decision.extras["verifier_route"] == route
    expected = ["step000_percept_mid_low.json"] + (["step000_verifier.json"] if route else [])
    assert sorted(p.name for p in tmp_path.iterdir()) == expected
    assert model.stages() == ["planner"] + (["verifier"] if route else [])


# ---- 5. verifier replies ------------------------------------------------------------------------


def test_verifier_is_offered_neither_stop_nor_sit():
    assert Skill.STOP not in REPLACEMENT_SKILLS and Skill.SIT not in REPLACEMENT_SKILLS
    for route in ROUTES_V2:
        proposal = SkillCall.stop() if "stop" in route else SkillCall.walk("slow")
        prompt = render_verifier_prompt_v2(route, instruction=_INSTRUCTION, proposal=proposal)
        offered = prompt.split("It is your main evidence.")[1].split("What to do:")[0]
        assert "action id 1:" not in offered and "action id 4:" not in offered
        assert "1 Stop/Stand" not in offered and "4 Sit down" not in offered
        assert '"final_action_name"' in prompt and '"verdict": "accept" | "replace"' in prompt


@pytest.mark.parametrize(
    ("reply", "executed", "verdict"),
    [
        (vreply("replace", 6, "<final action>"), "Walk<forward><fast>", "accept"),
        (vreply("replace", 6), "Walk<forward><fast>", "accept"),
        (vreply("replace", 6, "   "), "Walk<forward><fast>", "accept"),
        (vreply("reject", 2, "Turn<left><30>"), "Walk<forward><fast>", "accept"),
        (json.dumps({"reason": "fine"}), "Walk<forward><fast>", "accept"),
        (vreply("Replace", None, "Turn<right><45>"), "Turn<right><45>", "replace"),
        # the reference executes whatever the verifier names, even a skill it was not offered
        (vreply("replace", 1, "Stop/Stand"), "Stop/Stand", "replace"),
        (vreply("replace", 5, "Step back"), "Step back<0.25>", "replace"),
    ],
)
def test_verifier_replies_are_read_without_retries(reply: str, executed: str, verdict: str):
    model = ScriptedModel([plan(0, "Walk<forward><fast>")], [reply])
    decision = _act(_agent(model), 0)
    assert str(decision.action) == executed
    assert decision.extras["verifier"] == verdict
    assert decision.extras["verifier_attempts"] == 1


def test_an_unreadable_replace_still_shows_as_a_rejection_in_history():
    model = ScriptedModel(
        [plan(0, "Walk<forward><fast>"), plan(2, "Turn<left><30>")],
        [vreply("replace", None, "<final action>", reason="too close to the wall")],
    )
    agent = _agent(model)
    assert str(_act(agent, 0).action) == "Walk<forward><fast>"
    _act(agent, 1)
    row = _input_json(model.prompts("planner")[1])["recent_steps"][0]
    assert row["verifier_rejection"] == (
        "Verifier replaced Walk<forward><fast> with Walk<forward><fast> because too close "
        "to the wall"
    )


def test_read_verdict_v2_notes():
    proposal = SkillCall.walk("fast")
    read = read_verdict_v2({"verdict": "maybe"}, proposal)
    assert read.verdict == "accept" and read.final is proposal
    assert read.notes == ("verdict='maybe' read as accept",)
    read = read_verdict_v2({"verdict": "replace", "final_action_name": "Turn<left>"}, proposal)
    assert read.final == SkillCall.turn("left", 10.0)
    assert "turn angle missing: used 10" in read.notes


# ---- 6. action parsing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action_id", "name", "expected"),
    [
        (0, "Turn<left><30>", SkillCall.walk("slow")),  # the id wins over the name
        (2, "Walk<forward><fast>", SkillCall.turn("left", 10.0)),
        ("2", "Turn<right><45>", SkillCall.turn("right", 45.0)),
        (2.9, "Turn<right><45>", SkillCall.turn("right", 45.0)),
        ("2.0", "Turn<right><45>", SkillCall.turn("right", 45.0)),  # unreadable id: the name
        (True, "Walk<forward><fast>", SkillCall.stop()),  # int(True) is 1
        (9, "Walk<forward><fast>", SkillCall.stop()),  # no such id
        (None, "Fly<up>", SkillCall.stop()),  # an unknown name is Stop/Stand
        (None, "", SkillCall.stop()),
        (None, "Walk<forward>", SkillCall.walk("slow")),  # default speed: slow
        (None, "Walk<forward><sprint>", SkillCall.walk("slow")),
        (None, "Walk<forward><fast>", SkillCall.walk("fast")),
        (None, "Turn<left>", SkillCall.turn("left", 10.0)),  # default angle: 10
        (None, "Turn<up><45>", SkillCall.turn("left", 45.0)),  # not "right": left
        (None, "Turn<left><-90>", SkillCall.turn("left", 10.0)),  # clamped, sign kept
        (None, "Turn<right><200>", SkillCall.turn("right", 120.0)),
        (None, "Side step<0.3>", SkillCall.side_step("left", 0.3)),  # default side: left
        (None, "Side step<right><0.9>", SkillCall.side_step("right", 0.5)),
        (None, "sidestep to the right", SkillCall.side_step("right", 0.25)),
        (None, "Step back", SkillCall.step_back(0.25)),
        (None, "back off<0.05>", SkillCall.step_back(0.1)),
        (None, "Sit down<45cm>", SkillCall.sit(0.85)),
        (None, "Sit down", SkillCall.sit(0.5)),
        (None, "Climb up the stairs", SkillCall.climb_up()),
        (None, "climb down<normal>", SkillCall.climb_down()),
        (None, "Walk downstairs<normal>", SkillCall.climb_down()),
        (None, "Stand still", SkillCall.stop()),
        # a falsy action_name of any type is an empty name, as the reference reads it
        (4, 0, SkillCall.sit(0.5)),  # not 0 clamped to 0.15
        (5, 0.0, SkillCall.step_back(0.25)),  # not 0.0 clamped to 0.1
        (6, False, SkillCall.side_step("left", 0.25)),
        (2, [], SkillCall.turn("left", 10.0)),
        (None, 0, SkillCall.stop()),
        (4, 0.45, SkillCall.sit(0.45)),  # a truthy number is read as its text
    ],
)
def test_action_from_reply(action_id: Any, name: Any, expected: SkillCall):
    call, _notes = action_from_reply(action_id, name)
    assert call == expected


@pytest.mark.parametrize(
    ("call", "shown", "listed"),
    [
        (SkillCall.turn("left", 30.5), "Turn<left><30>", "Turn<left><30>"),  # halves to even
        (SkillCall.turn("right", 31.5), "Turn<right><32>", "Turn<right><32>"),
        (SkillCall.turn("left", 44.4), "Turn<left><44>", "Turn<left><44>"),
        (SkillCall.sit(0.456), "Sit down<0.46>", "action id 4: Sit down<0.46>"),
        (SkillCall.sit(0.5), "Sit down<0.50>", "action id 4: Sit down<0.50>"),
        (SkillCall.step_back(0.125), "Step back<0.12>", "action id 5: Step back<0.12>"),
        (
            SkillCall.side_step("right", 0.333),
            "Side step<right><0.33>",
            "action id 6: Side step<right><0.33>",
        ),
        (SkillCall.climb_down(), "Walk downstairs<normal>", "action id 7: Walk downstairs<normal>"),
        (SkillCall.walk("fast"), "Walk<forward><fast>", "Walk<forward><fast>"),
        (SkillCall.climb_up(), "Climb upstairs<normal>", "Climb upstairs<normal>"),
        (SkillCall.stop(), "Stop/Stand", "Stop/Stand"),
    ],
)
def test_action_text_rounds_numbers_as_the_reference_shows_them(
    call: SkillCall, shown: str, listed: str
):
    assert action_text_v2(call) == shown
    assert executed_action_text_v2(call) == listed


def test_verifier_is_shown_the_rounded_proposal_and_the_exact_action_runs():
    model = ScriptedModel(
        [plan(2, "Turn<left><30.5>", turn_for_sit=True), plan(4, "Sit down<0.456>")],
        [vreply("accept")],
    )
    agent = _agent(model)
    decision = _act(agent, 0)
    assert decision.action == SkillCall.turn("left", 30.5)  # executed as asked
    verifier_input = _input_json(model.prompts("verifier")[0])
    assert verifier_input["proposed_action"] == "Turn<left><30>"
    assert "Turn<left><30>" in model.prompts("verifier")[0]
    assert "30.5" not in model.prompts("verifier")[0]
    assert _act(agent, 1).action == SkillCall.sit(0.456)


def test_falsy_planner_fields_are_empty_and_visible_state_is_read_as_text():
    reply = json.loads(plan(4, 0))
    reply.update(visible_state=["a couch ahead"], mid_level_goal=0)
    model = ScriptedModel([json.dumps(reply), plan(0, "Walk<forward><slow>")])
    agent = _agent(model)
    decision = _act(agent, 0)
    assert decision.action == SkillCall.sit(0.5)
    assert decision.visible_state == "['a couch ahead']"  # str() of it, as the reference
    _act(agent, 1)
    row = _input_json(model.prompts("planner")[1])["recent_steps"][0]
    # the planner gave no action_name: the executed action, listed as the reference lists it
    assert row["action_name"] == "action id 4: Sit down<0.50>"
    assert row["mid_level_goal"] == ""
    assert row["visible_state"] == "['a couch ahead']"
    for value, text in ((0, None), (False, None), ([], None), ("", None), ("A bed.", "A bed.")):
        assert visible_state_text({"visible_state": value}) == text
    assert visible_state_text({}) is None


def test_planner_actions_are_never_retried_and_notes_are_recorded(tmp_path: Path):
    model = ScriptedModel([plan(None, "Fly<up>")], [vreply("accept")])
    decision = _act(_agent(model, tmp_path), 0)
    assert decision.action.is_stop  # an unknown name stops, as in the reference
    assert decision.extras["planner_attempts"] == 1
    record = _read(tmp_path / "step000_percept_mid_low.json")
    assert record["adjustments"] == ["action_name='Fly<up>' names no skill: read as Stop/Stand"]
    assert record["proposed_action"] == "Stop/Stand"


# ---- 7. reply extraction ------------------------------------------------------------------------

_TURN = json.loads(plan(2, "Turn<left><45>"))
_TURN_JSON = json.dumps(_TURN)
_SINGLE_QUOTED = (
    "{'visible_state': 'a couch', 'mid_level_goal': 'turn', 'action_id': 2, "
    "'action_name': 'Turn<left><45>', 'additional_info': {},}"
)


@pytest.mark.parametrize(
    ("reply", "recoveries"),
    [
        (_TURN_JSON, set()),
        (f'<think>The couch... maybe {{"action_id": 0}}</think>\n{_TURN_JSON}', {"think_block"}),
        (f"I considered it.</think>{_TURN_JSON}", {"think_block_unopened"}),
        (
            f"<think>long reasoning with a draft {_TURN_JSON}",
            {"think_block_unclosed", "prose_around"},
        ),
        (f"```json\n{_TURN_JSON}\n```", {"code_fence"}),
        (f"Here is my decision:\n{_TURN_JSON}\nI hope this helps!", {"prose_around"}),
        (f'{_TURN_JSON}\n{{"action_id": 0}}', {"several_objects", "prose_around"}),
        (_TURN_JSON[:-1] + ",}", {"trailing_comma"}),
        (_SINGLE_QUOTED, {"single_quotes", "trailing_comma"}),
        (_TURN_JSON.replace("{}", "{'turn_for_sit': False}"), {"single_quotes", "python_literals"}),
        (
            f"<think>hmm</think>\nSure!\n```json\n{_TURN_JSON}\n```\nDone.",
            {"think_block", "code_fence", "prose_around"},
        ),
        (f"<think>{_TURN_JSON}</think>", {"think_block", "json_inside_think"}),
    ],
)
def test_reply_extraction_needs_no_retry_and_is_counted(
    tmp_path: Path, reply: str, recoveries: set[str]
):
    model = ScriptedModel([reply])
    decision = _act(_agent(model, tmp_path, reply_reader="tolerant"), 0)
    assert str(decision.action) == "Turn<left><45>"
    assert decision.extras["planner_attempts"] == 1
    assert decision.extras["retries"] == {"transport": 0, "extraction": 0, "invalid_reply": 0}
    record = _read(tmp_path / "step000_percept_mid_low.json")
    assert set(record["recoveries"]) == recoveries
    assert all(count == 1 for count in record["recoveries"].values())
    assert set(decision.extras["reply_recoveries"]) == recoveries
    assert set(RECOVERIES) >= recoveries


def test_reply_without_json_is_retried_and_counted(tmp_path: Path):
    sleeps = Sleeps()
    model = ScriptedModel(["I cannot decide.", "<think>{not json</think> nope", _TURN_JSON])
    decision = _act(_agent(model, tmp_path, sleep=sleeps), 0)
    assert str(decision.action) == "Turn<left><45>"
    assert decision.extras["retries"]["extraction"] == 2
    assert sleeps == [1.0, 2.0]
    record = _read(tmp_path / "step000_percept_mid_low.json")
    assert record["attempts"] == 3 and record["retries"]["extraction"] == 2
    with pytest.raises(ReplyExtractionError, match="no JSON object"):
        read_reply_json("no braces at all")
    with pytest.raises(ReplyExtractionError, match="must be text"):
        read_reply_json(None)


def _reference_reader(text: str) -> dict[str, Any]:
    """The reference reader as described: closed think blocks and fence markers removed,
    the whole rest as JSON, else the first ``{`` from which an object decodes."""
    clean = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()
    clean = clean.replace("```json", "").replace("```", "").strip()
    try:
        value = json.loads(clean)
        if isinstance(value, dict):
            return value
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", clean):
        try:
            value, _ = decoder.raw_decode(clean[match.start() :])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("no object")


_prose = st.text(alphabet=st.sampled_from(list("abc xyz.,:!?'\n-")), max_size=20)
_objects = st.dictionaries(
    st.sampled_from(["action_id", "action_name", "verdict", "note"]),
    st.one_of(st.integers(-3, 9), st.text(alphabet="abc<>' ", max_size=8), st.booleans()),
    min_size=1,
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(
    before=_prose,
    after=_prose,
    first=_objects,
    second=st.one_of(st.none(), _objects),
    think=st.one_of(st.none(), _prose),
    fence=st.booleans(),
)
def test_reader_agrees_with_the_reference_wherever_the_reference_reads(
    before: str, after: str, first: dict, second: dict | None, think: str | None, fence: bool
):
    body = json.dumps(first)
    if fence:
        body = f"```json\n{body}\n```"
    text = before + body + after
    if second is not None:
        text += " " + json.dumps(second)
    if think is not None:
        text = f"<think>{think}</think>" + text
    expected = _reference_reader(text)
    assert read_reply_json(text).data == expected


# ---- 8. retries and the plan horizon ------------------------------------------------------------


def test_back_off_between_failed_attempts_and_planner_fallback(tmp_path: Path):
    sleeps = Sleeps()
    model = ScriptedModel([ModelCallError("HTTP 503")] * 3 + ["not json", "still not json"])
    agent = _agent(model, tmp_path, sleep=sleeps)
    decision = _act(agent, 2)
    assert sleeps == list(REFERENCE_BACKOFF_S) == [1.0, 2.0, 4.0, 8.0]
    assert decision.action == SkillCall.walk("slow")
    assert model.stages() == ["planner"] * 5  # no verifier after a planner failure
    assert decision.extras["verifier"] == "skipped" and decision.visible_state is None
    assert decision.extras["retries"] == {"transport": 3, "extraction": 2, "invalid_reply": 0}
    assert [u.source for u in decision.usage] == ["none"] * 3 + ["provider"] * 2
    record = _read(tmp_path / "step002_percept_mid_low.json")
    assert record["response"] == "still not json"  # the final attempt's raw text
    assert "no JSON object" in record["error"] and record["attempts"] == 5
    assert record["fallback_action"] == "Walk<forward><slow>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step002_percept_mid_low.json"]
    # the fallback step is remembered with the planner fields the agent filled in
    row = agent.history[-1]
    assert row.action_name == "Walk<forward><slow>" and "no usable reply" in (
        row.mid_level_progress_analysis
    )


def test_failed_calls_report_prompt_size_for_cost_rules():
    model = ScriptedModel([ModelCallError("down"), TimeoutError("slow"), _TURN_JSON])
    decision = _act(_agent(model), 0)
    prompt = model.prompts("planner")[0]
    failed = decision.extras["failed_calls"]
    assert [(f["stage"], f["attempt"]) for f in failed] == [("planner", 1), ("planner", 2)]
    for entry in failed:
        assert entry["prompt_chars"] == len(prompt)
        assert entry["estimated_input_tokens"] == math.ceil(len(prompt) / 4)
    assert "ModelCallError: down" in failed[0]["error"]
    json.dumps(dict(decision.extras))


def test_verifier_failing_every_attempt_accepts_the_proposal(tmp_path: Path):
    sleeps = Sleeps()
    model = ScriptedModel([plan(0, "Walk<forward><fast>")], ["nope"] * 4 + [ModelCallError("x")])
    decision = _act(_agent(model, tmp_path, sleep=sleeps), 0)
    assert str(decision.action) == "Walk<forward><fast>"
    assert decision.extras["verifier"] == "failed_open"
    assert sleeps == [1.0, 2.0, 4.0, 8.0]
    record = _read(tmp_path / "step000_verifier.json")
    assert record["attempts"] == 5 and record["response"] == "" and "x" in record["error"]
    assert record["final_action"] == "Walk<forward><fast>"


def test_default_back_off_is_real_time_and_configurable():
    model = ScriptedModel()
    agent = PSVAgent(model)
    assert agent._runner.sleep is time.sleep
    assert agent._runner.backoff_s == (1.0, 2.0, 4.0, 8.0)
    assert agent.max_attempts == 5
    sleeps = Sleeps()
    quick = _agent(ScriptedModel(["x"] * 3), max_attempts=3, retry_backoff_s=(0.5,), sleep=sleeps)
    _act(quick, 0)
    assert sleeps == [0.5, 0.5]
    with pytest.raises(ValueError, match="retry_backoff_s"):
        PSVAgent(model, retry_backoff_s=(-1.0,))
    with pytest.raises(ValueError, match="max_attempts=0"):
        PSVAgent(model, max_attempts=0)


def test_plan_horizon_restarts_the_goal_age():
    model = ScriptedModel([plan(2, "Turn<left><20>", goal="scan")] * 8)
    agent = _agent(model)
    ages = []
    for step in range(8):
        _act(agent, step)
        ages.append(agent.current_plan)
    assert [age for _, age in ages] == [1, 2, 3, 4, 5, 6, 1, 2]
    model.add([plan(2, "Turn<left><20>", goal="walk to the door")])
    _act(agent, 8)
    assert agent.current_plan == ("walk to the door", 1)
    model.add([plan(2, "Turn<left><20>", goal="")])  # an empty goal keeps the current one
    _act(agent, 9)
    assert agent.current_plan == ("walk to the door", 2)


# ---- records, protocol, variants ----------------------------------------------------------------


def test_step_records_hold_the_reference_fields(tmp_path: Path):
    model = ScriptedModel(
        [f"<think>x</think>{plan(0, 'Walk<forward><normal>')}"],
        [vreply("replace", 2, "Turn<right><30>", reason="wall")],
    )
    _act(_agent(model, tmp_path), 7)
    planner = _read(tmp_path / "step007_percept_mid_low.json")
    assert planner["prompt"] == model.prompts("planner")[0]
    assert planner["response"] == json.loads(plan(0, "Walk<forward><normal>"))
    assert "error" not in planner
    assert planner["stage"] == "percept_mid_low" and planner["step"] == 7
    assert planner["schema"] == "humanclaw_agents.stage_record/v2"
    verifier = _read(tmp_path / "step007_verifier.json")
    assert verifier["prompt"] == model.prompts("verifier")[0]
    assert verifier["response"]["final_action_name"] == "Turn<right><30>"
    assert (verifier["route"], verifier["verdict"], verifier["final_action"]) == (
        "walk",
        "replace",
        "Turn<right><30>",
    )
    assert "error" not in verifier


def test_agent_protocol_and_inputs():
    model = ScriptedModel([plan(5, "Step back<0.2>")])
    agent = _agent(model)
    assert isinstance(agent, Policy)
    decision = _act(agent, 0)
    assert decision.visible_state == f"A couch to the left. {_VISIBLE_MARKER}"
    json.dumps(dict(decision.extras))
    with pytest.raises(ValueError, match="uint8"):
        agent.act(np.zeros((448, 448, 3), dtype=np.float32), {"step": 1})
    with pytest.raises(ValueError, match="not a v2 prompt"):
        PSVAgent(model, prompt_version="v1")
    with pytest.raises(ValueError, match="not a v2 verifier"):
        PSVAgent(model, verifier_version="v1")
    fresh = PSVAgent(model)
    fresh.reset({})
    with pytest.raises(ValueError, match="instruction"):
        fresh.act(_image(), {"step": 0})


def test_variants_through_the_policy_registry(tmp_path: Path):
    config = tmp_path / "model.json"
    config.write_text(json.dumps({"backend": "filesystem_queue", "queue_dir": "q"}))
    assert type(load_policy("psv", model_config=config)) is PSVAgent
    assert type(load_policy("psv:v2", model_config=config)) is PSVAgent
    assert type(load_policy("psv:v1", model_config=config)) is PSVAgentV1
    tolerant = load_policy("psv:tolerant", model_config=config)
    assert type(tolerant) is PSVAgent and tolerant.reply_reader == "tolerant"
    assert load_policy("psv", model_config=config).reply_reader == "reference"
    with pytest.raises(ValueError, match="allowed one of \\['tolerant', 'v1', 'v2'\\]"):
        load_policy("psv:v3", model_config=config)
    with pytest.raises(PolicySpecError, match="has no variants"):
        load_policy("random:v1")
    with pytest.raises(PolicySpecError, match="no variant"):
        load_policy("psv:", model_config=config)
    assert type(make_psv_agent(config, variant="v1")) is PSVAgentV1


# ---- a reasoning model through a real episode -----------------------------------------------------


class ReasoningModel:
    """Always thinks first and wraps its JSON in prose, as reasoning VLMs do."""

    _SCRIPT = (
        plan(2, "Turn<left><30>", goal="scan the room"),
        plan(2, "Turn<left><30>", goal="scan the room"),
        plan(0, "Walk<forward><slow>", goal="walk to the couch"),
        plan(6, "Side step<right><0.25>", goal="walk to the couch"),
        plan(0, "Walk<forward><normal>", goal="walk to the couch"),
        plan(5, "Step back<0.2>", goal="walk to the couch"),
        plan(1, "Stop/Stand", goal="Stop/Stand"),
    )

    def __init__(self) -> None:
        self.step = 0
        self.calls = 0

    def respond(self, prompt: str, image_rgb: np.ndarray | None, stage: str) -> ModelReply:
        assert image_rgb is not None and image_rgb.shape == (448, 448, 3)
        self.calls += 1
        if stage == "planner":
            body = self._SCRIPT[min(self.step, len(self._SCRIPT) - 1)]
            self.step += 1
        else:
            body = vreply("accept", reason="the lane is clear")
        text = (
            "<think>\nThe user wants me to look at the picture. Let me draft "
            '{"action_id": 0} first... no, wait.\n</think>\n\n'
            f"Based on the image, here is my decision:\n\n{body}\n\nLet me know if you need more."
        )
        return ModelReply(text=text, usage=Usage(stage=stage, input_tokens=900, output_tokens=60))


def test_reasoning_model_runs_a_val100_episode_without_extraction_retries(tmp_path: Path):
    import humanclaw_gym  # noqa: F401  (registers the env)
    from humanclaw_gym.envs import ENV_ID
    from humanclaw_gym.evaluation import run_episode

    env = gym.make(ENV_ID, split="val100", max_steps=20)
    model = ReasoningModel()
    agent = PSVAgent(model, sleep=Sleeps())
    try:
        result = run_episode(env, agent, output_dir=tmp_path)
    finally:
        env.close()
    assert result.ended_by == "stop" and result.steps == 7
    planner_files = sorted(tmp_path.glob("step*_percept_mid_low.json"))
    assert len(planner_files) == 7
    for path in planner_files:
        record = _read(path)
        assert record["attempts"] == 1 and record["retries"]["extraction"] == 0
        assert {"think_block", "prose_around"} <= set(record["recoveries"])
    verifier_files = sorted(tmp_path.glob("step*_verifier.json"))
    assert [p.name[:7] for p in verifier_files] == ["step002", "step004", "step006"]
    for path in verifier_files:
        assert _read(path)["attempts"] == 1
    assert model.calls == 7 + 3  # one call per stage: not one retry
    actions = [step.action for step in result.actions]
    assert actions[0] == "Turn<left><30>" and actions[-1] == "Stop/Stand"
    assert all(step.extras["retries"]["extraction"] == 0 for step in result.actions)
