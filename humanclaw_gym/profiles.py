"""Named run configurations: ``profile="paper"``, the configuration of the published table.

:func:`resolve_profile` turns a checkout of the reference release (and the parts its
authors distribute separately: the motion weights and the HSSD scenes) into everything a
run needs, read from the release's own files where they live there:

* **episodes**: the release's ``val100`` subset (``resources/benchmark/val100.json``) or
  its full ``val`` split (``resources/benchmark/episodes/val``: header and ``content/``);
* **body**: the body folder its profile names (``physics.agent_urdf`` of
  ``configs/paper_fullval_v1.json``: ``resources/agent/neutral_beta0_handmerged``), read by
  :func:`humanclaw_gym.body.asset.load_body_asset`;
* **physics profile** (``physics`` of the same file and its simulator config
  ``src/humanclaw_bench/envs/half_physics/humanclaw.physics_config.json``): PJSC gains by
  link, human link friction, root-only gravity mode, scale and downward-velocity
  inheritance as backend options; the pelvis' friction from the body's URDF (a link
  without a ``<contact>`` element gets the URDF readers' default 0.5, which the release's
  per-link friction loop, starting at the first child link, leaves on the pelvis);
  substeps, the root x/z command substeps, frame rate, timestep, gravity, scene friction
  and restitution are checked against this package's frame contract, and a difference is
  refused;
* **metric rules** ``"paper"``, the **PSV agent** (``agent="psv"``), **max steps** (100);
* **motion**: ``motion="paper"`` with the weights from ``motion_weights`` (default
  ``<release>/weights/paper_fullval_v1``) and the release's manifest and seed state;
* **scenes**: the HSSD homes prepared as the release describes (``scene_dataset``, default
  ``<release>/data/humanclaw-hssd-val41``), holding the scene of every episode that will
  run (``limit`` / ``episode_ids`` narrow the selection: a smoke run needs only its
  episodes' scenes);
* **the release's arithmetic** (``release_arithmetic``, default True): the physics option
  of the same name (:mod:`humanclaw_gym.physics.release`: the release's spawn, first-frame
  rule, neck/head zeroing and joint drive) and the release's fixed shoulder and wrist PJSC
  gains; False runs this package's corrected arithmetic with the same values.

Every part is checked before anything runs; what is missing or wrong is refused in one
:class:`ProfileError` that names every such part and where it comes from. The returned
:class:`RunProfile` carries a ``record`` (JSON-ready) that run fingerprints and replay
manifests keep: the profile, the release's commit (or, without git metadata, the SHA-256 of
every release file the profile read), the body asset's hash, the weight manifest's hash and
the scene dataset.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from humanclaw_gym.backends.config import BackendConfig

__all__ = [
    "PAPER_CONFIG",
    "PAPER_PHYSICS_CONFIG",
    "PAPER_SPLITS",
    "PROFILE_NAMES",
    "RELEASE_FIXED_PJSC_GAINS",
    "URDF_DEFAULT_LATERAL_FRICTION",
    "ProfileError",
    "RunProfile",
    "paper_physics",
    "profile_for_env",
    "resolve_profile",
]

#: The profiles :func:`resolve_profile` knows.
PROFILE_NAMES: tuple[str, ...] = ("paper",)
#: The release's profile file, relative to its checkout.
PAPER_CONFIG = "configs/paper_fullval_v1.json"
#: Where its simulator config lives when the profile does not name it.
PAPER_PHYSICS_CONFIG = "src/humanclaw_bench/envs/half_physics/humanclaw.physics_config.json"
#: The episode selections of the paper profile, relative to the release checkout.
PAPER_SPLITS: dict[str, str] = {
    "val100": "resources/benchmark/val100.json",
    "val": "resources/benchmark/episodes/val",
}
_WEIGHTS_DIR = "weights/paper_fullval_v1"
_SCENE_DATASET = "data/humanclaw-hssd-val41"
#: PJSC gains the release's half-physics forces whatever its profile says (its ``hp_step``
#: overrides the configured shoulder and wrist gains with these constants).
RELEASE_FIXED_PJSC_GAINS: dict[str, float] = {
    "left_shoulder": 0.03,
    "right_shoulder": 0.03,
    "left_wrist": 0.1,
    "right_wrist": 0.1,
}
#: Lateral friction URDF readers (Bullet's, pybullet's, Habitat's) give a link without a
#: ``<contact><lateral_friction>``: the release's pelvis keeps it.
URDF_DEFAULT_LATERAL_FRICTION = 0.5
_CONFIG_LIMIT_BYTES = 1 << 20


class ProfileError(ValueError):
    """A profile cannot run: one line per missing or wrong part, each naming where the
    part comes from. ``parts`` lists the part names."""

    def __init__(self, profile: str, problems: list[tuple[str, str]]) -> None:
        self.parts = tuple(part for part, _ in problems)
        # one line whatever a part's message holds (an unpickler's error spans lines)
        listed = "; ".join(f"{part}: {' '.join(str(text).split())}" for part, text in problems)
        super().__init__(
            f"profile {profile!r} cannot run, {len(problems)} part(s) missing or wrong: {listed}"
        )


@dataclass(frozen=True)
class RunProfile:
    """Everything a run of a profile needs (see :func:`resolve_profile`).

    Attributes:
        name: the profile (``"paper"``).
        release_dir: the release checkout.
        episodes: the episode selection (a path ``load_split`` / ``--episodes`` read).
        split: ``"val100"`` or ``"val"``.
        backend: physics (with the profile's options), renderer, motion (``"paper"`` with
            its weights), body asset and scene dataset.
        metric_rules: ``"paper"``.
        agent: ``"psv"``.
        max_steps: the profile's step limit (100).
        record: what fingerprints and replay manifests record (JSON-ready).
        episode_ids: the ids of the episodes that will run when ``limit`` / ``episode_ids``
            narrowed the selection (an env made with this profile plays only those), None
            for the whole split.
        release_arithmetic: whether the release's arithmetic runs (see the module
            docstring).
    """

    name: str
    release_dir: str
    episodes: str
    split: str
    backend: BackendConfig
    metric_rules: str
    agent: str
    max_steps: int
    record: Mapping[str, Any] = field(default_factory=dict)
    episode_ids: tuple[str, ...] | None = None
    release_arithmetic: bool = True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path: Path, what: str) -> Any:
    from humanclaw_gym.fileio import loads_json, read_bytes_limited

    try:
        return loads_json(read_bytes_limited(path, _CONFIG_LIMIT_BYTES, what), str(path))
    except FileNotFoundError:
        raise ValueError(f"{what} {path} is missing") from None


def _release_commit(release: Path) -> str | None:
    """The release checkout's git commit, or None without git metadata."""
    if not (release / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(release), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if out.returncode == 0 and len(text) == 40 else None


def _within(release: Path, relative: Any, what: str) -> Path:
    """A path the release's profile names, relative to the checkout and inside it."""
    if not isinstance(relative, str) or not relative or os.path.isabs(relative):
        raise ValueError(f"{what} must be a relative path inside the release, got {relative!r}")
    path = (release / relative).resolve()
    if release.resolve() not in path.parents:
        raise ValueError(f"{what} {relative!r} leaves the release checkout")
    return path


def _number(section: Mapping[str, Any], key: str, where: str) -> float:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where} {key}={value!r} is not a finite number")
    return float(value)


def _physics_options(
    physics: Mapping[str, Any], sim: Mapping[str, Any], body: Any, where: str, sim_where: str
) -> tuple[dict[str, Any], list[str]]:
    """The backend options of the release's physics section and the contract checks.

    Returns:
        ``(options, problems)``.
    """
    from humanclaw_gym.physics.contract import (
        FRAME_RATE_HZ,
        GRAVITY_M_S2,
        RESTITUTION,
        ROOT_VELOCITY_SUBSTEPS,
        SCENE_FRICTION,
        SUBSTEP_S,
        SUBSTEPS_PER_FRAME,
    )

    problems: list[str] = []

    def expect(ok: bool, text: str) -> None:
        if not ok:
            problems.append(text)

    expect(
        physics.get("backend") == "hp", f"{where} backend {physics.get('backend')!r} is not 'hp'"
    )
    expect(
        _number(physics, "fps", where) == FRAME_RATE_HZ,
        f"{where} fps {physics.get('fps')} differs from this package's {FRAME_RATE_HZ}",
    )
    expect(
        physics.get("pjsc_substeps") == SUBSTEPS_PER_FRAME,
        f"{where} pjsc_substeps {physics.get('pjsc_substeps')!r} differs from this package's "
        f"{SUBSTEPS_PER_FRAME} substeps per frame",
    )
    command = physics.get("root_linear_xz_command_substeps")
    expect(
        isinstance(command, list) and tuple(command) == ROOT_VELOCITY_SUBSTEPS,
        f"{where} root_linear_xz_command_substeps {command!r} differ from this package's "
        f"{list(ROOT_VELOCITY_SUBSTEPS)}",
    )
    timestep = _number(sim, "timestep", sim_where)
    expect(
        abs(timestep - SUBSTEP_S) < 1e-8,
        f"{sim_where} timestep {timestep} differs from this package's {SUBSTEP_S}",
    )
    gravity = sim.get("gravity")
    expect(
        gravity == [0.0, -GRAVITY_M_S2, 0.0],
        f"{sim_where} gravity {gravity!r} differs from this package's [0, -{GRAVITY_M_S2}, 0]",
    )
    expect(
        _number(sim, "friction_coefficient", sim_where) == SCENE_FRICTION,
        f"{sim_where} friction_coefficient differs from this package's scene friction "
        f"{SCENE_FRICTION}",
    )
    expect(
        _number(sim, "restitution_coefficient", sim_where) == RESTITUTION,
        f"{sim_where} restitution_coefficient differs from this package's {RESTITUTION}",
    )
    mode = physics.get("root_gravity_mode")
    expect(mode in ("pre", "substep", "midpoint"), f"{where} root_gravity_mode {mode!r} is unknown")
    inherit = physics.get("inherit_downward_root_y_velocity")
    expect(isinstance(inherit, bool), f"{where} inherit_downward_root_y_velocity is not a bool")
    default_gain = _number(physics, "pjsc_lambda", where)
    by_link = physics.get("pjsc_lambda_by_link") or {}
    expect(isinstance(by_link, Mapping), f"{where} pjsc_lambda_by_link is not an object")
    gains: dict[str, float] = {}
    if default_gain != 1.0:  # every driven link takes the default unless named
        gains = {name: default_gain for name in body.links[1:]}
    if isinstance(by_link, Mapping):
        for name in by_link:
            if name not in body.links:
                problems.append(f"{where} pjsc_lambda_by_link names {name!r}, not a body link")
                continue
            gains[str(name)] = _number(by_link, name, f"{where} pjsc_lambda_by_link")
    root_contact = body.lateral_friction[0]
    options = {
        "pjsc_gains": gains,
        "human_friction": _number(physics, "friction", where),
        "root_friction": URDF_DEFAULT_LATERAL_FRICTION if root_contact is None else root_contact,
        "root_gravity_mode": mode,
        "root_gravity_scale": _number(physics, "root_gravity_scale", where),
        "inherit_downward_root_y_velocity": bool(inherit),
    }
    return options, problems


def _release_physics(
    release: Path, config: Mapping[str, Any], problems: list[tuple[str, str]], files: dict[str, str]
) -> tuple[Any, dict[str, Any]]:
    """The body and the physics options the release's profile names; problems appended."""
    section = config["physics"]
    body: Any = None
    options: dict[str, Any] = {}
    try:
        urdf = _within(release, section.get("agent_urdf"), "physics.agent_urdf")
        from humanclaw_gym.body.asset_cache import cached_body_asset

        body = cached_body_asset(urdf)
    except ValueError as exc:
        problems.append(("body", f"{str(exc)[:300]} (the release's resources/agent/)"))
    sim_rel = section.get("physics_config") or PAPER_PHYSICS_CONFIG
    try:
        sim_path = _within(release, sim_rel, "physics.physics_config")
        sim = _read_json(sim_path, "the release's simulator config")
        if not isinstance(sim, Mapping):
            raise ValueError(f"the release's simulator config {sim_path} is not an object")
        files[str(sim_rel)] = _sha256(sim_path)
        if body is not None:
            options, checks = _physics_options(
                section, sim, body, f"{PAPER_CONFIG} physics", str(sim_rel)
            )
            problems.extend(("physics profile", text) for text in checks)
    except ValueError as exc:
        problems.append(("physics profile", f"{str(exc)[:300]} (part of the release checkout)"))
    return body, options


def paper_physics(
    release_dir: str | os.PathLike[str], *, release_arithmetic: bool = True
) -> tuple[Any, dict[str, Any]]:
    """The body and the physics backend options of the paper profile, read from a release
    checkout (its ``configs/paper_fullval_v1.json``, simulator config and body folder).

    Args:
        release_dir: the release checkout.
        release_arithmetic: the release's arithmetic (default) or this package's (see
            :func:`release_arithmetic_options`).

    Returns:
        ``(BodyAsset, options)``: ``options`` are keyword arguments of both physics backends
        (``pjsc_gains``, ``human_friction``, ``root_friction``, ``root_gravity_mode``,
        ``root_gravity_scale``, ``inherit_downward_root_y_velocity``,
        ``release_arithmetic``).

    Raises:
        ProfileError: a missing or wrong part, each named.
    """
    release = Path(release_dir).expanduser()
    problems: list[tuple[str, str]] = []
    config: Any = None
    try:
        config = _read_json(release / PAPER_CONFIG, "the release's profile")
        if not isinstance(config, Mapping) or not isinstance(config.get("physics"), Mapping):
            raise ValueError(
                f"the release's profile {release / PAPER_CONFIG} has no physics section"
            )
    except ValueError as exc:
        problems.append(("release profile", f"{exc} (part of the release checkout)"))
    body, options = (
        (None, {}) if config is None else _release_physics(release, config, problems, {})
    )
    if problems:
        raise ProfileError("paper", problems)
    return body, release_arithmetic_options(options, release_arithmetic)


def release_arithmetic_options(
    options: Mapping[str, Any], release_arithmetic: bool
) -> dict[str, Any]:
    """The paper profile's physics options with the arithmetic chosen.

    Args:
        options: the options read from the release's files (:func:`paper_physics`).
        release_arithmetic: True: the physics option ``release_arithmetic``
            (:mod:`humanclaw_gym.physics.release`) and the release's fixed shoulder and
            wrist PJSC gains (:data:`RELEASE_FIXED_PJSC_GAINS`, which its ``hp_step`` forces
            over its profile's); False: this package's arithmetic, the profile's gains.

    Raises:
        TypeError: ``release_arithmetic`` is not a bool.
    """
    if not isinstance(release_arithmetic, bool):
        raise TypeError(f"release_arithmetic must be a bool, got {release_arithmetic!r}")
    out = dict(options)
    if release_arithmetic and "pjsc_gains" in out:
        out["pjsc_gains"] = {**dict(out["pjsc_gains"]), **RELEASE_FIXED_PJSC_GAINS}
    out["release_arithmetic"] = release_arithmetic
    return out


def resolve_profile(
    name: str,
    release_dir: str | os.PathLike[str] | None,
    *,
    episodes: str = "val100",
    motion_weights: str | os.PathLike[str] | None = None,
    scene_dataset: str | os.PathLike[str] | None = None,
    physics: str = "pybullet",
    renderer: str = "auto",
    motion_device: str = "cpu",
    limit: int | None = None,
    episode_ids: Sequence[str] | None = None,
    release_arithmetic: bool = True,
    load_motion: bool = False,
) -> RunProfile:
    """Resolve a named profile against a release checkout (see the module docstring).

    Args:
        name: ``"paper"``.
        release_dir: the reference release's checkout.
        episodes: ``"val100"`` (the release's subset) or ``"val"`` (its full split).
        motion_weights: the downloaded motion weights (default
            ``<release>/weights/paper_fullval_v1``).
        scene_dataset: HSSD prepared as the release describes (default
            ``<release>/data/humanclaw-hssd-val41``).
        physics: the physics backend (``"pybullet"`` or ``"mujoco"``; both take the
            profile's options).
        renderer: the render backend.
        motion_device: the paper motion's device (``"cpu"``, ``"cuda"``).
        limit: only the first ``limit`` episodes of the selection will run (``--limit``).
        episode_ids: only these episodes of the split will run, in the split's order.
        release_arithmetic: the release's arithmetic (default) or this package's
            (:func:`release_arithmetic_options`).
        load_motion: check the motion weights by loading the models on ``motion_device``
            (kept for the generator this process builds next, e.g. an env's: each file is
            then read once); False (default): check them one file at a time and keep no
            tensor (a run's driver process, whose workers load). Either way each file is
            hashed and checked once per process per file state.

    Returns:
        The :class:`RunProfile`; its scene dataset is checked for the scenes of the
        episodes that will run (after ``episode_ids`` and ``limit``), which its record
        names (``episodes.selected``) when they are fewer than the split's.

    Raises:
        ProfileError: naming every missing or wrong part and where it comes from.
    """
    if name not in PROFILE_NAMES:
        raise ValueError(f"profile {name!r} is unknown: allowed {PROFILE_NAMES}")
    if episodes not in PAPER_SPLITS:
        raise ValueError(
            f"profile {name!r}: episodes {episodes!r} is unknown: allowed {tuple(PAPER_SPLITS)}"
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"profile {name!r}: limit {limit!r} is invalid: allowed an int >= 1")
    if not isinstance(release_arithmetic, bool):
        raise TypeError(f"release_arithmetic must be a bool, got {release_arithmetic!r}")
    problems: list[tuple[str, str]] = []
    files: dict[str, str] = {}
    release = None if release_dir is None else Path(release_dir).expanduser()
    config: Any = None
    if release is None:
        problems.append(("release", "no release checkout given (--release PATH / release_dir=): "
                         "a checkout of Human-CLAW/HumanCLAW"))  # fmt: skip
    elif not release.is_dir():
        problems.append(
            ("release", f"{release} is not a directory (a checkout of Human-CLAW/HumanCLAW)")
        )
    else:
        try:
            config = _read_json(release / PAPER_CONFIG, "the release's profile")
            if not isinstance(config, Mapping) or not isinstance(config.get("physics"), Mapping):
                raise ValueError(
                    f"the release's profile {release / PAPER_CONFIG} has no physics section"
                )
            files[PAPER_CONFIG] = _sha256(release / PAPER_CONFIG)
        except ValueError as exc:
            problems.append(("release profile", f"{exc} (part of the release checkout)"))
            config = None

    # -- episodes --------------------------------------------------------------------------
    episodes_path: Path | None = None
    episode_list: list[Any] = []
    if release is not None and release.is_dir():
        episodes_path = release / PAPER_SPLITS[episodes]
        try:
            from humanclaw_gym.episodes.io import load_split

            episode_list = load_split(episodes_path)
            if episodes_path.is_file():
                files[PAPER_SPLITS[episodes]] = _sha256(episodes_path)
        except (ValueError, OSError) as exc:
            problems.append(
                ("episodes", f"{str(exc)[:300]} (the release's {PAPER_SPLITS[episodes]})")
            )

    # -- body and physics profile ----------------------------------------------------------
    selected, selection_problem = _select(episode_list, episode_ids, limit)
    if selection_problem:
        problems.append(("episodes", selection_problem))

    body: Any = None
    physics_options: dict[str, Any] = {}
    body_path: Path | None = None
    if config is not None:
        body, physics_options = _release_physics(release, config, problems, files)
        physics_options = release_arithmetic_options(physics_options, release_arithmetic)
        body_path = None if body is None else body.path

    # -- motion ----------------------------------------------------------------------------
    weights = Path(motion_weights).expanduser() if motion_weights is not None else (
        None if release is None else release / _WEIGHTS_DIR
    )  # fmt: skip
    motion_record: dict[str, Any] | None = None
    motion_options: dict[str, Any] = {"device": motion_device}
    if weights is not None:
        motion_options["weights_dir"] = str(weights)
    if release is not None:
        motion_options["release_dir"] = str(release)
    try:
        motion_record = _check_motion(weights, release, motion_device if load_motion else None)
    except _Missing as exc:
        problems.append(("motion weights", str(exc)))

    # -- physics backend -----------------------------------------------------------------
    from humanclaw_gym.backends import registry

    if physics not in registry.entries("physics"):
        problems.append(("physics", f"{physics!r} is not a registered physics backend"))
    elif "mesh" not in registry.entry("physics", physics).capabilities.part_shapes:
        problems.append(
            (
                "physics",
                f"{physics!r} cannot collide the HSSD scenes' triangle meshes: use --physics "
                "pybullet",
            )
        )
    elif body is not None and physics_options:
        problem = _check_physics_values(physics, body, physics_options)
        if problem is not None:
            problems.append(("physics profile", problem))

    # -- scenes ----------------------------------------------------------------------------
    dataset = Path(scene_dataset).expanduser() if scene_dataset is not None else (
        None if release is None else release / _SCENE_DATASET
    )  # fmt: skip
    dataset_record: dict[str, Any] | None = None
    try:
        dataset_record = _check_scenes(dataset, selected, scene_dataset is None)
    except _Missing as exc:
        problems.append(("scene dataset", str(exc)))

    if problems:
        raise ProfileError(name, problems)
    assert release is not None and episodes_path is not None and body_path is not None
    backend = BackendConfig(
        physics=physics,
        physics_options=physics_options,
        renderer=renderer,
        motion="paper",
        motion_options=motion_options,
        scene_dataset=str(dataset),
        body_asset=str(body_path),
    )
    commit = _release_commit(release)
    benchmark = config.get("benchmark") if isinstance(config.get("benchmark"), Mapping) else {}
    max_steps = benchmark.get("max_steps", 100)
    record = {
        "profile": name,
        "release": {
            "path": str(release.resolve()),
            "commit": commit,
            "profile_name": config.get("profile"),
            "files": None if commit else dict(sorted(files.items())),
        },
        "episodes": {
            "split": episodes,
            "path": str(episodes_path),
            "count": len(episode_list),
            "selected": _selection_record(selected, episode_list, episode_ids, limit),
        },
        "release_arithmetic": release_arithmetic,
        "body": body.identity(),
        "physics_options": physics_options,
        "motion_weights": motion_record,
        "scene_dataset": dataset_record,
        "metric_rules": "paper",
    }
    record = json.loads(json.dumps(record, sort_keys=True, default=str))
    return RunProfile(
        name=name,
        release_dir=str(release),
        episodes=str(episodes_path),
        split=episodes,
        backend=backend,
        metric_rules="paper",
        agent="psv",
        max_steps=int(max_steps) if isinstance(max_steps, int) and max_steps > 0 else 100,
        record=record,
        episode_ids=None
        if len(selected) == len(episode_list)
        else tuple(e.episode_id for e in selected),
        release_arithmetic=release_arithmetic,
    )


def _select(
    episodes: list[Any], episode_ids: Sequence[str] | None, limit: int | None
) -> tuple[list[Any], str | None]:
    """The episodes that will run (``episode_ids`` in the split's order, then the first
    ``limit``) and a problem naming the ids the split lacks, or None."""
    selected = list(episodes)
    if episode_ids is not None:
        if isinstance(episode_ids, str):
            return [], f"episode_ids must be a list of ids, got the string {episode_ids!r}"
        wanted = {str(i) for i in episode_ids}
        selected = [e for e in episodes if e.episode_id in wanted]
        if episodes and len(selected) < len(wanted):
            known = {e.episode_id for e in episodes}
            lacking = sorted(wanted - known)
            return [], f"episode_ids not in the split: {lacking[:5]}"
    if limit is not None:
        selected = selected[:limit]
    return selected, None


def _selection_record(
    selected: list[Any], episodes: list[Any], episode_ids: Sequence[str] | None, limit: int | None
) -> dict[str, Any] | None:
    """What the record keeps of a narrowed selection (None: the whole split runs)."""
    if len(selected) == len(episodes):
        return None
    return {
        "limit": limit,
        "episode_ids": None if episode_ids is None else sorted(str(i) for i in episode_ids),
        "count": len(selected),
        "scenes": sorted({e.scene_id for e in selected}),
    }


class _Missing(Exception):
    """One missing or wrong part (the message names it and where it comes from)."""


def _check_physics_values(physics: str, body: Any, options: Mapping[str, Any]) -> str | None:
    """The profile's physics values checked by the backend itself, before any episode
    runs: the backend is constructed with them and the body (nothing is built: no engine,
    no scene) and dropped. Returns the backend's one-line refusal, or None.

    The release's files give the values (friction, PJSC gains, root gravity); a value the
    backend refuses (a friction of -3, a gain of 1e300) would otherwise fail every episode.
    """
    from humanclaw_gym.backends import registry

    factory = registry.entry("physics", physics).load()
    try:
        backend = factory(body_asset=str(body.path), **dict(options))
    except (TypeError, ValueError) as exc:
        return f"{PAPER_CONFIG} physics: {' '.join(str(exc).split())[:300]} ({physics} backend)"
    close = getattr(backend, "close", None)
    if callable(close):
        close()
    return None


def _check_motion(
    weights: Path | None, release: Path | None, load_on: str | None = None
) -> dict[str, Any]:
    """The paper motion's weights and files: present and verified; its record (with
    ``load_on``, the models loaded on that device, see :func:`_check_motion_payloads`)."""
    from humanclaw_gym.backends import registry

    if "paper" not in registry.entries("motion"):
        raise _Missing("the paper motion model (motion='paper') is not part of this installation")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise _Missing(
            "the paper motion needs PyTorch: pip install 'humanclaw-gym[torch]'"
        ) from None
    from humanclaw_gym.motion.paper import check_weights, weights_record

    where = (
        "download the authors' weights (see the release's weights/paper_fullval_v1/README.md) "
        "and pass --motion-weights DIR"
    )
    if weights is None or not weights.is_dir():
        raise _Missing(
            f"{'no weights directory given' if weights is None else f'{weights} does not exist'}; {where}"
        )
    status = check_weights(weights_dir=weights, release_dir=release)
    if not status["ok"]:
        raise _Missing(
            f"{status['detail']} (the release's weights/paper_fullval_v1/README.md says "
            "where to get them; --motion-weights DIR)"
        )
    try:
        record = dict(weights_record(weights_dir=weights, release_dir=release))
    except ValueError as exc:
        raise _Missing(f"{exc} (the release's resources/seeds/)") from None
    _check_motion_payloads(weights, release, load_on)
    return record


def _check_motion_payloads(weights: Path, release: Path | None, load_on: str | None) -> None:
    """Beyond the hashes (just checked by :func:`check_weights`): every weight file
    unpickled weights-only and checked against the manifest's architecture (schema, tensor
    names, shapes, dtypes, finiteness) and the seed state read and checked, before any
    episode runs (torch). Each is worked out once per process per file state
    (``motion.paper.verified``): the generator built later in this process does not hash or
    check them again. ``load_on`` None: one file at a time, no model built (a run's driver,
    whose workers may load); a device: the models are loaded there while checked (an env,
    whose generator then shares them: each file read once)."""
    from humanclaw_gym.motion.paper.generator import _device, _load_seed_state
    from humanclaw_gym.motion.paper.manifest import (
        PaperWeightsError,
        read_manifest,
        resolve_sources,
    )
    from humanclaw_gym.motion.paper.weights import check_payloads, load_models

    try:
        sources = resolve_sources(weights, None, None, release)
        manifest = read_manifest(sources.manifest)
        if load_on is None:
            check_payloads(manifest, sources.weights_dir)
        else:
            load_models(manifest, sources.weights_dir, _device(load_on))
        if sources.seed_state is not None:
            _load_seed_state(None, sources.seed_state)
    except (PaperWeightsError, ValueError) as exc:
        raise _Missing(
            f"{' '.join(str(exc).split())[:400]} (the weights and the seed state must be the "
            "files the release's manifest describes)"
        ) from None


def _check_scenes(dataset: Path | None, episodes: list[Any], defaulted: bool) -> dict[str, Any]:
    where = (
        "HSSD with the release's gated supplement, prepared as its resources/hssd/README.md "
        "describes (humanclaw-bench prepare-hssd), passed as --scene-dataset PATH"
    )
    if dataset is None or not dataset.exists():
        shown = "no scene dataset given" if dataset is None else f"{dataset} does not exist"
        if defaulted and dataset is not None:
            shown = f"none given and {dataset} does not exist"
        raise _Missing(f"{shown}; {where}")
    try:
        import trimesh  # noqa: F401
    except ImportError:
        raise _Missing(
            "reading the HSSD meshes needs trimesh: pip install 'humanclaw-gym[hssd]'"
        ) from None
    from humanclaw_gym.scenes.hssd import open_scene_dataset

    try:
        opened = open_scene_dataset(dataset)
    except ValueError as exc:
        raise _Missing(f"{str(exc)[:300]}; {where}") from None
    lacking = sorted({e.scene_id for e in episodes if not opened.has_scene(e.scene_id)})
    if lacking:
        more = f" and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        raise _Missing(
            f"{opened.config_path} lacks {len(lacking)} scene(s) of the episodes: "
            f"{lacking[:5]}{more}; {where}"
        )
    config = Path(opened.config_path)
    return {"path": str(config.parent), "config": config.name, "config_sha256": _sha256(config)}


#: Backend fields a profile leaves to the caller (with the profile's scene dataset).
_FREE_FIELDS = ("physics", "renderer", "scene_dataset")
#: Keyword arguments of an env that choose among a profile's own settings.
_PROFILE_FIELDS = ("release_arithmetic",)


def profile_for_env(
    profile: Any,
    release_dir: str | os.PathLike[str] | None,
    motion_weights: str | os.PathLike[str] | None,
    split: Any,
    episodes: Any,
    backend: BackendConfig | None,
    backend_fields: Mapping[str, Any],
    episode_ids: Sequence[str] | None = None,
) -> RunProfile:
    """The :class:`RunProfile` an env is made with: ``profile`` a resolved one, or a name
    resolved here against ``release_dir`` with ``motion_weights``, the free backend
    fields (``physics``, ``renderer``, ``scene_dataset``) and ``release_arithmetic``
    (default True); ``split`` names its episodes (``"val100"`` or ``"val"``), the env's
    ``episode_ids`` those that will run (the scene dataset is checked for their scenes).

    Raises:
        TypeError / ValueError: ``release_dir`` or ``motion_weights`` without a profile, or a
            setting the profile makes itself (``backend=``, ``episodes=``, another backend
            field), naming it.
        ProfileError: see :func:`resolve_profile`.
    """
    if profile is None:
        raise TypeError("release_dir= and motion_weights= are read with profile='paper'")
    taken = sorted(set(backend_fields) - set(_FREE_FIELDS) - set(_PROFILE_FIELDS))
    if backend is not None:
        taken.insert(0, "backend")
    if episodes is not None:
        taken.insert(0, "episodes")
    if taken:
        raise ValueError(
            f"profile {getattr(profile, 'name', profile)!r} sets {taken} itself: give only "
            f"{list(_FREE_FIELDS)}, release_arithmetic (and split='val100' or 'val')"
        )
    if isinstance(profile, RunProfile):
        if release_dir is not None or motion_weights is not None or backend_fields:
            raise ValueError(
                "a resolved RunProfile takes no release_dir, motion_weights or backend fields"
            )
        return profile
    if split not in PAPER_SPLITS:
        raise ValueError(
            f"profile {profile!r}: split must be one of {tuple(PAPER_SPLITS)}, got {split!r}"
        )
    return resolve_profile(
        profile,
        release_dir,
        episodes=split,
        motion_weights=motion_weights,
        scene_dataset=backend_fields.get("scene_dataset"),
        physics=backend_fields.get("physics", "pybullet"),
        renderer=backend_fields.get("renderer", "auto"),
        episode_ids=episode_ids,
        release_arithmetic=backend_fields.get("release_arithmetic", True),
        load_motion=True,  # the env builds the generator next, in this process
    )
