"""A behaviour-cloning policy: a small CNN trained on oracle demonstrations.

The policy sees what every policy sees: the 448 x 448 ego RGB image and the public
``info`` (instruction, target category, interact flag, step). Per decision it

1. downsamples the image (area averaging, rounded back to ``uint8``; the same function the
   training script applies to the recorded frames) and keeps the last ``history`` of them;
2. runs :func:`build_model`'s network on the frames plus a condition vector (target
   category one-hot, interact flag, the skill it chose last, step fraction, frame mask);
3. decodes the heads into a valid :class:`~humanclaw_gym.SkillCall`: skill = argmax of the
   skill logits; speed / direction = argmax of their heads; angle, step-back, side-step
   and sit-height regressions (trained on values normalised to their Box ranges) are
   mapped back and clamped into the ranges of :func:`~humanclaw_gym.skills.action_space`;
4. states whether it sees the target (``visible_state``) from a visibility head trained on
   the recorded target-in-view labels.

Checkpoints (schema ``humanclaw_bc_policy_v1``) are one ``torch.save`` file holding the
JSON-ready ``metadata`` (config, env spec the model was trained for, image preprocessing,
training summary, SHA-256 of the weights), the SHA-256 of that metadata and the state
dict. :func:`load_checkpoint_policy` refuses a checkpoint whose hashes do not match
(tampering, corruption) or whose env spec differs from the env it is asked to drive (a
:class:`CheckpointError` names the mismatching field).

``--agent checkpoint:PATH`` resolves the ``checkpoint`` entry point
(:func:`load_checkpoint_policy`); ``--agent humanclaw_agents.bc_policy:policy_from_env``
reads the path from ``HUMANCLAW_BC_CHECKPOINT``. torch is imported only when a model is
built or loaded.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.fileio import atomic_path
from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import Skill, SkillCall

__all__ = [
    "CHECKPOINT_ENV_VAR",
    "HEAD_SIZES",
    "NUM_CONDITION_BASE",
    "REGRESSION_KEYS",
    "REGRESSION_SKILL",
    "SCHEMA",
    "BCConfig",
    "BCPolicy",
    "CheckpointError",
    "build_condition",
    "build_model",
    "check_env_spec",
    "current_env_spec",
    "downsample_frames",
    "env_spec_of",
    "frames_to_tensor",
    "load_checkpoint",
    "load_checkpoint_policy",
    "policy_from_env",
    "preprocessing_spec",
    "save_checkpoint",
    "visibility_text",
    "weights_sha256",
]

SCHEMA = "humanclaw_bc_policy_v1"
"""Schema id of the checkpoint files."""

CHECKPOINT_ENV_VAR = "HUMANCLAW_BC_CHECKPOINT"
"""Environment variable :func:`policy_from_env` reads the checkpoint path from."""

REGRESSION_KEYS: tuple[str, ...] = ("angle_deg", "step_back_m", "side_step_m", "height_m")
"""Box entries of the action space the network regresses, in head order."""

# Which skill reads which regression entry (training masks, decoding), from the skill table.
REGRESSION_SKILL: dict[str, Skill] = {
    key: next(s for s in Skill if key in s.spec.action_keys.values()) for key in REGRESSION_KEYS
}
_IMAGE_KEY = "ego_rgb"
_ENV_ID = "HumanClawFindNavInteract-v0"
_STEP_SCALE = 100.0  # step index is fed as min(step / 100, 1)
_NO_PREVIOUS_SKILL = -1
_VISIBLE_THRESHOLD = 0.5
_DECIMALS = {"angle_deg": 1, "step_back_m": 3, "side_step_m": 3, "height_m": 3}

NUM_CONDITION_BASE = 6 + 1 + 9 + 1
"""Condition features before the frame mask: category (6), interact, previous skill (none
+ 8), step fraction."""


class CheckpointError(ValueError):
    """A BC checkpoint is unusable: wrong schema, hash mismatch, or incompatible env.

    Attributes:
        path: the checkpoint file (or None).
        field: the offending field, e.g. ``"weights_sha256"`` or
            ``"env_spec.observation.shape"``.
    """

    def __init__(self, path: str | os.PathLike[str] | None, field: str, detail: str) -> None:
        self.path = None if path is None else Path(path)
        self.field = field
        where = f"{self.path}: " if self.path is not None else ""
        super().__init__(f"{where}{field}: {detail}")


# ----------------------------------------------------------------------------------------
# configuration, env spec, preprocessing
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BCConfig:
    """Network and input configuration (saved in every checkpoint).

    Attributes:
        image_size: side of the square network input (pixels) the 448 x 448 ego image is
            area-downsampled to.
        history: ego frames per decision, oldest first (1 = the current frame only).
        channels: output channels of the stride-2 convolutions.
        hidden: width of the fully connected trunk.
        dropout: dropout before the heads (training only).
        use_previous_skill: feed the skill chosen at the previous decision.
    """

    image_size: int = 112
    history: int = 2
    channels: tuple[int, ...] = (32, 64, 96, 128)
    hidden: int = 256
    dropout: float = 0.1
    use_previous_skill: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", tuple(int(c) for c in self.channels))
        if not isinstance(self.image_size, int) or not 16 <= self.image_size <= 448:
            raise ValueError(
                f"BCConfig.image_size={self.image_size!r} is out of range: allowed 16..448"
            )
        if not isinstance(self.history, int) or not 1 <= self.history <= 8:
            raise ValueError(f"BCConfig.history={self.history!r} is out of range: allowed 1..8")
        if not self.channels or any(c < 1 for c in self.channels):
            raise ValueError(f"BCConfig.channels={self.channels!r} must be positive ints")
        if not isinstance(self.hidden, int) or self.hidden < 1:
            raise ValueError(f"BCConfig.hidden={self.hidden!r} must be an int >= 1")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"BCConfig.dropout={self.dropout!r} is out of range: allowed [0, 1)")

    @property
    def condition_dim(self) -> int:
        return NUM_CONDITION_BASE + self.history

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["channels"] = list(self.channels)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BCConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"BCConfig has no fields {unknown}; known {sorted(known)}")
        return cls(**dict(data))


def _space_layout(space: Any) -> list[dict[str, Any]]:
    """JSON description of a Gymnasium Dict action space: keys in order, types, ranges."""
    from gymnasium import spaces

    if not isinstance(space, spaces.Dict):
        raise TypeError(f"the action space must be a gymnasium Dict, got {type(space).__name__}")
    out: list[dict[str, Any]] = []
    for key, sub in space.spaces.items():
        if isinstance(sub, spaces.Discrete):
            out.append({"key": key, "type": "discrete", "n": int(sub.n), "start": int(sub.start)})
        elif isinstance(sub, spaces.Box):
            out.append(
                {
                    "key": key,
                    "type": "box",
                    "shape": [int(v) for v in sub.shape],
                    "dtype": np.dtype(sub.dtype).name,
                    "low": [float(v) for v in np.ravel(sub.low)],
                    "high": [float(v) for v in np.ravel(sub.high)],
                }
            )
        else:
            out.append({"key": key, "type": type(sub).__name__})
    return out


def env_spec_of(observation_space: Any, action_space: Any, env_id: str = _ENV_ID) -> dict[str, Any]:
    """The env contract a checkpoint depends on: env id, observation shape/dtype, action
    layout (keys in order with their types and ranges)."""
    return {
        "env_id": env_id,
        "observation": {
            "shape": [int(v) for v in observation_space.shape],
            "dtype": np.dtype(observation_space.dtype).name,
        },
        "action_layout": _space_layout(action_space),
    }


def current_env_spec(env: Any = None) -> dict[str, Any]:
    """The env spec of ``env`` (its unwrapped spaces), or of the installed
    ``HumanClawFindNavInteract-v0`` when ``env`` is None (built from the library's
    constants and :func:`~humanclaw_gym.skills.action_space`, no simulator)."""
    if env is not None:
        spec = getattr(env, "spec", None)
        env_id = getattr(spec, "id", None) or _ENV_ID
        return env_spec_of(env.observation_space, env.action_space, env_id)

    from humanclaw_gym.sensors import EgoRGBSensor
    from humanclaw_gym.skills import action_space

    return env_spec_of(EgoRGBSensor().space(), action_space())


def check_env_spec(
    saved: Mapping[str, Any], current: Mapping[str, Any], path: str | os.PathLike[str] | None = None
) -> None:
    """Raise :class:`CheckpointError` naming the first field where ``saved`` (the spec the
    checkpoint was trained for) and ``current`` (the env it should drive) differ."""

    def fail(field: str, want: Any, have: Any) -> None:
        raise CheckpointError(
            path,
            f"env_spec.{field}",
            f"the checkpoint was trained for {want!r} but the env has {have!r}; this "
            "checkpoint cannot drive this env",
        )

    if saved.get("env_id") != current.get("env_id"):
        fail("env_id", saved.get("env_id"), current.get("env_id"))
    for key in ("shape", "dtype"):
        want = (saved.get("observation") or {}).get(key)
        have = (current.get("observation") or {}).get(key)
        if want != have:
            fail(f"observation.{key}", want, have)
    want_layout = list(saved.get("action_layout") or [])
    have_layout = list(current.get("action_layout") or [])
    want_keys = [e.get("key") for e in want_layout]
    have_keys = [e.get("key") for e in have_layout]
    if want_keys != have_keys:
        fail("action_layout.keys", want_keys, have_keys)
    for want, have in zip(want_layout, have_layout, strict=True):
        for name in sorted(set(want) | set(have)):
            if want.get(name) != have.get(name):
                fail(f"action_layout.{want['key']}.{name}", want.get(name), have.get(name))


def preprocessing_spec(config: BCConfig) -> dict[str, Any]:
    """How images become network input (saved in the checkpoint, checked on load)."""
    return {
        "observation_key": _IMAGE_KEY,
        "resize": [config.image_size, config.image_size],
        "resize_method": "area average (torch interpolate mode='area'), rounded to uint8",
        "history": config.history,
        "history_padding": "repeat the first frame; frame_mask marks padding",
        "layout": "frames oldest first, channels stacked as [history * 3, H, W] (RGB)",
        "normalisation": "x / 255 - 0.5",
    }


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "the BC policy needs torch: pip install 'humanclaw-gym[torch]' (torch==2.13.0)"
        ) from exc
    return torch


def downsample_frames(frames: np.ndarray, image_size: int) -> np.ndarray:
    """Area-downsample ``uint8 [..., H, W, 3]`` frames to ``uint8 [..., S, S, 3]``.

    The one resize used for training data and at inference time.
    """
    torch = _torch()
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim < 3 or frames.shape[-1] != 3:
        raise ValueError(
            f"frames must be uint8 [..., H, W, 3], got {frames.dtype}{tuple(frames.shape)}"
        )
    lead = frames.shape[:-3]
    height, width = frames.shape[-3:-1]
    flat = torch.from_numpy(np.ascontiguousarray(frames).reshape(-1, height, width, 3))
    x = flat.permute(0, 3, 1, 2).to(torch.float32)
    if (height, width) != (image_size, image_size):
        x = torch.nn.functional.interpolate(x, size=(image_size, image_size), mode="area")
    out = x.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    return out.numpy().reshape(*lead, image_size, image_size, 3)


def frames_to_tensor(frames: np.ndarray, frame_mask: np.ndarray) -> Any:
    """``uint8 [B, T, S, S, 3]`` small frames -> ``float32 [B, T*3, S, S]`` network input.

    Padding frames (``frame_mask`` False) are zeroed after normalisation.
    """
    torch = _torch()
    x = torch.from_numpy(np.ascontiguousarray(frames)).to(torch.float32)
    x = x / 255.0 - 0.5
    mask = torch.from_numpy(np.asarray(frame_mask, dtype=np.float32))
    x = x * mask[:, :, None, None, None]
    b, t, s1, s2, c = x.shape
    return x.permute(0, 1, 4, 2, 3).reshape(b, t * c, s1, s2).contiguous()


def build_condition(
    category_index: np.ndarray,
    interact: np.ndarray,
    previous_skill: np.ndarray,
    step: np.ndarray,
    frame_mask: np.ndarray,
    use_previous_skill: bool = True,
) -> np.ndarray:
    """The condition vector: ``float32 [B, NUM_CONDITION_BASE + history]``.

    Args:
        category_index: ``[B]`` index into ``TARGET_CATEGORIES``.
        interact: ``[B]`` bool, the instruction ends with sitting.
        previous_skill: ``[B]`` skill id chosen at the previous decision, -1 for none.
        step: ``[B]`` decision index in the episode.
        frame_mask: ``[B, history]`` bool, False for padding frames.
        use_previous_skill: when False the previous-skill one-hot is all zeros.
    """
    category_index = np.asarray(category_index, dtype=np.int64)
    b = category_index.shape[0]
    out = np.zeros((b, NUM_CONDITION_BASE + np.asarray(frame_mask).shape[1]), dtype=np.float32)
    if b and (category_index.min() < 0 or category_index.max() >= 6):
        raise ValueError(f"category_index must be in 0..5, got {category_index.tolist()}")
    out[np.arange(b), category_index] = 1.0
    out[:, 6] = np.asarray(interact, dtype=np.float32)
    if use_previous_skill:
        previous = np.asarray(previous_skill, dtype=np.int64)
        if b and (previous.min() < -1 or previous.max() >= 8):
            raise ValueError(f"previous_skill must be in -1..7, got {previous.tolist()}")
        out[np.arange(b), 7 + previous + 1] = 1.0
    out[:, 16] = np.minimum(np.asarray(step, dtype=np.float32) / _STEP_SCALE, 1.0)
    out[:, NUM_CONDITION_BASE:] = np.asarray(frame_mask, dtype=np.float32)
    return out


def visibility_text(category: str, visible: bool) -> str:
    """A target-visibility statement (the text form the demos store as policy text)."""
    name = category.replace("_", " ")
    return f"I can see the {name}." if visible else f"The {name} is not in view."


# ----------------------------------------------------------------------------------------
# network
# ----------------------------------------------------------------------------------------
HEAD_SIZES: dict[str, int] = {
    "skill": 8,
    "speed": 3,
    "direction": 2,
    "regression": len(REGRESSION_KEYS),
    "visible": 1,
}
"""Output heads of the network and their widths."""


def build_model(config: BCConfig) -> Any:
    """The CNN policy network (a ``torch.nn.Module``) for ``config``.

    ``forward(images [B, history*3, S, S], condition [B, condition_dim])`` returns a dict of
    head outputs: ``skill [B, 8]``, ``speed [B, 3]``, ``direction [B, 2]`` (logits),
    ``regression [B, 4]`` (in [0, 1], the :data:`REGRESSION_KEYS` normalised to their
    ranges) and ``visible [B]`` (logit).
    """
    torch = _torch()
    nn = torch.nn

    class BCNet(nn.Module):
        def __init__(self, cfg: BCConfig) -> None:
            super().__init__()
            layers: list[Any] = []
            c_in = 3 * cfg.history
            for i, c_out in enumerate(cfg.channels):
                k = 5 if i == 0 else 3
                layers += [
                    nn.Conv2d(c_in, c_out, k, stride=2, padding=k // 2),
                    nn.GroupNorm(min(8, c_out), c_out),
                    nn.ReLU(inplace=True),
                ]
                c_in = c_out
            layers += [nn.Conv2d(c_in, 32, 1), nn.ReLU(inplace=True), nn.Flatten()]
            self.encoder = nn.Sequential(*layers)
            with torch.no_grad():
                probe = torch.zeros(1, 3 * cfg.history, cfg.image_size, cfg.image_size)
                flat = int(self.encoder(probe).shape[1])
            self.image_fc = nn.Sequential(nn.Linear(flat, cfg.hidden), nn.ReLU(inplace=True))
            self.cond_fc = nn.Sequential(nn.Linear(cfg.condition_dim, 64), nn.ReLU(inplace=True))
            self.trunk = nn.Sequential(
                nn.Linear(cfg.hidden + 64, cfg.hidden),
                nn.ReLU(inplace=True),
                nn.Dropout(cfg.dropout),
            )
            self.head = nn.Linear(cfg.hidden, sum(HEAD_SIZES.values()))

        def forward(self, images: Any, condition: Any) -> dict[str, Any]:
            z = torch.cat([self.image_fc(self.encoder(images)), self.cond_fc(condition)], dim=1)
            out = self.head(self.trunk(z))
            parts = dict(zip(HEAD_SIZES, out.split(list(HEAD_SIZES.values()), dim=1), strict=True))
            parts["regression"] = torch.sigmoid(parts["regression"])
            parts["visible"] = parts["visible"].squeeze(1)
            return parts

    return BCNet(config)


# ----------------------------------------------------------------------------------------
# checkpoints
# ----------------------------------------------------------------------------------------
def weights_sha256(state_dict: Mapping[str, Any]) -> str:
    """SHA-256 over the state dict: every tensor's name, dtype, shape and bytes, by name."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        array = tensor.numpy()
        digest.update(f"{name}|{array.dtype.str}|{list(array.shape)}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _canonical_sha256(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save_checkpoint(
    path: str | os.PathLike[str],
    model: Any,
    config: BCConfig,
    env_spec: Mapping[str, Any],
    training: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a ``humanclaw_bc_policy_v1`` checkpoint atomically (temp file + rename).

    Args:
        path: target file (its directory is created).
        model: the network from :func:`build_model`.
        config: the network configuration.
        env_spec: the env contract it was trained for (:func:`current_env_spec`).
        training: JSON-ready training summary (dataset, steps, losses, ...).

    Returns:
        The metadata written (with ``weights_sha256``).
    """
    torch = _torch()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    metadata = {
        "schema": SCHEMA,
        "config": config.to_json(),
        "env_spec": dict(env_spec),
        "preprocessing": preprocessing_spec(config),
        "heads": dict(HEAD_SIZES),
        "regression_keys": list(REGRESSION_KEYS),
        "training": dict(training or {}),
        "weights_sha256": weights_sha256(state),
    }
    payload = {
        "schema": SCHEMA,
        "metadata": metadata,
        "metadata_sha256": _canonical_sha256(metadata),
        "state_dict": state,
    }
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(payload, handle)
    return metadata


def load_checkpoint(path: str | os.PathLike[str]) -> tuple[Any, BCConfig, dict[str, Any]]:
    """Load and verify a checkpoint: schema, metadata hash, weights hash, preprocessing.

    Returns:
        ``(model in eval mode, config, metadata)``.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: the file is not a valid, untampered ``humanclaw_bc_policy_v1``
            checkpoint (the error names the field).
    """
    torch = _torch()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no BC checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(path, "file", f"cannot be read as a torch checkpoint: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        schema = payload.get("schema") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(path, "schema", f"is {schema!r}, expected {SCHEMA!r}")
    metadata = payload.get("metadata")
    state = payload.get("state_dict")
    if not isinstance(metadata, dict) or not isinstance(state, dict):
        raise CheckpointError(path, "metadata", "metadata or state_dict is missing")
    if metadata.get("schema") != SCHEMA:
        raise CheckpointError(path, "metadata.schema", f"is {metadata.get('schema')!r}")
    actual = _canonical_sha256(metadata)
    if actual != payload.get("metadata_sha256"):
        raise CheckpointError(
            path,
            "metadata_sha256",
            f"the metadata hashes to {actual}, the file records "
            f"{payload.get('metadata_sha256')}; it was modified after it was written",
        )
    actual = weights_sha256(state)
    if actual != metadata.get("weights_sha256"):
        raise CheckpointError(
            path,
            "weights_sha256",
            f"the weights hash to {actual}, the metadata records "
            f"{metadata.get('weights_sha256')}; the weights were modified or damaged",
        )
    try:
        config = BCConfig.from_json(metadata["config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(path, "config", f"is invalid: {exc}") from exc
    if metadata.get("preprocessing") != preprocessing_spec(config):
        raise CheckpointError(
            path,
            "preprocessing",
            f"{metadata.get('preprocessing')!r} differs from what this version of "
            f"humanclaw_agents.bc_policy does: {preprocessing_spec(config)!r}",
        )
    if metadata.get("heads") != HEAD_SIZES or metadata.get("regression_keys") != list(
        REGRESSION_KEYS
    ):
        raise CheckpointError(
            path,
            "heads",
            f"heads {metadata.get('heads')!r} / {metadata.get('regression_keys')!r} differ "
            f"from {HEAD_SIZES!r} / {list(REGRESSION_KEYS)!r}",
        )
    model = build_model(config)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(path, "state_dict", f"does not fit the config: {exc}") from exc
    model.eval()
    return model, config, metadata


# ----------------------------------------------------------------------------------------
# the policy
# ----------------------------------------------------------------------------------------
class BCPolicy:
    """The Policy protocol around a trained network (see the module docstring).

    Args:
        model: the network (eval mode).
        config: its :class:`BCConfig`.
        env_spec: the env spec it was trained for; observations are checked against it.
        seed: seeds the sampler when ``greedy`` is False.
        greedy: argmax decoding (default); False samples the skill from its softmax.
        claim_visibility: emit ``visible_state`` from the visibility head.
    """

    requires_privileged = False

    def __init__(
        self,
        model: Any,
        config: BCConfig,
        env_spec: Mapping[str, Any],
        seed: int = 0,
        greedy: bool = True,
        claim_visibility: bool = True,
    ) -> None:
        from humanclaw_gym.skills import action_space

        self.model = model
        self.config = config
        self.env_spec = dict(env_spec)
        self.greedy = bool(greedy)
        self.claim_visibility = bool(claim_visibility)
        self._rng = np.random.default_rng(seed)
        space = action_space()
        self._bounds = {
            key: (float(space[key].low[0]), float(space[key].high[0])) for key in REGRESSION_KEYS
        }
        obs = self.env_spec["observation"]
        self._obs_shape = tuple(obs["shape"])
        self._obs_dtype = np.dtype(obs["dtype"])
        self._frames: deque[np.ndarray] = deque(maxlen=config.history)
        self._category_index = 0
        self._category = ""
        self._interact = False
        self._previous_skill = _NO_PREVIOUS_SKILL

    def check_env(self, env: Any) -> None:
        """Raise :class:`CheckpointError` unless ``env`` has the spec the model was trained for."""
        check_env_spec(self.env_spec, current_env_spec(env))

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

        category = episode_info.get("target_category")
        if category not in TARGET_CATEGORIES:
            raise ValueError(
                f"episode_info['target_category']={category!r} is not one of {TARGET_CATEGORIES}"
            )
        self._category = str(category)
        self._category_index = TARGET_CATEGORIES.index(category)
        self._interact = bool(episode_info.get("interact", False))
        self._frames.clear()
        self._previous_skill = _NO_PREVIOUS_SKILL

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision:
        torch = _torch()
        if not self._category:
            raise RuntimeError("BCPolicy.act() called before reset()")
        obs = np.asarray(observation)
        if obs.shape != self._obs_shape or obs.dtype != self._obs_dtype:
            raise CheckpointError(
                None,
                "env_spec.observation",
                f"the checkpoint was trained on {self._obs_dtype.name}{list(self._obs_shape)} "
                f"observations, got {obs.dtype}{list(obs.shape)}",
            )
        self._frames.append(downsample_frames(obs, self.config.image_size))
        history = self.config.history
        real = list(self._frames)
        frames = [real[0]] * (history - len(real)) + real
        mask = np.array([False] * (history - len(real)) + [True] * len(real))
        step = int(info.get("step", 0))
        condition = build_condition(
            np.array([self._category_index]),
            np.array([self._interact]),
            np.array([self._previous_skill]),
            np.array([step]),
            mask[None],
            self.config.use_previous_skill,
        )
        with torch.inference_mode():
            out = self.model(
                frames_to_tensor(np.stack(frames)[None], mask[None]),
                torch.from_numpy(condition),
            )
        heads = {k: v[0].double().numpy() for k, v in out.items()}
        call, skill_probs = self._decode(heads)
        self._previous_skill = int(call.skill)
        visible_prob = float(1.0 / (1.0 + math.exp(-float(heads["visible"]))))
        text = None
        if self.claim_visibility:
            text = visibility_text(self._category, visible_prob >= _VISIBLE_THRESHOLD)
        return Decision(
            action=call,
            visible_state=text,
            extras={
                "bc": {
                    "skill_probs": [round(float(p), 4) for p in skill_probs],
                    "visible_prob": round(visible_prob, 4),
                }
            },
        )

    def _decode(self, heads: Mapping[str, np.ndarray]) -> tuple[SkillCall, np.ndarray]:
        logits = heads["skill"]
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        if self.greedy:
            skill = int(np.argmax(probs))
        else:
            skill = int(self._rng.choice(len(probs), p=probs))
        action: dict[str, Any] = {
            "skill": np.int64(skill),
            "speed": np.int64(np.argmax(heads["speed"])),
            "direction": np.int64(np.argmax(heads["direction"])),
        }
        for i, key in enumerate(REGRESSION_KEYS):
            low, high = self._bounds[key]
            value = low + float(np.clip(heads["regression"][i], 0.0, 1.0)) * (high - low)
            value = float(np.clip(round(value, _DECIMALS[key]), low, high))
            action[key] = np.array([value], dtype=np.float64)
        return SkillCall.from_action(action), probs


def load_checkpoint_policy(
    checkpoint: str | os.PathLike[str],
    seed: int = 0,
    env: Any = None,
    greedy: bool = True,
    claim_visibility: bool = True,
) -> BCPolicy:
    """Load a verified checkpoint as a :class:`BCPolicy` (the ``checkpoint`` entry point).

    Args:
        checkpoint: the checkpoint file written by ``scripts/train_bc.py``.
        seed: seeds the skill sampler (only used with ``greedy=False``).
        env: the env the policy will drive; its spec must match the checkpoint's. None
            checks against the installed ``HumanClawFindNavInteract-v0`` spec.
        greedy: argmax decoding (default) or sampling of the skill.
        claim_visibility: state target visibility in ``visible_state``.

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: bad schema or hash, or an env spec that does not match (the
            message names the field).
    """
    model, config, metadata = load_checkpoint(checkpoint)
    check_env_spec(metadata["env_spec"], current_env_spec(env), checkpoint)
    return BCPolicy(
        model,
        config,
        metadata["env_spec"],
        seed=seed,
        greedy=greedy,
        claim_visibility=claim_visibility,
    )


DEFAULT_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "bc_default.pt"
"""The behaviour-cloning checkpoint shipped with the package (``--agent bc``); how it was
made is in ``checkpoints/bc_default.json`` and docs/learned_policy.md."""


def load_default_policy(seed: int = 0, env: Any = None) -> BCPolicy:
    """The shipped checkpoint as a :class:`BCPolicy` (the ``bc`` entry point).

    The file's SHA-256 must equal the one recorded in ``checkpoints/bc_default.json``.

    Raises:
        FileNotFoundError: the package was installed without its checkpoint.
        CheckpointError: the file differs from the recorded one, or fails its own checks.
    """
    record_path = DEFAULT_CHECKPOINT.with_suffix(".json")
    if not DEFAULT_CHECKPOINT.is_file() or not record_path.is_file():
        raise FileNotFoundError(
            f"{DEFAULT_CHECKPOINT} (or its record {record_path.name}) is missing; reinstall "
            "humanclaw-gym or use --agent checkpoint:PATH"
        )
    record = json.loads(record_path.read_text(encoding="utf-8"))
    digest = hashlib.sha256(DEFAULT_CHECKPOINT.read_bytes()).hexdigest()
    if digest != record.get("sha256"):
        raise CheckpointError(
            DEFAULT_CHECKPOINT,
            "sha256",
            f"the file hashes to {digest}, {record_path.name} records {record.get('sha256')}",
        )
    return load_checkpoint_policy(DEFAULT_CHECKPOINT, seed=seed, env=env)


def policy_from_env(seed: int = 0) -> BCPolicy:
    """:func:`load_checkpoint_policy` with the path from ``$HUMANCLAW_BC_CHECKPOINT``
    (for ``--agent humanclaw_agents.bc_policy:policy_from_env``)."""
    path = os.environ.get(CHECKPOINT_ENV_VAR)
    if not path:
        raise ValueError(
            f"{CHECKPOINT_ENV_VAR} is not set; set it to a BC checkpoint path or use "
            "--agent checkpoint:PATH"
        )
    return load_checkpoint_policy(Path(path), seed=seed)
