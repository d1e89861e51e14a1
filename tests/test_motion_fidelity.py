"""The field metrics of benchmarks/motion_fidelity.py on frames whose answer is known."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
from humanclaw_gym.skills import Skill

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "motion_fidelity.py"


@pytest.fixture(scope="module")
def mf():
    spec = importlib.util.spec_from_file_location("motion_fidelity", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["motion_fidelity"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _bundle(mf, frames: np.ndarray, skill: Skill, realized: np.ndarray | None = None):
    n = len(frames)
    return mf.Bundle(
        name="synthetic",
        generated=frames,
        realized=frames if realized is None else realized,
        skill=np.full(n, int(skill)),
        step_start=np.array([0]),
        step_skill=np.array([int(skill)]),
        step_text=[skill.name],
        floor_y=0.0,
    )


def _standing(frames: int = 12) -> np.ndarray:
    history = ProceduralMotionGenerator().reset(np.zeros(3), 0.0, seed=0)
    return np.repeat(history[-1:], frames, axis=0)


def test_a_still_body_on_the_floor_neither_skates_floats_nor_sinks(mf) -> None:
    f = mf.field_frames(_bundle(mf, _standing(), Skill.WALK), None)
    assert not f["skate"].any() and not f["skate_generated"].any()
    assert np.all(np.abs(f["lowest_above"]) < mf.FLOAT_HEIGHT_M)
    assert f["bone_dev"].max() < 1e-9
    assert not f["limits"].any()
    assert np.all(f["gap"] == 0.0)


@pytest.mark.parametrize(("step_m", "skates"), [(0.03, True), (0.02, False)])
def test_feet_on_the_floor_sliding_more_than_2_5_cm_a_frame_skate(mf, step_m, skates) -> None:
    frames = _standing()
    frames[:, 0] += step_m * np.arange(len(frames))  # the whole body glides, feet down
    f = mf.field_frames(_bundle(mf, frames, Skill.WALK), None)
    assert bool(f["skate"][1:].all()) is skates and not f["skate"][0]
    assert bool(f["skate_at_step_edge"][1]) is skates and not f["skate_at_step_edge"][3:].any()
    report = mf.field_report([_bundle(mf, frames, Skill.WALK)])
    assert report["all"]["foot_skate_ratio"] == (1.0 if skates else 0.0)


def test_a_lifted_body_floats_and_a_sunk_one_penetrates(mf) -> None:
    up, down = _standing(), _standing()
    up[:, 1] += 0.10
    down[:, 1] -= 0.04
    above = mf.field_frames(_bundle(mf, up, Skill.WALK), None)["lowest_above"]
    below = mf.field_frames(_bundle(mf, down, Skill.WALK), None)["lowest_above"]
    assert np.all(above > mf.FLOAT_HEIGHT_M)
    assert np.all(below < -0.03)


def test_the_generated_vs_realized_gap_is_per_joint_in_the_pelvis_frame(mf) -> None:
    frames = _standing()
    moved = frames.copy()
    moved[:, 0] += 0.2  # the whole body 20 cm aside: only the root differs
    gap = mf.field_frames(_bundle(mf, frames, Skill.WALK, realized=moved), None)["gap"]
    np.testing.assert_allclose(gap[:, 0], 0.2)
    assert np.abs(gap[:, 1:]).max() < 1e-9


def test_a_procedural_sit_is_seated_and_a_lifted_one_is_a_bad_sit(mf) -> None:
    gen = ProceduralMotionGenerator()
    gen.reset(np.zeros(3), 0.0, seed=0)
    chunk = gen.generate("Sit down<0.45>")
    (good,) = mf.seated_checks(_bundle(mf, chunk, Skill.SIT), None)
    assert not good["bad"]
    assert good["heel_above_floor_m"] <= mf.SEATED_HEEL_MAX_M
    assert good["wrist_below_shoulder_m"] >= mf.SEATED_WRIST_DROP_MIN_M
    lifted = chunk.copy()
    lifted[:, 1] += 0.08  # heels 8 cm up
    (bad,) = mf.seated_checks(_bundle(mf, lifted, Skill.SIT), None)
    assert bad["bad"] and bad["heel_above_floor_m"] > mf.SEATED_HEEL_MAX_M
