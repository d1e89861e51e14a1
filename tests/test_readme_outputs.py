"""The outputs the README quotes are what its commands print today.

The README shows what ``humanclaw rollout --agent oracle --max-steps 5`` prints for the
first val100 episode. This test runs that command and compares: every line must match,
except the wall-clock time (``in 2.5 s``), and numbers may differ by at most one unit in the
last printed digit (the figures are bit-reproducible only on the same CPU, see
docs/baselines.md "Across machines"). When the motion or the physics changes what the
command prints, this test fails until the README shows the new output.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_TIME = re.compile(r" in \d+(\.\d+)? s ")
_NUMBER = re.compile(r"-?\d+\.\d+")


def _quoted_block(text: str, marker: str) -> list[str]:
    """The lines of the first fenced block after the paragraph containing ``marker``."""
    start = text.index(marker)
    fence = text.index("```", start)
    body_start = text.index("\n", fence) + 1
    end = text.index("```", body_start)
    return text[body_start:end].rstrip("\n").splitlines()


def _same_line(quoted: str, printed: str) -> bool:
    quoted, printed = _TIME.sub(" in T s ", quoted), _TIME.sub(" in T s ", printed)
    if _NUMBER.sub("#", quoted) != _NUMBER.sub("#", printed):
        return False
    for a, b in zip(_NUMBER.findall(quoted), _NUMBER.findall(printed), strict=True):
        unit = 10.0 ** -len(a.split(".")[1])
        if len(a.split(".")[1]) != len(b.split(".")[1]) or abs(float(a) - float(b)) > 1.01 * unit:
            return False
    return True


def test_the_smoke_test_output_in_the_readme_is_what_the_command_prints(
    tmp_path, monkeypatch, capsys
) -> None:
    from humanclaw_gym.cli import main

    quoted = _quoted_block(README.read_text(encoding="utf-8"), "The smoke test prints")
    assert "humanclaw rollout --agent oracle --max-steps 5" in README.read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["rollout", "--agent", "oracle", "--max-steps", "5"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(printed) == len(quoted), (quoted, printed)
    for q, p in zip(quoted, printed, strict=True):
        assert _same_line(q, p), f"README quotes {q!r}, the command prints {p!r}"


@pytest.mark.parametrize(
    ("quoted", "printed", "same"),
    [
        ("x=4.440, y=11.819", "x=4.441, y=11.819", True),
        ("x=4.440, y=11.819", "x=4.480, y=11.816", False),
        ("done in 1.4 s -> d", "done in 2.5 s -> d", True),
        ("x=4.440", "x=4.44", False),
        ("a=n/a", "a=0.000", False),
    ],
)
def test_the_comparison_allows_only_the_time_and_the_last_digit(quoted, printed, same) -> None:
    assert _same_line(quoted, printed) is same
