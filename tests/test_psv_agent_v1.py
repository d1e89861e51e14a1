"""The first PSV agent, kept as ``psv:v1``, with a scripted fake ChatModel: routing, retries,
fallbacks, clamping, history, log files, and the v1 prompt/verifier helpers. These tests pin
its behaviour so that earlier results stay reproducible; the default agent is tested in
test_psv_agent.py."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanclaw_agents.prompts import (
    PLANNER_PROMPTS,
    HistoryItem,
    ResponseFormatError,
    extract_json_object,
    render_planner_prompt,
)
from humanclaw_agents.psv import PSVAgentV1 as PSVAgent
from humanclaw_agents.psv import action_from_fields
from humanclaw_agents.transports import ChatModel, ModelCallError, ModelReply
from humanclaw_agents.verifier import (
    ROUTES,
    check_replacement,
    parse_verdict,
    render_verifier_prompt,
    select_route,
)
from humanclaw_gym.policy import Decision, Policy, Usage
from humanclaw_gym.skills import Skill, SkillCall

_INSTRUCTION = "Find the couch and sit on it."
_RAW_MARKER = "RAW-PROVIDER-TEXT-MARKER"


def _image(value: int = 7) -> np.ndarray:
    return np.full((448, 448, 3), value, dtype=np.uint8)


def plan(action_id: int | None, action_name: str | None, **info: Any) -> str:
    """A planner reply as JSON text."""
    data: dict[str, Any] = {
        "visible_state": "I see a couch to the left.",
        "mid_level_progress_analysis": "The couch is in view.",
        "mid_level_goal": "approach the couch",
        "low_level_action_reasoning": f"reasoning {_RAW_MARKER}",
        "action_id": action_id,
        "action_name": action_name,
        "additional_info": info,
    }
    return json.dumps(data)


def verdict(kind: str, action_id: int | None = None, action_name: str | None = None) -> str:
    return json.dumps(
        {"verdict": kind, "action_id": action_id, "action_name": action_name, "reason": "r"}
    )


class ScriptedModel:
    """Replies from per-stage scripts; an Exception item is raised instead of answered."""

    def __init__(
        self,
        planner: Iterable[str | Exception] = (),
        verifier: Iterable[str | Exception] = (),
    ) -> None:
        self.scripts = {"planner": list(planner), "verifier": list(verifier)}
        self.calls: list[tuple[str, str, np.ndarray | None]] = []

    def add(self, planner: Iterable[str | Exception] = (), verifier: Iterable[Any] = ()) -> None:
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


def _agent(model: ScriptedModel, out: Path | None = None, **kwargs: Any) -> PSVAgent:
    agent = PSVAgent(model, output_dir=out, **kwargs)
    agent.reset({"instruction": _INSTRUCTION, "max_steps": 100, "interact": True})
    return agent


def _act(agent: PSVAgent, step: int, image: np.ndarray | None = None) -> Decision:
    info = {"instruction": _INSTRUCTION, "step": step, "target_category": "couch"}
    return agent.act(_image() if image is None else image, info)


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


# ---- routing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action_id", "action_name", "info", "route"),
    [
        (0, "Walk<forward><normal>", {}, "walk"),
        (1, "Stop/Stand", {}, "stop"),
        (3, "Climb upstairs<normal>", {}, "climb_up"),
        (2, "Turn<left><30>", {"turn_for_sit": True}, "turn_for_sit"),
        (1, "Stop/Stand", {"stop_after_sit": True}, "stop_after_sit"),
        (2, "Turn<left><30>", {}, None),
        (6, "Side step<left><0.2>", {}, None),
        (5, "Step back<0.3>", {}, None),
        (4, "Sit down<0.45>", {}, None),
        (7, "Walk downstairs<normal>", {}, None),
    ],
)
def test_verifier_routing(
    tmp_path: Path, action_id: int, action_name: str, info: dict[str, Any], route: str | None
):
    model = ScriptedModel([plan(action_id, action_name, **info)], [verdict("accept")])
    decision = _act(_agent(model, tmp_path), 0)

    assert str(decision.action) == str(SkillCall.parse(action_name))
    assert decision.extras["verifier_route"] == route
    assert decision.extras["verifier_called"] is (route is not None)
    assert decision.extras["verifier"] == "accept"
    assert decision.extras["proposed"] == str(decision.action)
    expected_stages = ["planner", "verifier"] if route else ["planner"]
    assert model.stages() == expected_stages
    assert len(decision.usage) == len(expected_stages)
    assert [u.stage for u in decision.usage] == expected_stages
    names = sorted(p.name for p in tmp_path.iterdir())
    expected = ["step000_percept_mid_low.json"]
    if route:
        expected.append("step000_verifier.json")
        record = _read(tmp_path / "step000_verifier.json")
        assert record["route"] == route
        assert record["verdict"] == "accept" and record["attempts"] == 1
        assert "error" not in record
    assert names == expected
    # the verifier sees the same image as the planner
    if route:
        assert model.calls[1][2] is model.calls[0][2]


def test_turn_for_sit_sequence_verifies_only_the_first_turn(tmp_path: Path):
    model = ScriptedModel()
    agent = _agent(model, tmp_path)
    tfs = {"turn_for_sit": True}

    model.add([plan(2, "Turn<left><60>", **tfs)], [verdict("accept")])
    assert _act(agent, 0).extras["verifier_route"] == "turn_for_sit"
    assert agent.turn_for_sit_active

    model.add([plan(2, "Turn<left><60>", **tfs)])
    assert _act(agent, 1).extras["verifier_called"] is False
    model.add([plan(2, "Turn<right><20>")])  # a plain turn does not end the sequence
    assert _act(agent, 2).extras["verifier_called"] is False
    model.add([plan(2, "Turn<left><30>", **tfs)])
    assert _act(agent, 3).extras["verifier_called"] is False
    assert agent.turn_for_sit_active

    model.add([plan(6, "Side step<left><0.2>")])  # a non-turn action resets the state
    assert _act(agent, 4).extras["verifier_called"] is False
    assert not agent.turn_for_sit_active

    model.add([plan(2, "Turn<left><60>", **tfs)], [verdict("accept")])
    assert _act(agent, 5).extras["verifier_route"] == "turn_for_sit"
    assert sorted(p.name for p in tmp_path.glob("*_verifier.json")) == [
        "step000_verifier.json",
        "step005_verifier.json",
    ]
    model.add(["not json"] * 5)  # the planner fallback walk also ends the sequence
    assert str(_act(agent, 6).action) == "Walk<forward><slow>"
    assert not agent.turn_for_sit_active

    agent.reset({"instruction": _INSTRUCTION})
    assert not agent.turn_for_sit_active and agent.history == ()


def test_stop_right_after_sit_uses_the_stop_after_sit_route():
    model = ScriptedModel([plan(4, "Sit down<0.45>"), plan(1, "Stop/Stand")], [verdict("accept")])
    agent = _agent(model)
    assert _act(agent, 0).extras["verifier_called"] is False
    decision = _act(agent, 1)
    assert decision.extras["verifier_route"] == "stop_after_sit"
    assert decision.action.is_stop
    assert "just sat down" in model.calls[-1][1]


# ---- retries and fallbacks --------------------------------------------------------------------


def test_bad_json_twice_then_good_counts_three_attempts(tmp_path: Path):
    model = ScriptedModel(["not json at all", '{"action_id": 2', plan(2, "Turn<left><30>")])
    decision = _act(_agent(model, tmp_path), 4)

    assert str(decision.action) == "Turn<left><30>"
    assert [(u.stage, u.attempt) for u in decision.usage] == [
        ("planner", 1),
        ("planner", 2),
        ("planner", 3),
    ]
    assert all(u.input_tokens == 100 and u.source == "provider" for u in decision.usage)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step004_percept_mid_low.json"]
    record = _read(tmp_path / "step004_percept_mid_low.json")
    assert record["attempts"] == 3
    assert "error" not in record
    assert record["response"]["action_name"] == "Turn<left><30>"
    assert record["prompt"] == model.calls[0][1]
    assert record["proposed_action"] == "Turn<left><30>"
    assert decision.extras["planner_attempts"] == 3
    assert decision.visible_state == "I see a couch to the left."


def test_provider_errors_and_invalid_actions_are_retried():
    model = ScriptedModel(
        [
            ModelCallError("HTTP 500"),
            TimeoutError("slow"),
            plan(2, "Turn<30>"),  # no direction: invalid, retried
            plan(9, "Fly<up>"),  # unknown skill id: invalid, retried
            plan(6, "Side step<right><0.3>"),
        ]
    )
    decision = _act(_agent(model), 0)
    assert str(decision.action) == "Side step<right><0.3>"
    assert [u.source for u in decision.usage] == [
        "none",
        "none",
        "provider",
        "provider",
        "provider",
    ]
    assert [u.attempt for u in decision.usage] == [1, 2, 3, 4, 5]


def test_planner_failing_five_times_walks_slowly_without_verifier(tmp_path: Path):
    model = ScriptedModel(["garbage"] * 4 + [ModelCallError("down")])
    agent = _agent(model, tmp_path)
    decision = _act(agent, 2)

    assert decision.action == SkillCall.walk("slow")
    assert str(decision.action) == "Walk<forward><slow>"
    assert model.stages() == ["planner"] * 5
    assert len(decision.usage) == 5
    assert decision.visible_state is None
    assert decision.extras["verifier"] == "skipped"
    assert decision.extras["verifier_called"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step002_percept_mid_low.json"]
    record = _read(tmp_path / "step002_percept_mid_low.json")
    assert record["attempts"] == 5
    assert record["response"] is None
    assert "down" in record["error"]
    assert record["fallback_action"] == "Walk<forward><slow>"
    assert agent.history[-1].action == "Walk<forward><slow>"


def test_verifier_failing_five_times_accepts_the_proposal(tmp_path: Path):
    model = ScriptedModel(
        [plan(0, "Walk<forward><fast>")],
        ["nope", verdict("maybe"), verdict("replace"), ModelCallError("x"), "{"],
    )
    decision = _act(_agent(model, tmp_path), 0)
    assert str(decision.action) == "Walk<forward><fast>"
    assert decision.extras["verifier"] == "failed_open"
    assert decision.extras["verifier_attempts"] == 5
    assert [u.stage for u in decision.usage] == ["planner"] + ["verifier"] * 5
    record = _read(tmp_path / "step000_verifier.json")
    assert record["attempts"] == 5 and record["error"]
    assert record["final_action"] == "Walk<forward><fast>"
    assert record["verdict"] == "failed_open"


def test_verifier_replacement_is_executed_not_the_proposal(tmp_path: Path):
    model = ScriptedModel(
        [plan(0, "Walk<forward><fast>")],
        [verdict("replace", 6, "Side step<left><0.3>")],
    )
    agent = _agent(model, tmp_path)
    decision = _act(agent, 0)
    assert str(decision.action) == "Side step<left><0.3>"
    assert decision.extras["verifier"] == "replace"
    assert decision.extras["proposed"] == "Walk<forward><fast>"
    record = _read(tmp_path / "step000_verifier.json")
    assert record["proposed_action"] == "Walk<forward><fast>"
    assert record["final_action"] == "Side step<left><0.3>"
    assert agent.history[-1].action == "Side step<left><0.3>"
    assert agent.history[-1].replaced == "Walk<forward><fast>"


def test_stop_replaced_by_stop_is_rejected_and_retried():
    model = ScriptedModel(
        [plan(1, "Stop/Stand")],
        [verdict("replace", 1, "Stop/Stand"), verdict("replace", 0, "Walk<forward><slow>")],
    )
    decision = _act(_agent(model), 0)
    assert str(decision.action) == "Walk<forward><slow>"
    assert decision.extras["verifier_attempts"] == 2
    assert decision.extras["verifier"] == "replace"
    with pytest.raises(ResponseFormatError, match="Stop/Stand"):
        check_replacement(SkillCall.stop(), SkillCall.stop())
    check_replacement(SkillCall.walk(), SkillCall.walk("slow"))


# ---- clamping and action parsing ------------------------------------------------------------


def test_agent_clamps_out_of_range_numbers(tmp_path: Path):
    model = ScriptedModel(
        [plan(2, "Turn<left><200>"), plan(4, "Sit down<0.05>"), plan(5, "Step back<2>")]
    )
    agent = _agent(model, tmp_path)
    assert _act(agent, 0).action == SkillCall.turn("left", 120.0)
    assert _act(agent, 1).action == SkillCall.sit(0.15)
    assert _act(agent, 2).action == SkillCall.step_back(0.6)
    record = _read(tmp_path / "step000_percept_mid_low.json")
    assert record["adjustments"] == ["angle_deg 200 clamped to 120"]


@pytest.mark.parametrize(
    ("action_id", "action_name", "info", "expected"),
    [
        (0, "Walk<forward><fast>", None, SkillCall.walk("fast")),
        (0, "Walk forward", {"speed": "slow"}, SkillCall.walk("slow")),
        (None, "Walk<forward>", None, SkillCall.walk("normal")),
        ("2", "Turn<Right><45deg>", None, SkillCall.turn("right", 45.0)),
        (2, "Turn in place", {"direction": "left", "angle_deg": 5}, SkillCall.turn("left", 10.0)),
        (2, "Turn<left><-90>", None, SkillCall.turn("left", 90.0)),
        (4, "Sit down<0.45m>", None, SkillCall.sit(0.45)),
        (4, "Sit down", None, SkillCall.sit(0.5)),
        (4, "Sit down<1.2>", None, SkillCall.sit(0.85)),
        (5, "Step back<0.01>", None, SkillCall.step_back(0.1)),
        (6, "Side step<left><0.9>", None, SkillCall.side_step("left", 0.5)),
        (
            6,
            "side_step",
            {"direction": "right", "distance": 0.2},
            SkillCall.side_step("right", 0.2),
        ),
        (1, "Stop/Stand", None, SkillCall.stop()),
        (3, "", None, SkillCall.climb_up()),
        (7.0, "Walk downstairs<normal>", None, SkillCall.climb_down()),
        (2, "rotate<left><30>", None, SkillCall.turn("left", 30.0)),  # id decides
    ],
)
def test_action_from_fields(
    action_id: Any, action_name: str, info: dict[str, Any] | None, expected: SkillCall
):
    call, _notes = action_from_fields(action_id, action_name, info)
    assert call == expected


@pytest.mark.parametrize(
    ("action_id", "action_name", "info", "match"),
    [
        (0, "Turn<left><30>", None, "disagrees"),
        (None, "Fly<up>", None, "names no known skill"),
        (None, None, None, "names no action"),
        (12, "x", None, "action_id=12"),
        ("two", None, None, "action_id='two'"),
        (True, None, None, "action_id=True"),
        (2, "Turn<30>", None, "needs a direction"),
        (6, "Side step<0.3>", None, "needs a direction"),
        (0, "Walk forward", {"speed": "sprint"}, "speed='sprint'"),
        (4, "Sit down", {"height_m": "tall"}, "height_m='tall'"),
        (4, "Sit down<nan>", None, None),
        (0, 42, None, "action_name=42"),
    ],
)
def test_action_from_fields_errors(
    action_id: Any, action_name: Any, info: dict[str, Any] | None, match: str | None
):
    with pytest.raises(ResponseFormatError, match=match):
        action_from_fields(action_id, action_name, info)


# ---- history ----------------------------------------------------------------------------------


def test_history_is_bounded_and_semantic_only():
    model = ScriptedModel([plan(6, f"Side step<left><0.{i % 4 + 1}>") for i in range(15)])
    agent = _agent(model)
    for step in range(15):
        _act(agent, step)

    history = agent.history
    assert len(history) == 10
    assert [item.step for item in history] == list(range(5, 15))
    for item in history:
        assert isinstance(item, HistoryItem)
        data = item.to_dict()
        assert set(data) == {"step", "action", "mid_level_goal", "progress_note", "replaced"}
        for value in data.values():
            assert value is None or isinstance(value, (int, str))
            assert not isinstance(value, str) or len(value) <= 200
    text = json.dumps([item.to_dict() for item in history])
    assert _RAW_MARKER not in text
    assert "I see a couch" not in text  # visible_state is not kept
    assert "usage" not in text and "tokens" not in text

    last_prompt = model.calls[-1][1]
    assert "step 4:" in last_prompt and "step 3:" not in last_prompt  # 10 items before step 14
    assert _RAW_MARKER not in last_prompt


def test_history_size_and_step_counter_without_info_step():
    model = ScriptedModel([plan(5, "Step back<0.2>")] * 4)
    agent = PSVAgent(model, history_size=2)
    agent.reset({"instruction": "Find the bed."})
    for _ in range(4):
        agent.act(_image(), {})
    assert [item.step for item in agent.history] == [2, 3]
    assert "Find the bed." in model.calls[0][1]


# ---- protocol, prompts, errors ---------------------------------------------------------------


def test_agent_satisfies_policy_protocol_and_passes_the_image():
    model = ScriptedModel([plan(5, "Step back<0.2>")])
    agent = _agent(model)
    assert isinstance(agent, Policy)
    assert isinstance(model, ChatModel)
    image = _image(99)
    decision = _act(agent, 0, image)
    assert isinstance(decision, Decision)
    np.testing.assert_array_equal(model.calls[0][2], image)
    json.dumps(dict(decision.extras))  # extras are JSON-serialisable


def test_agent_rejects_bad_inputs():
    model = ScriptedModel([plan(5, "Step back<0.2>")])
    with pytest.raises(ValueError, match="prompt_version='v0'"):
        PSVAgent(model, prompt_version="v0")
    with pytest.raises(ValueError, match="verifier_version='zz'"):
        PSVAgent(model, verifier_version="zz")
    with pytest.raises(ValueError, match="max_attempts=0"):
        PSVAgent(model, max_attempts=0)
    with pytest.raises(TypeError, match="ChatModel"):
        PSVAgent(object())
    agent = _agent(model)
    with pytest.raises(ValueError, match="uint8"):
        agent.act(np.zeros((448, 448, 3), dtype=np.float32), {"step": 0})
    fresh = PSVAgent(model)
    fresh.reset({})
    with pytest.raises(ValueError, match="instruction"):
        fresh.act(_image(), {"step": 0})


def test_planner_prompt_content():
    history = [HistoryItem(step=3, action="Turn<left><30>", mid_level_goal="scan the room")]
    prompt = render_planner_prompt("v1", _INSTRUCTION, 4, 100, history)
    assert _INSTRUCTION in prompt
    assert "decision 4 of at most 100" in prompt
    assert "448x448" in prompt and "blue humanoid" in prompt.lower()
    for text in ("Walk<forward><slow|normal|fast>", "Turn<left|right><10..120>", "Stop/Stand"):
        assert text in prompt
    assert "Side step<left|right><0.1..0.5>" in prompt and "Step back<0.1..0.6>" in prompt
    assert "Sit down<0.15..0.85>" in prompt
    assert "turn_for_sit" in prompt and "stop_after_sit" in prompt
    assert "step 3: executed Turn<left><30>; goal then: scan the room" in prompt
    for field in ("visible_state", "mid_level_goal", "action_id", "additional_info"):
        assert f'"{field}"' in prompt
    assert "$" not in prompt
    assert set(PLANNER_PROMPTS) >= {"v1"}
    with pytest.raises(ValueError, match="allowed one of"):
        render_planner_prompt("nope", _INSTRUCTION, 0, 100, [])


def test_verifier_prompts_and_route_selection():
    planner = {"visible_state": "a wall ahead", "mid_level_goal": "leave the room"}
    for route in ROUTES:
        prompt = render_verifier_prompt(
            "v1",
            route,
            instruction=_INSTRUCTION,
            step=3,
            max_steps=100,
            proposal=SkillCall.walk(),
            planner=planner,
            history=[],
        )
        assert "Walk<forward><normal>" in prompt and "a wall ahead" in prompt
        assert '"verdict"' in prompt and "$" not in prompt
    sit = SkillCall.sit()
    assert select_route(SkillCall.stop(), {}, last_action=sit, turn_for_sit_active=False) == (
        "stop_after_sit"
    )
    assert select_route(SkillCall.stop(), None, last_action=None, turn_for_sit_active=False) == (
        "stop"
    )
    turn = SkillCall.turn("left", 30)
    assert (
        select_route(turn, {"turn_for_sit": "true"}, last_action=None, turn_for_sit_active=True)
        is None
    )
    assert select_route(
        SkillCall.climb_down(), {}, last_action=None, turn_for_sit_active=False
    ) is (None)


def test_reply_parsing_helpers():
    fenced = '```json\n{"verdict": "Accept", "reason": "ok"}\n```'
    assert extract_json_object(fenced)["verdict"] == "Accept"
    assert extract_json_object('Sure! {"a": 1} hope this helps')["a"] == 1
    with pytest.raises(ResponseFormatError):
        extract_json_object("[1, 2]")
    with pytest.raises(ResponseFormatError):
        extract_json_object(None)
    assert parse_verdict(fenced).verdict == "accept"
    with pytest.raises(ResponseFormatError, match="needs the replacement"):
        parse_verdict('{"verdict": "replace"}')
    replacement = parse_verdict('{"verdict": "replace", "action_id": 2, "action_name": "Turn"}')
    assert replacement.action_id == 2 and Skill.from_name(replacement.action_name) is Skill.TURN
