"""Run one episode of a policy through a benchmark server (``humanclaw run --via-server``).

The server owns the simulator and the plan; this side only holds the token (from
``HUMANCLAW_SERVER_TOKEN``), runs the policy through the one episode loop
(:func:`humanclaw_gym.evaluation.run_episode` over a
:class:`~humanclaw_gym.server.client.RemoteEpisode`) and saves what the server returns.
It never imports ``humanclaw_agents``.

The server hands out episodes in its fixed plan order only. The episode requested here
must be the server's next one (else the server answers ``plan_mismatch`` and nothing is
claimed): list the episodes in the order of the server's plan, e.g. with
:func:`server_plan_specs`.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["run_via_server", "server_plan_specs"]


def run_via_server(url: str, policy: Any, spec: Any, out_dir: str | os.PathLike[str]) -> Any:
    """Run ``policy`` on the server's next plan episode and save its outputs in ``out_dir``.

    Args:
        url: the server URL, ``http://127.0.0.1:PORT`` (``/rpc`` optional).
        policy: any Policy; privileged ones (``requires_privileged = True``) are refused.
        spec: the :class:`~humanclaw_gym.evaluation.batch.EpisodeSpec` expected next on the
            server (``None``: take whatever is next).
        out_dir: local episode directory: policy logs, ``episode_result.json``,
            ``server_finish.json`` and the downloaded artifacts (replay bundle,
            ``metrics.json``, ``server_record.json``).

    Returns:
        The :class:`~humanclaw_gym.evaluation.EpisodeResult` (metrics from the server's
        scorer when the episode ended by Stop or the step limit).

    Raises:
        PrivilegedPolicyError: the policy needs hidden state.
        ServerError: e.g. ``plan_mismatch`` (the server's next episode is another one),
            ``plan_exhausted``, ``unauthorized``.
        ServerConnectionError: the server did not answer (outcome unknown).
    """
    from humanclaw_gym.server.client import ServerClient, run_remote_episode

    client = ServerClient(url)
    episode_id = None if spec is None else str(spec.episode_id)
    run = run_remote_episode(client, policy, episode_id=episode_id, output_dir=out_dir)
    return run.result


def server_plan_specs(url: str, pending_only: bool = True) -> list[Any]:
    """The server's plan as EpisodeSpecs, in plan order (pending entries only by default).

    Args:
        url: the server URL.
        pending_only: skip entries already claimed.
    """
    from humanclaw_gym.evaluation.batch import EpisodeSpec
    from humanclaw_gym.server.client import ServerClient

    plan = ServerClient(url).describe()["plan"]
    return [
        EpisodeSpec(str(plan["split"]), e["scene_id"], e["episode_id"], e["target_category"])
        for e in plan["episodes"]
        if not pending_only or e["status"] == "pending"
    ]
