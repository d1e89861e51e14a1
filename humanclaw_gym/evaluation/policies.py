"""Resolve ``--agent`` strings to Policy objects without importing any agent package statically.

Accepted forms:

* ``NAME``: an agent registered in :mod:`humanclaw_gym.registry` (kind ``"agent"``): in
  code with ``register_agent(name, cls)`` (or ``@register_agent(name)`` above the class),
  or by an installed package's entry point in the group ``humanclaw_gym.policies``
  (``humanclaw_agents`` registers ``psv``, ``oracle``, ``random`` and ``checkpoint`` so;
  third-party packages plug in the same way);
* ``module.path:ClassName``: any importable class or factory; the module is looked up in
  the current working directory first (as ``python -m`` does), so
  ``--agent scripts.custom_planner:BrightnessPlanner`` works from the repository root;
* ``checkpoint:PATH``: the ``checkpoint`` entry point called with ``checkpoint=PATH``;
* ``NAME:VARIANT``: a registered policy whose factory takes ``variant`` (``psv:v1``), called
  with ``variant=VARIANT``. A registered name before the colon wins over a module of the
  same name; a policy without variants is refused.

The factory is called with whichever of ``model_config``, ``seed`` and ``checkpoint`` its
signature accepts, so simple policies need no boilerplate. :func:`check_policy_spec`
resolves a spec without building the policy: batch runs call it once, before any episode,
so a policy that cannot be imported fails once with one clear message.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from humanclaw_gym import registry
from humanclaw_gym.registry import register_agent

__all__ = [
    "PolicySpecError",
    "available_policies",
    "check_policy_spec",
    "load_policy",
    "register_agent",
    "resolve_policy_factory",
]

#: The entry-point group installed packages register agents in.
GROUP = registry.ENTRY_POINT_GROUPS["agent"]


class PolicySpecError(ValueError):
    """An ``--agent`` string does not name a loadable policy."""


def available_policies() -> dict[str, str]:
    """Registered agent names -> where they come from (``module:attr``), in code and by
    entry points alike."""
    return {name: entry.where for name, entry in registry.entries("agent").items()}


def resolve_policy_factory(spec: str) -> tuple[Any, dict[str, Any]]:
    """Return ``(factory, extra_kwargs)`` for an ``--agent`` string."""
    if not isinstance(spec, str) or not spec.strip():
        raise PolicySpecError("agent must be a non-empty string")
    spec = spec.strip()
    extra: dict[str, Any] = {}
    name = spec
    if spec.startswith("checkpoint:"):
        path = spec[len("checkpoint:") :]
        if not path:
            raise PolicySpecError("agent 'checkpoint:PATH' needs a path")
        extra["checkpoint"] = Path(path)
        name = "checkpoint"
    elif ":" in spec and spec.partition(":")[0] in available_policies():
        name, _, variant = spec.partition(":")
        if not variant:
            raise PolicySpecError(f"agent {spec!r} names no variant after ':'")
        extra["variant"] = variant
    elif ":" in spec:
        module_name, _, attr = spec.partition(":")
        _current_directory_first()
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise PolicySpecError(
                f"cannot import policy module {module_name!r}: {exc} (looked in the current "
                f"directory {os.getcwd()} first, then the installed packages)"
            ) from exc
        try:
            return getattr(module, attr), extra
        except AttributeError:
            raise PolicySpecError(f"module {module_name!r} has no attribute {attr!r}") from None
    known = available_policies()
    if name not in known:
        listed = (
            ", ".join(sorted(known)) or "none (is humanclaw-gym installed with pip install -e .?)"
        )
        raise PolicySpecError(f"unknown agent {name!r}; registered: {listed}; or use module:Class")
    try:
        return registry.load("agent", name), extra
    except registry.RegistryError as exc:
        raise PolicySpecError(f"agent {name!r} cannot be loaded: {exc}") from exc


def _current_directory_first() -> None:
    """Put the current working directory at the front of ``sys.path`` (once), as
    ``python -m`` does; console scripts start with their own bin directory there."""
    cwd = os.getcwd()
    entries = [os.path.abspath(p) if p else cwd for p in sys.path]
    if entries and entries[0] == cwd:
        return
    if cwd in entries:
        sys.path.pop(entries.index(cwd))
    sys.path.insert(0, cwd)


def check_policy_spec(spec: str) -> None:
    """Resolve an ``--agent`` string (import its module or entry point) without building
    the policy.

    Raises:
        PolicySpecError: the spec names nothing loadable, with the reason.
    """
    resolve_policy_factory(spec)


def load_policy(
    spec: str, *, model_config: str | Path | None = None, seed: int = 0, **kwargs: Any
) -> Any:
    """Build the policy an ``--agent`` string names (see module docstring)."""
    factory, extra = resolve_policy_factory(spec)
    offered: dict[str, Any] = {"model_config": model_config, "seed": seed, **extra, **kwargs}
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if "variant" in extra and "variant" not in params and not takes_var_kw:
        raise PolicySpecError(f"agent {spec!r}: {spec.partition(':')[0]!r} has no variants")
    call_kwargs = {
        k: v for k, v in offered.items() if (k in params or takes_var_kw) and v is not None
    }
    if (
        "model_config" in params
        and params["model_config"].default is inspect.Parameter.empty
        and model_config is None
    ):
        raise PolicySpecError(f"agent {spec!r} needs --model-config")
    return factory(**call_kwargs)
