"""The fingerprint of a batch run: what defines its results, recorded in its directory.

Every ``humanclaw run`` output directory holds ``run_fingerprint.json`` (schema
``humanclaw_run_fingerprint_v1``), written atomically before any episode runs. Its
``settings`` are everything that decides what an episode's results are:

* ``task``: the task's record (``{"id", "version"}`` of its spec; the name it was given
  by, a registered name or ``module:Class``, is not part of it);
* ``agent`` (the ``--agent`` string) and ``agent_checkpoint_sha256`` (the content of a
  ``checkpoint:PATH`` file);
* ``model_config``: the ``--model-config`` JSON **without secrets** (see
  :func:`model_config_record`);
* ``seed``, ``max_steps``;
* ``episodes``: the selection (``--episodes`` value, or the server's plan) and the SHA-256
  of its episode list before ``--limit``;
* ``backend``: :meth:`~humanclaw_gym.backends.config.BackendConfig.to_dict` (physics,
  renderer, motion and their options, body model), ``motion_checkpoint_sha256`` and
  ``motion_weights`` (what the motion generator says names its weights: for ``"paper"`` the
  weight manifest's and seed state's SHA-256, device and dtype; None for the others);
* ``body_asset``: the identity of the ``body_asset`` folder (name, path, one SHA-256 over
  its files, links, mass), None for the built-in body;
* ``profile``: the record of a profile (``--profile paper``: the release's commit or
  file hashes, the body, the physics options, the weight manifest's hash, the scene
  dataset, ``release_arithmetic``, and ``episodes.selected`` when ``--limit`` narrowed the
  episodes the scene dataset was checked for), None without one;
* ``metric_rules``: which metric rules score the episodes (``"paper"`` when the run
  config names none);
* ``instruction_template``: ``None`` (each episode's own instruction) or where the
  ``--instruction-template`` came from and its fields, so an edited file is a changed
  setting;
* ``via_server``: whether a benchmark server ran the episodes;
* ``humanclaw_gym_version``.

Not part of it (they change no episode's result): ``--limit`` (a resumed run may cover
more or fewer episodes of the same selection; under ``--profile`` the narrowed selection is
part of the profile's record, since only its scenes were checked), ``--workers``,
``--executor``, the output path, and ``--metrics`` / ``--video`` (``--resume`` already
re-runs an episode that lacks an artifact the flags ask for).

:func:`check_fingerprint` refuses a directory whose recorded settings differ from the
current ones, naming every differing field, before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from humanclaw_gym.fileio import write_json_record

__all__ = [
    "FINGERPRINT_FILE",
    "FINGERPRINT_SCHEMA",
    "RunFingerprintError",
    "check_fingerprint",
    "episodes_record",
    "fingerprint_differences",
    "model_config_record",
    "read_fingerprint",
    "run_fingerprint",
]

FINGERPRINT_FILE = "run_fingerprint.json"
FINGERPRINT_SCHEMA = "humanclaw_run_fingerprint_v1"

DEFAULT_METRIC_RULES = "paper"

# Settings a fingerprint written before the field existed is taken to have had.
_DEFAULTS: dict[str, Any] = {
    "task": {"id": "find_nav_interact", "version": 1},
    "metric_rules": DEFAULT_METRIC_RULES,
    "instruction_template": None,
    "body_asset": None,
    "profile": None,
    "motion_weights": None,
}

# Words of a field name that mark a credential; ``*_env`` fields only name a variable.
_SECRET_WORDS = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "key",
        "passphrase",
        "password",
        "passwd",
        "secret",
        "token",
    }
)
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_SHOWN_CHARS = 60


class RunFingerprintError(ValueError):
    """A run directory holds results of other settings (or cannot be checked).

    Attributes:
        fields: the differing setting names (dotted for nested ones, e.g.
            ``backend.motion``); empty when the directory has no usable fingerprint.
    """

    def __init__(self, message: str, fields: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


# ----------------------------------------------------------------------------------------
# building
# ----------------------------------------------------------------------------------------
def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_sha256_or_none(path: str | os.PathLike[str] | None) -> str | None:
    if path is None:
        return None
    p = Path(path)
    return _sha256_file(p) if p.is_file() else None


def _is_secret_name(name: str) -> bool:
    words = [w for w in _WORD_SPLIT.split(name.lower()) if w]
    if words and words[-1] == "env":  # names an environment variable, holds no value
        return False
    return any(w in _SECRET_WORDS for w in words) or "apikey" in name.lower().replace("_", "")


def _strip_secrets(value: Any, where: str, withheld: list[str]) -> Any:
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if _is_secret_name(str(key)):
                withheld.append(path)
                continue
            out[str(key)] = _strip_secrets(item, path, withheld)
        return out
    if isinstance(value, list):
        return [_strip_secrets(item, f"{where}[{i}]", withheld) for i, item in enumerate(value)]
    return value


def model_config_record(path: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The model config as recorded in a fingerprint, never holding a secret.

    The JSON object is kept except for fields whose name marks a credential (``api_key``,
    ``token``, ``secret``, ``password``, ``authorization``, ... at any depth, e.g. inside
    ``extra_body`` or headers): those are dropped and listed in ``withheld``. Fields
    ending in ``_env`` name an environment variable and are kept; for those whose name is
    not a credential's (``model_env``, ``azure_endpoint_env``, ...) the variable's value
    now is recorded under ``resolved_env``, since it changes what the agent calls. A file
    that is not a JSON object is recorded by its SHA-256 only.

    Returns:
        None without a model config.
    """
    if path is None:
        return None
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        return {"unreadable": f"{type(exc).__name__}: {exc.strerror or exc}"}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        data = None
    if not isinstance(data, Mapping):
        return {"not_json_object_sha256": hashlib.sha256(raw).hexdigest()}
    withheld: list[str] = []
    config = _strip_secrets(data, "", withheld)
    resolved = {}
    for key, value in data.items():
        if str(key).endswith("_env") and not _is_secret_name(str(key)[: -len("_env")]):
            if isinstance(value, str) and value:
                resolved[value] = os.environ.get(value)
    return {"config": config, "withheld": sorted(withheld), "resolved_env": resolved}


def episodes_record(selection: str | None, keys: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """The ``episodes`` setting: the selection's name and the SHA-256 of its episode list.

    Args:
        selection: the ``--episodes`` value (or a name for another source, such as a
            server's plan); None for a list given in code.
        keys: ``(split, scene_id, episode_id)`` of every selected episode, in order,
            before any ``--limit``.
    """
    text = "\n".join("/".join(k) for k in keys)
    return {"selection": selection, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def _motion_weights_record(backend: Any) -> dict[str, Any] | None:
    """The motion generator's own description of the weights it would load (its
    ``weights_record(**motion_options)``, e.g. the paper motion's manifest SHA-256, device
    and dtype), or None for a generator without one."""
    from humanclaw_gym.backends import registry

    describe = getattr(registry.entry("motion", backend.motion).load(), "weights_record", None)
    return None if describe is None else describe(**dict(backend.motion_options))


def _body_asset_record(path: str | None) -> dict[str, Any] | None:
    """The identity of a body folder (name, path, SHA-256 over its files), or None."""
    if path is None:
        return None
    from humanclaw_gym.body.asset import load_body_asset

    return load_body_asset(path).identity()


def _profile_record(profile: Any) -> dict[str, Any] | None:
    """A resolved profile's record (see :class:`humanclaw_gym.profiles.RunProfile`)."""
    return None if profile is None else dict(profile.record)


def run_fingerprint(config: Any, episodes: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint record of a run (see the module docstring).

    Args:
        config: the :class:`~humanclaw_gym.evaluation.batch.RunConfig`.
        episodes: from :func:`episodes_record`.

    Returns:
        ``{"schema", "settings", "settings_sha256", "written_unix_s"}``.
    """
    from humanclaw_gym import __version__
    from humanclaw_gym.episodes.instructions import instruction_template_record
    from humanclaw_gym.tasks import DEFAULT_TASK, resolve_task

    agent = str(config.agent)
    checkpoint = agent[len("checkpoint:") :] if agent.startswith("checkpoint:") else None
    backend = config.backend
    settings = {
        "task": resolve_task(getattr(config, "task", DEFAULT_TASK)).spec.record(),
        "agent": agent,
        "agent_checkpoint_sha256": _file_sha256_or_none(checkpoint),
        "model_config": model_config_record(config.model_config),
        "seed": int(config.seed),
        "max_steps": None if config.max_steps is None else int(config.max_steps),
        "episodes": dict(episodes),
        "backend": backend.to_dict(),
        "motion_checkpoint_sha256": _file_sha256_or_none(backend.motion_checkpoint),
        "motion_weights": _motion_weights_record(backend),
        "body_asset": _body_asset_record(getattr(backend, "body_asset", None)),
        "profile": _profile_record(getattr(config, "profile", None)),
        "metric_rules": getattr(config, "metric_rules", None) or DEFAULT_METRIC_RULES,
        "instruction_template": instruction_template_record(
            getattr(config, "instruction_template", None)
        ),
        "via_server": bool(config.via_server),
        "humanclaw_gym_version": __version__,
    }
    settings = json.loads(json.dumps(settings, sort_keys=True, default=str))
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return {
        "schema": FINGERPRINT_SCHEMA,
        "settings": settings,
        "settings_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "written_unix_s": time.time(),
    }


# ----------------------------------------------------------------------------------------
# checking
# ----------------------------------------------------------------------------------------
def read_fingerprint(output: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The fingerprint recorded in ``output``, or None when there is none.

    Raises:
        RunFingerprintError: the file exists but is not a fingerprint.
    """
    path = Path(output) / FINGERPRINT_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise RunFingerprintError(f"{path} cannot be read as JSON: {exc}") from None
    if (
        not isinstance(data, dict)
        or data.get("schema") != FINGERPRINT_SCHEMA
        or not isinstance(data.get("settings"), dict)
    ):
        raise RunFingerprintError(
            f"{path} is not a {FINGERPRINT_SCHEMA} record (schema and settings required)"
        )
    return data


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _diff(recorded: Any, current: Any, where: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(recorded, dict) and isinstance(current, dict):
        for key in sorted(set(recorded) | set(current)):
            missing = object()
            a, b = recorded.get(key, missing), current.get(key, missing)
            path = f"{where}.{key}"
            if a is missing or b is missing:
                out.append((path, None if a is missing else a, None if b is missing else b))
            else:
                _diff(a, b, path, out)
    elif recorded != current:
        out.append((where, recorded, current))


def fingerprint_differences(
    recorded: Mapping[str, Any], current: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """``(field, recorded value, current value)`` of every setting that differs.

    Nested settings (``backend``, ``model_config``, ``episodes``) are compared field by
    field and named with dots; a setting missing from an older record takes its default
    (``metric_rules``: ``"paper"``).
    """
    old = {**_DEFAULTS, **dict(recorded.get("settings", {}))}
    new = dict(current.get("settings", {}))
    out: list[tuple[str, Any, Any]] = []
    for key in sorted(set(old) | set(new)):
        if key not in old or key not in new:
            out.append((key, old.get(key), new.get(key)))
        else:
            _diff(old[key], new[key], key, out)
    return out


def _has_results(output: Path) -> bool:
    return output.is_dir() and any(output.glob("*/rollout_*/episode_result.json"))


def check_fingerprint(
    output: str | os.PathLike[str],
    fingerprint: Mapping[str, Any],
    *,
    resume: bool,
    write: bool = True,
) -> None:
    """Refuse to mix settings in one run directory; record the fingerprint if new.

    * no fingerprint yet: written (atomically), unless ``resume`` is asked for a directory
      that already holds episode results (made before fingerprints existed: they cannot be
      checked, so they are not reused);
    * a fingerprint with the same settings: kept as it is;
    * different settings: refused, with or without ``resume`` (the directory's results
      would mix two settings), listing every differing field.

    ``write=False`` only checks (a run calls it once before anything is written, and again
    with ``write=True`` once it holds the output directory's lock).

    Raises:
        RunFingerprintError: differing settings (``fields`` names them), an unreadable
            fingerprint, or a resume of unverifiable results. Nothing has been written.
    """
    output = Path(output)
    recorded = read_fingerprint(output)
    path = output / FINGERPRINT_FILE
    if recorded is None:
        if resume and _has_results(output):
            raise RunFingerprintError(
                f"--resume refused: {output} holds episode results but no {FINGERPRINT_FILE}, "
                "so the settings they were made with cannot be checked; run into a fresh "
                "--output directory"
            )
        if write:
            write_json_record(path, dict(fingerprint))
        return
    differences = fingerprint_differences(recorded, fingerprint)
    if not differences:
        return
    listed = "; ".join(f"{k}: recorded {_shown(a)}, now {_shown(b)}" for k, a, b in differences)
    what = "--resume refused" if resume else "refused"
    raise RunFingerprintError(
        f"{what}: {output} holds results made with other settings (recorded in {path}); "
        f"{len(differences)} differing field(s): {listed}. Use a fresh --output directory, "
        "or the recorded settings to continue this run",
        [k for k, _, _ in differences],
    )
