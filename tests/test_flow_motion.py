"""Tests of the learned flow motion generator (humanclaw_gym.motion.flow); need torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from smplx_synthetic import write_synthetic_smplx as _write_synthetic_smplx  # noqa: E402

from humanclaw_gym.backends import registry  # noqa: E402
from humanclaw_gym.backends.protocols import MotionCapabilities, MotionGenerator  # noqa: E402
from humanclaw_gym.body.skeleton import forward_kinematics  # noqa: E402
from humanclaw_gym.motion.canonical import STATE_DIM, canonicalize, decanonicalize  # noqa: E402
from humanclaw_gym.motion.flow.checkpoint import (  # noqa: E402
    CheckpointError,
    default_checkpoint_path,
    load_checkpoint,
    save_checkpoint,
    sha256_file,
)
from humanclaw_gym.motion.flow.dataset import (  # noqa: E402
    BRANCHES,
    ChunkSet,
    TrainingStyleProcedural,
    branch_of,
    chunk_states,
    condition_value,
    hindsight_label,
    history_state,
    mocap_chunks,
    normalized_condition,
    procedural_chunks,
)
from humanclaw_gym.motion.flow.generator import (  # noqa: E402
    BatchedMotionService,
    FlowMotionGenerator,
    clear_model_cache,
    generate_many,
)
from humanclaw_gym.motion.flow.model import (  # noqa: E402
    SAMPLE_MIN_GAP,
    FlowModelConfig,
    MotionDiT,
    velocity_closure,
)
from humanclaw_gym.motion.flow.sampler import flow_matching_loss, sample_midpoint  # noqa: E402
from humanclaw_gym.motion.procedural import ProceduralMotionGenerator  # noqa: E402
from humanclaw_gym.skills import BUILTIN_MOTION_KEYS, NUM_SKILLS, Skill, SkillCall  # noqa: E402

_REPO = Path(__file__).resolve().parents[1]
_TINY = FlowModelConfig(d_model=32, n_layers=2, n_heads=2, ff_mult=2, control_layers=1)
_CALLS = (
    "Walk<forward><normal>",
    "Turn<left><45>",
    "Side step<right><0.25>",
    "Step back<0.3>",
    "Sit down<0.45>",
    "Climb upstairs<normal>",
    "Walk downstairs<normal>",
)


# --------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chunks() -> ChunkSet:
    return procedural_chunks(3, 12, seed=7)


def _tiny_model(seed: int = 0) -> MotionDiT:
    torch.manual_seed(seed)
    return MotionDiT(_TINY)


def _norm(data: ChunkSet) -> tuple[np.ndarray, np.ndarray]:
    states = np.concatenate(
        [data.history.reshape(-1, STATE_DIM), data.future.reshape(-1, STATE_DIM)]
    )
    return states.mean(0).astype(np.float64), np.maximum(states.std(0), 1e-3).astype(np.float64)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory, chunks: ChunkSet) -> Path:
    """A tiny model trained for a few steps on procedural chunks, saved as a checkpoint."""
    model = _tiny_model()
    mean, std = _norm(chunks)
    hist = torch.from_numpy(((chunks.history - mean) / std).astype(np.float32))
    fut = torch.from_numpy(((chunks.future - mean) / std).astype(np.float32))
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(20):
        loss = flow_matching_loss(lambda x, t: model(x, t, hist), fut, gen, weighting="data")
        opt.zero_grad()
        loss.backward()
        opt.step()
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_checkpoint(path, model, mean, std, {"note": "test"})
    return path


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    torch.set_num_threads(1)
    clear_model_cache()


def test_importing_the_package_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import humanclaw_gym.motion.flow as flow\n"
        "import humanclaw_gym.motion.flow.generator as gen\n"
        "import humanclaw_gym.motion.flow.checkpoint, humanclaw_gym.motion.flow.dataset\n"
        "assert gen.FlowMotionGenerator.capabilities.batched\n"
        "assert flow.BRANCHES[0] == 'walk'\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=_REPO)


# --------------------------------------------------------------------------------------
# data and canonical states
# --------------------------------------------------------------------------------------
def test_branch_table_and_conditions() -> None:
    assert BRANCHES == ("walk", "turn", "side_step", "step_back", "sit", "stairs")
    assert [branch_of(SkillCall.parse(c).skill) for c in _CALLS] == [0, 1, 2, 3, 4, 5, 5]
    values = [condition_value(SkillCall.parse(c)) for c in _CALLS]
    np.testing.assert_allclose(values, [0.4, np.radians(45), -0.25, 0.3, 0.45, 1.0, -1.0])
    with pytest.raises(ValueError, match="no control branch"):
        branch_of(Skill.STOP)
    norm = normalized_condition(np.arange(6), [0.6, np.radians(-120), 0.5, 0.6, 0.85, -1.0])
    np.testing.assert_allclose(norm, [1.0, -1.0, 1.0, 1.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="branch"):
        normalized_condition(6, 0.0)


def test_chunk_states_shapes_and_canonical_round_trip() -> None:
    gen = ProceduralMotionGenerator()
    gen.reset(np.array([2.0, 0.3, -1.0]), 1.1, seed=3)
    gen.generate("Walk<forward><fast>")
    hist, ground = gen.history(), gen.ground_y
    fut = gen.generate("Turn<right><60>")
    h, f = chunk_states(hist, fut, ground)
    assert h.shape == (5, STATE_DIM) and f.shape == (15, STATE_DIM)
    assert h.dtype == np.float64 and f.dtype == np.float64
    # last history pelvis above the origin, facing +Z, floor at y = 0
    np.testing.assert_allclose(h[-1, [0, 2]], 0.0, atol=1e-12)
    hs, ref = history_state(hist, ground)
    np.testing.assert_allclose(hs, h, atol=1e-12)
    assert ref.origin_m[1] == pytest.approx(0.3)
    np.testing.assert_allclose(decanonicalize(canonicalize(fut, ref), ref), fut, atol=1e-9)
    # joint positions inside the state are the forward kinematics of the canonical frames
    pos, _ = forward_kinematics(f[:, :75])
    np.testing.assert_allclose(f[:, 75:147], pos.reshape(15, -1), atol=1e-9)
    # first future velocity is against the last history frame
    np.testing.assert_allclose(f[0, 147:], (f[0, 75:147] - h[-1, 75:147]) * 30.0, atol=1e-9)


def test_procedural_chunks_and_chunkset_io(chunks: ChunkSet, tmp_path: Path) -> None:
    assert len(chunks) == 36
    assert chunks.history.shape == (36, 5, STATE_DIM) and chunks.history.dtype == np.float32
    assert chunks.future.shape == (36, 15, STATE_DIM) and chunks.future.dtype == np.float32
    assert chunks.branch.dtype == np.int64 and set(chunks.branch) <= set(range(6))
    assert np.all(np.isfinite(chunks.future))
    again = procedural_chunks(3, 12, seed=7)
    np.testing.assert_array_equal(again.future, chunks.future)
    path = tmp_path / "c.npz"
    chunks.save(str(path))
    loaded = ChunkSet.load(str(path))
    np.testing.assert_array_equal(loaded.history, chunks.history)
    np.testing.assert_array_equal(loaded.condition, chunks.condition)
    with pytest.raises(ValueError, match="ChunkSet.future"):
        ChunkSet(chunks.history, chunks.history, chunks.branch, chunks.condition)


def test_hindsight_labels_of_procedural_motion() -> None:
    gen = ProceduralMotionGenerator()
    frames = [gen.reset(np.zeros(3), 0.4, seed=0)]
    calls = ["Walk<forward><normal>"] * 3 + ["Turn<left><60>", "Side step<left><0.3>"]
    calls += ["Step back<0.4>", "Sit down<0.45>"]
    for c in calls:
        frames.append(gen.generate(c))
    clip = np.concatenate(frames)
    data = mocap_chunks(clip, stride=15, floor_y=0.0)
    assert len(data) == len(calls)
    got = [(int(b), float(v)) for b, v in zip(data.branch, data.condition, strict=True)]
    assert got[1][0] == 0 and got[1][1] == pytest.approx(0.4, abs=0.04)
    assert got[3][0] == 1 and got[3][1] == pytest.approx(np.radians(60), abs=0.1)
    assert got[4][0] == 2 and got[4][1] == pytest.approx(0.3, abs=0.05)
    assert got[5][0] == 3 and got[5][1] == pytest.approx(0.4, abs=0.05)
    assert got[6][0] == 4 and got[6][1] == pytest.approx(0.45, abs=0.05)
    still = np.repeat(clip[:1], 20, axis=0)
    h = canonicalize(still[:5], still[4])
    assert hindsight_label(h, canonicalize(still[5:], still[4]))[0] == -1
    with pytest.raises(ValueError, match="frames_world"):
        mocap_chunks(clip[:10])


# --------------------------------------------------------------------------------------
# model and sampler
# --------------------------------------------------------------------------------------
def test_config_validation_and_dict_round_trip() -> None:
    assert FlowModelConfig.from_dict(_TINY.to_dict()) == _TINY
    with pytest.raises(ValueError, match="n_heads"):
        FlowModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="control_layers"):
        FlowModelConfig(n_layers=2, control_layers=3)
    with pytest.raises(ValueError, match="d_model"):
        FlowModelConfig(d_model=0)
    with pytest.raises(ValueError, match="unknown field"):
        FlowModelConfig.from_dict({**_TINY.to_dict(), "depth": 3})


def test_model_forward_shapes_and_zero_initialised_branches() -> None:
    model = _tiny_model().eval()
    b = 4
    x = torch.randn(b, 15, STATE_DIM)
    t = torch.rand(b)
    hist = torch.randn(b, 5, STATE_DIM)
    branch = torch.tensor([0, 1, -1, 5])
    cond = torch.randn(b)
    with torch.no_grad():
        base = model(x, t, hist)
        ctrl = model(x, t, hist, branch, cond)
    assert base.shape == (b, 15, STATE_DIM) and base.dtype == torch.float32
    # zero-initialised output projections: every branch starts as the base
    torch.testing.assert_close(ctrl, base)
    with torch.no_grad():
        for lin in model.control["walk"].zero_out:
            lin.weight.normal_()
        moved = model(x, t, hist, branch, cond)
    assert not torch.allclose(moved[0], base[0])  # the walk row changed
    torch.testing.assert_close(moved[1:], base[1:])  # the other rows did not
    with pytest.raises(ValueError, match="cond"):
        model(x, t, hist, branch)


def test_mixed_batch_routing_equals_per_row() -> None:
    model = _tiny_model().eval()
    with torch.no_grad():
        for branch in model.control.values():
            for lin in branch.zero_out:
                lin.weight.normal_(std=0.1)
    x, t, hist = torch.randn(5, 15, STATE_DIM), torch.rand(5), torch.randn(5, 5, STATE_DIM)
    branch = torch.tensor([2, 0, 2, 4, -1])
    cond = torch.randn(5)
    with torch.no_grad():
        batched = model(x, t, hist, branch, cond)
        rows = [
            model(x[i : i + 1], t[i : i + 1], hist[i : i + 1], branch[i : i + 1], cond[i : i + 1])
            for i in range(5)
        ]
    torch.testing.assert_close(batched, torch.cat(rows), atol=1e-5, rtol=1e-5)
    # the sampling closure (per-row branch weights, cached history tokens): the same field
    every_row = torch.tensor([2, 0, 2, 4, 1])  # mixed, no base-only row
    for rows_branch in (branch, every_row, torch.full((5,), 3), torch.full((5,), -1)):
        with torch.no_grad():
            ref = model(x, t, hist, rows_branch, cond, min_gap=SAMPLE_MIN_GAP)
            fast = velocity_closure(model, hist, rows_branch, cond)(x, t)
        torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(
            velocity_closure(model, hist, min_gap=0.05)(x, t), model(x, t, hist, min_gap=0.05)
        )


def test_midpoint_sampler_is_exact_for_linear_time_fields() -> None:
    noise = torch.zeros(2, 15, STATE_DIM)
    # dx/dt = 2t integrates to t^2: the midpoint rule is exact for a linear field in t
    out = sample_midpoint(lambda x, t: 2.0 * t[:, None, None].expand_as(x), noise, steps=3)
    torch.testing.assert_close(out, torch.ones_like(out))
    with pytest.raises(ValueError, match="steps"):
        sample_midpoint(lambda x, t: x, noise, steps=0)


def test_x_prediction_velocity_reaches_the_predicted_sample() -> None:
    model = _tiny_model()
    target = torch.randn(2, 15, STATE_DIM)

    def velocity(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return model.velocity(target, x, t, SAMPLE_MIN_GAP)  # a perfect clean prediction

    out = sample_midpoint(velocity, torch.randn(2, 15, STATE_DIM), steps=30)
    torch.testing.assert_close(out, target, atol=1e-4, rtol=1e-4)
    v_model = MotionDiT(FlowModelConfig(**{**_TINY.to_dict(), "prediction": "v"}))
    head = torch.randn(2, 15, STATE_DIM)
    assert v_model.velocity(head, target, torch.rand(2), 0.05) is head
    with pytest.raises(ValueError, match="prediction"):
        FlowModelConfig(prediction="eps")
    with pytest.raises(ValueError, match="weighting"):
        flow_matching_loss(velocity, target, weighting="snr")


def test_tiny_model_training_lowers_the_loss(chunks: ChunkSet) -> None:
    model = _tiny_model(1)
    mean, std = _norm(chunks)
    hist = torch.from_numpy(((chunks.history[:16] - mean) / std).astype(np.float32))
    fut = torch.from_numpy(((chunks.future[:16] - mean) / std).astype(np.float32))
    branch = torch.from_numpy(chunks.branch[:16])
    cond = torch.from_numpy(
        normalized_condition(chunks.branch[:16], chunks.condition[:16]).astype(np.float32)
    )

    def eval_loss() -> float:
        g = torch.Generator().manual_seed(99)
        with torch.no_grad():
            return float(
                flow_matching_loss(
                    lambda x, t: model(x, t, hist, branch, cond), fut, g, weighting="data"
                )
            )

    before = eval_loss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        loss = flow_matching_loss(
            lambda x, t: model(x, t, hist, branch, cond), fut, gen, weighting="data"
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert eval_loss() < 0.8 * before


# --------------------------------------------------------------------------------------
# checkpoint
# --------------------------------------------------------------------------------------
def test_checkpoint_round_trip_with_hashes(tiny_checkpoint: Path) -> None:
    manifest = json.loads((tiny_checkpoint / "manifest.json").read_text())
    assert manifest["schema"] == "humanclaw_flow_motion_v1"
    assert manifest["config"]["d_model"] == 32
    for name in ("weights.npz", "normalization.npz"):
        assert manifest["files"][name]["sha256"] == sha256_file(tiny_checkpoint / name)
    ck = load_checkpoint(tiny_checkpoint)
    assert ck.config == _TINY and ck.metadata == {"note": "test"}
    assert ck.mean.shape == (STATE_DIM,) and np.all(ck.std > 0)
    assert not ck.model.training
    ck2 = load_checkpoint(tiny_checkpoint / "manifest.json")
    for (k, v), (k2, v2) in zip(
        ck.model.state_dict().items(), ck2.model.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(v, v2)
    # no temporary directories are left next to it
    assert [p.name for p in tiny_checkpoint.parent.iterdir()] == ["tiny"]


def test_checkpoint_float16_and_overwrite(tmp_path: Path) -> None:
    model = _tiny_model()
    path = tmp_path / "ck"
    save_checkpoint(path, model, np.zeros(STATE_DIM), np.ones(STATE_DIM))
    save_checkpoint(path, model, np.zeros(STATE_DIM), np.ones(STATE_DIM), weights_dtype="float16")
    ck = load_checkpoint(path)
    w = model.state_dict()["out.weight"]
    torch.testing.assert_close(ck.model.state_dict()["out.weight"], w, atol=1e-3, rtol=1e-3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]
    with pytest.raises(CheckpointError, match="weights_dtype"):
        save_checkpoint(path, model, np.zeros(STATE_DIM), np.ones(STATE_DIM), weights_dtype="int8")


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_tampered_checkpoint_is_refused(tiny_checkpoint: Path, tmp_path: Path) -> None:
    path = _copy(tiny_checkpoint, tmp_path / "bad")
    weights = path / "weights.npz"
    raw = bytearray(weights.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    weights.write_bytes(bytes(raw))
    expected = json.loads((path / "manifest.json").read_text())["files"]["weights.npz"]["sha256"]
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    msg = str(info.value)
    assert "weights.npz" in msg and expected in msg and sha256_file(weights) in msg
    with pytest.raises(CheckpointError, match="weights.npz"):
        FlowMotionGenerator(path)


def test_architecture_mismatch_is_refused(tiny_checkpoint: Path, tmp_path: Path) -> None:
    path = _copy(tiny_checkpoint, tmp_path / "arch")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["config"]["d_model"] = 64
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"d_model=64") as info:
        load_checkpoint(path)
    assert "expects" in str(info.value)
    manifest["config"]["d_model"] = 32
    manifest["config"]["n_layers"] = 3
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="n_layers=3"):
        load_checkpoint(path)
    manifest["config"]["n_layers"] = 2
    manifest["config"]["branches"] = ["walk", "turn"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="branches"):
        FlowMotionGenerator(path)
    manifest["config"]["branches"] = list(BRANCHES)
    manifest["config"]["width"] = 3
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="width"):
        load_checkpoint(path)
    manifest["config"].pop("width")
    manifest["schema"] = "other_v9"
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="schema"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing")


# --------------------------------------------------------------------------------------
# generator
# --------------------------------------------------------------------------------------
def test_generator_protocol_shapes_and_history_roll(tiny_checkpoint: Path) -> None:
    gen = FlowMotionGenerator(tiny_checkpoint, steps=4)
    assert isinstance(gen, MotionGenerator)
    # one control branch per built-in motion skill: those it executes
    assert gen.capabilities == MotionCapabilities("flow", BUILTIN_MOTION_KEYS, batched=True)
    assert gen.capabilities.skills == frozenset(range(NUM_SKILLS))
    with pytest.raises(RuntimeError, match="before reset"):
        gen.generate("Walk<forward><slow>")
    seed = gen.reset(np.array([1.0, 0.2, -2.0]), 0.7, seed=3)
    assert seed.shape == (5, 75) and seed.dtype == np.float64
    np.testing.assert_array_equal(seed, gen.history())
    # the procedural standing pose with the arm carriage of the model's training data
    standing = TrainingStyleProcedural().reset(np.array([1.0, 0.2, -2.0]), 0.7, seed=0)
    np.testing.assert_allclose(seed, standing)
    for text in _CALLS:
        chunk = gen.generate(text)
        assert chunk.shape == (15, 75) and chunk.dtype == np.float64
        assert np.all(np.isfinite(chunk))
        norms = np.linalg.norm(chunk[:, 3:].reshape(15, 24, 3), axis=-1)
        assert np.all(norms <= np.pi + 1e-9)
        np.testing.assert_array_equal(gen.history(), chunk[-5:])
    with pytest.raises(ValueError, match="Stop/Stand"):
        gen.generate("Stop/Stand")
    with pytest.raises(ValueError, match="seed"):
        gen.reset(np.zeros(3), 0.0, seed=-1)
    with pytest.raises(ValueError, match="steps"):
        FlowMotionGenerator(tiny_checkpoint, steps=0)


def test_generator_output_is_the_decanonicalised_sample(tiny_checkpoint: Path) -> None:
    gen = FlowMotionGenerator(tiny_checkpoint, steps=3)
    gen.reset(np.array([0.5, 0.0, 0.5]), -0.4, seed=11)
    hist = gen.history()
    state, ref = history_state(hist, 0.0)
    ck = load_checkpoint(tiny_checkpoint)
    g = torch.Generator().manual_seed(11)
    noise = torch.randn((15, STATE_DIM), generator=g)
    h = torch.from_numpy(((state - ck.mean) / ck.std).astype(np.float32))[None]
    call = SkillCall.parse("Side step<left><0.2>")
    br = torch.tensor([branch_of(call.skill)])
    c = torch.tensor([float(normalized_condition(2, 0.2))], dtype=torch.float32)
    with torch.no_grad():
        x = sample_midpoint(
            lambda x, t: ck.model(x, t, h, br, c, min_gap=SAMPLE_MIN_GAP), noise[None], 3
        )[0].numpy()
    frames_c = (x.astype(np.float64) * ck.std + ck.mean)[:, :75]
    expected = decanonicalize(frames_c, ref)
    chunk = gen.generate(call)
    # positions match exactly up to float rounding; rotations may be re-wrapped to [0, pi]
    np.testing.assert_allclose(chunk[:, :3], expected[:, :3], atol=1e-5)


def test_determinism_for_a_fixed_seed(tiny_checkpoint: Path) -> None:
    def run(seed: int) -> np.ndarray:
        gen = FlowMotionGenerator(tiny_checkpoint, steps=3)
        gen.reset(np.zeros(3), 0.0, seed=seed)
        return np.stack([gen.generate(c) for c in _CALLS[:3]])

    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_batch_generation_equals_per_item_generation(tiny_checkpoint: Path) -> None:
    seeds = (0, 1, 2, 3)
    calls = ("Walk<forward><fast>", "Turn<right><90>", "Walk<forward><fast>", "Sit down<0.5>")
    starts = [np.array([i, 0.0, -i], dtype=float) for i in range(4)]

    singles = []
    for seed, call, start in zip(seeds, calls, starts, strict=True):
        g = FlowMotionGenerator(tiny_checkpoint, steps=3)
        g.reset(start, 0.3 * seed, seed=seed)
        singles.append((g.generate(call), g.generate("Step back<0.2>")))

    gens = [FlowMotionGenerator(tiny_checkpoint, steps=3) for _ in seeds]
    for g, seed, start in zip(gens, seeds, starts, strict=True):
        g.reset(start, 0.3 * seed, seed=seed)
    first = FlowMotionGenerator.generate_batch(list(calls), gens)
    second = generate_many([(g, "Step back<0.2>") for g in gens])
    for i in range(4):
        np.testing.assert_allclose(first[i], singles[i][0], atol=1e-4)
        np.testing.assert_allclose(second[i], singles[i][1], atol=1e-4)
        np.testing.assert_array_equal(gens[i].history(), second[i][-5:])
    with pytest.raises(ValueError, match="twice"):
        generate_many([(gens[0], "Turn<left><20>"), (gens[0], "Turn<left><20>")])
    with pytest.raises(ValueError, match="2 calls but 1"):
        FlowMotionGenerator.generate_batch(["Turn<left><20>"] * 2, gens[:1])


def test_staged_chunks_are_picked_up_or_discarded(tiny_checkpoint: Path) -> None:
    def fresh(seed: int) -> FlowMotionGenerator:
        g = FlowMotionGenerator(tiny_checkpoint, steps=3)
        g.reset(np.zeros(3), 0.0, seed=seed)
        return g

    ref_a, ref_b = fresh(1), fresh(2)
    want_a = [ref_a.generate("Walk<forward><slow>"), ref_a.generate("Turn<left><30>")]
    want_b = [ref_b.generate("Turn<left><30>"), ref_b.generate("Turn<left><30>")]

    a, b = fresh(1), fresh(2)
    service = BatchedMotionService()
    assert service.stage([(a, "Walk<forward><slow>"), (b, "Side step<left><0.2>")]) == 2
    np.testing.assert_allclose(a.generate("Walk<forward><slow>"), want_a[0], atol=1e-4)
    # b asks for something else: the staged chunk is dropped and its noise given back
    np.testing.assert_allclose(b.generate("Turn<left><30>"), want_b[0], atol=1e-4)
    assert service.stage([(a, "Stop/Stand")]) == 0
    out = service.generate_many([(a, "Turn<left><30>"), (b, "Turn<left><30>")])
    np.testing.assert_allclose(out[0], want_a[1], atol=1e-4)
    np.testing.assert_allclose(out[1], want_b[1], atol=1e-4)


def test_service_threads_apply_to_its_model_call_only(tiny_checkpoint: Path) -> None:
    def fresh(seed: int) -> FlowMotionGenerator:
        g = FlowMotionGenerator(tiny_checkpoint, steps=3)
        g.reset(np.zeros(3), 0.0, seed=seed)
        return g

    calls = ["Walk<forward><slow>", "Turn<left><30>", "Side step<left><0.2>"]
    one = BatchedMotionService().generate_many(
        list(zip([fresh(k) for k in range(3)], calls, strict=True))
    )
    seen = []
    service = BatchedMotionService(num_threads=2)
    real = torch.set_num_threads

    def spy(n: int) -> None:
        seen.append(n)
        real(n)

    torch.set_num_threads = spy
    try:
        outs = [
            service.generate_many(list(zip([fresh(k) for k in range(3)], calls, strict=True)))
            for _ in range(2)
        ]
    finally:
        torch.set_num_threads = real
    assert torch.get_num_threads() == 1  # restored after every call
    assert seen == [2, 1, 2, 1]
    for a, b, c in zip(outs[0], outs[1], one, strict=True):
        np.testing.assert_array_equal(a, b)  # the same thread count gives the same bits
        np.testing.assert_allclose(a, c, atol=1e-4)  # another count: float rounding only
    with pytest.raises(ValueError, match="num_threads=0 is invalid"):
        BatchedMotionService(num_threads=0)


def test_env_episode_end_to_end_with_the_flow_generator(tiny_checkpoint: Path) -> None:
    import gymnasium as gym

    import humanclaw_gym  # noqa: F401  (registers the env)

    if "flow" not in registry.entries("motion"):
        registry.register_motion("flow", "humanclaw_gym.motion.flow.generator:FlowMotionGenerator")
    env = gym.make(
        "HumanClawFindNavInteract-v0",
        split="val100",
        motion="flow",
        motion_checkpoint=str(tiny_checkpoint),
        max_steps=3,
    )
    try:
        obs, info = env.reset(seed=0)
        assert obs.dtype == np.uint8
        motion = env.unwrapped.motion_generator
        assert isinstance(motion, FlowMotionGenerator)
        assert motion.checkpoint_path == tiny_checkpoint.resolve()
        done = False
        steps = 0
        while not done:
            obs, reward, terminated, truncated, info = env.step("Walk<forward><slow>")
            done = terminated or truncated
            steps += 1
        assert steps == 3 and truncated and reward == 0.0
    finally:
        env.close()


def test_env_motion_options_reach_the_generator_and_are_checked_early(
    tiny_checkpoint: Path,
) -> None:
    import gymnasium as gym

    import humanclaw_gym  # noqa: F401  (registers the env)

    env = gym.make(
        "HumanClawFindNavInteract-v0",
        split="val100",
        motion="flow",
        motion_checkpoint=str(tiny_checkpoint),
        motion_options={"steps": 2, "seat_guidance": False},
    )
    try:
        env.reset(seed=0)
        gen = env.unwrapped.motion_generator
        assert gen.steps == 2 and gen.seat_guidance is False
    finally:
        env.close()
    bad = [
        ({"stepz": 2}, "not accepted by the 'flow' motion generator: allowed"),
        ({"checkpoint": "x"}, "motion_checkpoint="),
        (["steps"], "mapping"),
    ]
    for options, message in bad:
        with pytest.raises(ValueError, match=message):
            gym.make("HumanClawFindNavInteract-v0", split="val100", motion="flow",
                     motion_options=options)  # fmt: skip
    with pytest.raises(ValueError, match="allowed .*history_frames"):
        gym.make("HumanClawFindNavInteract-v0", split="val100", motion_options={"steps": 2})


@pytest.mark.skipif(not default_checkpoint_path().is_dir(), reason="no shipped checkpoint")
def test_shipped_default_checkpoint_loads_and_walks() -> None:
    gen = FlowMotionGenerator(None)
    assert gen.checkpoint_path == default_checkpoint_path()
    meta = load_checkpoint(None).metadata
    assert meta["command"].startswith("python scripts/train_motion.py")
    gen.reset(np.zeros(3), 0.0, seed=0)
    chunks = [gen.generate("Walk<forward><normal>") for _ in range(4)]
    moved = chunks[-1][-1, 2] - chunks[0][0, 2]
    assert 0.8 < moved < 2.2  # about 4 x 0.4 m along +Z
    assert abs(chunks[-1][-1, 0]) < 0.3


def test_train_script_smoke(tmp_path: Path) -> None:
    out = tmp_path / "run" / "ck"
    cmd = [
        sys.executable,
        str(_REPO / "scripts" / "train_motion.py"),
        "--out", str(out),
        "--episodes", "2", "--calls-per-episode", "6",
        "--base-steps", "4", "--branch-steps", "4", "--batch-size", "8",
        "--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--control-layers", "1",
        "--log-every", "2", "--val-fraction", "0.2",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=_REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ck = load_checkpoint(out)
    assert ck.config.d_model == 16
    assert ck.metadata["stages"]["base"]["steps"] == 4
    assert "train_motion.py" in ck.metadata["command"]
    log = (tmp_path / "run" / "ck.log.csv").read_text().splitlines()
    assert log[0] == "stage,step,seconds,lr,train_loss,val_loss" and len(log) > 3

    # fine-tune only the sit branch of that checkpoint: everything else stays bit-identical
    tuned = tmp_path / "run" / "tuned"
    cmd = [
        sys.executable,
        str(_REPO / "scripts" / "train_motion.py"),
        "--out", str(tuned), "--init-checkpoint", str(out), "--train-branches", "sit",
        "--episodes", "2", "--calls-per-episode", "6",
        "--base-steps", "0", "--branch-steps", "3", "--batch-size", "8",
        "--d-model", "64", "--log-every", "2", "--val-fraction", "0.2",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=_REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ft = load_checkpoint(tuned)
    assert ft.config == ck.config  # --d-model is ignored: the architecture is the checkpoint's
    np.testing.assert_array_equal(ft.mean, ck.mean)
    assert ft.metadata["init_checkpoint"]["manifest_sha256"] == ck.manifest_sha256
    assert "base" not in ft.metadata["stages"] or not ft.metadata["stages"]["base"]
    before, after = ck.model.state_dict(), ft.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("control.sit.") for k in changed)
    bad = [*cmd[:2], "--out", str(tmp_path / "x"), "--train-branches", "fly"]
    proc = subprocess.run(bad, capture_output=True, text=True, timeout=120, cwd=_REPO)
    assert proc.returncode != 0 and "unknown ['fly']" in proc.stderr


# --------------------------------------------------------------------------------------
# SMPL-X through the real smplx package, with a synthetic model file
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smplx_body(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("smplx")
    from humanclaw_gym.body.smplx_model import SmplxBody

    directory = tmp_path_factory.mktemp("smplx")
    _write_synthetic_smplx(directory, (0.01, -0.35, 0.02))
    return SmplxBody(directory)


def _amass_clip(n: int = 40, rate_hz: float = 60.0) -> dict[str, np.ndarray]:
    """A Z-up clip: an upright body walking along world +X while bending its knees."""
    rng = np.random.default_rng(1)
    from scipy.spatial.transform import Rotation

    up = Rotation.from_euler("x", 90, degrees=True)  # Y-up body -> Z-up world
    face = Rotation.from_euler("z", 90, degrees=True)  # then turn to face world +X... about Z
    root = (face * up).as_rotvec()
    t = np.arange(n) / rate_hz
    pose = rng.normal(0, 0.05, (n, 63))
    pose[:, 9] = 0.6 * np.sin(4 * t)  # left knee flexion (joint 4, x axis)
    trans = np.stack([0.8 * t, np.zeros(n), 0.9 + 0.02 * np.sin(8 * t)], axis=1)
    return {
        "trans": trans,
        "root_orient": np.repeat(root[None], n, 0),
        "pose_body": pose,
        "betas": np.zeros(16),
        "mocap_frame_rate": np.array(rate_hz),
    }


def test_smplx_clip_to_frames_uses_the_real_body_model(smplx_body) -> None:
    from humanclaw_gym.motion.flow.smplx_io import amass_to_frames, smplx_clip_to_chunks

    clip = _amass_clip()
    frames, joints, betas = amass_to_frames(clip, smplx_body)
    assert frames.shape == (20, 75) and joints.shape == (20, 24, 3)  # 60 -> 30 fps
    assert betas.shape == (10,)
    # the synthetic model's skeleton is ours: FK of the converted frames = the model's joints
    pos, rot = forward_kinematics(frames)
    np.testing.assert_allclose(pos[:, :22], joints[:, :22], atol=2e-4)
    # Z up -> Y up: pelvis height = trans z + the rest pelvis' model-frame z (the usual
    # SMPL-X quirk: J0 is added unrotated); upright body
    height = 0.9 + 0.02 + 0.02 * np.sin(8 * np.arange(20) / 30)
    np.testing.assert_allclose(frames[:, 1], height, atol=1e-3)
    np.testing.assert_allclose(rot[:, 0, :, 1], np.tile([0.0, 1.0, 0.0], (20, 1)), atol=1e-6)
    assert frames[-1, 0] > frames[0, 0]  # walks along +X
    data = smplx_clip_to_chunks(clip, smplx_body, stride=1)
    assert len(data) == 1 and data.future.shape == (1, 15, STATE_DIM)
    with pytest.raises(ValueError, match="pose_body"):
        amass_to_frames({"trans": clip["trans"], "root_orient": clip["root_orient"]}, smplx_body)


def test_smplx_vertices_place_the_skinned_mesh_on_the_frame(smplx_body) -> None:
    from humanclaw_gym.body.smplx_model import smplx_vertices

    gen = ProceduralMotionGenerator()
    gen.reset(np.array([1.0, 0.0, 2.0]), 0.5, seed=0)
    frames = gen.generate("Walk<forward><normal>")
    verts, faces = smplx_vertices(frames, smplx_body)
    assert verts.shape == (15, 64, 3) and faces.shape == (31, 3) and faces.dtype == np.int64
    pos, _ = forward_kinematics(frames)
    np.testing.assert_allclose(verts[:, :22], pos[:, :22], atol=2e-4)  # joint vertices
    single, _ = smplx_vertices(frames[3], smplx_body)  # the batch-1 path (one render)
    np.testing.assert_allclose(single, verts[3], atol=1e-6)
    # the rest pelvis is cached per shape, and the cache hands out copies
    a = smplx_body.rest_pelvis()
    a[:] = 99.0
    np.testing.assert_array_equal(smplx_body.rest_pelvis(), smplx_body.rest_pelvis())
    assert not np.allclose(smplx_body.rest_pelvis(), 99.0)


def test_smplx_missing_model_files_fail_clearly(tmp_path: Path) -> None:
    pytest.importorskip("smplx")
    from humanclaw_gym.body.smplx_model import SmplxBody

    with pytest.raises(FileNotFoundError, match="SMPLX_NEUTRAL.npz"):
        SmplxBody(tmp_path)


# --------------------------------------------------------------------------------------
# the quality benchmark (one short case through the real physics)
# --------------------------------------------------------------------------------------
def _benchmark_module(monkeypatch: pytest.MonkeyPatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "motion_quality", _REPO / "benchmarks" / "motion_quality.py"
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "motion_quality", module)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_motion_quality_benchmark_measures_requests(
    tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pybullet")
    mq = _benchmark_module(monkeypatch)
    standing = ProceduralMotionGenerator().reset(np.zeros(3), 0.0)
    assert mq.foot_slide_cm_per_s(standing) == 0.0
    walk = mq.Case("walk normal", "Walk<forward><normal>", "forward_m", 0.4)
    sit = mq.Case("sit 0.45", "Sit down<0.45>", "sit", 0.45)
    mq.CASES = (walk, sit)
    args = mq.Args(seeds=1, chunks=2, steps=2)
    proc = mq.evaluate(ProceduralMotionGenerator(), args)
    assert proc["walk normal"]["generated"]["mean"] == pytest.approx(0.4, abs=1e-6)
    assert abs(proc["walk normal"]["realized"]["mean"] - 0.4) < 0.05
    assert proc["sit 0.45"]["quantity"] == "pelvis_height_m"
    assert 0.0 <= proc["sit 0.45"]["pelvis_seat_contact_rate"] <= 1.0
    flow = mq.evaluate(FlowMotionGenerator(tiny_checkpoint, steps=2), args)
    table = mq.markdown({"generators": {"flow": flow, "procedural": proc}})
    assert "| walk normal | 0.400 m |" in table
    main, checks = table.split("Realized-motion checks")
    assert main.count("\n") == 5  # header, rule, 2 cases, blank line
    assert "| walk normal | " in checks and "| sit 0.45 | " in checks
    walk_checks = proc["walk normal"]["realized_checks"]
    assert walk_checks["max_joint_error_deg"] < 30.0 and walk_checks["wrist_above_head_frames"] == 0
    assert proc["walk normal"]["realized_checks_next_to_furniture"]["frames_over_bound"] == 0


def test_batched_sync_vector_env_equals_unbatched_with_flow():
    """Sub-envs of one process generate their flow chunks as one batch, with the same result."""
    pytest.importorskip("torch")
    import gymnasium as gym

    import humanclaw_gym  # noqa: F401
    from humanclaw_gym import SkillCall
    from humanclaw_gym.envs.vector import BatchedMotionSyncVectorEnv

    calls = [SkillCall.walk("normal"), SkillCall.turn("left", 30)]
    act = {k: np.stack([np.asarray(c.to_action()[k]) for c in calls]) for k in calls[0].to_action()}
    results = []
    for batched in (True, False):
        envs = gym.make_vec(
            "HumanClawFindNavInteract-v0", num_envs=2, split="val100", motion="flow", max_steps=3
        )
        assert isinstance(envs, BatchedMotionSyncVectorEnv)
        if not batched:
            envs.step = super(BatchedMotionSyncVectorEnv, envs).step  # plain per-env generation
        try:
            envs.reset(seed=0)
            obs, *_ = envs.step(act)
            frames = [e.unwrapped._physics.realized_frame() for e in envs.envs]
            results.append((obs, np.array(frames)))
        finally:
            envs.close()
    np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-4)


@pytest.mark.skipif(not default_checkpoint_path().is_dir(), reason="no shipped checkpoint")
def test_sit_guidance_keeps_the_pelvis_on_the_seat_and_the_feet_planted() -> None:
    from humanclaw_gym.body.skeleton import JOINT_INDEX, forward_kinematics
    from humanclaw_gym.motion.procedural import seated_pelvis_height

    ankles = [JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"]]
    seat_y = seated_pelvis_height(0.45)
    guided, raw = FlowMotionGenerator(None), FlowMotionGenerator(None, seat_guidance=False)
    low, drift = [], []
    for gen in (guided, raw):
        start = gen.reset(np.zeros(3), 0.0, seed=2)[-1]
        chunk = gen.generate("Sit down<0.45>")
        low.append(float(chunk[:, 1].min()))
        pos, _ = forward_kinematics(np.concatenate([start[None], chunk]))
        drift.append(float(np.abs(pos[:, ankles] - pos[:1, ankles]).max()))
    assert low[0] >= seat_y - 1e-3  # never below the seated height
    assert drift[0] < 0.01  # feet stay put (IK reaches within a few mm)
    # the network alone sinks into the seat and skates its feet (why guidance exists)
    assert low[1] < seat_y - 0.01 and drift[1] > 0.02
    with pytest.raises(ValueError, match="seat_guidance"):
        FlowMotionGenerator(None, seat_guidance=1)  # type: ignore[arg-type]


@pytest.mark.skipif(not default_checkpoint_path().is_dir(), reason="no shipped checkpoint")
def test_learned_sit_reaches_pelvis_seat_contact_through_physics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("pybullet")
    from humanclaw_gym.metrics import pelvis_target_contact
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics

    mq = _benchmark_module(monkeypatch)
    physics = PybulletHalfPhysics()
    physics.build(mq.scene(0.45))
    gen = FlowMotionGenerator(None)
    try:
        for seed in (0, 2):
            physics.reset(gen.reset(np.zeros(3), 0.0, seed=seed)[-1])
            for _ in range(2):  # Sit down, then Sit down again (as the oracle does)
                for frame in gen.generate("Sit down<0.45>"):
                    physics.step_frame(frame)
            assert pelvis_target_contact(physics.contacts(), [mq._SEAT_ID]), seed
    finally:
        physics.close()
