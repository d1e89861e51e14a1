"""Tests of the paper's motion model (humanclaw_gym.motion.paper) on random weights that the
tests write in the release's storage layout and manifest format; need torch."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from humanclaw_gym.backends import registry  # noqa: E402
from humanclaw_gym.backends.config import BackendConfig  # noqa: E402
from humanclaw_gym.backends.protocols import MotionGenerator  # noqa: E402
from humanclaw_gym.motion.paper.conditioning import release_condition  # noqa: E402
from humanclaw_gym.motion.paper.generator import (  # noqa: E402
    BatchedMotionService,
    PaperMotion,
    PaperMotionError,
    generate_many,
)
from humanclaw_gym.motion.paper.manifest import (  # noqa: E402
    BRANCHES,
    PaperWeightsError,
    read_manifest,
    sha256_file,
)
from humanclaw_gym.motion.paper.networks import condition_tensor  # noqa: E402
from humanclaw_gym.motion.paper.synthetic import (  # noqa: E402
    PAPER_BASE_VARIANTS,
    REST_PELVIS_M,
    write_synthetic_release,
)
from humanclaw_gym.motion.paper.weights import _CACHE, clear_model_cache  # noqa: E402
from humanclaw_gym.rotations import matrix_from_rotvec, rot_y  # noqa: E402
from humanclaw_gym.skills import SkillCall  # noqa: E402

_REPO = Path(__file__).resolve().parents[1]
_TINY = {"hidden_dim": 32, "num_layers": 2, "num_heads": 2, "nfe_steps": 6}
_ALL_SKILLS = (
    "Walk<forward><normal>",
    "Turn<left><30>",
    "Side step<right><0.25>",
    "Step back<0.3>",
    "Climb upstairs<normal>",
    "Walk downstairs<normal>",
    "Sit down<0.45>",
    "Stop/Stand",
)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Small networks run fastest on one thread (and do not fight other processes)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A release checkout with random weights of a small architecture."""
    root = tmp_path_factory.mktemp("paper_release")
    write_synthetic_release(root, seed=3, **_TINY)
    return root


@pytest.fixture
def copy_of(release: Path, tmp_path: Path):
    """A private copy of the release (for tampering); the model cache is cleared after."""

    def make() -> Path:
        return Path(shutil.copytree(release, tmp_path / "release"))

    yield make
    clear_model_cache()


def _rewrite_manifest(root: Path, edit) -> None:
    path = root / "resources/weights/paper_fullval_v1.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _repin(root: Path, skill: str) -> None:
    """Pin a rewritten file in the manifest (so only its content is judged)."""
    rel = f"skills/{skill}.pt" if skill != "base" else "base/motion_dit.pt"
    path = root / "weights/paper_fullval_v1" / rel

    def edit(data):
        entry = data["base"] if skill == "base" else data["skills"][skill]
        entry["size_bytes"] = path.stat().st_size
        entry["sha256"] = sha256_file(path)

    _rewrite_manifest(root, edit)


def _cached(root: Path) -> bool:
    return any(key[0].startswith(str(root)) for key in _CACHE)


def _payload(root: Path, skill: str) -> tuple[Path, dict]:
    path = root / "weights/paper_fullval_v1/skills" / f"{skill}.pt"
    return path, torch.load(path, weights_only=True)


# ----------------------------------------------------------------------------------------
# imports, registration, manifest
# ----------------------------------------------------------------------------------------
def test_resolving_the_paper_generator_does_not_import_torch(release: Path) -> None:
    code = (
        "import sys, humanclaw_gym\n"
        "from humanclaw_gym.backends import registry\n"
        "from humanclaw_gym.backends.config import BackendConfig\n"
        f"BackendConfig(motion='paper', motion_options={{'release_dir': {str(release)!r}}}).check()\n"
        "registry.resolve(physics='pybullet', render='auto', motion='paper')\n"
        "import humanclaw_gym.motion.paper as p\n"
        "p.read_manifest, p.release_condition, p.check_weights\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=_REPO)


def test_registered_with_its_capabilities() -> None:
    entry = registry.entry("motion", "paper")
    assert entry.capabilities == PaperMotion.capabilities
    assert entry.capabilities.batched and entry.capabilities.skills == frozenset(range(8))


def test_manifest_is_read_and_checked(release: Path) -> None:
    manifest = read_manifest(release / "resources/weights/paper_fullval_v1.json")
    assert set(manifest.skills) == set(BRANCHES)
    assert manifest.variants == {"fp32": "identity", "bf16_roundtrip": "bf16_roundtrip"}
    assert manifest.architecture.hidden_dim == 32 and manifest.architecture.nfe_steps == 6
    for name, entry in manifest.skills.items():
        assert entry.base_variant == PAPER_BASE_VARIANTS[name]
        assert (entry.n_freqs is not None) == BRANCHES[name].n_freqs


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d.update(schema="humanclaw_weight_manifest_v1"),
            "schema='humanclaw_weight_manifest_v1' is unknown",
        ),
        (lambda d: d.update(selection_policy="latest"), "selection_policy='latest' is unknown"),
        (
            lambda d: d["skills"]["turn"].update(network="TurnCtrlDiTv2"),
            r"skills\.turn\.network='TurnCtrlDiTv2' is unknown: allowed TurnCtrlDiT",
        ),
        (
            lambda d: d["skills"]["sit"].update(kind="sit_fourier"),
            r"skills\.sit\.kind='sit_fourier' is unknown",
        ),
        (
            lambda d: d["skills"]["sit"].update(base_variant="fp16"),
            r"skills\.sit\.base_variant='fp16' is unknown",
        ),
        (
            lambda d: d["base_variants"]["fp32"].update(transform="fp16"),
            "transform='fp16' is unknown",
        ),
        (lambda d: d["skills"].pop("stand"), r"skills \['stand'\] are missing"),
        (lambda d: d["skills"].update(jump=d["skills"]["turn"]), r"skills \['jump'\] are unknown"),
        (
            lambda d: d["skills"]["side_walk"].pop("n_freqs"),
            r"skills\.side_walk\.n_freqs is missing",
        ),
        (lambda d: d["skills"]["turn"].update(path="../turn.pt"), "inside the weights directory"),
        (lambda d: d["base"]["architecture"].update(x_dim=75), "x_dim=75 is not supported"),
    ],
)
def test_manifest_errors_name_the_field(copy_of, edit, message: str) -> None:
    root = copy_of()
    _rewrite_manifest(root, edit)
    with pytest.raises(PaperWeightsError, match=message):
        PaperMotion(release_dir=root)
    assert not _cached(root)


def test_paths_must_be_known(tmp_path: Path, release: Path) -> None:
    with pytest.raises(PaperWeightsError, match="weights_dir is required"):
        PaperMotion()
    with pytest.raises(PaperWeightsError, match="manifest is unknown"):
        PaperMotion(weights_dir=release / "weights/paper_fullval_v1")
    with pytest.raises(PaperWeightsError, match="is not a directory"):
        PaperMotion(weights_dir=tmp_path / "nowhere", release_dir=release)


# ----------------------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------------------
def test_round_trip_of_the_written_weights_and_shared_bases(release: Path) -> None:
    gen = PaperMotion(release_dir=release)
    models = gen._models
    assert set(models.bases) == {"fp32", "bf16_roundtrip"}  # two bases, never eight
    base_payload = torch.load(
        release / "weights/paper_fullval_v1/base/motion_dit.pt", weights_only=True
    )
    assert base_payload["schema"] == "humanclaw_motion_dit_state_v1"
    for name, variant in models.bases.items():
        for key, value in variant.state_dict().items():
            stored = base_payload["state_dict"][key]
            expect = stored if name == "fp32" else stored.to(torch.bfloat16).to(torch.float32)
            assert value.dtype == torch.float32
            torch.testing.assert_close(value, expect, rtol=0, atol=0)
    for name, skill in models.skills.items():
        assert skill.base is models.bases[PAPER_BASE_VARIANTS[name]]
        assert skill.branch.base_dit is skill.base
        _, payload = _payload(release, name)
        assert payload["schema"] == "humanclaw_control_state_v1"
        own = {k: v for k, v in skill.branch.state_dict().items() if not k.startswith("base_dit.")}
        assert set(own) == set(payload["state_dict"])
        stored_dtypes = {v.dtype for v in payload["state_dict"].values()}
        assert stored_dtypes == (
            {torch.bfloat16} if PAPER_BASE_VARIANTS[name] == "bf16_roundtrip" else {torch.float32}
        )
        for key, value in own.items():
            torch.testing.assert_close(value, payload["state_dict"][key].float(), rtol=0, atol=0)
    assert PaperMotion(release_dir=release)._models is models  # one copy per process


def test_a_flipped_byte_is_refused_naming_the_file_and_skill(copy_of) -> None:
    root = copy_of()
    path = root / "weights/paper_fullval_v1/skills/turn.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(PaperWeightsError, match=r"skill 'turn'.*turn\.pt has SHA-256") as err:
        PaperMotion(release_dir=root)
    assert err.value.skill == "turn" and err.value.path == str(path)
    assert not _cached(root)  # nothing half-loaded stays cached


def test_missing_and_truncated_files_are_refused(copy_of) -> None:
    root = copy_of()
    sit = root / "weights/paper_fullval_v1/skills/sit.pt"
    sit.write_bytes(sit.read_bytes()[:-10])
    with pytest.raises(PaperWeightsError, match=r"skill 'sit'.*bytes, the manifest pins"):
        PaperMotion(release_dir=root)
    sit.unlink()
    with pytest.raises(PaperWeightsError, match=r"skill 'sit'.*sit\.pt is missing"):
        PaperMotion(release_dir=root)
    assert not _cached(root)


def test_payload_schema_tensors_dtypes_and_nan_are_checked(copy_of) -> None:
    cases = []

    def schema(p):
        p["schema"] = "humanclaw_control_state_v0"

    def extra(p):
        p["state_dict"]["base_dit.in_fc.weight"] = torch.zeros(32, 219)

    def missing(p):
        del p["state_dict"]["zero_linears.1.bias"]

    def dtype(p):
        p["state_dict"]["zero_linears.0.bias"] = p["state_dict"]["zero_linears.0.bias"].double()

    def nan(p):
        p["state_dict"]["zero_linears.0.weight"][0, 0] = float("nan")

    cases = [
        (schema, "payload schema 'humanclaw_control_state_v0'"),
        (extra, r"unexpected tensors \['base_dit.in_fc.weight'\]"),
        (missing, r"missing tensors \['zero_linears.1.bias'\]"),
        (dtype, "stored as torch.float64"),
        (nan, "'zero_linears.0.weight' holds NaN"),
    ]
    for edit, message in cases:
        root = copy_of()
        path, payload = _payload(root, "step_back")
        edit(payload)
        torch.save(payload, path)
        _repin(root, "step_back")
        with pytest.raises(
            PaperWeightsError, match=r"skill 'step_back'.*step_back\.pt.*" + message
        ):
            PaperMotion(release_dir=root)
        assert not _cached(root)
        shutil.rmtree(root)


def test_a_non_weights_pickle_is_refused_unread(copy_of) -> None:
    root = copy_of()
    path = root / "weights/paper_fullval_v1/base/motion_dit.pt"
    payload = torch.load(path, weights_only=True)  # the right size: only the pickle is wrong
    torch.save({**payload, "x": object()}, path)
    _repin(root, "base")
    with pytest.raises(PaperWeightsError, match="base MotionDiT.*weights-only"):
        PaperMotion(release_dir=root)


# ----------------------------------------------------------------------------------------
# generation
# ----------------------------------------------------------------------------------------
def test_protocol_shapes_history_and_seed_placement(release: Path) -> None:
    gen = PaperMotion(release_dir=release)
    assert isinstance(gen, MotionGenerator)
    start, yaw = np.array([1.5, 0.2, -2.0]), 0.7
    history = gen.reset(start, yaw, seed=0)
    assert history.shape == (5, 75) and history.dtype == np.float64
    # the synthetic seed's pelvis is above the canonical origin: it lands on the start point
    np.testing.assert_allclose(history[:, [0, 2]], np.tile(start[[0, 2]], (5, 1)), atol=1e-5)
    facing = matrix_from_rotvec(history[-1, 3:6]) @ np.array([0.0, 0.0, 1.0])
    assert math.isclose(math.atan2(facing[0], facing[2]), yaw, abs_tol=1e-4)
    for text in _ALL_SKILLS:
        chunk = gen.generate(text)
        assert chunk.shape == (15, 75) and chunk.dtype == np.float64 and np.isfinite(chunk).all()
        np.testing.assert_array_equal(gen.history(), chunk[-5:])
        assert gen.release_chunk.shape == (15, 75) and gen.release_chunk.dtype == np.float32
        for joint in (12, 15):  # neck and head, zeroed as the release does
            assert not chunk[:, 3 + 3 * joint : 6 + 3 * joint].any()
    gen.close()
    with pytest.raises(RuntimeError, match="before reset"):
        gen.generate("Stop/Stand")


def test_our_frames_are_the_release_chunk_turned_and_pelvis_placed(release: Path) -> None:
    gen = PaperMotion(release_dir=release)
    gen.reset(np.array([0.3, 0.0, 0.4]), -1.2, seed=4)
    chunk = gen.generate("Walk<forward><fast>")
    xb = gen.release_chunk.astype(np.float64)
    half = rot_y(math.pi)
    offset = rot_y(-1.2) @ np.asarray(REST_PELVIS_M)
    np.testing.assert_allclose(chunk[:, :3], xb[:, :3] @ half.T + offset, atol=1e-6)
    np.testing.assert_allclose(
        matrix_from_rotvec(chunk[:, 3:6]), half @ matrix_from_rotvec(xb[:, 3:6]), atol=1e-6
    )
    np.testing.assert_array_equal(chunk[:, 6:], xb[:, 6:])


def test_determinism_for_a_seed(release: Path) -> None:
    a, b = PaperMotion(release_dir=release), PaperMotion(release_dir=release)
    runs = []
    for gen, seed in ((a, 7), (b, 7), (a, 8)):
        gen.reset(np.zeros(3), 0.0, seed=seed)
        runs.append([gen.generate(t) for t in _ALL_SKILLS[:3]])
    for x, y in zip(runs[0], runs[1], strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(runs[0][0], runs[2][0])
    torch.manual_seed(0)  # an episode does not depend on the global generator
    a.reset(np.zeros(3), 0.0, seed=7)
    np.testing.assert_array_equal(a.generate(_ALL_SKILLS[0]), runs[0][0])


def test_reset_release_draws_from_the_global_or_the_given_generator(release: Path) -> None:
    plain = PaperMotion(release_dir=release)
    given = PaperMotion(release_dir=release, generator=torch.Generator())
    plain.reset_release([-3.2, 5.1, 0.0], 37.5)
    given.reset_release([-3.2, 5.1, 0.0], 37.5)
    for i, text in enumerate(_ALL_SKILLS[:3]):
        torch.manual_seed(100 + i)
        given._user_rng.manual_seed(100 + i)
        plain.generate(text)
        given.generate(text)
        np.testing.assert_array_equal(plain.release_chunk, given.release_chunk)


def test_reset_equals_reset_release_of_the_reference_fields(release: Path) -> None:
    ours = PaperMotion(release_dir=release)
    ref = PaperMotion(release_dir=release, generator=torch.Generator())
    x, y, z, yaw = 2.5, 0.1, -1.0, 0.4
    ours.reset(np.array([x, y, z]), yaw, seed=3)
    ref.reset_release([-x, z, y], math.degrees(yaw) - 180.0)
    ref._user_rng.manual_seed(3)
    for text in _ALL_SKILLS[:3]:
        np.testing.assert_allclose(ours.generate(text), ref.generate(text), atol=1e-5)


def test_every_skill_gets_the_release_condition(release: Path) -> None:
    expected = {
        "Walk<forward><slow>": ("walk_forward", [0.0, 0.2, 0.0], [[0.0, 0.2, 0.0]]),
        "Walk<forward><fast>": ("walk_forward", [0.0, 0.6, 0.0], [[0.0, 0.6, 0.0]]),
        "Turn<left><30>": ("turn", [30.0], [[30.0 / 75.0]]),
        "Turn<right><120>": ("turn", [-120.0], [[-120.0 / 75.0]]),
        "Side step<left><0.25>": ("side_walk", [0.25], [[0.25]]),
        "Side step<right><0.5>": ("side_walk", [-0.5], [[-0.5]]),
        "Step back<0.3>": ("step_back", [0.0, -0.3], [[0.0, -0.3]]),
        "Climb upstairs<normal>": (
            "step_climb_up",
            [0.28, 0.30],
            [[4 * 0.28 - 1, (0.30 - 0.5) / 0.3]],
        ),
        "Walk downstairs<normal>": (
            "step_climb_down",
            [0.20, 0.40],
            [[4 * 0.20 - 1, (0.40 - 0.5) / 0.3]],
        ),
        "Sit down<0.45>": ("sit", [0.45], [[0.45]]),
        "Stop/Stand": ("stand", None, None),
    }
    gen = PaperMotion(release_dir=release)
    gen.reset(np.zeros(3), 0.0, seed=0)
    for text, (skill, raw, net) in expected.items():
        call = SkillCall.parse(text)
        assert release_condition(call) == (skill, raw)
        tensor = condition_tensor(skill, raw, "cpu")
        if net is None:
            assert tensor is None
        else:
            torch.testing.assert_close(tensor, torch.tensor(net, dtype=torch.float32))
        request = gen._prepare(call)  # the call is routed to its own branch
        assert request.skill.name == skill
        gen._set_rng_state(request.rng_state)
    # the branch sees its condition: a different condition gives a different chunk
    chunks = []
    for text in ("Turn<left><30>", "Turn<right><30>", "Sit down<0.3>", "Sit down<0.8>"):
        gen.reset(np.zeros(3), 0.0, seed=0)
        chunks.append(gen.generate(text))
    assert not np.allclose(chunks[0], chunks[1]) and not np.allclose(chunks[2], chunks[3])


def test_equivariance_under_a_rotated_and_translated_start(release: Path) -> None:
    a, b = PaperMotion(release_dir=release), PaperMotion(release_dir=release)
    start, yaw = np.array([0.5, 0.0, -0.25]), 0.3
    alpha, shift = 1.1, np.array([4.0, 0.5, -3.0])
    turn = rot_y(alpha)
    a.reset(start, yaw, seed=11)
    b.reset(turn @ start + shift, yaw + alpha, seed=11)
    for text in ("Walk<forward><normal>", "Turn<left><45>", "Side step<left><0.3>"):
        ca, cb = a.generate(text), b.generate(text)
        np.testing.assert_allclose(cb[:, :3], ca[:, :3] @ turn.T + shift, atol=2e-4)
        np.testing.assert_allclose(
            matrix_from_rotvec(cb[:, 3:6]), turn @ matrix_from_rotvec(ca[:, 3:6]), atol=2e-4
        )
        np.testing.assert_allclose(cb[:, 6:], ca[:, 6:], atol=2e-4)


def test_a_non_finite_chunk_names_the_skill_and_changes_nothing(copy_of) -> None:
    gen = PaperMotion(release_dir=copy_of())
    gen.reset(np.zeros(3), 0.0, seed=2)
    gen.generate("Walk<forward><normal>")
    history, state = gen.history(), gen._rng.get_state()
    weight = gen._models.skills["turn"].branch.zero_linears[0].weight
    saved = weight.detach().clone()
    with torch.no_grad():
        weight[0, 0] = float("nan")
    with pytest.raises(PaperMotionError, match=r"skill 'turn' \(.*turn\.pt\) produced non-finite"):
        gen.generate("Turn<left><30>")
    np.testing.assert_array_equal(gen.history(), history)
    assert torch.equal(gen._rng.get_state(), state)
    with torch.no_grad():
        weight.copy_(saved)
    gen.generate("Turn<left><30>")


# ----------------------------------------------------------------------------------------
# batching
# ----------------------------------------------------------------------------------------
_BATCH_CALLS = (
    "Walk<forward><normal>",  # bf16 base
    "Turn<left><30>",  # bf16 base
    "Walk<forward><slow>",  # the same skill twice
    "Side step<right><0.25>",  # fp32 base
    "Sit down<0.45>",
    "Walk downstairs<normal>",
)


def _generators(release: Path, n: int) -> list[PaperMotion]:
    gens = [PaperMotion(release_dir=release) for _ in range(n)]
    for k, g in enumerate(gens):
        g.reset(np.array([0.1 * k, 0.0, 0.0]), 0.2 * k, seed=k)
    return gens


def test_batched_equals_single(release: Path) -> None:
    single = _generators(release, len(_BATCH_CALLS))
    batched = _generators(release, len(_BATCH_CALLS))
    for round_ in range(2):
        calls = _BATCH_CALLS[round_:] + _BATCH_CALLS[:round_]
        expect = [g.generate(c) for g, c in zip(single, calls, strict=True)]
        got = generate_many(list(zip(batched, calls, strict=True)))
        for e, g in zip(expect, got, strict=True):
            np.testing.assert_allclose(g, e, atol=1e-4)
    for s, b in zip(single, batched, strict=True):
        np.testing.assert_allclose(b.history(), s.history(), atol=1e-4)


def test_staged_chunks_are_picked_up_or_discarded(release: Path) -> None:
    gens = _generators(release, 3)
    ref = _generators(release, 3)
    service = BatchedMotionService()
    calls = [SkillCall.parse(c) for c in _BATCH_CALLS[:3]]
    assert service.stage(list(zip(gens, calls, strict=True))) == 3
    np.testing.assert_allclose(gens[0].generate(calls[0]), ref[0].generate(calls[0]), atol=1e-4)
    other = SkillCall.parse("Step back<0.2>")  # not the staged call: computed afresh
    np.testing.assert_array_equal(gens[1].generate(other), ref[1].generate(other))
    assert service.stage([(gens[2], SkillCall.parse("Stop/Stand"))]) == 0
    np.testing.assert_allclose(gens[2].generate(calls[2]), ref[2].generate(calls[2]), atol=1e-4)
    with pytest.raises(ValueError, match="appears twice"):
        generate_many([(gens[0], calls[0]), (gens[0], calls[1])])


def test_vector_env_computes_a_step_in_one_model_run(release: Path, monkeypatch) -> None:
    """Sub-envs of one process: their chunks of a step in one batched integration (walk and
    turn share the bf16 base), equal to the unbatched step."""
    import gymnasium as gym

    import humanclaw_gym  # noqa: F401
    from humanclaw_gym.envs.vector import BatchedMotionSyncVectorEnv
    from humanclaw_gym.motion.paper import generator as paper_generator

    rows: list[int] = []
    integrate = paper_generator._integrate

    def counting(group):
        rows.append(len(group))
        return integrate(group)

    monkeypatch.setattr(paper_generator, "_integrate", counting)
    calls = [SkillCall.walk("normal"), SkillCall.turn("left", 30)]
    act = {k: np.stack([np.asarray(c.to_action()[k]) for c in calls]) for k in calls[0].to_action()}
    results = []
    for batched in (True, False):
        envs = gym.make_vec(
            "HumanClawFindNavInteract-v0",
            num_envs=2,
            split="val100",
            motion="paper",
            motion_options={"release_dir": str(release)},
            max_steps=3,
        )
        assert isinstance(envs, BatchedMotionSyncVectorEnv)
        if not batched:
            envs.step = super(BatchedMotionSyncVectorEnv, envs).step  # per-env generation
        try:
            envs.reset(seed=0)
            rows.clear()
            envs.step(act)
            assert rows == ([2] if batched else [1, 1])
            frames = [e.unwrapped.motion_generator.history() for e in envs.envs]
            results.append(np.array(frames))
        finally:
            envs.close()
    np.testing.assert_allclose(results[0], results[1], atol=1e-4)


# ----------------------------------------------------------------------------------------
# the library around it
# ----------------------------------------------------------------------------------------
def test_env_episode_with_the_paper_motion_records_the_weights(
    release: Path, tmp_path: Path
) -> None:
    import gymnasium as gym

    import humanclaw_gym  # noqa: F401  (registers the env)
    from humanclaw_gym.wrappers import TrajectoryWrapper

    env = gym.make(
        "HumanClawFindNavInteract-v0",
        split="val100",
        motion="paper",
        motion_options={"release_dir": str(release), "device": "cpu"},
        max_steps=2,
    )
    env = TrajectoryWrapper(env, tmp_path / "out")
    try:
        env.reset(seed=0)
        assert isinstance(env.unwrapped.motion_generator, PaperMotion)
        for _ in range(2):
            *_, terminated, truncated, _ = env.step("Walk<forward><slow>")
        assert truncated
    finally:
        env.close()
    manifest = json.loads(next((tmp_path / "out").rglob("replay_manifest.json")).read_text())
    weights = manifest["backends"]["motion_weights"]
    assert weights["manifest_sha256"] == sha256_file(
        release / "resources/weights/paper_fullval_v1.json"
    )
    assert weights["device"] == "cpu" and weights["dtype"] == "float32"
    assert weights["seed_state_sha256"] == sha256_file(
        release / "resources/seeds/natural_beta0_fk_seed.pt"
    )


def test_options_cli_flags_and_fingerprint(release: Path, tmp_path: Path) -> None:
    from humanclaw_gym.cli.backend_args import BackendArgs
    from humanclaw_gym.evaluation.batch import RunConfig
    from humanclaw_gym.evaluation.fingerprint import fingerprint_differences, run_fingerprint

    args = BackendArgs(
        motion="paper", motion_weights=release / "weights/paper_fullval_v1", release=release
    )
    config = args.to_config().check()
    assert config.motion_options == {
        "weights_dir": str(release / "weights/paper_fullval_v1"),
        "release_dir": str(release),
    }
    with pytest.raises(ValueError, match="--release and --motion-option release_dir"):
        BackendArgs(motion="paper", release=release, motion_option=("release_dir=x",)).to_config()
    with pytest.raises(ValueError, match=r"\['weightsdir'\] are not accepted by the 'paper'"):
        BackendConfig(motion="paper", motion_options={"weightsdir": "x"}).check()
    with pytest.raises(ValueError, match="motion_checkpoint is not accepted by the 'paper'"):
        BackendConfig(motion="paper", motion_checkpoint="x").check()
    with pytest.raises(PaperWeightsError, match="weights_dir is required"):  # when made
        BackendConfig(motion="paper", motion_options={"device": "cpu"}).check()

    run = RunConfig(agent="random", backend=config, output=tmp_path / "run")
    record = run_fingerprint(run, {"selection": "x", "sha256": "0"})
    weights = record["settings"]["motion_weights"]
    assert (
        weights["manifest_sha256"]
        == read_manifest(release / "resources/weights/paper_fullval_v1.json").sha256
    )
    assert weights["device"] == "cpu" and weights["dtype"] == "float32"
    cuda = RunConfig(
        agent="random",
        backend=config.replace(motion_options={**config.motion_options, "device": "cuda"}),
        output=tmp_path / "run",
    )
    diff = fingerprint_differences(record, run_fingerprint(cuda, {"selection": "x", "sha256": "0"}))
    assert {d[0] for d in diff} == {"backend.motion_options.device", "motion_weights.device"}
    plain = run_fingerprint(
        RunConfig(agent="random", output=tmp_path / "p"), {"selection": "x", "sha256": "0"}
    )
    assert plain["settings"]["motion_weights"] is None
    old = {"settings": {k: v for k, v in plain["settings"].items() if k != "motion_weights"}}
    assert fingerprint_differences(old, plain) == []  # fingerprints written before the field


def test_doctor_reports_the_weights(copy_of) -> None:
    from humanclaw_gym.doctor import format_report, installation_report

    root = copy_of()
    report = installation_report(probe=False, release_dir=root)
    paper = report["paper_motion"]
    assert paper["ok"] and paper["files"] == 9 and "SHA-256 match" in paper["detail"]
    assert "paper motion weights" in format_report(report)
    (root / "weights/paper_fullval_v1/skills/stand.pt").unlink()
    report = installation_report(
        probe=False, motion_weights=root / "weights/paper_fullval_v1", release_dir=root
    )
    assert not report["paper_motion"]["ok"] and not report["ok"]
    assert any("stand.pt is missing" in m for m in report["missing"])
    assert installation_report(probe=False)["paper_motion"] is None


def test_real_width_and_heads_load_and_generate(tmp_path: Path) -> None:
    """The release's width (512) and heads (8) with one layer: loads, runs every skill."""
    write_synthetic_release(tmp_path, num_layers=1, nfe_steps=2, seed=1)
    try:
        gen = PaperMotion(release_dir=tmp_path)
        gen.reset(np.zeros(3), 0.0, seed=0)
        for text in _ALL_SKILLS:
            assert np.isfinite(gen.generate(text)).all()
    finally:
        clear_model_cache()


@pytest.mark.slow
def test_release_architecture_sizes(tmp_path: Path) -> None:
    """The release's full architecture (10 layers, 1.1 GB of random weights) end to end."""
    rel = write_synthetic_release(tmp_path, seed=5)
    sizes = {p.name: p.stat().st_size for p in rel.weights_dir.rglob("*.pt")}
    assert sizes["motion_dit.pt"] > 160e6 and sizes["turn.pt"] < sizes["side_walk.pt"]
    try:
        gens = _generators(tmp_path, 2)
        single = gens[0].generate("Walk<forward><normal>")
        ref = _generators(tmp_path, 2)
        both = generate_many([(ref[0], "Walk<forward><normal>"), (ref[1], "Turn<left><30>")])
        np.testing.assert_allclose(both[0], single, atol=1e-4)
    finally:
        clear_model_cache()


def test_device_is_checked(release: Path) -> None:
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device='cuda' needs a CUDA build of torch"):
            PaperMotion(release_dir=release, device="cuda")
    with pytest.raises(ValueError, match="device='abacus' is invalid"):
        PaperMotion(release_dir=release, device="abacus")
    with pytest.raises(ValueError, match="generator=3 is invalid"):
        PaperMotion(release_dir=release, generator=3)
