"""Loading the paper's weights into networks (torch): verified, strict, shared.

:func:`load_models` turns a validated :class:`~.manifest.WeightManifest` and its weights
directory into :class:`PaperModels`, in this order, so that a fault is found before anything
is used:

1. every pinned file's size against the architecture (:func:`check_sizes`: at least two
   and at most four bytes per value of the networks the manifest describes, plus the
   file's records), then its size and SHA-256 (:func:`~.manifest.verify_files`), before
   any file is unpickled;
2. each payload, read with ``torch.load(..., weights_only=True)``: a mapping with the
   expected ``schema`` (``humanclaw_motion_dit_state_v1`` / ``humanclaw_control_state_v1``)
   and a ``state_dict`` of named tensors;
3. strict key sets (the base holds exactly the MotionDiT's tensors; a control state exactly
   its branch's own, no ``base_dit.`` copy), shapes, dtypes (float32, or bfloat16 where the
   release stored values that lie on the bfloat16 grid) and finiteness of every tensor;
4. the base variants the skills use, each built once (``identity``: the stored values in
   float32; ``bf16_roundtrip``: every float tensor rounded to bfloat16 and back) and shared
   by the branches of its group: two bases in memory, never eight.

:func:`check_payloads` runs steps 1 to 3 alone, one file at a time, without building a
model: the paper profile's check before any episode runs.

Steps 1 to 3 are worked out once per process per file state (:mod:`.verified`): a file
hashed, or a payload checked against the manifest's network, by the profile's check or
``BackendConfig.check()`` is not hashed or checked again when the models are loaded (its
tensors are still read to load them). Loaded models are kept per process (keyed by the
weights directory, the manifest's SHA-256, the files' sizes and modification times, and
the device), so envs of one process share one copy; a failed load leaves nothing in either
cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from humanclaw_gym.motion.paper.manifest import (
    BASE_PAYLOAD_SCHEMA,
    CONTROL_PAYLOAD_SCHEMA,
    PaperWeightsError,
    SkillEntry,
    WeightManifest,
    _one_line,
    verify_files,
)
from humanclaw_gym.motion.paper.networks import (
    ControlBranch,
    ModulationTable,
    MotionDiT,
    new_base,
    new_branch,
)
from humanclaw_gym.motion.paper.verified import once

__all__ = [
    "LoadedSkill",
    "PaperModels",
    "check_payloads",
    "check_sizes",
    "clear_model_cache",
    "load_models",
]

_STORED_DTYPES = (torch.float32, torch.bfloat16)
#: What a payload file may hold beyond its tensors' values: the pickle and zip records
#: (torch.save writes about 300 bytes per tensor and a few KB in all).
_RECORD_BYTES = 64 << 10
_RECORD_BYTES_PER_TENSOR = 1 << 10
_CACHE: dict[tuple, PaperModels] = {}
_CACHE_LOCK = threading.Lock()


@dataclass
class LoadedSkill:
    """One skill ready to run: its branch (attached to its base variant) and settings."""

    name: str
    branch: ControlBranch
    base: MotionDiT
    variant: str
    kind: str
    nfe_steps: int
    file: Path
    _tables: dict[int, ModulationTable] = field(default_factory=dict, repr=False)


@dataclass
class PaperModels:
    """The loaded weights of one manifest on one device.

    Attributes:
        manifest: the validated manifest.
        weights_dir: where the files were read.
        device: the torch device the networks live on.
        bases: base variant name -> its one :class:`MotionDiT`.
        skills: skill name -> :class:`LoadedSkill`.
    """

    manifest: WeightManifest
    weights_dir: Path
    device: torch.device
    bases: dict[str, MotionDiT]
    skills: dict[str, LoadedSkill]
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _base_tables: dict[tuple[str, int], ModulationTable] = field(default_factory=dict, repr=False)

    def base_table(self, variant: str, nfe_steps: int) -> ModulationTable:
        """The base variant's block and final-layer modulations at every solver time."""
        key = (variant, nfe_steps)
        with self._lock:
            if key not in self._base_tables:
                base = self.bases[variant]
                self._base_tables[key] = ModulationTable(base, base.blocks, nfe_steps, final=True)
            return self._base_tables[key]

    def skill_table(self, skill: LoadedSkill) -> ModulationTable:
        """The skill's control-block modulations at every solver time."""
        with self._lock:
            if skill.nfe_steps not in skill._tables:
                skill._tables[skill.nfe_steps] = ModulationTable(
                    skill.base, skill.branch.ctrl_blocks, skill.nfe_steps, final=False
                )
            return skill._tables[skill.nfe_steps]


def _payload(path: Path, schema: str, skill: str) -> dict[str, torch.Tensor]:
    """The ``state_dict`` of one verified payload file (weights only, on CPU)."""
    what = "the shared base MotionDiT" if skill == "base" else f"skill {skill!r}"
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # an unreadable or non-weights pickle
        raise PaperWeightsError(
            f"paper motion: {what}: {path} cannot be read as a weights-only torch file: "
            f"{type(exc).__name__}: {_one_line(exc)}",
            path,
            skill,
        ) from None
    found = data.get("schema") if isinstance(data, dict) else None
    if found != schema:
        raise PaperWeightsError(
            f"paper motion: {what}: {path} has payload schema {found!r}: allowed {schema!r}",
            path,
            skill,
        )
    state = data.get("state_dict")
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise PaperWeightsError(
            f"paper motion: {what}: {path} has no state_dict of named tensors", path, skill
        )
    return state


def _check_state(
    state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], path: Path, skill: str
) -> None:
    """Exact key set, shapes, stored dtypes and finiteness of one payload."""
    what = "the shared base MotionDiT" if skill == "base" else f"skill {skill!r}"
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing tensors {missing[:5]}" + (" ..." if len(missing) > 5 else ""))
        if unexpected:
            parts.append(
                f"unexpected tensors {unexpected[:5]}" + (" ..." if len(unexpected) > 5 else "")
            )
        raise PaperWeightsError(
            f"paper motion: {what}: {path} does not hold the network the manifest names: "
            + "; ".join(parts),
            path,
            skill,
        )
    for name, ref in expected.items():
        tensor = state[name]
        if tuple(tensor.shape) != tuple(ref.shape):
            raise PaperWeightsError(
                f"paper motion: {what}: {path}: tensor {name!r} has shape {tuple(tensor.shape)}, "
                f"the manifest's architecture needs {tuple(ref.shape)}",
                path,
                skill,
            )
        if tensor.dtype not in _STORED_DTYPES:
            raise PaperWeightsError(
                f"paper motion: {what}: {path}: tensor {name!r} is stored as {tensor.dtype}: "
                "allowed torch.float32 or torch.bfloat16",
                path,
                skill,
            )
        if not bool(torch.isfinite(tensor).all()):
            raise PaperWeightsError(
                f"paper motion: {what}: {path}: tensor {name!r} holds NaN or infinite values",
                path,
                skill,
            )


def _expected(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(module.state_dict())


def _template(manifest: WeightManifest, skill: str) -> torch.nn.Module:
    """The network of a manifest file (``"base"`` or a skill) on the meta device: shapes
    only, nothing allocated."""
    arch = manifest.architecture
    try:
        with torch.device("meta"):
            if skill == "base":
                return new_base(arch)
            return new_branch(arch, skill, manifest.skills[skill].n_freqs)
    except (RuntimeError, ValueError, OverflowError, TypeError, MemoryError) as exc:
        where = "base.architecture" if skill == "base" else f"skills.{skill}"
        raise PaperWeightsError(
            f"paper motion: {manifest.path}: {where} describes a network that cannot be "
            f"built ({type(exc).__name__}: {_one_line(exc)})",
            manifest.path,
            skill,
        ) from None


def check_sizes(manifest: WeightManifest) -> None:
    """Every pinned file's ``size_bytes`` against the network its architecture describes:
    at least 2 bytes per value (all bfloat16), at most 4 (all float32) plus the file's
    pickle and zip records. Reads no file; builds the networks on the meta device only;
    once per process per manifest file state.

    Raises:
        PaperWeightsError: naming the manifest, the file's skill, both sizes and the
            architecture fields that set them.
    """
    once("sizes", manifest.path, lambda: _check_sizes(manifest), manifest.sha256)


def _check_sizes(manifest: WeightManifest) -> bool:
    for pinned in manifest.files():
        state = _expected(_template(manifest, pinned.skill))
        values = sum(t.numel() for t in state.values())
        low = 2 * values
        high = 4 * values + _RECORD_BYTES + _RECORD_BYTES_PER_TENSOR * len(state)
        if not low <= pinned.size_bytes <= high:
            field = "base" if pinned.skill == "base" else f"skills.{pinned.skill}"
            raise PaperWeightsError(
                f"paper motion: {manifest.path}: {field}.size_bytes={pinned.size_bytes} does not "
                f"fit the architecture (base.architecture: {values} values in "
                f"{len(state)} tensors need {low} to {high} bytes): the manifest does not "
                "describe its files",
                manifest.path,
                pinned.skill,
            )
    return True


def check_payloads(manifest: WeightManifest, weights_dir: Path) -> None:
    """Steps 1-3 of the module docstring for every file, one at a time, without building
    a model: sizes against the architecture, size and SHA-256, weights-only unpickling,
    schema, tensor names, shapes, dtypes and finiteness. No tensor is kept (at most one
    file's are in memory at a time), only that the file passed (:mod:`.verified`): a file
    hashed or checked before in this process in its current state is not read again.

    Raises:
        PaperWeightsError: the first file at fault, naming it and its skill.
    """
    check_sizes(manifest)
    paths = verify_files(manifest, Path(weights_dir))
    for pinned, path in zip(manifest.files(), paths, strict=True):
        once(
            "payload",
            path,
            lambda pinned=pinned, path=path: _check_payload(manifest, pinned.skill, path),
            manifest.sha256,
            pinned.skill,
        )


def _check_payload(manifest: WeightManifest, skill: str, path: Path) -> bool:
    """One file read (weights only) and checked against the manifest's network."""
    schema = BASE_PAYLOAD_SCHEMA if skill == "base" else CONTROL_PAYLOAD_SCHEMA
    state = _payload(path, schema, skill)
    _check_state(state, _expected(_template(manifest, skill)), path, skill)
    return True


def _loaded_state(
    manifest: WeightManifest, skill: str, path: Path, expected: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """One file's tensors, read to load them; checked unless this file state passed the
    check against the manifest's network already (:func:`check_payloads`)."""
    schema = BASE_PAYLOAD_SCHEMA if skill == "base" else CONTROL_PAYLOAD_SCHEMA
    state = _payload(path, schema, skill)

    def check() -> bool:
        _check_state(state, expected, path, skill)
        return True

    once("payload", path, check, manifest.sha256, skill)
    return state


def _variant_state(state: dict[str, torch.Tensor], transform: str) -> dict[str, torch.Tensor]:
    if transform == "identity":
        return {k: v.to(torch.float32) for k, v in state.items()}
    # bf16_roundtrip: exactly the base tensors four of the evaluated skills ran with
    return {k: v.to(torch.bfloat16).to(torch.float32) for k, v in state.items()}


def _materialise(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    module.load_state_dict(state, strict=True, assign=True)
    module.requires_grad_(False)
    module.eval()


def _build(manifest: WeightManifest, weights_dir: Path, device: torch.device) -> PaperModels:
    check_sizes(manifest)  # the architecture against the files, before anything is read
    paths = verify_files(manifest, weights_dir)  # every file, before anything is unpickled
    arch = manifest.architecture
    template = _template(manifest, "base")
    base_state = _loaded_state(manifest, "base", paths[0], _expected(template))

    used = {entry.base_variant for entry in manifest.skills.values()}
    bases: dict[str, MotionDiT] = {}
    for name in sorted(used):
        with torch.device("meta"):
            base = new_base(arch)
        _materialise(base, _variant_state(base_state, manifest.variants[name]))
        bases[name] = base.to(device)
    del base_state

    skills: dict[str, LoadedSkill] = {}
    for (name, entry), path in zip(manifest.skills.items(), paths[1:], strict=True):
        skills[name] = _load_skill(manifest, entry, path, bases[entry.base_variant], device)
    return PaperModels(manifest, weights_dir, device, bases, skills)


def _load_skill(
    manifest: WeightManifest, entry: SkillEntry, path: Path, base: MotionDiT, device
) -> LoadedSkill:
    with torch.device("meta"):
        branch = new_branch(manifest.architecture, entry.name, entry.n_freqs)
    state = _loaded_state(manifest, entry.name, path, _expected(branch))
    _materialise(branch, {k: v.to(torch.float32) for k, v in state.items()})
    branch = branch.to(device).attach(base)
    return LoadedSkill(
        name=entry.name,
        branch=branch,
        base=base,
        variant=entry.base_variant,
        kind=entry.kind,
        nfe_steps=entry.nfe_steps,
        file=path,
    )


def _cache_key(manifest: WeightManifest, weights_dir: Path, device: torch.device) -> tuple:
    stats = []
    for pinned in manifest.files():
        path = weights_dir / pinned.path
        try:
            st = path.stat()
            stats.append((pinned.path, st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append((pinned.path, None, None))
    return (str(weights_dir), manifest.sha256, str(device), tuple(stats))


def load_models(manifest: WeightManifest, weights_dir: Path, device: Any = "cpu") -> PaperModels:
    """Load (once per process) and check the weights of ``manifest`` (see the module
    docstring); later calls with the same files and device share the models.

    Raises:
        PaperWeightsError: naming the file and the skill at fault; nothing is cached.
    """
    dev = torch.device(device)
    key = _cache_key(manifest, Path(weights_dir), dev)
    with _CACHE_LOCK:
        models = _CACHE.get(key)
        if models is None:
            models = _build(manifest, Path(weights_dir), dev)
            _CACHE[key] = models
        return models


def clear_model_cache() -> None:
    """Forget every loaded model and every verified record (the next generator verifies
    and loads again)."""
    from humanclaw_gym.motion.paper.verified import clear_verified_cache

    with _CACHE_LOCK:
        _CACHE.clear()
    clear_verified_cache()
