"""The procedural generator's output is byte-identical to the recorded one.

``tests/fixtures/procedural_golden.json`` holds the SHA-256 of every chunk (float64, C
order) the generator produced, before its speed-up, for three episodes (all eight skills,
seated transitions, stairs, three seeds and start poses). The speed-up (issue #18: written
out cross products, norms, linspace and single-angle rotations, a cache of single-angle
matrices; later, float-only paths of the easing curves and the knee angle) must not change
a bit.

Bits are only comparable between machines with the same numerics: the digests were recorded
where OpenBLAS chose its ``SkylakeX`` kernels (the fixture's ``numerics`` record). On such a
machine every chunk must match its digest; elsewhere (another BLAS kernel set or numpy SIMD
target, docs/baselines.md "Across machines") each chunk must equal the recorded chunk in
``procedural_golden_chunks.npz`` within 1e-9, far below any change of the motion itself
(the kernels alone move it by less than 1e-13 here). A subprocess with
``OPENBLAS_CORETYPE=SkylakeX`` checks the bits on any AVX-512 machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from humanclaw_gym.motion import _legs
from humanclaw_gym.motion import procedural as proc
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
from humanclaw_gym.motion.rotations import rot_x, rot_y, rot_z
from humanclaw_gym.provenance import cpu_record

_GOLDEN = Path(__file__).parent / "fixtures" / "procedural_golden.json"
_CHUNKS = Path(__file__).parent / "fixtures" / "procedural_golden_chunks.npz"
_TOLERANCE = 1e-9


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float64).tobytes()).hexdigest()


def _same_numerics(recorded: dict) -> bool:
    cpu = cpu_record()
    blas = cpu["blas"] or {}
    return (
        blas.get("architecture") == recorded["blas_architecture"]
        and cpu["numpy_simd"] == recorded["numpy_simd"]
    )


@pytest.mark.parametrize("episode", [0, 1, 2])
def test_procedural_frames_are_byte_identical_to_the_recorded_ones(episode) -> None:
    doc = json.loads(_GOLDEN.read_text())
    exact = _same_numerics(doc["numerics"])
    chunks = np.load(_CHUNKS)
    ep = doc["episodes"][episode]
    gen = ProceduralMotionGenerator()
    history = gen.reset(np.array(ep["start"]), ep["yaw"], seed=ep["seed"])
    assert _digest(history) == ep["reset_sha256"]
    for i, (call, expected) in enumerate(zip(ep["calls"], ep["chunk_sha256"], strict=True)):
        chunk = gen.generate(call)
        recorded = chunks[f"ep{episode}_chunk{i:03d}"]
        assert _digest(recorded) == expected  # the stored chunk is the digested one
        if exact:
            assert _digest(chunk) == expected, f"chunk {i} ({call}) changed"
        else:
            err = float(np.abs(chunk - recorded).max())
            assert err <= _TOLERANCE, f"chunk {i} ({call}) changed by {err:.3g}"


def test_recorded_bits_reproduce_with_the_recorded_blas_kernels() -> None:
    """Where the CPU can run OpenBLAS's SkylakeX kernels, choosing them reproduces every
    recorded digest exactly (the tolerance above then only covers the kernel choice)."""
    doc = json.loads(_GOLDEN.read_text())
    cpu = cpu_record()
    if cpu["blas"] is None or cpu["blas"].get("api") != "openblas":
        pytest.skip("numpy's BLAS kernel set cannot be read or chosen here")
    if _same_numerics(doc["numerics"]) or cpu["numpy_simd"] != doc["numerics"]["numpy_simd"]:
        pytest.skip("covered by the exact check, or another numpy SIMD target set")
    tests = str(Path(__file__).parent)
    code = (
        f"import sys; sys.path.insert(0, {tests!r}); import test_procedural_golden as t; "
        "assert t._same_numerics(t.json.loads(t._GOLDEN.read_text())['numerics']); "
        "[t.test_procedural_frames_are_byte_identical_to_the_recorded_ones(e) for e in range(3)]"
    )
    env = {**os.environ, "OPENBLAS_CORETYPE": doc["numerics"]["blas_architecture"]}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_fast_helpers_equal_the_numpy_calls_they_replace() -> None:
    rng = np.random.default_rng(11)
    vecs = list(rng.normal(size=(200, 3))) + [np.zeros(3), np.array([-0.0, 1.0, 0.0])]
    for a, b in zip(vecs[:-1], vecs[1:], strict=True):
        assert np.array_equal(_legs._cross3(a, b), np.cross(a, b))
        assert _legs._norm3(a) == np.linalg.norm(a)
        stacked = np.stack([a, b, a], axis=1)
        columns = _legs._columns(a, b, a)
        assert np.array_equal(columns, stacked) and columns.flags.c_contiguous
    for start, stop in [(0.0, 0.5), (0.1, 0.1), (-0.3, 0.7), (0.0, 0.0), (1e-310, 2e-310)]:
        for num in (2, 3, 17):
            assert np.array_equal(_legs._linspace(start, stop, num), np.linspace(start, stop, num))
    for angle in [*rng.normal(size=50), 0.0, -0.0, np.float32(0.3), np.array(1.2)]:
        for fn in (rot_x, rot_y, rot_z):
            single = fn(angle)
            batch = fn(np.array([float(angle)]))[0]
            assert single.tobytes() == batch.tobytes()  # signed zeros included
            single[0, 0] = 99.0  # a caller may modify its matrix: the cache is not affected
            assert fn(angle).tobytes() == batch.tobytes()


def _same(a, b) -> bool:
    return np.float64(a).tobytes() == np.float64(b).tobytes()  # signed zeros and NaN too


def test_float_paths_equal_the_array_paths() -> None:
    """One Python float through the easing curves and the knee angle gives exactly what the
    array code gives for it as a 0-d array, which is what the generator's loops fed it
    before (numpy then computes on scalars; a one-element array would take numpy's vector
    power, which differs in the last bit for some inputs)."""
    rng = np.random.default_rng(5)
    edges = [0.0, -0.0, 1.0, 0.5, 1e-300, -1e-300, 1.0 - 1e-16, 2.0, -3.0, float("nan")]
    values = [*(rng.random(3000) * 3.0 - 1.0).tolist(), *edges]
    for u in values:
        assert isinstance(proc._mj(u), float) and isinstance(proc._bump(u), float)
        assert _same(proc._mj(u), proc._mj(np.asarray(u))), u
        assert _same(proc._bump(u), proc._bump(np.asarray(u))), u
        assert _same(proc._mj_window(u, 0.2, 0.9), proc._mj_window(np.asarray(u), 0.2, 0.9))
    for leg in _legs.leg_geometry():
        inside = leg.reach_min + rng.random(20000) * (leg.reach_max - leg.reach_min)
        dists = [*inside.tolist(), *(rng.random(200) * 1.2).tolist(), leg.reach_min, 0.0, 1e-9]
        dists.append(leg.reach_max)
        for dist in dists:
            assert _same(_legs.knee_angle(leg, dist), _legs.knee_angle(leg, np.asarray(dist)))
