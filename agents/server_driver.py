"""The trusted driver: runs any Policy against a HumanClaw benchmark server.

The driver is the only model-side process that holds the server token. It claims the
server's plan episodes one by one, gives the policy nothing but the public observation
(the ego image as a ``uint8 (448, 448, 3)`` array and the declared info fields), sends
each Decision's action text, ``visible_state`` and usage records, and saves what the
server returns (finish record, scorer result, verified artifacts). The policy itself never
sees the token, the server URL's other methods or any scorer value.

PSV, random and custom policies run unchanged; policies that need hidden simulator state
(``requires_privileged = True``, e.g. the oracle) are refused with
:class:`~humanclaw_gym.server.client.PrivilegedPolicyError` before anything is claimed.

Command line::

    export HUMANCLAW_SERVER_TOKEN=...            # same token as the server
    python -m humanclaw_agents.server_driver --url http://127.0.0.1:8765 \\
        --agent random --output runs/driver --max-episodes 5
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from humanclaw_gym.evaluation.episode import write_json_atomic
from humanclaw_gym.evaluation.remote import RemoteRun, check_policy_allowed, run_remote_episode
from humanclaw_gym.server.client import PrivilegedPolicyError, ServerClient, ServerError

__all__ = ["DriverArgs", "PrivilegedPolicyError", "ServerDriver", "main"]

SUMMARY_FILE = "driver_summary.json"


class ServerDriver:
    """Runs policies through one benchmark server.

    Args:
        url: ``http://127.0.0.1:PORT`` of a ``humanclaw serve`` process.
        token: bearer token (default: ``HUMANCLAW_SERVER_TOKEN``).
        timeout_s: socket timeout of one call.
    """

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 300.0) -> None:
        self.client = ServerClient(url, token=token, timeout_s=timeout_s)

    def __repr__(self) -> str:
        return f"ServerDriver(url={self.client.url!r})"

    def describe(self) -> dict[str, Any]:
        """The server's protocol, specs, budgets and plan status."""
        return self.client.describe()

    def run_episode(
        self,
        policy: Any,
        *,
        output_root: str | Path | None = None,
        episode_id: str | None = None,
        download: bool = True,
    ) -> RemoteRun:
        """Claim the server's next plan episode and run ``policy`` on it.

        Args:
            policy: any Policy.
            output_root: local root; the episode goes to ``output_root/<artifact_dir>``.
            episode_id: assert the id of the next plan episode.
            download: fetch the frozen artifacts into the episode directory.

        Raises:
            PrivilegedPolicyError: the policy needs hidden state (nothing is claimed).
        """
        return run_remote_episode(
            self.client, policy, episode_id=episode_id, output_root=output_root, download=download
        )

    def run_plan(
        self,
        policy: Any,
        output_root: str | Path,
        *,
        max_episodes: int | None = None,
        download: bool = True,
    ) -> list[RemoteRun]:
        """Run ``policy`` on the server's pending plan episodes in order until the plan is
        exhausted (or ``max_episodes`` were run), then write ``driver_summary.json``.

        Each episode is attempted once; a failed episode stays failed (no re-run).
        """
        check_policy_allowed(policy)
        if max_episodes is not None and max_episodes < 1:
            raise ValueError(f"max_episodes={max_episodes!r} is invalid: allowed None or >= 1")
        runs: list[RemoteRun] = []
        root = Path(output_root)
        while max_episodes is None or len(runs) < max_episodes:
            try:
                runs.append(self.run_episode(policy, output_root=root, download=download))
            except ServerError as exc:
                if exc.name == "plan_exhausted":
                    break
                raise
        write_json_atomic(root / SUMMARY_FILE, summarize(runs))
        return runs


def summarize(runs: list[RemoteRun]) -> dict[str, Any]:
    """A JSON-ready summary of driver runs (per episode: ids, ending, steps, counts)."""
    episodes = []
    for run in runs:
        fin = run.finish or {}
        res = run.result
        episodes.append(
            {
                "episode_id": fin.get("episode_id", getattr(res, "episode_id", None)),
                "scene_id": fin.get("scene_id", getattr(res, "scene_id", None)),
                "ended_by": fin.get("ended_by"),
                "steps": fin.get("steps"),
                "driver_error": getattr(res, "error", None),
                "counts": fin.get("counts"),
                "counts_unknown": fin.get("counts_unknown"),
                "output_dir": None if run.output_dir is None else str(run.output_dir),
            }
        )
    return {"schema": "humanclaw_driver_summary_v1", "episodes": episodes}


@dataclass
class DriverArgs:
    """Run a policy through a HumanClaw benchmark server (token from HUMANCLAW_SERVER_TOKEN)."""

    url: str
    """server URL, e.g. http://127.0.0.1:8765"""
    output: Path
    """local output root (one directory per episode)"""
    agent: str = "random"
    """psv | psv:v1 | random | module:Class | checkpoint:PATH (privileged agents are refused)"""
    model_config: Path | None = None
    """JSON model config for VLM agents (psv)"""
    seed: int = 0
    """seed for stochastic policies"""
    max_episodes: int | None = None
    """stop after this many episodes (default: the whole plan)"""
    no_download: bool = False
    """do not fetch the server's artifacts"""


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    import tyro

    from humanclaw_gym.evaluation.policies import load_policy

    args = tyro.cli(DriverArgs, args=argv, prog="python -m humanclaw_agents.server_driver")
    try:
        driver = ServerDriver(args.url)
        policy = load_policy(
            args.agent,
            model_config=None if args.model_config is None else str(args.model_config),
            seed=args.seed,
        )
        runs = driver.run_plan(
            policy, args.output, max_episodes=args.max_episodes, download=not args.no_download
        )
    except (PrivilegedPolicyError, ServerError, ValueError, ConnectionError) as exc:
        print(f"server_driver: error: {exc}", file=sys.stderr)
        return 2
    failed = sum(1 for r in runs if (r.finish or {}).get("ended_by") not in ("stop", "truncated"))
    print(
        f"server_driver: {len(runs)} episode(s), {failed} without a score; output in {args.output}"
    )
    return 0 if failed == 0 else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
