"""Bounds on every file a user hands in (third hardening round): weight manifests and the
files they pin, the paper profile's pre-check, body assets, episode files and scene
datasets (GLB meshes, scene instances, dataset configs).

Each test builds its hostile file itself, small (a "300 MB" file is sparse), and checks
that it is refused in bounded time with one line naming the file and the field: a
:class:`PaperWeightsError` / :class:`ProfileError` / :class:`BodyAssetError` /
:class:`EpisodeFormatError` / :class:`SceneDatasetError` / :class:`MeshAssetError`, and from
the CLI exit code 2 with nothing written. Every test here failed before these bounds
existed (a raw ``RecursionError`` / ``OverflowError`` / ``TypeError``, a crash, minutes of
work, or an accepted file).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hostile_files import HABITAT_RECORD, glb_bytes, glb_parts, manifest_dict, scene_instance_dict

from humanclaw_gym.motion.paper.manifest import PaperWeightsError, read_manifest

_REPO = Path(__file__).resolve().parents[1]
_TINY = {"hidden_dim": 32, "num_layers": 2, "num_heads": 2, "nfe_steps": 6}


def _one_line(text: str) -> None:
    text = text.strip()
    assert text and "\n" not in text and "Traceback" not in text, text


def _cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``humanclaw ARGS`` in a child process (a crash there cannot take the tests down)."""
    env = {**os.environ, "HUMANCLAW_DEBUG": ""}
    return subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


# ----------------------------------------------------------------------------------------
# weight manifests (no torch: read_manifest reads no weight)
# ----------------------------------------------------------------------------------------
def test_a_valid_manifest_document_reads(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest_dict()))
    assert read_manifest(path).architecture.num_layers == 10


def test_a_deeply_nested_manifest_is_one_line_error(tmp_path: Path) -> None:
    """Was a ``RecursionError`` traceback (rollout, run --profile, doctor)."""
    path = tmp_path / "m.json"
    doc = json.dumps(manifest_dict())
    path.write_text(doc[:-1] + ', "notes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(PaperWeightsError, match="nested too deeply") as err:
        read_manifest(path)
    assert str(path) in str(err.value)
    _one_line(str(err.value))


def test_a_300_mb_manifest_is_refused_unread(tmp_path: Path) -> None:
    """Was read whole; now capped at 1 MiB like the release's other JSON files (the file
    is sparse: no disk space, and the size is refused before a byte is read)."""
    path = tmp_path / "m.json"
    with open(path, "wb") as fh:
        fh.truncate(300 << 20)
    start = time.perf_counter()
    with pytest.raises(PaperWeightsError, match=r"has 314572800 bytes; allowed at most 1048576"):
        read_manifest(path)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("where", "key", "value", "message"),
    [
        ("arch", "nfe_steps", 200_000, r"base\.architecture\.nfe_steps=200000 is invalid"),
        ("arch", "num_layers", 10**7, r"base\.architecture\.num_layers=10000000 is invalid"),
        ("arch", "hidden_dim", 10**6, r"base\.architecture\.hidden_dim=1000000 is invalid"),
        ("arch", "hidden_dim", 10**4000, r"hidden_dim=<an integer of 4001 digits> is invalid"),
        ("arch", "num_heads", 10**6, r"base\.architecture\.num_heads=1000000 is invalid"),
        ("arch", "mlp_ratio", 1e308, r"base\.architecture\.mlp_ratio=1e\+308 is invalid"),
        ("arch", "mlp_ratio", 1e-9, r"base\.architecture\.mlp_ratio=1e-09 is invalid"),
        ("arch", "x_dim", 219.0, r"base\.architecture\.x_dim=219\.0 is not supported"),
        ("skill", "n_freqs", 10**6, r"skills\.side_walk\.n_freqs=1000000 is invalid"),
        ("skill", "n_freqs", 2000, r"skills\.side_walk\.n_freqs=2000 is invalid"),
        ("skill", "nfe_steps", 200_000, r"skills\.side_walk\.nfe_steps=200000 is invalid"),
        ("skill", "size_bytes", 10**30, r"skills\.side_walk\.size_bytes=10{30} is invalid"),
        ("skill", "network", "x" * 5000, r"network='xxxx.*\(5002 characters\) is unknown"),
    ],
    ids=lambda v: str(v)[:24] if not isinstance(v, int) or v < 10**30 else "huge",
)
def test_architecture_and_skill_values_are_bounded(
    tmp_path: Path, where: str, key: str, value: Any, message: str
) -> None:
    """Were accepted and ran for minutes at GBs (nfe_steps, num_layers), or gave a raw
    OverflowError / RuntimeError / TypeError naming no file (n_freqs, hidden_dim,
    mlp_ratio) when the networks were built."""
    doc = manifest_dict()
    target = doc["base"]["architecture"] if where == "arch" else doc["skills"]["side_walk"]
    target[key] = value
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PaperWeightsError, match=message) as err:
        read_manifest(path)
    assert str(path) in str(err.value)
    _one_line(str(err.value))
    assert len(str(err.value)) < 600


def test_num_threads_is_bounded_before_torch_sees_it(tmp_path: Path) -> None:
    """``--motion-option num_threads=100000`` crashed torch (SystemError, or a segfault):
    refused when the config is checked, torch untouched."""
    from humanclaw_gym.motion.torch_threads import MAX_NUM_THREADS, check_num_threads

    assert check_num_threads(MAX_NUM_THREADS) == MAX_NUM_THREADS
    for bad in (0, MAX_NUM_THREADS + 1, 100_000, 10**4000, 2.0, True):
        with pytest.raises(ValueError, match=r"num_threads=.* is invalid: allowed an int in"):
            check_num_threads(bad)
    from humanclaw_gym.backends.config import BackendConfig

    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(manifest_dict()))
    (tmp_path / "w").mkdir()
    options = {"weights_dir": str(tmp_path / "w"), "manifest": str(manifest), "num_threads": 10**5}
    with pytest.raises(ValueError, match="num_threads=100000 is invalid"):
        BackendConfig(motion="paper", motion_options=options).check()


def test_cli_rollout_refuses_threads_and_nested_manifests(tmp_path: Path, release: Path) -> None:
    """``humanclaw rollout --motion paper``: ``num_threads=100000`` crashed torch in the
    episode, a deeply nested manifest gave a RecursionError traceback; both are one line,
    exit 2, nothing written."""
    out = tmp_path / "out"
    done = _cli(
        "rollout",
        "--motion",
        "paper",
        "--release",
        str(release),
        "--motion-option",
        "num_threads=100000",
        "--max-steps",
        "2",
        "--output",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    _one_line(done.stderr)
    assert "num_threads=100000 is invalid" in done.stderr
    assert not out.exists()
    manifest = tmp_path / "m.json"
    manifest.write_text('{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}")
    done = _cli(
        "rollout",
        "--motion",
        "paper",
        "--release",
        str(release),
        "--motion-option",
        f"manifest={manifest}",
        "--output",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    _one_line(done.stderr)
    assert "nested too deeply" in done.stderr and not out.exists()


def test_doctor_reports_a_hostile_manifest_in_one_line(tmp_path: Path) -> None:
    """``humanclaw doctor --release``: was a RecursionError traceback."""
    from humanclaw_gym.doctor import installation_report

    manifest = tmp_path / "resources/weights/paper_fullval_v1.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"schema": ' + "[" * 50_000 + "]" * 50_000 + "}")
    (tmp_path / "weights/paper_fullval_v1").mkdir(parents=True)
    report = installation_report(probe=False, release_dir=tmp_path)
    paper = report["paper_motion"]
    assert not paper["ok"] and "nested too deeply" in paper["detail"]
    done = _cli("doctor", "--no-probe", "--release", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "nested too deeply" in done.stdout


# ----------------------------------------------------------------------------------------
# weights and seed state (torch)
# ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    root = tmp_path_factory.mktemp("paper_release")
    write_synthetic_release(root, seed=3, **_TINY)
    return root


@pytest.fixture
def copy_of(release: Path, tmp_path: Path):
    from humanclaw_gym.motion.paper import clear_model_cache

    def make() -> Path:
        return Path(shutil.copytree(release, tmp_path / "release"))

    yield make
    clear_model_cache()


def _edit_manifest(root: Path, edit) -> None:
    path = root / "resources/weights/paper_fullval_v1.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _repin(root: Path, skill: str) -> None:
    from humanclaw_gym.motion.paper.manifest import sha256_file

    rel = "base/motion_dit.pt" if skill == "base" else f"skills/{skill}.pt"
    path = root / "weights/paper_fullval_v1" / rel

    def edit(data):
        entry = data["base"] if skill == "base" else data["skills"][skill]
        entry["size_bytes"] = path.stat().st_size
        entry["sha256"] = sha256_file(path)

    _edit_manifest(root, edit)


def test_an_architecture_bigger_than_its_files_is_refused_before_building(copy_of) -> None:
    """64 layers named over files of two: refused from the sizes alone (nothing unpickled,
    nothing built); was built, then refused tensor by tensor."""
    import torch

    from humanclaw_gym.motion.paper import PaperMotion
    from humanclaw_gym.motion.paper import weights as weights_module

    root = copy_of()
    _edit_manifest(root, lambda d: d["base"]["architecture"].update(num_layers=64))
    loaded = []
    real_load = torch.load
    weights_module.torch.load = lambda *a, **k: loaded.append(a) or real_load(*a, **k)
    start = time.perf_counter()
    try:
        with pytest.raises(PaperWeightsError, match=r"base\.size_bytes=\d+ does not fit") as err:
            PaperMotion(release_dir=root)
    finally:
        weights_module.torch.load = real_load
    assert time.perf_counter() - start < 10.0
    assert not [a for a in loaded if isinstance(a[0], (str, Path))]  # no weight file read
    _one_line(str(err.value))


def test_a_seed_state_of_huge_values_is_refused_when_loaded(copy_of) -> None:
    """3e38 is finite in float32 and was accepted; the first chunk then overflowed."""
    import torch

    from humanclaw_gym.motion.paper import PaperMotion

    root = copy_of()
    seed = root / "resources/seeds/natural_beta0_fk_seed.pt"
    state = torch.load(seed, weights_only=True)["state"]
    torch.save({"state": torch.full_like(state, 3e38)}, seed)
    with pytest.raises(PaperWeightsError, match=r"seed state .* magnitude 3e\+38") as err:
        PaperMotion(release_dir=root)
    _one_line(str(err.value))
    with open(seed, "wb") as fh:  # a sparse 300 MB seed state: refused by its size
        fh.truncate(300 << 20)
    with pytest.raises(PaperWeightsError, match="has 314572800 bytes"):
        PaperMotion(release_dir=root)


def test_an_unpickler_refusal_is_one_line(copy_of) -> None:
    """torch's weights-only refusal spans many lines; the error stays one line."""
    import torch

    from humanclaw_gym.motion.paper import PaperMotion

    root = copy_of()
    path = root / "weights/paper_fullval_v1/skills/turn.pt"
    payload = torch.load(path, weights_only=True)
    payload["x"] = Path(".")  # a global the weights-only unpickler refuses
    torch.save(payload, path)
    _repin(root, "turn")
    with pytest.raises(PaperWeightsError, match="skill 'turn'.*weights-only") as err:
        PaperMotion(release_dir=root)
    _one_line(str(err.value))
    assert len(str(err.value)) < 1000


# ----------------------------------------------------------------------------------------
# the paper profile's pre-check: payloads, seed state and physics values
# ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    return write_synthetic_dataset(tmp_path_factory.mktemp("hssd") / "humanclaw-hssd-synth")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, synth, release) -> Path:
    """A synthetic release checkout with its (random, tiny) weights downloaded."""
    from paper_release_synthetic import write_release_checkout

    root = tmp_path_factory.mktemp("checkout") / "HumanCLAW"
    shutil.copytree(release, root)
    write_release_checkout(root, episodes_dir=synth.episodes_dir.parent)
    return root


@pytest.fixture
def checkout_copy(checkout: Path, tmp_path: Path):
    from humanclaw_gym.motion.paper import clear_model_cache

    yield lambda: Path(shutil.copytree(checkout, tmp_path / "HumanCLAW"))
    clear_model_cache()


def _resave(root: Path, skill: str, edit) -> None:
    import torch

    rel = "base/motion_dit.pt" if skill == "base" else f"skills/{skill}.pt"
    path = root / "weights/paper_fullval_v1" / rel
    payload = torch.load(path, weights_only=True)
    edit(payload, torch)
    torch.save(payload, path)
    _repin(root, skill)


def _nan(payload, torch) -> None:
    payload["state_dict"]["zero_linears.0.weight"][0, 0] = float("nan")


def _pickle(payload, torch) -> None:
    payload["x"] = Path(".")


def _dtype(payload, torch) -> None:
    payload["state_dict"]["zero_linears.0.bias"] = payload["state_dict"]["zero_linears.0.bias"].to(
        torch.float16
    )


def _shape(payload, torch) -> None:
    weight = payload["state_dict"]["zero_linears.0.weight"]
    payload["state_dict"]["zero_linears.0.weight"] = weight[:, :-1].clone()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_nan, "holds NaN or infinite values"),
        (_pickle, "cannot be read as a weights-only torch file"),
        (_dtype, "is stored as torch.float16"),
        (_shape, r"has shape \(32, 31\)"),
    ],
    ids=["nan", "pickle", "dtype", "shape"],
)
def test_profile_refuses_a_bad_payload_before_any_episode(
    checkout_copy, synth, edit, message: str
) -> None:
    """The profile's pre-check was hash-only: a re-pinned bad payload passed it and failed
    every episode."""
    from humanclaw_gym.profiles import ProfileError, resolve_profile

    root = checkout_copy()
    _resave(root, "step_back", edit)
    with pytest.raises(ProfileError, match=r"skill 'step_back'.*step_back\.pt.*" + message) as err:
        resolve_profile("paper", root, scene_dataset=synth.root)
    assert err.value.parts == ("motion weights",)
    _one_line(str(err.value))


def test_profile_refuses_a_bad_seed_state(checkout_copy, synth) -> None:
    import torch

    from humanclaw_gym.profiles import ProfileError, resolve_profile

    root = checkout_copy()
    seed = root / "resources/seeds/natural_beta0_fk_seed.pt"
    torch.save({"state": torch.full((5, 219), 3e38)}, seed)
    with pytest.raises(ProfileError, match=r"seed state .* magnitude 3e\+38") as err:
        resolve_profile("paper", root, scene_dataset=synth.root)
    assert err.value.parts == ("motion weights",)


@pytest.mark.parametrize(
    ("physics", "message"),
    [
        ({"friction": -3.0}, "human_friction must be finite and > 0, got -3.0"),
        (
            {"pjsc_lambda_by_link": {"left_ankle": 1e300}},
            r"pjsc_gains\['left_ankle'\] must be in \[0, 1\], got 1e\+300",
        ),
        ({"root_gravity_scale": -1.0}, "root_gravity_scale must be finite and >= 0"),
    ],
    ids=["friction", "gain", "gravity"],
)
def test_profile_refuses_bad_physics_values_before_any_episode(
    checkout_copy, synth, physics: dict, message: str
) -> None:
    """A value the physics backend refuses was passed on and failed every episode."""
    from paper_release_synthetic import write_release_checkout

    from humanclaw_gym.profiles import ProfileError, resolve_profile

    root = checkout_copy()
    write_release_checkout(root, physics=physics, body=False)
    with pytest.raises(ProfileError, match=message) as err:
        resolve_profile("paper", root, scene_dataset=synth.root)
    assert err.value.parts == ("physics profile",)
    _one_line(str(err.value))


def test_cli_profile_refusals_write_nothing(checkout_copy, synth, tmp_path, capsys) -> None:
    """``humanclaw run --profile paper``: a NaN payload and a deeply nested manifest are
    refused in one line, exit 2, before the output folder exists."""
    from humanclaw_gym.cli.run_cmd import RunArgs, run

    root = checkout_copy()
    out = tmp_path / "out"
    args = RunArgs(profile="paper", agent="oracle", output=out, quiet=True, limit=1)
    args.backend.release = root
    args.backend.scene_dataset = synth.root
    _resave(root, "turn", _nan)
    assert run(args) == 2
    err = capsys.readouterr().err
    _one_line(err)
    assert "motion weights:" in err and "turn.pt" in err and "NaN" in err
    assert not out.exists()
    manifest = root / "resources/weights/paper_fullval_v1.json"
    manifest.write_text('{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert run(args) == 2
    err = capsys.readouterr().err
    _one_line(err)
    assert "nested too deeply" in err
    assert not out.exists()


# ----------------------------------------------------------------------------------------
# body assets
# ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def body_dir(tmp_path_factory) -> Path:
    from humanclaw_gym.body.synthetic import write_synthetic_body_asset

    return write_synthetic_body_asset(tmp_path_factory.mktemp("body") / "body")


def _body_copy(src: Path, dst: Path) -> tuple[Path, Path]:
    shutil.copytree(src, dst)
    return dst, next(dst.glob("*.urdf"))


def _stl(triangles: int) -> bytes:
    """A binary STL of ``triangles`` small distinct triangles (a fan along x)."""
    records = np.zeros(triangles, dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    x = np.arange(triangles, dtype=np.float32) * 1e-4
    records["v"][:, 0, 0] = x
    records["v"][:, 1, 0] = x + 5e-5
    records["v"][:, 1, 1] = 0.01
    records["v"][:, 2, 0] = x
    records["v"][:, 2, 2] = 0.01
    return b"\0" * 80 + np.uint32(triangles).tobytes() + records.tobytes()


def _body_refused(folder: Path, pattern: str, seconds: float = 5.0) -> str:
    from humanclaw_gym.body.asset import BodyAssetError, load_body_asset

    start = time.perf_counter()
    with pytest.raises(BodyAssetError, match=pattern) as err:
        load_body_asset(folder)
    assert time.perf_counter() - start < seconds
    _one_line(str(err.value))
    return str(err.value)


def test_a_utf16_urdf_with_entities_is_refused(body_dir, tmp_path) -> None:
    """The DOCTYPE / ENTITY ban was a byte regex: in UTF-16 the declaration passed it and
    the entities expanded (3.9 MB became 192 MB). Now the parser refuses it in any
    encoding; a plain UTF-16 URDF still reads."""
    from humanclaw_gym.body.asset import load_body_asset

    folder, urdf = _body_copy(body_dir, tmp_path / "b")
    text = urdf.read_text().replace('<?xml version="1.0" ?>', "")
    urdf.write_bytes(('<?xml version="1.0" encoding="UTF-16"?>' + text).encode("utf-16"))
    assert load_body_asset(folder).num_links == 55
    bomb = (
        '<?xml version="1.0" encoding="UTF-16"?>\n<!DOCTYPE robot [<!ENTITY a "'
        + "x" * 1000
        + '"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>\n'
        + text.replace('<robot name="synthetic_beta0">', '<robot name="synthetic_beta0">&b;')
    )
    urdf.write_bytes(bomb.encode("utf-16"))
    _body_refused(folder, "DOCTYPE or ENTITY declarations are not accepted")
    urdf.write_bytes(bomb.encode("utf-16-be"))
    _body_refused(folder, "DOCTYPE or ENTITY declarations are not accepted|malformed XML")


def test_many_elements_naming_one_mesh_are_bounded(body_dir, tmp_path, monkeypatch) -> None:
    """One STL named by 20,000 <collision> elements made a transformed copy each (uncapped:
    ~137 GB for a 5 MB file). Now the elements and their triangles in all are counted (the
    triangle cap lowered here, so that a small file reaches it)."""
    from humanclaw_gym.body import asset

    folder, urdf = _body_copy(body_dir, tmp_path / "b")
    text = urdf.read_text()
    one = (
        '<collision><origin rpy="0 0 0" xyz="0 0 0"/><geometry>'
        '<mesh filename="meshes/pelvis.stl"/></geometry></collision>'
    )
    many = text.replace('<link name="pelvis">', '<link name="pelvis">' + one * 20_000, 1)
    urdf.write_text(many)
    _body_refused(folder, r"more than 2048 <collision> / <visual> meshes in all")
    (folder / "meshes" / "big.stl").write_bytes(_stl(4_000))
    big = one.replace("meshes/pelvis.stl", "meshes/big.stl")
    urdf.write_text(text.replace('<link name="pelvis">', '<link name="pelvis">' + big * 3, 1))
    monkeypatch.setitem(asset.BODY_ASSET_LIMITS, "total_triangles", 10_000)
    _body_refused(folder, r"'meshes/big.stl': .* more than 10000 triangles in all")


def test_deeply_nested_unknown_elements_are_refused_at_load(body_dir, tmp_path) -> None:
    """20,000 nested unknown elements were accepted, then the physics' URDF rewrite hit a
    RecursionError at reset."""
    folder, urdf = _body_copy(body_dir, tmp_path / "b")
    urdf.write_text(
        urdf.read_text().replace("</robot>", "<x>" * 20_000 + "</x>" * 20_000 + "</robot>")
    )
    _body_refused(folder, r"elements nested 17 deep \(<x>\): allowed at most 16 levels")


@pytest.mark.parametrize(
    ("old", "new", "pattern"),
    [
        (
            '<mesh filename="meshes/pelvis.stl"/>',
            '<mesh filename="meshes/pelvis.stl" scale="1e300 1e300 1e300"/>',
            r"mesh scale \[1e\+300, 1e\+300, 1e\+300\] must be in",
        ),
        (
            '<mesh filename="meshes/pelvis.stl"/>',
            '<mesh filename="meshes/pelvis.stl" scale="900 900 900"/>',
            r"mesh 'meshes/pelvis.stl' \(scale \[900.0, 900.0, 900.0\]\) reaches .* m",
        ),
        ('<mass value="5.000000"/>', '<mass value="1e300"/>', "at most 10000.0 kg"),
    ],
    ids=["scale-1e300", "scale-900", "mass"],
)
def test_placed_meshes_and_masses_are_bounded(body_dir, tmp_path, old, new, pattern) -> None:
    """``<mesh scale="1e300 ...">`` passed the 100 m coordinate cap (checked before the
    scale): pybullet ran, MuJoCo failed."""
    folder, urdf = _body_copy(body_dir, tmp_path / "b")
    urdf.write_text(urdf.read_text().replace(old, new, 1))
    _body_refused(folder, pattern)


def test_cli_refuses_a_hostile_body_in_one_line(body_dir, tmp_path) -> None:
    folder, urdf = _body_copy(body_dir, tmp_path / "b")
    urdf.write_text(
        urdf.read_text().replace("</robot>", "<x>" * 20_000 + "</x>" * 20_000 + "</robot>")
    )
    out = tmp_path / "out"
    done = _cli(
        "rollout",
        "--body-asset",
        str(folder),
        "--max-steps",
        "2",
        "--output",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    _one_line(done.stderr)
    assert "nested 17 deep" in done.stderr
    assert not out.exists()


# ----------------------------------------------------------------------------------------
# episodes
# ----------------------------------------------------------------------------------------
def _shard_with(tmp_path: Path, edit, name: str = "s") -> Path:
    """A shard of our format holding the first val100 episode, edited as a dict (in a
    folder of its own: splits are cached by path)."""
    from humanclaw_gym.episodes.io import canonical_json, gzip_bytes, load_split

    ep = load_split("val100")[0]
    record = ep.to_dict()
    edit(record)
    doc = {"schema": "humanclaw_episodes_v2", "scene_id": ep.scene_id, "episodes": [record]}
    (tmp_path / name).mkdir()
    path = tmp_path / name / f"{ep.scene_id}.json.gz"
    path.write_bytes(gzip_bytes(canonical_json(doc).encode()))
    return path


@pytest.mark.parametrize("value", [1e300, 1e6, -1e5])
def test_start_positions_far_away_are_refused_when_read(tmp_path: Path, value: float) -> None:
    """1e300 failed late, 1e6 was accepted and scored final_distance_m=1414205.6."""
    from humanclaw_gym.episodes.io import read_shard
    from humanclaw_gym.episodes.schema import EpisodeFormatError

    path = _shard_with(tmp_path, lambda r: r.update(start_position=[value, 0.0, 1.0]))
    with pytest.raises(EpisodeFormatError, match=r"start_position .* is out of range") as err:
        read_shard(path)
    message = str(err.value)
    _one_line(message)
    assert str(path) in message and "episodes[0]" in message


def test_a_start_below_the_floor_is_refused_when_the_episode_starts(tmp_path: Path) -> None:
    """50 m below the floor, or beside the home, was accepted and run."""
    import gymnasium as gym

    from humanclaw_gym.envs import ENV_ID
    from humanclaw_gym.episodes.schema import EpisodeFormatError

    for k, (position, pattern) in enumerate(
        (
            ([1.0, -50.0, 1.0], r"start_position \[1, -50, 1\] .* is off the scene's floors"),
            ([1.0, 0.0, 300.0], r"start_position \[1, 0, 300\] .* lies outside the scene"),
        )
    ):
        path = _shard_with(tmp_path, lambda r, p=position: r.update(start_position=p), str(k))
        env = gym.make(ENV_ID, split=str(path), max_steps=2)
        try:
            with pytest.raises(EpisodeFormatError, match=pattern) as err:
                env.reset(seed=0)
        finally:
            env.close()
        _one_line(str(err.value))
        assert "episode " in str(err.value)


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (lambda e: e.update(goals=5), r"field 'goals' must be a list"),
        (lambda e: e.update(max_steps="abc"), r"max_steps must be an int in \[1, 10000\]"),
        (lambda e: e.update(max_steps=1e300), r"max_steps must be an int in \[1, 10000\]"),
        (lambda e: e.update(init_offset=[1e300, 0, 0]), r"'init_offset' must be 3 numbers"),
    ],
    ids=["goals", "max_steps", "max_steps_huge", "init_offset"],
)
def test_habitat_records_give_one_line_errors(tmp_path: Path, edit, pattern: str) -> None:
    """Each was a raw TypeError / ValueError / OverflowError naming no file, or (the huge
    offset) accepted and failed late."""
    from humanclaw_gym.episodes.io import episodes_from_habitat
    from humanclaw_gym.episodes.schema import EpisodeFormatError

    record = copy.deepcopy(HABITAT_RECORD)
    edit(record)
    with pytest.raises(EpisodeFormatError, match=pattern) as err:
        episodes_from_habitat({"episodes": [record]}, "shard.json.gz")
    _one_line(str(err.value))
    assert "shard.json.gz" in str(err.value) and len(str(err.value)) < 600
    # a goal id of 5,000 digits was a raw ValueError (int conversion): it stays a string
    record = copy.deepcopy(HABITAT_RECORD)
    record["goals"][0]["object_id"] = "9" * 5000
    (episode,) = episodes_from_habitat({"episodes": [record]}, "shard.json.gz")
    assert episode.goals[0].object_id == "9" * 5000


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (lambda r: r["info"].update(choice_points="abc"), "choice_points must be a non-negative"),
        (lambda r: r["info"].update(choice_points=[1]), "choice_points must be a non-negative"),
        (lambda r: r.update(max_steps=10**9), r"max_steps must be an int in \[1, 10000\]"),
        (lambda r: r.update(instruction=5), "instruction must be a string"),
        (lambda r: r["goals"][0].update(seat_height_m=1e300), "seat_height_m .* out of range"),
    ],
    ids=["choice_points", "choice_points_list", "max_steps", "instruction", "seat"],
)
def test_our_records_give_one_line_errors(tmp_path: Path, edit, pattern: str) -> None:
    """A raw ValueError / TypeError naming no file, or (steps, instruction, seat height)
    accepted and failed or ran long later."""
    from humanclaw_gym.episodes.io import read_shard
    from humanclaw_gym.episodes.schema import EpisodeFormatError

    path = _shard_with(tmp_path, edit)
    with pytest.raises(EpisodeFormatError, match=pattern) as err:
        read_shard(path)
    _one_line(str(err.value))
    assert str(path) in str(err.value)


# ----------------------------------------------------------------------------------------
# scene datasets: GLB meshes, configs, scene instances
# ----------------------------------------------------------------------------------------
def _tiny_dataset(root: Path, glb: bytes | None = None, count: int = 1) -> Path:
    """A scene dataset of one object config (a triangle GLB) placed ``count`` times in
    scene ``home``; returns the dataset config file."""
    doc, binary = glb_parts()
    objects = root / "objects" / "box"
    objects.mkdir(parents=True)
    (objects / "box.glb").write_bytes(glb if glb is not None else glb_bytes(doc, binary))
    (objects / "box.object_config.json").write_text(json.dumps({"render_asset": "box.glb"}))
    (root / "scenes").mkdir()
    (root / "scenes" / "home.scene_instance.json").write_text(
        json.dumps(scene_instance_dict("box", count))
    )
    config = root / "tiny.scene_dataset_config.json"
    config.write_text(
        json.dumps(
            {
                "objects": {"paths": {".json": ["objects/*"]}},
                "scene_instances": {"paths": {".json": ["scenes"]}},
            }
        )
    )
    return config


def _dataset_refused(config: Path, pattern: str, scene: str | None = "home") -> str:
    """Open the dataset (and load ``scene``): a one-line SceneDatasetError / MeshAssetError
    matching ``pattern``."""
    from humanclaw_gym.scenes.hssd.configs import SceneDatasetError
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset
    from humanclaw_gym.scenes.meshes import MeshAssetError

    with pytest.raises((SceneDatasetError, MeshAssetError), match=pattern) as err:
        dataset = SceneDataset(config)
        if scene is not None:
            dataset.load_scene(scene)
    _one_line(str(err.value))
    assert len(str(err.value)) < 1500
    return str(err.value)


def test_a_tiny_dataset_loads(tmp_path: Path) -> None:
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset

    scene = SceneDataset(_tiny_dataset(tmp_path)).load_scene("home")
    assert len(scene.objects) == 1


def _nested(doc: dict) -> bytes:
    text = json.dumps(doc)
    return (text[:-1] + ', "extras": ' + "[" * 50_000 + "]" * 50_000 + "}").encode()


def _digits(doc: dict) -> bytes:
    return (json.dumps(doc)[:-1] + ', "extras": {"n": ' + "9" * 5000 + "}}").encode()


def _glb_case(name: str) -> bytes:
    doc, binary = glb_parts()
    if name == "nesting":
        return glb_bytes(None, binary, raw_json=_nested(doc))
    if name == "digits":
        return glb_bytes(None, binary, raw_json=_digits(doc))
    if name == "extensionsRequired":
        doc["extensionsRequired"] = 5
    elif name == "materials":
        doc["materials"] = [1]
    elif name == "texture_source":
        doc["textures"] = [{"source": "a"}]
        doc["materials"][0]["pbrMetallicRoughness"]["baseColorTexture"] = {"index": 0}
    elif name == "index_range":
        doc, binary = glb_parts(indices=(0, 1, 7))
    elif name == "huge_vertices":
        doc, binary = glb_parts(positions=((0, 0, 0), (3e38, 0, 0), (0, 3e38, 0)))
    return glb_bytes(doc, binary)


@pytest.mark.parametrize(
    ("case", "pattern"),
    [
        ("nesting", "JSON chunk holds JSON nested too deeply"),
        ("digits", "JSON chunk holds a JSON value that cannot be read"),
        ("extensionsRequired", "extensionsRequired must be a list of extension names"),
        ("materials", "materials must be a list of objects"),
        ("texture_source", r"textures\[0\]\.source"),
        ("index_range", r"primitives\[0\]\.indices name vertex 7: POSITION has 3 vertices"),
        ("huge_vertices", r"POSITION must be .*|vertex .* beyond 100000"),
    ],
)
def test_hostile_glb_json_chunks_are_one_line_errors(tmp_path: Path, case, pattern) -> None:
    """Were a raw RecursionError / ValueError / TypeError / AttributeError / IndexError
    naming no file, or (vertices at 3e38) accepted."""
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.meshes import MeshAssetError, load_mesh

    path = tmp_path / f"{case}.glb"
    path.write_bytes(_glb_case(case))
    with pytest.raises(MeshAssetError, match=pattern) as err:
        load_mesh(path, use_disk_cache=False)
    _one_line(str(err.value))
    assert str(path) in str(err.value) and len(str(err.value)) < 800
    # and through a dataset: the scene's load names the file too
    config = _tiny_dataset(tmp_path / "ds", glb=path.read_bytes())
    _dataset_refused(config, "box.glb")


def test_a_huge_glb_is_refused_unread(tmp_path: Path) -> None:
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.meshes import MeshAssetError, load_mesh

    path = tmp_path / "big.glb"
    with open(path, "wb") as fh:
        fh.truncate(600 << 20)
    start = time.perf_counter()
    with pytest.raises(MeshAssetError, match=r"has 629145600 bytes; allowed at most 536870912"):
        load_mesh(path, use_disk_cache=False)
    assert time.perf_counter() - start < 1.0


def test_a_huge_texture_is_not_decoded(tmp_path: Path) -> None:
    """A 9,000 x 9,000 image (81 M pixels, a few hundred KB as PNG) was decoded to RGBA in
    memory (324 MB) before being shrunk; above 8192 x 8192 pixels the file is read without
    its images and the material colour drawn."""
    pytest.importorskip("trimesh")
    import warnings
    import zlib

    from humanclaw_gym.scenes.meshes import MeshTextureWarning, load_mesh

    side = 9000
    raw = zlib.compressobj(9)
    row = b"\0" * (side + 1)
    idat = b"".join(raw.compress(row) for _ in range(side)) + raw.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        import struct

        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    import struct

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", idat)
        + chunk(b"IEND", b"")
    )
    doc, binary = glb_parts()
    offset = len(binary)
    binary += png
    doc["bufferViews"].append({"buffer": 0, "byteOffset": offset, "byteLength": len(png)})
    doc["buffers"][0]["byteLength"] = len(binary)
    doc["images"] = [{"bufferView": 2, "mimeType": "image/png"}]
    doc["textures"] = [{"source": 0}]
    doc["materials"][0]["pbrMetallicRoughness"]["baseColorTexture"] = {"index": 0}
    doc["meshes"][0]["primitives"][0]["attributes"]["TEXCOORD_0"] = 2
    uv = np.zeros((3, 2), dtype=np.float32).tobytes()
    doc["bufferViews"].append({"buffer": 0, "byteOffset": len(binary), "byteLength": len(uv)})
    doc["accessors"].append({"bufferView": 3, "componentType": 5126, "count": 3, "type": "VEC2"})
    binary += uv
    doc["buffers"][0]["byteLength"] = len(binary)
    path = tmp_path / "textured.glb"
    path.write_bytes(glb_bytes(doc, binary))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asset = load_mesh(path, use_disk_cache=False)
    assert asset.primitives[0].texture is None
    assert any(
        "9000 x 9000 pixels" in str(w.message) for w in caught if w.category is MeshTextureWarning
    )


@pytest.mark.parametrize(
    ("key", "value", "pattern"),
    [
        ("translation", [1e300, 0.0, 0.0], r"field 'translation' .* is out of range"),
        ("non_uniform_scale", [1e30, 1.0, 1.0], r"the scale .* is out of range"),
        ("translation", [20_000.0, 0.0, 0.0], r"field 'translation' .* is out of range"),
    ],
    ids=["translation", "scale", "translation-20km"],
)
def test_instance_placement_is_bounded(tmp_path: Path, key, value, pattern) -> None:
    """Translation 1e300 or scale 1e30 gave a bare OverflowError when the scene was built."""
    pytest.importorskip("trimesh")
    config = _tiny_dataset(tmp_path)
    path = tmp_path / "scenes" / "home.scene_instance.json"
    doc = json.loads(path.read_text())
    doc["object_instances"][0][key] = value
    path.write_text(json.dumps(doc))
    message = _dataset_refused(config, pattern)
    assert "object_instances[0]" in message and str(path) in message


def test_instance_counts_and_scene_triangles_are_bounded(tmp_path: Path, monkeypatch) -> None:
    """200,000 object instances (40 MB, under the 64 MiB file cap) ran for minutes at GBs:
    the instances of a scene and the triangles it places in all are bounded (the caps
    lowered here so that a small file reaches them)."""
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd import configs

    config = _tiny_dataset(tmp_path, count=60)
    monkeypatch.setitem(configs.DATASET_LIMITS, "object_instances", 50)
    _dataset_refused(config, r"'object_instances' holds 60 instances: allowed at most 50")
    monkeypatch.setitem(configs.DATASET_LIMITS, "object_instances", 10_000)
    monkeypatch.setitem(configs.DATASET_LIMITS, "scene_triangles", 40)
    message = _dataset_refused(config, r"places more than 40 triangles in all")
    assert "object_instances[40]" in message


def test_dataset_paths_stay_inside_the_dataset(tmp_path: Path) -> None:
    """A render_asset or a dataset config's glob reached /proc: every path a config names
    stays inside the dataset folder as written; a symbolic link inside it may lead to
    other files (a prepared dataset links the licensed meshes), never into /proc."""
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset

    for k, asset in enumerate(("../../../../../../proc/self/status", "/proc/self/status")):
        config = _tiny_dataset(tmp_path / f"a{k}")
        cfg = config.parent / "objects" / "box" / "box.object_config.json"
        cfg.write_text(json.dumps({"render_asset": asset}))
        _dataset_refused(config, r"field 'render_asset': the path .* (leaves|must be relative)")
    for k, entry in enumerate(("/proc/*", "../../../../*", "objects/../../*")):
        config = _tiny_dataset(tmp_path / f"g{k}")
        doc = json.loads(config.read_text())
        doc["objects"]["paths"][".json"] = [entry]
        config.write_text(json.dumps(doc))
        _dataset_refused(config, r"objects\.paths.*the path .* (leaves|must be relative)", None)
    # a symbolic link inside the dataset into /proc is refused, one to other files is read
    config = _tiny_dataset(tmp_path / "s")
    os.symlink("/proc/self", config.parent / "objects" / "proc")
    _dataset_refused(config, r"leads into /proc/", None)
    (config.parent / "objects" / "proc").unlink()
    outside = tmp_path / "licensed"
    shutil.move(str(config.parent / "objects" / "box"), outside)
    os.symlink(outside, config.parent / "objects" / "box")
    assert len(SceneDataset(config).load_scene("home").objects) == 1


def test_compressed_geometry_is_named_before_the_structure_check(tmp_path: Path) -> None:
    """A Draco file's accessors have no buffer view: the refusal still names the extension
    (and how to decompress), not the accessor."""
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.meshes import MeshAssetError, load_mesh

    doc, binary = glb_parts()
    doc["extensionsRequired"] = doc["extensionsUsed"] = ["KHR_draco_mesh_compression"]
    for accessor in doc["accessors"]:
        del accessor["bufferView"]
    path = tmp_path / "draco.glb"
    path.write_bytes(glb_bytes(doc, binary))
    with pytest.raises(MeshAssetError, match="uses KHR_draco_mesh_compression .* decompress"):
        load_mesh(path, use_disk_cache=False)
