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

from humanclaw_gym.motion.paper.manifest import PaperWeightsError, read_manifest

_REPO = Path(__file__).resolve().parents[1]
_TINY = {"hidden_dim": 32, "num_layers": 2, "num_heads": 2, "nfe_steps": 6}
_SKILLS = (
    "walk_forward",
    "side_walk",
    "step_back",
    "turn",
    "step_climb_up",
    "step_climb_down",
    "sit",
    "stand",
)
_NETWORKS = {
    "walk_forward": ("WalkForwardCtrlDiTFourierXZYaw", "fast_xzyaw", True),
    "side_walk": ("SideWalkCtrlDiTFourier", "side_fourier", True),
    "step_back": ("WalkForwardCtrlDiTFourier", "fourier", True),
    "turn": ("TurnCtrlDiT", "base", False),
    "step_climb_up": ("StepClimbUpCtrlDiT", "base", False),
    "step_climb_down": ("StepClimbDownCtrlDiT", "step_down_mlp", False),
    "sit": ("SitCtrlDiT", "sit_mlp", False),
    "stand": ("NonCondCtrlDiT", "noncond_fast", False),
}


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
def _pinned(path: str) -> dict[str, Any]:
    return {"path": path, "size_bytes": 1000, "sha256": "ab" * 32}


def manifest_dict() -> dict[str, Any]:
    """A valid ``humanclaw_weight_manifest_v2`` document (its files are not needed)."""
    skills = {}
    for name in _SKILLS:
        network, kind, fourier = _NETWORKS[name]
        entry = {
            **_pinned(f"skills/{name}.pt"),
            "storage": "control_state_v1",
            "base_variant": "fp32",
            "network": network,
            "kind": kind,
            "nfe_steps": 30,
        }
        if fourier:
            entry["n_freqs"] = 6
        skills[name] = entry
    return {
        "schema": "humanclaw_weight_manifest_v2",
        "profile": "hostile",
        "selection_policy": "exact_step_only",
        "checkpoint_step": 0,
        "base": {
            **_pinned("base/motion_dit.pt"),
            "storage": "motion_dit_state_v1",
            "architecture": {
                "x_dim": 219,
                "hidden_dim": 512,
                "num_layers": 10,
                "num_heads": 8,
                "mlp_ratio": 2.0,
                "n_history": 5,
                "n_future": 15,
                "nfe_steps": 30,
                "use_qk_norm": False,
            },
        },
        "base_variants": {"fp32": {"transform": "identity"}},
        "skills": skills,
    }


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


def test_cli_num_threads_is_refused_in_one_line(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(manifest_dict()))
    (tmp_path / "w").mkdir()
    out = tmp_path / "out"
    done = _cli(
        "rollout",
        "--motion",
        "paper",
        "--motion-weights",
        str(tmp_path / "w"),
        "--motion-option",
        f"manifest={manifest}",
        "--motion-option",
        "num_threads=100000",
        "--output",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    _one_line(done.stderr)
    assert "num_threads=100000 is invalid" in done.stderr
    assert not out.exists()


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
    from humanclaw_gym.motion.paper import PaperMotion

    root = copy_of()
    _edit_manifest(root, lambda d: d["base"]["architecture"].update(num_layers=64))
    start = time.perf_counter()
    with pytest.raises(PaperWeightsError, match=r"base\.size_bytes=\d+ does not fit") as err:
        PaperMotion(release_dir=root)
    assert time.perf_counter() - start < 5.0
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


_HABITAT_RECORD = {
    "episode_id": "0",
    "scene_id": "data/scenes/home.scene_instance.json",
    "start_position": [1.0, 0.0, 1.0],
    "start_rotation": [0.0, 0.0, 0.0, 1.0],
    "object_category": "chair",
    "info": {"geodesic_distance": 2.0},
    "goals": [{"object_id": 3, "position": [2.0, 0.5, 2.0]}],
}


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

    record = copy.deepcopy(_HABITAT_RECORD)
    edit(record)
    with pytest.raises(EpisodeFormatError, match=pattern) as err:
        episodes_from_habitat({"episodes": [record]}, "shard.json.gz")
    _one_line(str(err.value))
    assert "shard.json.gz" in str(err.value) and len(str(err.value)) < 600
    # a goal id of 5,000 digits was a raw ValueError (int conversion): it stays a string
    record = copy.deepcopy(_HABITAT_RECORD)
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
