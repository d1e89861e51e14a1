"""Procedural chunks computed in worker processes (humanclaw_gym/motion/pool.py) equal the
generator's own, bit for bit, and are used only for the state and call they were made for."""

from __future__ import annotations

import numpy as np
import pytest

from humanclaw_gym.motion.pool import ProceduralMotionPool
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
from humanclaw_gym.skills import SkillCall

_CALLS = [
    SkillCall.walk("normal"),
    SkillCall.turn("left", 30),
    SkillCall.climb_up(),
    SkillCall.climb_down(),
    SkillCall.sit(0.45),
    SkillCall.walk("slow"),  # stands up first
    SkillCall.side_step("right", 0.3),
    SkillCall.step_back(0.2),
]


def _generators(n: int) -> list[ProceduralMotionGenerator]:
    gens = []
    for k in range(n):
        g = ProceduralMotionGenerator()
        g.reset(np.array([0.3 * k, 0.0, -0.2 * k]), 0.4 * k, seed=k)
        gens.append(g)
    return gens


def test_pool_chunks_equal_local_ones_bit_for_bit() -> None:
    local, staged = _generators(3), _generators(3)
    with ProceduralMotionPool(2) as pool:
        for step, _ in enumerate(_CALLS):
            calls = [_CALLS[(step + k) % len(_CALLS)] for k in range(3)]
            futures = [pool.stage(g, c) for g, c in zip(staged, calls, strict=True)]
            for g, c, fut, ref in zip(staged, calls, futures, local, strict=True):
                chunk = g.generate(c)
                assert g._staged is None and fut.done()
                assert np.array_equal(chunk, ref.generate(c))
                assert np.array_equal(g.history(), ref.history())
                assert g.ground_y == ref.ground_y


def test_a_staged_chunk_is_used_only_for_its_call_and_state(monkeypatch) -> None:
    (g,) = _generators(1)
    (ref,) = _generators(1)
    with ProceduralMotionPool(1) as pool:
        pool.stage(g, SkillCall.walk("fast"))
        # a different call: the parked chunk is dropped and the generator computes its own
        assert np.array_equal(
            g.generate(SkillCall.turn("right", 45)), ref.generate(SkillCall.turn("right", 45))
        )
        assert g._staged is None
        # the state changed since staging (a reset): the parked chunk is not used
        pool.stage(g, SkillCall.walk("slow"))
        g.reset(np.zeros(3), 0.0, seed=5)
        ref.reset(np.zeros(3), 0.0, seed=5)
        assert g._staged is None
        pool.stage(g, SkillCall.walk("slow"))
        # the chunk comes from the worker: computing it here would fail
        monkeypatch.setattr(
            ProceduralMotionGenerator, "_pose_chunk", lambda *a, **k: pytest.fail("computed here")
        )
        chunk = g.generate("Walk<forward><slow>")  # an equal call in another form
        monkeypatch.undo()
        assert np.array_equal(chunk, ref.generate(SkillCall.walk("slow")))


def test_pool_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="workers=0 is invalid: allowed an int >= 1"):
        ProceduralMotionPool(0)
    pool = ProceduralMotionPool(1)
    with pytest.raises(
        ValueError, match="cannot be staged: allowed a ProceduralMotionGenerator after reset"
    ):
        pool.stage(ProceduralMotionGenerator(), SkillCall.walk("slow"))
    pool.close()
    (g,) = _generators(1)
    with pytest.raises(RuntimeError, match="the pool was closed"):
        pool.stage(g, SkillCall.walk("slow"))
    pool.close()  # idempotent


def test_worker_errors_reach_the_caller() -> None:
    (g,) = _generators(1)
    with ProceduralMotionPool(1) as pool:
        # the worker's own error comes back as it is (Stop/Stand produces no chunk)
        with pytest.raises(ValueError, match="produces no motion chunk"):
            pool.stage(g, SkillCall.stop()).result(timeout=60)
        pool.stage(g, SkillCall.walk("slow")).result(timeout=60)  # the worker runs
        # a worker that died fails the chunks it gets, it does not leave them waiting
        pool._workers[0].proc.kill()
        pool._workers[0].proc.wait()
        with pytest.raises(RuntimeError, match=r"procedural motion worker \(pid \d+\) stopped"):
            pool.stage(g, SkillCall.walk("slow")).result(timeout=60)
        g.generate(SkillCall.walk("fast"))  # another call than the staged one: computed here
        pool.stage(g, SkillCall.walk("slow"))
        with pytest.raises(RuntimeError, match="stopped"):
            g.generate(SkillCall.walk("slow"))  # the staged chunk's error is raised
