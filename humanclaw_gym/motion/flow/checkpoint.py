"""The flow-motion checkpoint: a directory with a hashed manifest.

Layout (schema ``humanclaw_flow_motion_v1``)::

    <checkpoint>/
        manifest.json        schema, architecture config, weight dtype, metadata, and the
                             SHA-256 + size of every other file
        weights.npz          the state dict, one array per parameter/buffer name
        normalization.npz    per-dimension ``mean`` and ``std`` (219,) of the training states

Nothing is pickled: weights are plain numpy arrays, so reading a checkpoint never executes
code. :func:`load_checkpoint` checks, in order, before the model is used: the manifest's
schema and fields, the SHA-256 of every listed file (a changed byte fails with the file
name and both hashes), the architecture config (an unknown or invalid field is named), the
normalisation arrays, and every weight name and shape against the model the config builds
(a mismatch names the parameter, both shapes and the config fields that set them).
:func:`save_checkpoint` writes into a temporary sibling directory and swaps it into place,
so a reader never sees a half-written checkpoint.

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.motion.flow.model import FlowModelConfig, MotionDiT

__all__ = [
    "DEFAULT_CHECKPOINT",
    "SCHEMA",
    "CheckpointError",
    "FlowCheckpoint",
    "default_checkpoint_path",
    "load_checkpoint",
    "save_checkpoint",
    "sha256_file",
]

#: Schema name written into (and required from) every manifest.
SCHEMA = "humanclaw_flow_motion_v1"
_MANIFEST = "manifest.json"
_WEIGHTS = "weights.npz"
_NORM = "normalization.npz"
_WEIGHT_DTYPES = ("float32", "float16")
_STD_FLOOR = 1e-6

#: Name of the shipped default checkpoint directory under ``humanclaw_gym/assets/motion``.
DEFAULT_CHECKPOINT = "flow_default"

# Which config fields decide the shape of a parameter (for mismatch messages).
_SHAPE_FIELDS = (
    "state_dim",
    "history_frames",
    "future_frames",
    "d_model",
    "n_heads",
    "ff_mult",
    "n_layers",
    "control_layers",
    "branches",
    "cond_features",
)


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupted or does not match the architecture."""


@dataclass
class FlowCheckpoint:
    """A loaded, verified checkpoint.

    Attributes:
        path: the checkpoint directory.
        config: the architecture.
        model: the :class:`~humanclaw_gym.motion.flow.model.MotionDiT` in eval mode (float32).
        mean: ``float64 (219,)`` state mean.
        std: ``float64 (219,)`` state standard deviation (> 0).
        metadata: free-form training metadata (command, losses, timings, dataset).
        manifest_sha256: SHA-256 of ``manifest.json`` (identifies the checkpoint).
    """

    path: Path
    config: FlowModelConfig
    model: MotionDiT
    mean: np.ndarray
    std: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)
    manifest_sha256: str = ""


def default_checkpoint_path() -> Path:
    """Path of the checkpoint shipped with the package."""
    return Path(__file__).resolve().parents[2] / "assets" / "motion" / DEFAULT_CHECKPOINT


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def save_checkpoint(
    path: str | os.PathLike[str],
    model: MotionDiT,
    mean: np.ndarray,
    std: np.ndarray,
    metadata: dict[str, Any] | None = None,
    weights_dtype: str = "float32",
) -> Path:
    """Write a checkpoint directory atomically.

    Args:
        path: target directory (replaced if it exists).
        model: the model (its ``config`` is stored).
        mean: ``(state_dim,)`` normalisation mean.
        std: ``(state_dim,)`` normalisation std (> 0).
        metadata: JSON-serialisable training metadata.
        weights_dtype: ``"float32"`` or ``"float16"`` (half the size; loaded back as float32).

    Returns:
        the checkpoint directory.
    """
    if weights_dtype not in _WEIGHT_DTYPES:
        raise CheckpointError(
            f"weights_dtype={weights_dtype!r} is invalid: allowed {' | '.join(_WEIGHT_DTYPES)}"
        )
    cfg = model.config
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    for name, arr in (("mean", mean), ("std", std)):
        if arr.shape != (cfg.state_dim,) or not np.all(np.isfinite(arr)):
            raise CheckpointError(f"{name} must be finite with shape ({cfg.state_dim},)")
    if np.any(std <= 0):
        raise CheckpointError("std must be > 0 in every dimension")
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
    try:
        state = {
            k: v.detach().cpu().numpy().astype(weights_dtype) for k, v in model.state_dict().items()
        }
        with open(tmp / _WEIGHTS, "wb") as fh:
            np.savez(fh, **state)
            fh.flush()
            os.fsync(fh.fileno())
        with open(tmp / _NORM, "wb") as fh:
            np.savez(fh, mean=mean, std=std)
            fh.flush()
            os.fsync(fh.fileno())
        manifest = {
            "schema": SCHEMA,
            "config": cfg.to_dict(),
            "weights_dtype": weights_dtype,
            "files": {
                name: {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size}
                for name in (_WEIGHTS, _NORM)
            },
            "metadata": metadata or {},
        }
        with open(tmp / _MANIFEST, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o755)
        _fsync_dir(tmp)
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.old-{os.getpid()}-{os.urandom(4).hex()}"
            os.replace(target, old)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _resolve_dir(path: str | os.PathLike[str] | None) -> Path:
    p = default_checkpoint_path() if path is None else Path(path)
    if p.is_file() and p.name == _MANIFEST:
        p = p.parent
    if not p.is_dir():
        raise CheckpointError(
            f"flow checkpoint {str(p)!r} not found: expected a directory with {_MANIFEST}, "
            f"{_WEIGHTS} and {_NORM} (write one with scripts/train_motion.py)"
        )
    return p


def read_manifest(path: str | os.PathLike[str] | None) -> tuple[Path, dict[str, Any], str]:
    """Read and check a manifest (no file hashes yet).

    Returns:
        ``(checkpoint dir, manifest dict, manifest sha256)``.
    """
    directory = _resolve_dir(path)
    mpath = directory / _MANIFEST
    if not mpath.is_file():
        raise CheckpointError(f"{mpath}: missing (every flow checkpoint has a {_MANIFEST})")
    raw = mpath.read_bytes()
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # invalid UTF-8 or JSON, too deep
        raise CheckpointError(f"{mpath}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise CheckpointError(f"{mpath}: expected a JSON object")
    schema = manifest.get("schema")
    if schema != SCHEMA:
        raise CheckpointError(f"{mpath}: schema={schema!r} is not supported: allowed {SCHEMA!r}")
    for key, kind in (("config", dict), ("files", dict), ("weights_dtype", str)):
        if not isinstance(manifest.get(key), kind):
            raise CheckpointError(f"{mpath}: field {key!r} is missing or not a {kind.__name__}")
    if manifest["weights_dtype"] not in _WEIGHT_DTYPES:
        raise CheckpointError(
            f"{mpath}: weights_dtype={manifest['weights_dtype']!r} is invalid: allowed "
            f"{' | '.join(_WEIGHT_DTYPES)}"
        )
    for name in (_WEIGHTS, _NORM):
        entry = manifest["files"].get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise CheckpointError(f"{mpath}: files[{name!r}] must give its 'sha256'")
    return directory, manifest, hashlib.sha256(raw).hexdigest()


def verify_files(directory: Path, manifest: dict[str, Any]) -> None:
    """Check every listed file's size and SHA-256 against the manifest.

    Raises:
        CheckpointError: naming the file, the expected and the actual hash.
    """
    for name, entry in sorted(manifest["files"].items()):
        fpath = directory / name
        if Path(name).name != name:
            raise CheckpointError(f"{directory / _MANIFEST}: file name {name!r} is not allowed")
        if not fpath.is_file():
            raise CheckpointError(f"{fpath}: missing (listed in {_MANIFEST})")
        actual = sha256_file(fpath)
        if actual != entry["sha256"]:
            raise CheckpointError(
                f"{fpath}: SHA-256 mismatch: manifest {entry['sha256']}, file {actual} "
                "(the file was changed or corrupted)"
            )
        if "bytes" in entry and fpath.stat().st_size != entry["bytes"]:  # pragma: no cover
            raise CheckpointError(
                f"{fpath}: size {fpath.stat().st_size} differs from the manifest's {entry['bytes']}"
            )


def _check_normalization(directory: Path, state_dim: int) -> tuple[np.ndarray, np.ndarray]:
    with np.load(directory / _NORM, allow_pickle=False) as data:
        missing = {"mean", "std"} - set(data.files)
        if missing:
            raise CheckpointError(f"{directory / _NORM}: missing array(s) {sorted(missing)}")
        mean = np.asarray(data["mean"], dtype=np.float64)
        std = np.asarray(data["std"], dtype=np.float64)
    for name, arr in (("mean", mean), ("std", std)):
        if arr.shape != (state_dim,):
            raise CheckpointError(
                f"{directory / _NORM}: {name} has shape {arr.shape} but config.state_dim="
                f"{state_dim} expects ({state_dim},)"
            )
        if not np.all(np.isfinite(arr)):
            raise CheckpointError(f"{directory / _NORM}: {name} is not finite")
    if np.any(std < _STD_FLOOR):
        raise CheckpointError(
            f"{directory / _NORM}: std must be >= {_STD_FLOOR} in every dimension"
        )
    return mean, std


def load_checkpoint(
    path: str | os.PathLike[str] | None = None,
    expect: dict[str, Any] | None = None,
) -> FlowCheckpoint:
    """Load and verify a checkpoint (see the module docstring for the checks).

    Args:
        path: checkpoint directory (or its ``manifest.json``); None = the shipped default.
        expect: config fields the caller requires, e.g. ``{"state_dim": 219}``; a differing
            value raises naming the field.

    Returns:
        the verified :class:`FlowCheckpoint` (model in eval mode, float32, CPU).
    """
    import torch

    from humanclaw_gym.motion.flow.model import FlowModelConfig, MotionDiT

    directory, manifest, manifest_sha = read_manifest(path)
    verify_files(directory, manifest)
    try:
        config = FlowModelConfig.from_dict(manifest["config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{directory / _MANIFEST}: config is invalid: {exc}") from None
    for key, want in (expect or {}).items():
        have = getattr(config, key, None)
        if isinstance(want, list):
            want = tuple(want)
        if have != want:
            raise CheckpointError(
                f"{directory / _MANIFEST}: config.{key}={have!r} does not match the required "
                f"{want!r}"
            )
    mean, std = _check_normalization(directory, config.state_dim)
    model = MotionDiT(config)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    with np.load(directory / _WEIGHTS, allow_pickle=False) as data:
        arrays = {k: np.asarray(data[k]) for k in data.files}
    unexpected = sorted(set(arrays) - set(expected))
    missing = sorted(set(expected) - set(arrays))
    fields_text = ", ".join(f"{f}={getattr(config, f)!r}" for f in _SHAPE_FIELDS)
    if missing or unexpected:
        raise CheckpointError(
            f"{directory / _WEIGHTS}: parameters do not match the config ({fields_text}): "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected "
            f"{unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for key, shape in expected.items():
        if tuple(arrays[key].shape) != shape:
            raise CheckpointError(
                f"{directory / _WEIGHTS}: parameter {key!r} has shape {tuple(arrays[key].shape)} "
                f"but the config ({fields_text}) expects {shape}"
            )
        if not np.all(np.isfinite(arrays[key])):
            raise CheckpointError(f"{directory / _WEIGHTS}: parameter {key!r} is not finite")
    state = {
        k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in arrays.items()
    }
    model.load_state_dict(state, strict=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return FlowCheckpoint(
        path=directory,
        config=config,
        model=model,
        mean=mean,
        std=std,
        metadata=dict(manifest.get("metadata") or {}),
        manifest_sha256=manifest_sha,
    )
