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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.evaluation.episode import EpisodeSpec, run_episode, write_json_atomic
from humanclaw_gym.server.client import PrivilegedPolicyError, RemoteEpisode, ServerClient

__all__ = [
    "FINISH_FILE",
    "RemoteRun",
    "check_policy_allowed",
    "run_remote_episode",
    "run_via_server",
    "server_plan_specs",
]

FINISH_FILE = "server_finish.json"


def run_via_server(url: str, policy: Any, spec: Any, out_dir: str | os.PathLike[str]) -> Any:
    """Run ``policy`` on the server's next plan episode and save its outputs in ``out_dir``.

    Args:
        url: the server URL, ``http://127.0.0.1:PORT`` (``/rpc`` optional).
        policy: any Policy; privileged ones (``requires_privileged = True``) are refused.
        spec: the :class:`~humanclaw_gym.evaluation.episode.EpisodeSpec` expected next on the
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
    plan = ServerClient(url).describe()["plan"]
    return [
        EpisodeSpec(str(plan["split"]), e["scene_id"], e["episode_id"], e["target_category"])
        for e in plan["episodes"]
        if not pending_only or e["status"] == "pending"
    ]


class _CountingPolicy:
    """Forwards to a policy and counts ``act`` calls (including ones that raise)."""

    requires_privileged = False

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.calls = 0

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        self.policy.reset(episode_info)

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Any:
        self.calls += 1
        return self.policy.act(observation, info)


@dataclass
class RemoteRun:
    """Outcome of :func:`run_remote_episode`."""

    result: Any  # EpisodeResult
    finish: dict[str, Any] | None
    output_dir: Path | None
    downloaded: list[Path] = field(default_factory=list)


def check_policy_allowed(policy: Any) -> None:
    """Raise :class:`PrivilegedPolicyError` for policies with ``requires_privileged = True``."""
    if getattr(policy, "requires_privileged", False):
        raise PrivilegedPolicyError(
            f"{type(policy).__name__} needs privileged simulator state (requires_privileged=True); "
            "the benchmark server never serves hidden state, so this policy can only run "
            "in-process (humanclaw run without --via-server)"
        )


def run_remote_episode(
    client: ServerClient,
    policy: Any,
    *,
    episode_id: str | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    output_root: str | os.PathLike[str] | None = None,
    download: bool = True,
) -> RemoteRun:
    """Run ``policy`` on the server's next plan episode through :func:`run_episode`.

    Args:
        client: the server client.
        policy: any Policy (``reset`` / ``act``); privileged policies are refused before
            anything is claimed.
        episode_id: assert that the next plan episode is this one (``plan_mismatch``
            otherwise, nothing claimed).
        output_dir: the local directory of this episode (policy logs,
            ``episode_result.json``, ``server_finish.json``, downloaded artifacts).
        output_root: alternatively, a root under which the server's artifact directory
            name is used.
        download: fetch the frozen artifacts (replay bundle, metrics.json, server record).

    Returns:
        A :class:`RemoteRun`. The episode is always finished on the server, also when the
        policy fails (then as abandoned, with the error text as reason).

    Raises:
        PrivilegedPolicyError: the policy needs hidden state.
        ServerError / ServerConnectionError: the server refused or did not answer
            ``open`` / ``reset`` (after a failed reset the episode is finished first).
    """
    check_policy_allowed(policy)
    if output_dir is not None and output_root is not None:
        raise ValueError("give output_dir or output_root, not both")
    counting = _CountingPolicy(policy)
    episode = RemoteEpisode(client, client_counts=lambda: {"decision_calls": counting.calls})
    opened = episode.open(episode_id)
    out: Path | None = None
    if output_dir is not None:
        out = Path(output_dir)
    elif output_root is not None:
        out = Path(output_root) / str(opened["artifact_dir"])
    result = None
    failure: BaseException | None = None
    try:
        result = run_episode(episode, counting, output_dir=out, raise_errors=False)
    except BaseException as exc:  # reset refused / connection lost: still close the claim
        failure = exc
        raise
    finally:
        if episode.active:
            reason = None
            if result is not None and result.error:
                reason = result.error
            elif failure is not None:
                reason = f"{type(failure).__name__}: {failure}"
            try:
                episode.finish(reason or "the episode loop ended without a terminal step")
            except Exception:
                if failure is None:
                    raise
    run = RemoteRun(result=result, finish=episode.finish_result, output_dir=out)
    if out is not None and episode.finish_result is not None:
        write_json_atomic(out / FINISH_FILE, episode.finish_result)
        if download:
            run.downloaded = client.download_artifacts(episode.finish_result["artifacts"], out)
    if result is not None and episode.finish_result is not None and result.metrics is None:
        result.metrics = episode.finish_result.get("metrics")
    return run
