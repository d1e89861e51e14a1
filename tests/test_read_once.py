"""What a configuration names is read and checked once per process per file state: the paper
motion's manifest, weight files and seed state, and a scene dataset.

Every read is counted: the manifest parsed (``manifest._read_manifest``), a file hashed
(``verified._hash_file``), a weight file unpickled (``weights._payload``), a payload checked
against the manifest's network (``weights._check_state``), the seed state read
(``generator._read_seed_state``); a scene dataset's config indexed
(``dataset.read_dataset_index``) and a scene built (``scene.build_scene``). All files are
synthetic (random weights in the release's layout, a synthetic HSSD dataset).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trimesh")

from paper_release_synthetic import write_release_checkout  # noqa: E402

import humanclaw_gym  # noqa: E402,F401  (registers the env)
from humanclaw_gym.backends.config import BackendConfig  # noqa: E402
from humanclaw_gym.motion.paper import generator as generator_module  # noqa: E402
from humanclaw_gym.motion.paper import manifest as manifest_module  # noqa: E402
from humanclaw_gym.motion.paper import verified  # noqa: E402
from humanclaw_gym.motion.paper import weights as weights_module  # noqa: E402
from humanclaw_gym.motion.paper.generator import PaperMotion  # noqa: E402
from humanclaw_gym.motion.paper.synthetic import write_synthetic_release  # noqa: E402
from humanclaw_gym.motion.paper.weights import clear_model_cache  # noqa: E402
from humanclaw_gym.profiles import resolve_profile  # noqa: E402

ENV_ID = "HumanClawFindNavInteract-v0"
_TINY = {"hidden_dim": 32, "num_layers": 2, "num_heads": 2, "nfe_steps": 6}
WEIGHT_FILES = 9  # the shared base and the eight skills


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    base = tmp_path_factory.mktemp("hssd")
    old = os.environ.get("HUMANCLAW_CACHE_DIR")
    os.environ["HUMANCLAW_CACHE_DIR"] = str(base / "cache")
    try:
        yield write_synthetic_dataset(base / "humanclaw-hssd-synth")
    finally:
        if old is None:
            os.environ.pop("HUMANCLAW_CACHE_DIR", None)
        else:
            os.environ["HUMANCLAW_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def release(tmp_path_factory, synth) -> Path:
    root = tmp_path_factory.mktemp("release") / "HumanCLAW"
    write_release_checkout(root, episodes_dir=synth.episodes_dir.parent)
    write_synthetic_release(root, seed=3, **_TINY)
    return root


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Counts of each kind of read, by file name (``kind:name``); both caches start empty
    and are emptied after."""
    counts: Counter = Counter()
    clear_model_cache()  # the models and the verified records

    def counted(module, name, kind, path_of):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            counts[f"{kind}:{Path(path_of(*args, **kwargs)).name}"] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counted(manifest_module, "_read_manifest", "manifest", lambda p: p)
    counted(verified, "_hash_file", "hash", lambda p: p)
    counted(weights_module, "_payload", "unpickle", lambda p, schema, skill: p)
    counted(weights_module, "_check_state", "check", lambda state, expected, p, skill: p)
    counted(generator_module, "_read_seed_state", "seed", lambda p: p)
    yield counts
    clear_model_cache()


def _by_kind(counts: Counter) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for key, n in counts.items():
        kind, name = key.split(":", 1)
        out.setdefault(kind, Counter())[name] = n
    return out


def _weight_names(release: Path) -> set[str]:
    return {p.name for p in (release / "weights/paper_fullval_v1").rglob("*.pt")}


def test_an_env_with_the_paper_profile_reads_and_checks_each_file_once(
    release, synth, reads
) -> None:
    """``gym.make(profile="paper")`` and a reset: the profile's check (which loads the
    models the env's generator then shares), ``BackendConfig.check()`` and the generator
    together hash, unpickle and check each weight file once and read the manifest and the
    seed state once; a second env of the process reads none of them; a file that changed
    is hashed and checked again (alone), and the models are loaded again."""
    names = _weight_names(release)
    assert len(names) == WEIGHT_FILES

    def make_and_reset():
        env = gym.make(
            ENV_ID, profile="paper", release_dir=str(release), scene_dataset=str(synth.root)
        )
        try:
            env.reset(seed=0)
        finally:
            env.close()

    make_and_reset()
    got = _by_kind(reads)
    assert got["hash"] == Counter({**dict.fromkeys(names, 1), "natural_beta0_fk_seed.pt": 1})
    assert got["unpickle"] == Counter(dict.fromkeys(names, 1))
    assert got["check"] == Counter(dict.fromkeys(names, 1))
    assert got["seed"] == Counter({"natural_beta0_fk_seed.pt": 1})
    assert got["manifest"] == Counter({"paper_fullval_v1.json": 1})

    reads.clear()
    make_and_reset()  # a further env of the process: nothing is read again
    assert not reads

    turn = release / "weights/paper_fullval_v1/skills/turn.pt"
    turn.write_bytes(turn.read_bytes())  # the same bytes, a new file state
    reads.clear()
    make_and_reset()
    got = _by_kind(reads)
    assert got["hash"] == Counter({"turn.pt": 1}) and got["check"] == Counter({"turn.pt": 1})
    assert got["unpickle"] == Counter(dict.fromkeys(names, 1))  # the models, loaded again
    assert "seed" not in got and "manifest" not in got


def test_a_run_driver_checks_each_file_once_and_its_generator_does_not_again(
    release, synth, reads
) -> None:
    """A run's driver process (``humanclaw run --profile paper``): the profile's check one
    file at a time (nothing kept but the verified records), ``BackendConfig.check()``, then
    (``--workers 1``) the generator in the same process: each file hashed and checked
    once; the generator reads each payload once more to load its tensors."""
    names = _weight_names(release)
    profile = resolve_profile("paper", release, scene_dataset=synth.root)
    got = _by_kind(reads)
    assert got["unpickle"] == Counter(dict.fromkeys(names, 1))
    assert not weights_module._CACHE  # no model is kept by the driver's check
    BackendConfig(**{**profile.backend.to_dict()}).check()
    options = profile.backend.motion_options
    PaperMotion(**options)
    PaperMotion(**options)  # a further generator: shares the models
    got = _by_kind(reads)
    assert got["hash"] == Counter({**dict.fromkeys(names, 1), "natural_beta0_fk_seed.pt": 1})
    assert got["check"] == Counter(dict.fromkeys(names, 1))
    assert got["unpickle"] == Counter(dict.fromkeys(names, 2))  # checked, then loaded
    assert got["seed"] == Counter({"natural_beta0_fk_seed.pt": 1})
    assert got["manifest"] == Counter({"paper_fullval_v1.json": 1})


def test_a_failed_check_is_not_kept(release, tmp_path, reads) -> None:
    """A payload that fails its check is checked again next time (and fails the same way,
    naming it); once the file is right again it is checked once more and then kept. A
    file's SHA-256 is a fact of its state: kept whether or not it matches the manifest."""
    import json
    import shutil

    from humanclaw_gym.motion.paper import PaperWeightsError
    from humanclaw_gym.motion.paper.manifest import sha256_file

    root = Path(shutil.copytree(release, tmp_path / "release"))
    manifest = root / "resources/weights/paper_fullval_v1.json"
    path = root / "weights/paper_fullval_v1/skills/sit.pt"
    good_bytes, good_manifest = path.read_bytes(), manifest.read_text()
    payload = torch.load(path, weights_only=True)
    payload["state_dict"]["zero_linears.0.weight"][0, 0] = float("nan")
    torch.save(payload, path)
    data = json.loads(good_manifest)
    data["skills"]["sit"].update(size_bytes=path.stat().st_size, sha256=sha256_file(path))
    manifest.write_text(json.dumps(data))  # pinned: only the payload's check fails
    for _ in range(2):
        with pytest.raises(PaperWeightsError, match=r"skill 'sit'.*sit\.pt.*holds NaN"):
            PaperMotion(release_dir=root)
    assert reads["check:sit.pt"] == 2 and reads["hash:sit.pt"] == 1
    path.write_bytes(good_bytes)
    manifest.write_text(good_manifest)
    PaperMotion(release_dir=root)
    PaperMotion(release_dir=root)
    assert reads["check:sit.pt"] == 3 and reads["hash:sit.pt"] == 2


def test_a_scene_dataset_is_opened_once_per_process(synth, monkeypatch) -> None:
    """Making and resetting an env with ``scene_dataset=`` indexes the dataset's config
    once (``BackendConfig.check()`` and the simulation share the opened dataset) and builds
    a scene once for the episodes in it; a further env of the process opens nothing."""
    from humanclaw_gym.scenes.hssd import dataset as dataset_module
    from humanclaw_gym.scenes.hssd import scene as scene_module

    counts: Counter = Counter()
    index, build = dataset_module.read_dataset_index, scene_module.build_scene

    def counted_index(*args, **kwargs):
        counts["index"] += 1
        return index(*args, **kwargs)

    def counted_build(*args, **kwargs):
        counts["build"] += 1
        return build(*args, **kwargs)

    monkeypatch.setattr(dataset_module, "read_dataset_index", counted_index)
    monkeypatch.setattr(scene_module, "build_scene", counted_build)
    dataset_module._open.cache_clear()
    episodes = str(synth.root / "episodes" / "val" / "content")

    def make_and_reset(times: int) -> None:
        env = gym.make(ENV_ID, scene_dataset=str(synth.root), episodes=episodes)
        try:
            for seed in range(times):
                env.reset(seed=seed)
        finally:
            env.close()

    try:
        make_and_reset(2)
        assert counts == Counter({"index": 1, "build": 1})
        counts.clear()
        make_and_reset(1)
        assert not counts
    finally:
        dataset_module._open.cache_clear()
