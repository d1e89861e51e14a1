"""The paper's weight manifest and the files it pins, read and checked without torch.

The reference release distributes the inference weights of its motion model as one
directory (``weights/paper_fullval_v1`` in its checkout, about 1.14 GB) described by a JSON
manifest (``resources/weights/paper_fullval_v1.json``, schema
``humanclaw_weight_manifest_v2``)::

    <weights_dir>/base/motion_dit.pt          the MotionDiT every skill shares (fp32)
    <weights_dir>/skills/<skill>.pt           one control branch per skill

The manifest pins every file by size and SHA-256, names the base architecture, the two
base variants (``identity``: the stored fp32 tensors; ``bf16_roundtrip``: every float tensor
rounded to bfloat16 and back, which is what four of the skills were evaluated with) and,
per skill, its base variant, control network class, conditioning kind and solver steps.

This module parses and validates that manifest (:func:`read_manifest`), resolves the paths
of a release checkout (:func:`resolve_sources`), checks every file's size and SHA-256
(:func:`verify_files`) and describes the weights for run fingerprints and replay manifests
(:func:`weights_record`). Nothing here unpickles a file or imports torch; every problem is
one :class:`PaperWeightsError` naming the file and the skill. The manifest's validation and
every file's SHA-256 are worked out once per process per file state (:mod:`.verified`).

Bounds: the manifest is read as a regular file of at most :data:`MAX_MANIFEST_BYTES`
(1 MiB, like the release's other JSON files) whose JSON nesting and numbers the
interpreter can take, and every architecture value lies in :data:`ARCHITECTURE_LIMITS`,
so a hostile manifest is refused before any network is built, however it is written.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from humanclaw_gym.skills import Skill

__all__ = [
    "ARCHITECTURE_LIMITS",
    "BASE_PAYLOAD_SCHEMA",
    "BRANCHES",
    "CONTROL_PAYLOAD_SCHEMA",
    "MANIFEST_SCHEMA",
    "MAX_MANIFEST_BYTES",
    "MAX_WEIGHT_FILE_BYTES",
    "RELEASE_MANIFEST",
    "RELEASE_SEED_STATE",
    "RELEASE_WEIGHTS_DIR",
    "Architecture",
    "BranchSpec",
    "PaperSources",
    "PaperWeightsError",
    "PinnedFile",
    "SkillEntry",
    "WeightManifest",
    "check_weights",
    "read_manifest",
    "resolve_sources",
    "sha256_file",
    "verify_files",
    "weights_record",
]

MANIFEST_SCHEMA = "humanclaw_weight_manifest_v2"
BASE_PAYLOAD_SCHEMA = "humanclaw_motion_dit_state_v1"
CONTROL_PAYLOAD_SCHEMA = "humanclaw_control_state_v1"
_BASE_STORAGE = "motion_dit_state_v1"
_CONTROL_STORAGE = "control_state_v1"
_SELECTION_POLICY = "exact_step_only"
#: Base variant transforms the manifest may name.
TRANSFORMS: tuple[str, ...] = ("identity", "bf16_roundtrip")

#: Where a release checkout keeps the manifest, the seed state and (by default) the weights.
RELEASE_MANIFEST = PurePosixPath("resources/weights/paper_fullval_v1.json")
RELEASE_SEED_STATE = PurePosixPath("resources/seeds/natural_beta0_fk_seed.pt")
RELEASE_WEIGHTS_DIR = PurePosixPath("weights/paper_fullval_v1")

# What the generator around the model is built for: 219-D states, 5 history frames, 15
# generated frames (the architecture's other fields are free).
_FIXED_ARCHITECTURE = {"x_dim": 219, "n_history": 5, "n_future": 15}
_CHUNK_BYTES = 1 << 20
#: Largest manifest read, bytes (the release's is 8 KB; its other JSON files are capped
#: at 1 MiB as well).
MAX_MANIFEST_BYTES = 1 << 20
#: Largest ``size_bytes`` a manifest may pin for one weight file (the release's largest is
#: 164 MB).
MAX_WEIGHT_FILE_BYTES = 16 << 30
#: ``(lowest, highest)`` of every architecture value a manifest may give (the release's:
#: width 512, 10 layers, 8 heads, MLP ratio 2, 30 solver steps, 6 Fourier octaves): a
#: MotionDiT of the release's family fits, a model that would take minutes or GBs to build
#: or run does not. ``nfe_steps`` bounds the base's and every skill's.
ARCHITECTURE_LIMITS: dict[str, tuple[float, float]] = {
    "hidden_dim": (2, 4096),
    "num_layers": (1, 64),
    "num_heads": (1, 256),
    "mlp_ratio": (0.0625, 16.0),
    "nfe_steps": (1, 1000),
    "n_freqs": (1, 32),
}
_SHOWN_CHARS = 60
_MAX_VARIANTS = 16


def _shown(value: Any) -> str:
    """``repr(value)`` cut to a readable length (a huge number or string in a hostile
    manifest must not make a huge message)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of {len(str(value))} digits>"
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:_SHOWN_CHARS]}... ({len(text)} characters)"


class PaperWeightsError(ValueError):
    """The paper's weights cannot be used: a missing or altered file, or a manifest or
    payload the loader does not accept. The message names the file and the skill.

    Attributes:
        path: the file at fault (manifest, weight file or seed state), when there is one.
        skill: the skill whose file it is (``"base"`` for the shared MotionDiT), or None.
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None, skill=None):
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.skill = skill


@dataclass(frozen=True)
class BranchSpec:
    """The one control network a skill of the release runs, and how it is conditioned.

    Attributes:
        skill: our :class:`~humanclaw_gym.skills.Skill`.
        network: the release's class name (the manifest's ``network``).
        kind: the release's conditioning kind (the manifest's ``kind``).
        encoder: our encoder of the condition (see :mod:`.networks`).
        n_freqs: whether the manifest entry must give ``n_freqs`` (Fourier encoders).
    """

    skill: Skill
    network: str
    kind: str
    encoder: str
    n_freqs: bool = False


#: The eight skills of the paper (manifest name -> branch), in the release's order.
BRANCHES: dict[str, BranchSpec] = {
    "walk_forward": BranchSpec(
        Skill.WALK, "WalkForwardCtrlDiTFourierXZYaw", "fast_xzyaw", "fourier_xzyaw", True
    ),
    "side_walk": BranchSpec(
        Skill.SIDE_STEP, "SideWalkCtrlDiTFourier", "side_fourier", "fourier_x", True
    ),
    "step_back": BranchSpec(
        Skill.STEP_BACK, "WalkForwardCtrlDiTFourier", "fourier", "fourier_xz", True
    ),
    "turn": BranchSpec(Skill.TURN, "TurnCtrlDiT", "base", "mlp_yaw"),
    "step_climb_up": BranchSpec(Skill.CLIMB_UP, "StepClimbUpCtrlDiT", "base", "mlp_climb"),
    "step_climb_down": BranchSpec(
        Skill.CLIMB_DOWN, "StepClimbDownCtrlDiT", "step_down_mlp", "mlp_climb"
    ),
    "sit": BranchSpec(Skill.SIT, "SitCtrlDiT", "sit_mlp", "mlp_sit"),
    "stand": BranchSpec(Skill.STOP, "NonCondCtrlDiT", "noncond_fast", "token"),
}


@dataclass(frozen=True)
class Architecture:
    """The base MotionDiT's hyper-parameters (the manifest's ``base.architecture``)."""

    x_dim: int
    hidden_dim: int
    num_layers: int
    num_heads: int
    mlp_ratio: float
    n_history: int
    n_future: int
    nfe_steps: int
    use_qk_norm: bool

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True)
class PinnedFile:
    """One weight file: ``path`` relative to the weights directory, its size and SHA-256."""

    path: str
    size_bytes: int
    sha256: str
    skill: str  # "base" or a skill name (for messages)


@dataclass(frozen=True)
class SkillEntry:
    """One skill of the manifest."""

    name: str
    file: PinnedFile
    base_variant: str
    network: str
    kind: str
    n_freqs: int | None
    nfe_steps: int

    @property
    def branch(self) -> BranchSpec:
        return BRANCHES[self.name]


@dataclass(frozen=True)
class WeightManifest:
    """A validated weight manifest.

    Attributes:
        path: the manifest file.
        sha256: SHA-256 of its bytes (it pins every weight file, so it names the weights).
        profile: the manifest's ``profile`` (``"paper_fullval_v1"``), or None.
        checkpoint_step: the training step the weights are from, or None.
        architecture: the base architecture.
        base: the base file.
        variants: base variant name -> transform (``"identity"`` / ``"bf16_roundtrip"``).
        skills: skill name -> entry, for every skill of :data:`BRANCHES`.
    """

    path: Path
    sha256: str
    profile: str | None
    checkpoint_step: int | None
    architecture: Architecture
    base: PinnedFile
    variants: dict[str, str]
    skills: dict[str, SkillEntry]

    def files(self) -> list[PinnedFile]:
        """The base file, then every skill's file (manifest order)."""
        return [self.base, *(s.file for s in self.skills.values())]


@dataclass(frozen=True)
class PaperSources:
    """Where the weights, the manifest and the seed state are read from."""

    weights_dir: Path
    manifest: Path
    seed_state: Path | None  # None: the seed state was given as an array


# ----------------------------------------------------------------------------------------
# paths
# ----------------------------------------------------------------------------------------
def _as_path(value: Any, name: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise PaperWeightsError(f"{name}={value!r} is invalid: allowed a path or None")
    return Path(value).expanduser()


def resolve_sources(
    weights_dir: str | os.PathLike[str] | None = None,
    manifest: str | os.PathLike[str] | None = None,
    seed_state: Any = None,
    release_dir: str | os.PathLike[str] | None = None,
    *,
    need_seed: bool = True,
) -> PaperSources:
    """The files of the paper motion: explicit paths win, else those of ``release_dir``.

    Args:
        weights_dir: the downloaded weights (holding ``base/`` and ``skills/``); default
            ``<release_dir>/weights/paper_fullval_v1``, where the release's runner looks.
        manifest: the weight manifest; default
            ``<release_dir>/resources/weights/paper_fullval_v1.json``.
        seed_state: the ``(5, 219)`` seed state file; default
            ``<release_dir>/resources/seeds/natural_beta0_fk_seed.pt``. An array-like
            (not a path) is taken as the state itself.
        release_dir: a checkout of the reference release.
        need_seed: False when only the weights are wanted (the seed state may be unknown).

    Raises:
        PaperWeightsError: a path cannot be resolved (naming the option to pass) or does
            not exist.
    """
    release = _as_path(release_dir, "release_dir")
    if release is not None and not release.is_dir():
        raise PaperWeightsError(
            f"release_dir={os.fspath(release)!r} is not a directory: expected a checkout of "
            "the reference release (it holds resources/weights and resources/seeds)",
            release,
        )
    weights = _as_path(weights_dir, "weights_dir")
    manifest_path = _as_path(manifest, "manifest")
    seed_is_array = seed_state is not None and not isinstance(seed_state, (str, os.PathLike))
    seed_path = None if seed_is_array else _as_path(seed_state, "seed_state")
    if weights is None:
        if release is None:
            raise PaperWeightsError(
                "paper motion: weights_dir is required (--motion-weights DIR: the directory "
                "the release's weights were downloaded to, holding base/ and skills/), or "
                "release_dir (--release DIR) whose weights/paper_fullval_v1 holds them"
            )
        weights = release / RELEASE_WEIGHTS_DIR
    if manifest_path is None:
        if release is None:
            raise PaperWeightsError(
                "paper motion: the weight manifest is unknown: pass release_dir (--release DIR, "
                f"a checkout of the reference release, for its {RELEASE_MANIFEST}) or manifest="
            )
        manifest_path = release / RELEASE_MANIFEST
    if seed_path is None and not seed_is_array and (need_seed or release is not None):
        if release is None:
            raise PaperWeightsError(
                "paper motion: the seed state is unknown: pass release_dir (--release DIR, for "
                f"its {RELEASE_SEED_STATE}) or seed_state="
            )
        seed_path = release / RELEASE_SEED_STATE
    if not weights.is_dir():
        raise PaperWeightsError(
            f"paper motion: weights_dir {os.fspath(weights)!r} is not a directory: download the "
            "release's weights (its docs/ASSETS.md) and pass their directory (--motion-weights)",
            weights,
        )
    if not manifest_path.is_file():
        raise PaperWeightsError(
            f"paper motion: weight manifest {os.fspath(manifest_path)!r} does not exist",
            manifest_path,
        )
    if seed_path is not None and not seed_path.is_file() and need_seed:
        raise PaperWeightsError(
            f"paper motion: seed state {os.fspath(seed_path)!r} does not exist", seed_path
        )
    return PaperSources(
        weights.resolve(),
        manifest_path.resolve(),
        None if seed_path is None else seed_path.resolve(),
    )


# ----------------------------------------------------------------------------------------
# the manifest
# ----------------------------------------------------------------------------------------
def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


class _Fields:
    """Typed reads of one JSON object, each failure naming the manifest and the field."""

    def __init__(self, data: Any, where: str, manifest: Path, skill: str | None) -> None:
        if not isinstance(data, Mapping):
            raise PaperWeightsError(f"{manifest}: {where} must be a JSON object", manifest, skill)
        self.data, self.where, self.manifest, self.skill = data, where, manifest, skill

    def fail(self, key: str, message: str) -> PaperWeightsError:
        sep = "" if message.startswith("=") else " "
        return PaperWeightsError(
            f"{self.manifest}: {self.where}.{key}{sep}{message}", self.manifest, self.skill
        )

    def get(self, key: str) -> Any:
        if key not in self.data:
            raise self.fail(key, "is missing")
        return self.data[key]

    def text(self, key: str, allowed: tuple[str, ...] | None = None) -> str:
        value = self.get(key)
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"={_shown(value)} is invalid: allowed a non-empty string")
        if allowed is not None and value not in allowed:
            listed = " | ".join(_shown(a) if len(a) > _SHOWN_CHARS else a for a in allowed[:8])
            more = f" (and {len(allowed) - 8} more)" if len(allowed) > 8 else ""
            raise self.fail(key, f"={_shown(value)} is unknown: allowed {listed}{more}")
        return value

    def integer(self, key: str, minimum: int, maximum: int | None = None) -> int:
        value = self.get(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < minimum
            or (maximum is not None and value > maximum)
        ):
            allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            raise self.fail(key, f"={_shown(value)} is invalid: allowed an integer {allowed}")
        return value

    def bounded(self, key: str) -> int:
        """An integer within :data:`ARCHITECTURE_LIMITS`."""
        low, high = ARCHITECTURE_LIMITS[key]
        return self.integer(key, int(low), int(high))

    def number(self, key: str, low: float, high: float) -> float:
        value = self.get(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not low <= value <= high
        ):
            raise self.fail(
                key, f"={_shown(value)} is invalid: allowed a number in [{low}, {high}]"
            )
        return float(value)

    def flag(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, bool):
            raise self.fail(key, f"={_shown(value)} is invalid: allowed true or false")
        return value

    def pinned(self, storage: str, skill: str) -> PinnedFile:
        self.text("storage", (storage,))
        rel = self.text("path")
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or "\\" in rel:
            raise self.fail(
                "path",
                f"={_shown(rel)} is invalid: allowed a relative path inside the weights directory",
            )
        digest = self.text("sha256").lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise self.fail("sha256", f"={_shown(digest)} is invalid: allowed 64 hex digits")
        return PinnedFile(rel, self.integer("size_bytes", 1, MAX_WEIGHT_FILE_BYTES), digest, skill)


def _architecture(fields: _Fields) -> Architecture:
    for key, value in _FIXED_ARCHITECTURE.items():
        found = fields.get(key)
        if found != value or isinstance(found, bool) or not isinstance(found, int):
            raise fields.fail(key, f"={_shown(found)} is not supported: allowed {value}")
    arch = Architecture(
        x_dim=fields.integer("x_dim", 1),
        hidden_dim=fields.bounded("hidden_dim"),
        num_layers=fields.bounded("num_layers"),
        num_heads=fields.bounded("num_heads"),
        mlp_ratio=fields.number("mlp_ratio", *ARCHITECTURE_LIMITS["mlp_ratio"]),
        n_history=fields.integer("n_history", 1),
        n_future=fields.integer("n_future", 1),
        nfe_steps=fields.bounded("nfe_steps"),
        use_qk_norm=fields.flag("use_qk_norm"),
    )
    if arch.hidden_dim % arch.num_heads or arch.hidden_dim % 2:
        raise fields.fail(
            "hidden_dim", f"={arch.hidden_dim} is invalid: allowed an even multiple of num_heads"
        )
    return arch


def read_manifest(path: str | os.PathLike[str]) -> WeightManifest:
    """Read and validate a ``humanclaw_weight_manifest_v2`` file (no weight is read); once
    per process while the file is unchanged (:func:`.verified.once`), the same record then.

    Every field the loader relies on is checked: schema, ``selection_policy``
    ``exact_step_only``, the base file and architecture, the base variants and their
    transforms, and each of the eight skills (file, base variant, network, kind, ``n_freqs``
    for Fourier encoders, ``nfe_steps``). Skills beyond the eight are refused.

    Raises:
        PaperWeightsError: naming the manifest, the field and what is allowed.
    """
    from humanclaw_gym.motion.paper.verified import once

    return once("manifest", path, lambda: _read_manifest(Path(path)))


def _read_manifest(mpath: Path) -> WeightManifest:
    from humanclaw_gym.fileio import FileContentError, loads_json, read_bytes_limited

    try:
        raw = read_bytes_limited(mpath, MAX_MANIFEST_BYTES, "weight manifest")
        data = loads_json(raw, str(mpath))
    except FileNotFoundError:
        raise PaperWeightsError(f"{mpath}: the weight manifest does not exist", mpath) from None
    except FileContentError as exc:
        raise PaperWeightsError(
            f"{mpath}: cannot be read as a JSON weight manifest: {_one_line(exc)}", mpath
        ) from None
    top = _Fields(data, "manifest", mpath, None)
    schema = data.get("schema") if isinstance(data, Mapping) else None
    if schema != MANIFEST_SCHEMA:
        raise PaperWeightsError(
            f"{mpath}: schema={_shown(schema)} is unknown: allowed {MANIFEST_SCHEMA!r}", mpath
        )
    top.text("selection_policy", (_SELECTION_POLICY,))
    base = _Fields(top.get("base"), "base", mpath, "base")
    base_file = base.pinned(_BASE_STORAGE, "base")
    architecture = _architecture(
        _Fields(base.get("architecture"), "base.architecture", mpath, "base")
    )
    raw_variants = _Fields(top.get("base_variants"), "base_variants", mpath, None)
    if len(raw_variants.data) > _MAX_VARIANTS:
        raise PaperWeightsError(
            f"{mpath}: base_variants holds {len(raw_variants.data)} variants: allowed at most "
            f"{_MAX_VARIANTS}",
            mpath,
        )
    variants = {
        str(name): _Fields(entry, f"base_variants.{_shown(name)}", mpath, None).text(
            "transform", TRANSFORMS
        )
        for name, entry in raw_variants.data.items()
    }
    raw_skills = _Fields(top.get("skills"), "skills", mpath, None)
    unknown = sorted(set(raw_skills.data) - set(BRANCHES))
    if unknown:
        shown = [_shown(u) for u in unknown[:5]] + (["..."] if len(unknown) > 5 else [])
        raise PaperWeightsError(
            f"{mpath}: skills [{', '.join(shown)}] are unknown: allowed {list(BRANCHES)}",
            mpath,
            unknown[0],
        )
    missing = [name for name in BRANCHES if name not in raw_skills.data]
    if missing:
        raise PaperWeightsError(
            f"{mpath}: skills {missing} are missing (the paper motion needs all of {list(BRANCHES)})",
            mpath,
            missing[0],
        )
    skills: dict[str, SkillEntry] = {}
    for name in raw_skills.data:
        spec = BRANCHES[name]
        entry = _Fields(raw_skills.data[name], f"skills.{name}", mpath, name)
        variant = entry.text("base_variant", tuple(variants))
        n_freqs = entry.bounded("n_freqs") if spec.n_freqs else None
        skills[name] = SkillEntry(
            name=name,
            file=entry.pinned(_CONTROL_STORAGE, name),
            base_variant=variant,
            network=entry.text("network", (spec.network,)),
            kind=entry.text("kind", (spec.kind,)),
            n_freqs=n_freqs,
            nfe_steps=entry.bounded("nfe_steps"),
        )
    step = data.get("checkpoint_step")
    if isinstance(step, int) and step.bit_length() > 63:
        step = None  # not a training step: recorded as unknown
    profile = data.get("profile")
    if isinstance(profile, str) and len(profile) > 256:
        profile = None
    return WeightManifest(
        path=mpath.resolve(),
        sha256=hashlib.sha256(raw).hexdigest(),
        profile=profile if isinstance(profile, str) else None,
        checkpoint_step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        architecture=architecture,
        base=base_file,
        variants=variants,
        skills=skills,
    )


# ----------------------------------------------------------------------------------------
# the files
# ----------------------------------------------------------------------------------------
def _one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message on one line, at most ``limit`` characters (torch's and the
    unpickler's messages span many lines)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _label(skill: str) -> str:
    return "the shared base MotionDiT" if skill == "base" else f"skill {skill!r}"


def verify_files(manifest: WeightManifest, weights_dir: str | os.PathLike[str]) -> list[Path]:
    """Check every pinned file's size and SHA-256 (nothing is unpickled); each file is
    hashed once per process per file state (:func:`.verified.file_sha256`).

    Returns:
        the absolute paths, base first, in the order of :meth:`WeightManifest.files`.

    Raises:
        PaperWeightsError: the first missing file, size mismatch or hash mismatch, naming
            the file, its skill and the manifest.
    """
    from humanclaw_gym.motion.paper.verified import file_sha256

    root = Path(weights_dir)
    paths = []
    for pinned in manifest.files():
        path = root / pinned.path
        what = f"paper motion: {_label(pinned.skill)}: weight file {path}"
        if not path.is_file():
            raise PaperWeightsError(
                f"{what} is missing (pinned by {manifest.path}); download the release's weights "
                "into weights_dir",
                path,
                pinned.skill,
            )
        size = path.stat().st_size
        if size != pinned.size_bytes:
            raise PaperWeightsError(
                f"{what} has {size} bytes, the manifest pins {pinned.size_bytes}: the file is "
                "incomplete or not the released one",
                path,
                pinned.skill,
            )
        digest = file_sha256(path)
        if digest != pinned.sha256:
            raise PaperWeightsError(
                f"{what} has SHA-256 {digest}, the manifest pins {pinned.sha256}: the file was "
                "altered or is not the released one",
                path,
                pinned.skill,
            )
        paths.append(path)
    return paths


def weights_record(
    weights_dir: str | os.PathLike[str] | None = None,
    manifest: str | os.PathLike[str] | None = None,
    seed_state: Any = None,
    release_dir: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    num_threads: Any = None,
    **_: Any,
) -> dict[str, Any]:
    """What names the paper motion's results, for run fingerprints and replay manifests:
    the manifest's SHA-256 (it pins every weight file), the seed state's SHA-256, the
    device and the compute dtype. Cheap: only the manifest and the seed state are hashed
    (once per process per file state, shared with the generator: :mod:`.verified`).

    Raises:
        PaperWeightsError: the manifest or seed state cannot be found or read.
        ValueError: ``num_threads`` is not an int in ``[1, MAX_NUM_THREADS]`` or None.
    """
    from humanclaw_gym.motion.paper.verified import file_sha256
    from humanclaw_gym.motion.torch_threads import check_num_threads

    check_num_threads(num_threads)
    sources = resolve_sources(weights_dir, manifest, seed_state, release_dir)
    parsed = read_manifest(sources.manifest)
    return {
        "generator": "paper",
        "manifest_sha256": parsed.sha256,
        "profile": parsed.profile,
        "checkpoint_step": parsed.checkpoint_step,
        "seed_state_sha256": None
        if sources.seed_state is None
        else file_sha256(sources.seed_state),
        "device": str(device),
        "dtype": "float32",
    }


def check_weights(
    weights_dir: str | os.PathLike[str] | None = None,
    release_dir: str | os.PathLike[str] | None = None,
    manifest: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Whether the paper's weights are present and verified (for ``humanclaw doctor``).

    Returns:
        ``{"ok", "detail", "weights_dir", "manifest", "manifest_sha256", "files", "bytes"}``;
        ``ok`` is False with the first problem in ``detail``.
    """
    out: dict[str, Any] = {
        "ok": False,
        "weights_dir": None if weights_dir is None else str(weights_dir),
        "manifest": None if manifest is None else str(manifest),
        "manifest_sha256": None,
        "files": 0,
        "bytes": 0,
    }
    try:
        sources = resolve_sources(weights_dir, manifest, None, release_dir, need_seed=False)
        parsed = read_manifest(sources.manifest)
        out.update(weights_dir=str(sources.weights_dir), manifest=str(sources.manifest))
        out["manifest_sha256"] = parsed.sha256
        paths = verify_files(parsed, sources.weights_dir)
    except PaperWeightsError as exc:
        out["detail"] = str(exc)
        return out
    out.update(ok=True, files=len(paths), bytes=sum(p.stat().st_size for p in paths))
    out["detail"] = (
        f"{len(paths)} files ({out['bytes'] / 1e9:.2f} GB) present, sizes and SHA-256 match "
        f"{sources.manifest.name}"
    )
    return out
