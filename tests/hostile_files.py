"""Small valid files in the formats users hand in, for the hostile-file tests to break:
a weight manifest document, a GLB (binary glTF) of one triangle, a scene instance and a
Habitat episode record. Nothing here reads the reference release.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

__all__ = [
    "HABITAT_RECORD",
    "glb_bytes",
    "glb_parts",
    "manifest_dict",
    "scene_instance_dict",
]

_SKILLS = {
    "walk_forward": ("WalkForwardCtrlDiTFourierXZYaw", "fast_xzyaw", True),
    "side_walk": ("SideWalkCtrlDiTFourier", "side_fourier", True),
    "step_back": ("WalkForwardCtrlDiTFourier", "fourier", True),
    "turn": ("TurnCtrlDiT", "base", False),
    "step_climb_up": ("StepClimbUpCtrlDiT", "base", False),
    "step_climb_down": ("StepClimbDownCtrlDiT", "step_down_mlp", False),
    "sit": ("SitCtrlDiT", "sit_mlp", False),
    "stand": ("NonCondCtrlDiT", "noncond_fast", False),
}


def _pinned(path: str) -> dict[str, Any]:
    return {"path": path, "size_bytes": 1000, "sha256": "ab" * 32}


def manifest_dict() -> dict[str, Any]:
    """A valid ``humanclaw_weight_manifest_v2`` document (its files are not needed to read
    it) with the release's architecture."""
    skills = {}
    for name, (network, kind, fourier) in _SKILLS.items():
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


def glb_parts(
    positions: Any = ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
    indices: Any = (0, 1, 2),
) -> tuple[dict[str, Any], bytes]:
    """The JSON document and binary chunk of a GLB holding one red triangle mesh
    (float32 positions, uint16 indices), valid glTF 2.0."""
    pos = np.asarray(positions, dtype=np.float32).reshape(-1, 3)
    idx = np.asarray(indices, dtype=np.uint16)
    pos_bytes = pos.tobytes()
    idx_bytes = idx.tobytes()
    idx_bytes += b"\0" * (-len(idx_bytes) % 4)
    binary = pos_bytes + idx_bytes
    doc = {
        "asset": {"version": "2.0"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1, "material": 0}]}],
        "materials": [{"pbrMetallicRoughness": {"baseColorFactor": [1.0, 0.0, 0.0, 1.0]}}],
        "accessors": [
            {
                "bufferView": 0,
                "componentType": 5126,
                "count": len(pos),
                "type": "VEC3",
                "min": [float(v) for v in pos.min(axis=0)],
                "max": [float(v) for v in pos.max(axis=0)],
            },
            {"bufferView": 1, "componentType": 5123, "count": len(idx), "type": "SCALAR"},
        ],
        "bufferViews": [
            {"buffer": 0, "byteOffset": 0, "byteLength": len(pos_bytes)},
            {"buffer": 0, "byteOffset": len(pos_bytes), "byteLength": 2 * len(idx)},
        ],
        "buffers": [{"byteLength": len(binary)}],
    }
    return doc, binary


def glb_bytes(doc: Any, binary: bytes = b"", raw_json: bytes | None = None) -> bytes:
    """A GLB file of a JSON document (or raw JSON chunk bytes) and a binary chunk."""
    text = raw_json if raw_json is not None else json.dumps(doc).encode()
    text += b" " * (-len(text) % 4)
    binary += b"\0" * (-len(binary) % 4)
    chunks = struct.pack("<II", len(text), 0x4E4F534A) + text
    if binary:
        chunks += struct.pack("<II", len(binary), 0x004E4942) + binary
    return b"glTF" + struct.pack("<II", 2, 12 + len(chunks)) + chunks


def scene_instance_dict(template: str, count: int = 1) -> dict[str, Any]:
    """A scene instance placing ``count`` instances of an object template (no stage)."""
    return {
        "translation_origin": "asset_local",
        "object_instances": [
            {
                "template_name": template,
                "translation": [float(i), 0.0, 0.0],
                "rotation": [1.0, 0.0, 0.0, 0.0],
                "non_uniform_scale": [1.0, 1.0, 1.0],
                "motion_type": "STATIC",
            }
            for i in range(count)
        ],
    }


#: One episode record of the reference release's (Habitat ObjectNav) layout.
HABITAT_RECORD: dict[str, Any] = {
    "episode_id": "0",
    "scene_id": "data/scenes/home.scene_instance.json",
    "start_position": [1.0, 0.0, 1.0],
    "start_rotation": [0.0, 0.0, 0.0, 1.0],
    "object_category": "chair",
    "info": {"geodesic_distance": 2.0},
    "goals": [{"object_id": 3, "position": [2.0, 0.5, 2.0]}],
    "init_offset": [-1.0, 1.0, 0.0],
    "init_yaw": 30.0,
}
