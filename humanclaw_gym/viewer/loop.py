"""``run_viewer``: build an env and a policy, serve them in a :class:`DebugViewer`, clean up.

This is what ``humanclaw view`` calls. The env is constructed here (cheaply: backends are
built on the first reset, which happens on the simulation thread), the policy is resolved
through the same ``--agent`` machinery as ``humanclaw run``, and the simulation loop runs
on the calling thread until Ctrl+C, ``duration_s`` or an error; the server and the env are
closed in every case.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from humanclaw_gym.viewer.control import ViewerState

__all__ = ["DEFAULT_AGENT", "resolve_viewer_policy", "run_viewer"]

#: What ``policy=None`` means: the privileged oracle, else the random policy.
DEFAULT_AGENT = "oracle"
_MANUAL = "manual"
_LOG = logging.getLogger("humanclaw_gym.viewer")


def resolve_viewer_policy(
    policy: Any, env_kwargs: Mapping[str, Any], seed: int | None = None
) -> tuple[Any, str, dict[str, Any]]:
    """Choose the viewer's policy and the env arguments it needs.

    Args:
        policy: ``None`` (the oracle with ``privileged=True``; the random policy when the
            oracle cannot be loaded or ``env_kwargs`` sets ``privileged=False``),
            ``"manual"`` (no policy: skills chosen in the GUI only), an ``--agent`` string
            (``"oracle"``, ``"random"``, any registered name, ``module:Class``), or a
            policy object.
        env_kwargs: keyword arguments for ``FindNavInteractEnv``.
        seed: seed offered to policy factories that take one.

    Returns:
        ``(policy or None, agent name, env kwargs)``; ``privileged=True`` is added when the
        policy requires it.

    Raises:
        ValueError: a privileged policy was asked for with ``privileged=False``, or the
            agent string names nothing loadable.
    """
    from humanclaw_gym.evaluation.policies import PolicySpecError, load_policy

    kwargs = dict(env_kwargs)
    if policy is None:
        if kwargs.get("privileged", True) is not False:
            try:
                return resolve_viewer_policy(DEFAULT_AGENT, kwargs, seed)
            except (PolicySpecError, ImportError) as exc:
                _LOG.warning("oracle unavailable (%s); the viewer falls back to random", exc)
        try:
            return resolve_viewer_policy("random", kwargs, seed)
        except (PolicySpecError, ImportError) as exc:
            _LOG.warning("random policy unavailable (%s); manual control only", exc)
            return None, _MANUAL, kwargs
    if isinstance(policy, str):
        name = policy.strip()
        if name == _MANUAL:
            return None, _MANUAL, kwargs
        try:
            obj = load_policy(name, seed=0 if seed is None else int(seed))
        except PolicySpecError as exc:
            raise ValueError(f"agent={name!r} cannot be used: {exc}") from exc
    else:
        obj, name = policy, type(policy).__name__
    if getattr(obj, "requires_privileged", False):
        if kwargs.get("privileged", True) is False:
            raise ValueError(
                f"agent {name!r} needs privileged state but env_kwargs sets privileged=False"
            )
        kwargs["privileged"] = True
    return obj, name, kwargs


def run_viewer(
    env_kwargs: Mapping[str, Any] | None = None,
    port: int = 8080,
    policy: Any = None,
    fps: float = 2.0,
    duration_s: float | None = None,
    *,
    host: str = "127.0.0.1",
    paused: bool = False,
    episode_id: str | None = None,
    seed: int | None = None,
    on_ready: Callable[[Any], None] | None = None,
) -> ViewerState:
    """Serve a live episode in the browser until Ctrl+C, ``duration_s`` or an error.

    Args:
        env_kwargs: keyword arguments for ``FindNavInteractEnv`` (e.g. ``split``,
            ``episode_ids``, ``renderer``).
        port: TCP port on 127.0.0.1 (0: any free port).
        policy: see :func:`resolve_viewer_policy` (default: the oracle, else random).
        fps: maximum decision steps per second while running.
        duration_s: stop after this many seconds (``None``: run until Ctrl+C).
        host: ``"127.0.0.1"`` or ``"localhost"``; anything else is refused.
        paused: start paused.
        episode_id: the first episode (default: the env's first one).
        seed: seed of the first ``env.reset`` and of seeded policies.
        on_ready: called with the :class:`DebugViewer` once the page is served and before
            the loop starts (e.g. to print the URL, or to drive it from another thread).

    Returns:
        The final state. Ctrl+C ends the run normally; other errors propagate after the
        server and the env have been closed.
    """
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
    from humanclaw_gym.viewer.debug_viewer import DebugViewer, check_host

    check_host(host)
    chosen, agent, kwargs = resolve_viewer_policy(policy, env_kwargs or {}, seed)
    env = FindNavInteractEnv(**kwargs)
    try:
        viewer = DebugViewer(
            env,
            chosen,
            agent_name=agent,
            host=host,
            port=port,
            fps=fps,
            paused=paused,
            episode_id=episode_id,
            seed=seed,
            close_env=True,
        )
    except BaseException:
        env.close()
        raise
    try:
        if on_ready is not None:
            on_ready(viewer)
        viewer.run(duration_s)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.close()
    return viewer.state()
