"""Every ``humanclaw`` command reports a mistake in what it is given as one line with exit
code 2 and writes nothing (README, "Every command reports a mistake ...").

The table holds, per command, inputs that are wrong: a file, a flag, a path or a config.
Each runs in this process through the ``humanclaw`` entry point; a traceback would be an
exception here and fail the test. Every command of the CLI must appear in the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# (command, arguments): T is the test's folder; T/out and T/out.html must stay unwritten.
# T/empty is an empty folder, T/bad.json is not JSON, T/broken holds a replay bundle whose
# manifest is not one.
CASES: list[tuple[str, list[str]]] = [
    ("episodes", ["--split", "nosuch"]),
    ("episodes", ["--split", "T/bad.json"]),
    ("scenes", ["show", "--scene", "hc_val_999"]),
    ("scenes", ["render-map", "--scene", "hc_val_003", "--px-per-m", "0", "--out", "T/out/m.png"]),
    # a map of 1e9 px per metre was an OverflowError traceback (exit 1)
    (
        "scenes",
        ["render-map", "--scene", "hc_val_003", "--px-per-m", "1e9", "--out", "T/out/m.png"],
    ),
    (
        "scenes",
        ["render-map", "--scene", "hc_val_003", "--episode", "nope", "--out", "T/out/m.png"],
    ),
    ("rollout", ["--split", "nosuch", "--output", "T/out"]),
    ("rollout", ["--episode-id", "nope", "--output", "T/out"]),
    ("rollout", ["--agent", "nosuch_module:Thing", "--output", "T/out"]),
    ("rollout", ["--max-steps", "0", "--output", "T/out"]),
    ("rollout", ["--task", "nosuch", "--output", "T/out"]),
    ("rollout", ["--body-asset", "T/empty", "--output", "T/out"]),
    ("run", ["--episodes", "nosuch", "--output", "T/out"]),
    ("run", ["--episodes", "T/bad.json", "--output", "T/out"]),
    ("run", ["--workers", "0", "--output", "T/out"]),
    ("run", ["--ray-task-resources", "CPU=x", "--output", "T/out"]),
    ("run", ["--agent", "psv", "--model-config", "T/bad.json", "--output", "T/out"]),
    ("run", ["--instruction-template", "T/nosuch.json", "--output", "T/out"]),
    ("run", ["--motion-option", "steps", "--output", "T/out"]),
    ("run", ["--physics-option", "bogus=1", "--output", "T/out"]),
    ("run", ["--physics", "nosuch", "--output", "T/out"]),
    ("run", ["--scene-dataset", "T/nosuch", "--output", "T/out"]),
    ("run", ["--profile", "paper", "--output", "T/out"]),
    ("run", ["--via-server", "notaurl", "--output", "T/out"]),
    ("metrics", ["T/nosuch"]),
    ("metrics", ["T/empty", "--export", "T/out/x.json"]),
    ("metrics", ["T/empty", "--compare", "T/bad.json"]),
    ("render", ["--rollout-dir", "T/empty", "--output-dir", "T/out"]),
    ("render", ["--rollout-dir", "T/broken", "--output-dir", "T/out"]),
    ("render", ["--rollout-dir", "T/broken", "--renderer", "nosuch", "--output-dir", "T/out"]),
    # --crf 99 was refused only after the output folder was made
    ("render", ["--rollout-dir", "T/broken", "--crf", "99", "--output-dir", "T/out"]),
    # an unknown gender was accepted (and ignored)
    ("render", ["--rollout-dir", "T/broken", "--body-model-gender", "x", "--output-dir", "T/out"]),
    ("render", ["--rollout-dir", "T/broken", "--no-ego", "--no-exo", "--output-dir", "T/out"]),
    # no bundle under --root, or no --root at all: exit 1
    ("render-batch", ["--root", "T/empty", "--output-root", "T/out"]),
    ("render-batch", ["--root", "T/nosuch", "--output-root", "T/out"]),
    # flags every job would fail on: exit 1 after a failed job per rollout
    ("render-batch", ["--root", "T/broken", "--output-root", "T/out", "--crf", "99"]),
    ("render-batch", ["--root", "T/broken", "--output-root", "T/out", "--renderer", "nosuch"]),
    ("render-batch", ["--root", "T/broken", "--output-root", "T/out", "--workers", "0"]),
    ("render-batch", ["--root", "T/broken", "--output-root", "T/out", "--body-model-dir", "T/no"]),
    ("report", ["--rollout-dir", "T/nosuch", "--output", "T/out.html"]),
    ("report", ["--rollout-dir", "T/empty", "--output", "T/out.html"]),
    # a bad flag, or the one rollout given unreadable: exit 1
    ("report", ["--rollout-dir", "T/broken", "--output", "T/out.html", "--image-size", "0"]),
    ("report", ["--rollout-dir", "T/broken", "--output", "T/out.html", "--renderer", "nosuch"]),
    ("report", ["--rollout-dir", "T/broken", "--output", "T/out.html"]),
    ("serve", ["--output-dir", "T/out"]),  # no token in the environment
    ("serve", ["--output-dir", "T/out", "--port", "99999"]),
    ("serve", ["--output-dir", "T/out", "--host", "0.0.0.0"]),
    ("doctor", ["--no-probe", "--hide", "nosuch"]),
    ("doctor", ["--no-probe", "--timeout-s", "-1"]),
    # a path that does not exist: exit 1 with the whole report
    ("doctor", ["--no-probe", "--scene-dataset", "T/nosuch"]),
    ("doctor", ["--no-probe", "--release", "T/nosuch"]),
    ("view", ["--split", "nosuch", "--duration-s", "1"]),
    ("view", ["--host", "0.0.0.0", "--duration-s", "1"]),
    ("view", ["--agent", "nosuch", "--duration-s", "1"]),
]


def _ids() -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for command, _ in CASES:
        seen[command] = seen.get(command, 0) + 1
        ids.append(f"{command}-{seen[command]}")
    return ids


def _workspace(root: Path) -> None:
    (root / "empty").mkdir()
    (root / "bad.json").write_text("{nope")
    broken = root / "broken"
    broken.mkdir()
    (broken / "replay_manifest.json").write_text("{}")


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_every_command_is_in_the_table() -> None:
    from humanclaw_gym.cli import COMMANDS

    assert {command for command, _ in CASES} == set(COMMANDS)


@pytest.mark.parametrize(("command", "args"), CASES, ids=_ids())
def test_an_input_mistake_is_one_line_exit_2_nothing_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    args: list[str],
) -> None:
    from humanclaw_gym.cli import main

    monkeypatch.delenv("HUMANCLAW_SERVER_TOKEN", raising=False)
    monkeypatch.delenv("HUMANCLAW_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    _workspace(tmp_path)
    before = _files(tmp_path)
    argv = [a.replace("T/", f"{tmp_path}/") for a in args]
    code = main([command, *argv])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, captured.err + captured.out
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"humanclaw {command}: error: "), lines[0]
    assert _files(tmp_path) == before, sorted(map(str, _files(tmp_path) - before))
