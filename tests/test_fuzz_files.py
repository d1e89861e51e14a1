"""Seeded mutation fuzzing of every file surface a user hands in: weight manifests, URDF body
folders, GLB meshes, scene instances (with their object configs) and episode records.

Each family starts from a valid synthetic file (:mod:`hostile_files`,
:func:`humanclaw_gym.body.synthetic.write_synthetic_body_asset`) and applies 1-3 seeded
mutations per case: a value swapped for an edge case (huge, tiny, negative, NaN,
infinite, wrong type, long string, path out of the folder, deep nesting), a field deleted
or added, an element duplicated or nested, the bytes truncated, flipped or re-encoded.
Every case must either load or raise the surface's one-line error class (a user error for
the CLI), within a few seconds; never a raw Python exception. Fixed seeds: the same cases
every run; together the families run in well under a minute.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile_files import (
    HABITAT_RECORD,
    glb_bytes,
    glb_parts,
    manifest_dict,
    scene_instance_dict,
)

from humanclaw_gym.cli.errors import is_user_error

_SEED = 35_035
_CASE_SECONDS = 5.0
_MESSAGE_LIMIT = 2000

# ----------------------------------------------------------------------------------------
# mutations of JSON documents
# ----------------------------------------------------------------------------------------
_EDGE_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 3, 2**31, 2**63, 10**30, -(10**30), 10**300, 1e300, -1e300,
    1e-300, 3e38, float("nan"), float("inf"), float("-inf"), 0.5, -0.5, "", "a", "x" * 5000,
    "1e300", "nan", "../../../../proc/self/status", "/proc/self/environ", "\u0000", "\ud800",
    "objects/*", [], {}, [0, 0, 0], [1e300, 0, 0], [0, 0, 0, 0], [[0]], {"a": {"b": {}}},
    ["a", "b"], [None], [float("nan")] * 3,
]  # fmt: skip


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys / indices) to a value inside ``node`` (bounded)."""
    out = [prefix]
    if len(out) > 5000:
        return out
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:20]):
            out += _paths(value, (*prefix, i))
    return out


def _get(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


def _mutate_json(rng: random.Random, doc: Any) -> Any:
    """One mutation of a JSON document (a copy)."""
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    path = rng.choice(paths[1:] or paths)
    if not path:
        return rng.choice(_EDGE_VALUES)
    parent, key = _get(doc, path[:-1]), path[-1]
    value = parent[key]
    op = rng.randrange(8)
    if op <= 2:  # an edge value
        parent[key] = copy.deepcopy(rng.choice(_EDGE_VALUES))
    elif op == 3:  # delete
        del parent[key]
    elif op == 4 and isinstance(value, (int, float)) and not isinstance(value, bool):
        parent[key] = value * rng.choice((-1, 1e6, 1e-6, 1e30, 0)) + rng.choice((0, 0.5, -1))
    elif op == 5 and isinstance(value, list) and value:  # duplicate or drop items
        parent[key] = value * rng.choice((0, 2, 50, 1000)) if rng.random() < 0.7 else value[:-1]
    elif op == 6 and isinstance(value, dict):  # an unknown or edge field
        value[rng.choice(["extra", "uri", "sparse", "children", "x" * 300])] = copy.deepcopy(
            rng.choice(_EDGE_VALUES)
        )
    elif op == 7:  # nested
        depth = rng.choice((2, 50))  # deeper nesting: see _damage
        nested: Any = value
        for _ in range(depth):
            nested = [nested]
        parent[key] = nested
    else:
        parent[key] = copy.deepcopy(rng.choice(_EDGE_VALUES))
    return doc


def _json_cases(doc: Any, count: int, seed: int) -> list[bytes]:
    """``count`` serialised documents: the valid one, then 1-3 mutations each; one in
    ten is then damaged as bytes (truncated, a byte flipped, a digit string)."""
    rng = random.Random(seed)
    out = [json.dumps(doc).encode()]
    while len(out) < count:
        mutated = doc
        for _ in range(rng.randint(1, 3)):
            mutated = _mutate_json(rng, mutated)
        try:
            data = json.dumps(mutated).encode("utf-8", "surrogatepass")
        except (RecursionError, ValueError):
            data = b"[" * 5000
        if rng.random() < 0.1:
            data = _damage(rng, data)
        out.append(data)
    return out


def _damage(rng: random.Random, data: bytes) -> bytes:
    choice = rng.randrange(5)
    if choice == 4 and data.endswith(b"}"):  # nesting deeper than the interpreter reads
        return data[:-1] + b', "deep": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    if choice == 0 and data:
        return data[: rng.randrange(len(data))]
    if choice == 1 and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
    if choice == 2:
        return data.replace(b"0", b"9" * 5000, 1)
    return data.decode("utf-8", "ignore").encode("utf-16")


# ----------------------------------------------------------------------------------------
# the check every case passes
# ----------------------------------------------------------------------------------------
def _outcome(call: Callable[[], Any], errors: tuple[type[BaseException], ...], label: str) -> str:
    """Run one case: it loads (``"ok"``) or raises one of ``errors``, a user error for the
    CLI, whose message is one bounded line (``"refused"``); within ``_CASE_SECONDS``."""
    start = time.perf_counter()
    try:
        call()
        result = "ok"
    except errors as exc:
        text = str(exc)
        assert is_user_error(exc), f"{label}: {type(exc).__name__} is not a user error"
        assert "\n" not in text and 0 < len(text) <= _MESSAGE_LIMIT, f"{label}: {text[:300]!r}"
        result = "refused"
    except Exception as exc:  # noqa: BLE001 - the failure this fuzzing looks for
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1]
        pytest.fail(
            f"{label}: raw {type(exc).__name__}: {str(exc)[:300]} ({where.filename}:{where.lineno})"
        )
    seconds = time.perf_counter() - start
    assert seconds < _CASE_SECONDS, f"{label} took {seconds:.1f} s"
    return result


def _both_outcomes(results: list[str]) -> None:
    """The family exercised both branches (a fuzzer that only ever refuses tests little):
    the valid file loads, and some of the mutated ones load too (at least one in fifty:
    the formats are strict, most mutations are refused)."""
    loaded = results.count("ok")
    assert results[0] == "ok" and "refused" in results, results[:5]
    assert loaded >= max(2, len(results) // 50), f"{loaded} of {len(results)} cases loaded"


# ----------------------------------------------------------------------------------------
# families
# ----------------------------------------------------------------------------------------
def _sized_manifest(path: Path) -> dict[str, Any]:
    """A manifest document of a small architecture whose pinned sizes fit it (with torch;
    without, the release's architecture and sizes that only the reader checks)."""
    doc = manifest_dict()
    try:
        from humanclaw_gym.motion.paper.manifest import read_manifest
        from humanclaw_gym.motion.paper.weights import _expected, _template
    except ImportError:  # pragma: no cover - without the torch extra
        return doc
    doc["base"]["architecture"].update(hidden_dim=32, num_layers=2, num_heads=2)
    path.write_text(json.dumps(doc))
    manifest = read_manifest(path)
    for entry, skill in [(doc["base"], "base")] + [(doc["skills"][n], n) for n in doc["skills"]]:
        values = sum(t.numel() for t in _expected(_template(manifest, skill)).values())
        entry["size_bytes"] = 4 * values + 4096
    return doc


def test_fuzzed_weight_manifests(tmp_path: Path) -> None:
    """300 manifests: read, then (with torch) the architecture's sizes checked against the
    pinned files (networks built on the meta device only)."""
    from humanclaw_gym.motion.paper.manifest import PaperWeightsError, read_manifest

    try:
        from humanclaw_gym.motion.paper.weights import check_sizes
    except ImportError:  # pragma: no cover - without the torch extra
        check_sizes = None
    path = tmp_path / "manifest.json"
    results = []
    for k, data in enumerate(_json_cases(_sized_manifest(path), 300, _SEED)):
        path.write_bytes(data)

        def case() -> None:
            manifest = read_manifest(path)
            if check_sizes is not None:
                check_sizes(manifest)

        results.append(_outcome(case, (PaperWeightsError,), f"manifest case {k}"))
    _both_outcomes(results)


def _mutate_urdf(rng: random.Random, root: ET.Element) -> None:
    elements = list(root.iter())
    elem = rng.choice(elements)
    op = rng.randrange(7)
    texts = [
        "nan", "inf", "-1", "0", "1e300", "1e-300", "1 2", "0 0 0 0", "", "a" * 5000,
        "../../etc/passwd.stl", "/proc/self/status.stl", "meshes/absent.stl", "revolute",
        "1e300 1e300 1e300", "900 900 900", "pelvis", "left_hip", "-1e300 0 0",
    ]  # fmt: skip
    if op <= 2 and elem.attrib:
        elem.set(rng.choice(sorted(elem.attrib)), rng.choice(texts))
    elif op == 3 and elem is not root:
        parent = next(p for p in elements if elem in list(p))
        parent.remove(elem)
    elif op == 4 and elem is not root:
        parent = next(p for p in elements if elem in list(p))
        for _ in range(rng.choice((1, 10, 300))):
            parent.append(copy.deepcopy(elem))
    elif op == 5:
        node = elem
        for _ in range(rng.choice((1, 5, 40))):
            node = ET.SubElement(node, rng.choice(("x", "link", "collision", "geometry")))
    else:
        elem.tag = rng.choice(("x", "link", "joint", "mesh", "inertial", "origin"))


def test_fuzzed_urdf_body_folders(tmp_path: Path) -> None:
    """120 body folders whose URDF is mutated (attributes, elements removed, duplicated,
    nested or renamed; then re-encoded, given a DOCTYPE, or truncated now and then)."""
    from humanclaw_gym.body.asset import BodyAssetError, load_body_asset
    from humanclaw_gym.body.synthetic import write_synthetic_body_asset

    folder = write_synthetic_body_asset(tmp_path / "body")
    urdf = next(folder.glob("*.urdf"))
    valid = urdf.read_bytes()
    rng = random.Random(_SEED + 1)
    results = [_outcome(lambda: load_body_asset(folder), (BodyAssetError,), "urdf case 0")]
    for k in range(1, 120):
        root = ET.fromstring(valid)
        for _ in range(rng.randint(1, 3)):
            _mutate_urdf(rng, root)
        data = ET.tostring(root, encoding="utf-8")
        r = rng.random()
        if r < 0.05:
            data = data.decode().encode("utf-16")
        elif r < 0.1:
            data = b'<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY a "aaaa">]>' + data.split(
                b"?>", 1
            )[-1].replace(b"<link ", b"<link x='&a;' ", 1)
        elif r < 0.15:
            data = _damage(rng, data)
        urdf.write_bytes(data)
        results.append(_outcome(lambda: load_body_asset(folder), (BodyAssetError,), f"urdf {k}"))
    _both_outcomes(results)


def test_fuzzed_glb_meshes(tmp_path: Path) -> None:
    """500 GLBs: the JSON chunk mutated (350), or the binary chunk's values (150: vertices,
    indices, lengths); each read with the mesh reader, no disk cache."""
    pytest.importorskip("trimesh")
    import numpy as np

    from humanclaw_gym.scenes.meshes import MeshAssetError, clear_memory_cache, load_mesh

    doc, binary = glb_parts()
    path = tmp_path / "mesh.glb"
    results = []
    for k, data in enumerate(_json_cases(doc, 350, _SEED + 2)):
        path.write_bytes(glb_bytes(None, binary, raw_json=data))
        results.append(
            _outcome(lambda: load_mesh(path, use_disk_cache=False), (MeshAssetError,), f"glb {k}")
        )
    rng = random.Random(_SEED + 3)
    values = [0.0, -1.0, 1e30, 3e38, float("nan"), float("inf"), 7.0, 65535.0]
    for k in range(150):
        raw = bytearray(binary)
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.6:  # a float32 vertex coordinate
                i = rng.randrange(9)
                raw[4 * i : 4 * i + 4] = np.float32(rng.choice(values)).tobytes()
            else:  # an index
                i = rng.randrange(3)
                raw[36 + 2 * i : 38 + 2 * i] = np.uint16(rng.choice((0, 2, 3, 9, 65535))).tobytes()
        chunk = bytes(raw) if rng.random() < 0.8 else bytes(raw[: rng.randrange(len(raw))])
        path.write_bytes(glb_bytes(doc, chunk))
        results.append(
            _outcome(lambda: load_mesh(path, use_disk_cache=False), (MeshAssetError,), f"bin {k}")
        )
    clear_memory_cache()
    _both_outcomes(results)


def test_fuzzed_scene_instances_and_object_configs(tmp_path: Path) -> None:
    """250 scenes of a tiny dataset: the scene instance (200) or the object config (50)
    mutated; each loaded through the dataset (configs, meshes, placement)."""
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd.configs import SceneDatasetError
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset
    from humanclaw_gym.scenes.meshes import MeshAssetError

    doc, binary = glb_parts()
    root = tmp_path / "ds"
    (root / "objects" / "box").mkdir(parents=True)
    (root / "objects" / "box" / "box.glb").write_bytes(glb_bytes(doc, binary))
    object_config = root / "objects" / "box" / "box.object_config.json"
    config_doc = {
        "render_asset": "box.glb",
        "up": [0, 1, 0],
        "front": [0, 0, -1],
        "scale": [1, 1, 1],
        "mass": 2.0,
        "semantic_id": 1,
        "COM": [0, 0, 0],
        "friction_coefficient": 1.0,
        "restitution_coefficient": 0.0,
    }
    (root / "scenes").mkdir()
    scene_file = root / "scenes" / "home.scene_instance.json"
    config = root / "tiny.scene_dataset_config.json"
    config.write_text(
        json.dumps(
            {
                "objects": {"paths": {".json": ["objects/*"]}},
                "scene_instances": {"paths": {".json": ["scenes"]}},
            }
        )
    )
    instance = scene_instance_dict("box", 2)
    instance["object_instances"][1].update(uniform_scale=2.0, motion_type="DYNAMIC")
    errors = (SceneDatasetError, MeshAssetError)
    results = []
    cases = [("scene", d) for d in _json_cases(instance, 200, _SEED + 4)]
    cases += [("config", d) for d in _json_cases(config_doc, 50, _SEED + 5)]
    for k, (kind, data) in enumerate(cases):
        object_config.write_text(json.dumps(config_doc) if kind == "scene" else "")
        if kind == "config":
            object_config.write_bytes(data)
            scene_file.write_text(json.dumps(instance))
        else:
            scene_file.write_bytes(data)
        results.append(
            _outcome(lambda: SceneDataset(config).load_scene("home"), errors, f"{kind} {k}")
        )
    _both_outcomes(results)


def test_fuzzed_episode_records(tmp_path: Path) -> None:
    """900 shards: records of our format (450) and of the reference release's Habitat
    layout (450), mutated; each read as a shard file."""
    from humanclaw_gym.episodes.io import canonical_json, gzip_bytes, load_split, read_shard
    from humanclaw_gym.episodes.schema import EpisodeFormatError

    ours = {
        "schema": "humanclaw_episodes_v2",
        "scene_id": "hc_val_003",
        "episodes": [load_split("val100")[0].to_dict()],
    }
    ours["scene_id"] = ours["episodes"][0]["scene_id"]
    habitat = {"episodes": [copy.deepcopy(HABITAT_RECORD)]}
    path = tmp_path / "shard.json.gz"
    results = []
    for name, doc, seed in (("ours", ours, _SEED + 6), ("habitat", habitat, _SEED + 7)):
        for k, data in enumerate(_json_cases(doc, 450, seed)):
            path.write_bytes(gzip_bytes(data))
            results.append(_outcome(lambda: read_shard(path), (EpisodeFormatError,), f"{name} {k}"))
    assert canonical_json  # the canonical writer reads back (checked by the first case)
    _both_outcomes(results)


def test_the_families_start_from_valid_files(tmp_path: Path) -> None:
    """The seed files load (so every refusal above comes from a mutation)."""
    from humanclaw_gym.episodes.io import episodes_from_habitat

    assert episodes_from_habitat({"episodes": [copy.deepcopy(HABITAT_RECORD)]})
    shutil.rmtree(tmp_path, ignore_errors=True)
