"""The two learning examples of docs/learning_rl.md train for a couple of thousand steps."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEPS = 2048


def _script(name: str):
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _check_outputs(out: Path, curve: dict, model_file: str) -> None:
    assert curve["total_steps"] >= STEPS
    assert curve["steps_per_s"] > 0 and math.isfinite(curve["steps_per_s"])
    returns = curve["episode_return"]
    assert len(returns) >= 20 and all(math.isfinite(r) for r in returns)
    assert curve["episode_end_step"] == sorted(curve["episode_end_step"])
    assert json.loads((out / "curve.json").read_text())["total_steps"] == curve["total_steps"]
    assert (out / "curve.png").stat().st_size > 5000
    assert (out / model_file).stat().st_size > 10000


@pytest.mark.slow
def test_sb3_ppo_trains_on_discrete_skills_with_the_shaped_reward(tmp_path):
    pytest.importorskip("stable_baselines3")
    example = _script("train_sb3_ppo")
    out = tmp_path / "sb3"
    curve = example.main(example.Args(total_steps=STEPS, output=out))
    _check_outputs(out, curve, "ppo.zip")


@pytest.mark.slow
def test_cleanrl_style_ppo_trains_over_make_vec(tmp_path):
    pytest.importorskip("torch")
    example = _script("cleanrl_ppo")
    out = tmp_path / "cleanrl"
    curve = example.main(example.Args(total_steps=STEPS, output=out))
    _check_outputs(out, curve, "agent.pt")
