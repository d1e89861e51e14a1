"""The backend options every simulating command shares (run, rollout, serve, view).

One dataclass, flattened into each command's flags (``--physics``, ``--renderer``,
``--motion``, ``--motion-option KEY=VALUE``, ``--motion-weights DIR`` and ``--release DIR``
for ``--motion paper``, ...), turned into a
:class:`~humanclaw_gym.backends.config.BackendConfig` by :meth:`BackendArgs.to_config`. The
choices in the help come from the backend registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from humanclaw_gym.backends import registry
from humanclaw_gym.backends.config import BackendConfig

__all__ = ["BackendArgs", "Flattened", "parse_options"]


def _names(kind: str) -> str:
    names = registry.render_choices() if kind == "render" else tuple(registry.entries(kind))
    return " | ".join(names)


def parse_options(
    items: tuple[str, ...], flag: str = "--motion-option"
) -> tuple[tuple[str, object], ...]:
    """``("steps=10", "seat_guidance=false")`` -> ``(("steps", 10), ("seat_guidance", False))``.

    VALUE is read as JSON when it parses, else kept as a string.

    Raises:
        ValueError: an item without ``=`` or with an empty key, naming it.
    """
    out = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} {item!r}: expected KEY=VALUE, e.g. steps=10")
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            value = raw
        out.append((key.strip(), value))
    return tuple(out)


@dataclass
class BackendArgs:
    """Simulator backends."""

    physics: Annotated[str, tyro.conf.arg(help=f"physics backend: {_names('physics')}")] = (
        "pybullet"
    )
    physics_option: tuple[str, ...] = ()
    """physics backend keyword as KEY=VALUE, VALUE read as JSON when it parses (e.g. solver_iterations=20)"""
    renderer: Annotated[str, tyro.conf.arg(help=f"render backend: {_names('render')}")] = "auto"
    motion: Annotated[str, tyro.conf.arg(help=f"motion generator: {_names('motion')}")] = (
        "procedural"
    )
    motion_checkpoint: Path | None = None
    """checkpoint of the flow motion generator"""
    motion_option: tuple[str, ...] = ()
    """motion generator keyword as KEY=VALUE, VALUE read as JSON when it parses (e.g. steps=10 seat_guidance=false)"""
    motion_weights: Path | None = None
    """the paper motion's weights as downloaded (--motion paper; its weights_dir)"""
    release: Path | None = None
    """a checkout of the reference release: the paper motion reads its weight manifest and seed state (--motion paper; its release_dir)"""
    body_model_dir: Path | None = None
    """your licensed SMPL-X files: draw the skinned body in the images (rendering only)"""
    body_model_gender: Literal["neutral", "male", "female"] = "neutral"
    """SMPL-X model gender"""
    scene_dataset: Path | None = None
    """a Habitat scene dataset (its *.scene_dataset_config.json or folder, e.g. HSSD prepared by the reference release): episodes of its scenes run in them"""
    body_asset: Path | None = None
    """a body folder in the reference release's format (URDF, STL meshes, shift.npy, metadata.json), e.g. its resources/agent/neutral_beta0_handmerged: simulated, drawn and scored instead of the built-in body"""

    def to_config(self) -> BackendConfig:
        """The :class:`BackendConfig` (types checked; run :meth:`BackendConfig.check` for
        names and options).

        Raises:
            ValueError: a malformed ``KEY=VALUE`` option or a bad value.
        """
        return BackendConfig(
            physics=self.physics,
            physics_options=dict(parse_options(self.physics_option, "--physics-option")),
            renderer=self.renderer,
            motion=self.motion,
            motion_checkpoint=self.motion_checkpoint,
            motion_options=self._motion_options(),
            body_model_dir=self.body_model_dir,
            body_model_gender=self.body_model_gender,
            scene_dataset=self.scene_dataset,
            body_asset=self.body_asset,
        )

    def _motion_options(self) -> dict[str, object]:
        options = dict(parse_options(self.motion_option))
        for flag, key, value in (
            ("--motion-weights", "weights_dir", self.motion_weights),
            ("--release", "release_dir", self.release),
        ):
            if value is None:
                continue
            if key in options:
                raise ValueError(f"{flag} and --motion-option {key}=... both given: pass one")
            options[key] = str(value)
        return options


Flattened = tyro.conf.OmitArgPrefixes
"""Marker that puts a nested ``BackendArgs`` field's flags at the top level."""
