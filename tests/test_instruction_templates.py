"""Instruction wording chosen at run time: ``instruction_template`` on the env, ``humanclaw
run`` / ``rollout --instruction-template``, its record in the run fingerprint, and one-line
errors for template files that cannot be used. The template files are written here."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.episodes import InstructionTemplate, load_split
from humanclaw_gym.episodes.instructions import (
    INSTRUCTION_TEMPLATE_SCHEMA,
    InstructionTemplateError,
    apply_instruction_template,
    instruction_template_record,
    load_instruction_template,
    resolve_instruction_template,
)
from humanclaw_gym.evaluation.batch import RunConfig, check_run_config, run_batch

# A wording in the shape of the reference release's (written for this test): a find
# sentence, a sit sentence appended for bed / couch / toilet, the tv called "TV".
WORDING = {
    "schema": INSTRUCTION_TEMPLATE_SCHEMA,
    "find": "Locate the {noun} and keep moving until you touch it.",
    "sit": "Then sit on the {noun}.",
    "nouns": {"tv": "TV"},
}


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_a_template_file_renders_every_category(tmp_path):
    template = load_instruction_template(_write(tmp_path / "t.json", WORDING))
    assert template == InstructionTemplate(
        find=WORDING["find"], sit=WORDING["sit"], nouns=(("tv", "TV"),)
    )
    assert template.render("couch", True) == (
        "Locate the couch and keep moving until you touch it. Then sit on the couch."
    )
    assert template.render("tv", False) == "Locate the TV and keep moving until you touch it."
    assert template.render("potted_plant", False).startswith("Locate the potted plant ")
    braces = load_instruction_template(
        _write(tmp_path / "b.json", {**WORDING, "find": "Find the {noun} {{now}}."})
    )
    assert braces.render("bed", False) == "Find the bed {now}."
    assert resolve_instruction_template("touch").nouns == (("tv", "TV"),)
    assert resolve_instruction_template(None) is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", "not valid JSON"),
        ([], "must be a JSON object with the fields schema, find, sit, interact_find, nouns"),
        ({**WORDING, "schema": "v2"}, "field 'schema' must be 'humanclaw_instruction_template_v1'"),
        ({**WORDING, "finish": "x"}, "unknown field 'finish'; allowed: schema, find, sit"),
        ({k: v for k, v in WORDING.items() if k != "find"}, "field 'find' must be a non-empty"),
        ({**WORDING, "find": ""}, "field 'find' must be a non-empty string"),
        ({**WORDING, "sit": 3}, "field 'sit' must be a non-empty string"),
        ({**WORDING, "find": "Find the {category}."}, "placeholder {category}; the only"),
        ({**WORDING, "find": "Find the {noun!r}."}, "placeholder {noun!r}; the only"),
        ({**WORDING, "find": "Find the {noun:>9}."}, "placeholder {noun:>9}; the only"),
        ({**WORDING, "find": "Find the {noun."}, "is not a valid template"),
        ({**WORDING, "find": "Find the } thing."}, "is not a valid template"),
        ({**WORDING, "nouns": ["TV"]}, "field 'nouns' must be an object of category -> name"),
        ({**WORDING, "nouns": {"sofa": "couch"}}, "nouns['sofa'] is no target category"),
        ({**WORDING, "nouns": {"tv": "{noun}"}}, "nouns['tv'] must be a non-empty name"),
    ],
)
def test_bad_template_files_fail_in_one_line_naming_the_file(tmp_path, doc, message):
    path = _write(tmp_path / "bad.json", doc)
    with pytest.raises(InstructionTemplateError) as info:
        load_instruction_template(path)
    text = str(info.value)
    assert message in text and str(path) in text and "\n" not in text


def test_names_paths_and_missing_files(tmp_path):
    with pytest.raises(InstructionTemplateError, match="neither a shipped template"):
        resolve_instruction_template("reference")
    with pytest.raises(InstructionTemplateError, match="no such file"):
        resolve_instruction_template(str(tmp_path / "absent.json"))
    with pytest.raises(InstructionTemplateError, match=r"at most 65536 bytes"):
        load_instruction_template(_write(tmp_path / "big.json", " " * 70_000))
    with pytest.raises(InstructionTemplateError, match="instruction_template must be"):
        resolve_instruction_template(42)  # type: ignore[arg-type]


def test_the_env_gives_every_episode_the_template_wording(tmp_path):
    path = _write(tmp_path / "t.json", WORDING)
    default = load_split("val100")
    env = gym.make(ENV_ID, split="val100", instruction_template=str(path), max_steps=1)
    try:
        episodes = env.unwrapped.episodes
        assert len(episodes) == len(default)
        for ours, theirs in zip(default, episodes, strict=True):
            noun = "TV" if ours.object_category == "tv" else ours.object_category.replace("_", " ")
            expected = f"Locate the {noun} and keep moving until you touch it."
            if ours.interact:
                expected += f" Then sit on the {noun}."
            assert theirs.instruction == expected and theirs.episode_id == ours.episode_id
        _, info = env.reset(options={"episode_id": default[0].episode_id})
        assert info["instruction"] == episodes[0].instruction
    finally:
        env.close()
    # the default stays each episode's own instruction
    assert [e.instruction for e in apply_instruction_template(default, None)] == [
        e.instruction for e in default
    ]
    with pytest.raises(InstructionTemplateError, match="placeholder {x}"):
        gym.make(
            ENV_ID,
            instruction_template=str(_write(tmp_path / "x.json", {**WORDING, "find": "{x}"})),
        )


def test_the_run_records_the_template_and_refuses_an_edited_file(tmp_path):
    from humanclaw_gym.evaluation.fingerprint import FINGERPRINT_FILE, RunFingerprintError

    path = _write(tmp_path / "t.json", WORDING)
    out = tmp_path / "run"
    config = RunConfig(agent="random", output=str(out), instruction_template=str(path))
    check_run_config(config)
    run_batch([], config, progress=False)
    settings = json.loads((out / FINGERPRINT_FILE).read_text())["settings"]
    assert settings["instruction_template"] == {
        "source": str(path),
        "find": WORDING["find"],
        "sit": WORDING["sit"],
        "interact_find": None,
        "nouns": {"tv": "TV"},
    }
    run_batch([], config, progress=False, resume=True)  # same file: resumes
    _write(path, {**WORDING, "sit": "Sit down on the {noun}."})
    with pytest.raises(RunFingerprintError) as info:
        run_batch([], config, progress=False, resume=True)
    assert info.value.fields == ("instruction_template.sit",)
    # a record written before the setting existed reads as "no template"
    data = json.loads((out / FINGERPRINT_FILE).read_text())
    del data["settings"]["instruction_template"]
    (out / FINGERPRINT_FILE).write_text(json.dumps(data))
    run_batch([], RunConfig(agent="random", output=str(out)), progress=False, resume=True)
    assert instruction_template_record(None) is None
    with pytest.raises(ValueError, match="only available for local runs"):
        check_run_config(
            RunConfig(agent="random", instruction_template=str(path), via_server="http://x")
        )


def test_cli_rollout_uses_the_template_and_refuses_a_bad_one(tmp_path, capsys):
    from humanclaw_gym.cli.run_cmd import rollout_main

    path = _write(tmp_path / "t.json", WORDING)
    out = tmp_path / "ro"
    common = ["--max-steps", "1", "--output", str(out), "--no-metrics"]
    assert rollout_main([*common, "--instruction-template", str(path)]) == 0
    first = load_split("val100")[0]
    printed = capsys.readouterr().out
    assert f": Locate the {first.object_category.replace('_', ' ')} and keep moving" in printed
    bad = _write(tmp_path / "bad.json", {**WORDING, "find": "Find the {category}."})
    assert rollout_main([*common, "--instruction-template", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("humanclaw rollout: error: ") and str(bad) in err
    assert "the only placeholder allowed is {noun}" in err and "\n" not in err
