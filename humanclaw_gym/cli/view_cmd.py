"""``humanclaw view``: the browser debug viewer (viser) on 127.0.0.1.

Serves one live episode at a time: the 3-D scene, the humanoid's realized pose, dynamic
objects, the ego image, the instruction, the last skill and the step count, with pause /
resume, single step, reset and choose-skill controls. Needs the ``viewer`` extra
(``pip install 'humanclaw-gym[viewer]'``). See ``docs/viewer.md``.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass, field
from typing import Annotated, Any

import tyro

from humanclaw_gym.cli.backend_args import BackendArgs, Flattened

__all__ = ["ViewArgs", "main", "view"]


@dataclass
class ViewArgs:
    """Serve a live HumanClaw episode in the browser (debug viewer, loopback only).

    The page is served on http://127.0.0.1:PORT/ (reach it from another machine with
    ssh -L PORT:127.0.0.1:PORT). Ctrl+C stops the viewer and closes the environment.
    """

    port: int = 8080
    """TCP port on 127.0.0.1 (0: any free port; a taken port moves on to the next free one)"""
    episode_id: str | None = None
    """play only this episode (every reset replays it); default: the whole split in order"""
    split: str = "val100"
    """val100 | val | a split directory | a .json list of episode ids"""
    agent: str = "oracle"
    """oracle (privileged planner) | random | manual (skills chosen in the page) | module:Class"""
    duration_s: float | None = None
    """stop after this many seconds (default: run until Ctrl+C)"""
    fps: float = 2.0
    """maximum decision steps per second while running (2 = real time)"""
    paused: bool = False
    """start paused (single step and chosen skills still work)"""
    seed: int = 0
    """seed of the first reset and of seeded agents (random)"""
    max_steps: int | None = None
    """override the episode step limit (default 100)"""
    host: str = "127.0.0.1"
    """bind address; only 127.0.0.1 / localhost are accepted"""
    backend: Annotated[BackendArgs, Flattened] = field(default_factory=BackendArgs)
    """simulator backends"""


def _fail(message: str) -> int:
    print(f"humanclaw view: error: {message}", file=sys.stderr)
    return 2


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def view(args: ViewArgs) -> int:
    """Run the viewer until Ctrl+C / SIGTERM / ``--duration-s``; returns the exit code."""
    from humanclaw_gym.viewer.debug_viewer import ViewerUnavailableError, check_host
    from humanclaw_gym.viewer.loop import run_viewer

    try:
        check_host(args.host)
    except ValueError as exc:
        return _fail(str(exc))
    if not 0 <= args.port <= 65535:
        return _fail(f"--port {args.port} is invalid: allowed 0..65535")
    if not args.fps > 0:
        return _fail(f"--fps {args.fps} is invalid: allowed > 0")
    if args.duration_s is not None and not args.duration_s > 0:
        return _fail(f"--duration-s {args.duration_s} is invalid: allowed > 0")
    if args.max_steps is not None and args.max_steps < 1:
        return _fail(f"--max-steps {args.max_steps} is invalid: allowed >= 1")

    try:
        backend = args.backend.to_config().check()
    except (ValueError, FileNotFoundError) as exc:
        return _fail(str(exc))
    env_kwargs: dict[str, Any] = {"split": args.split, "backend": backend}
    if args.episode_id is not None:
        env_kwargs["episode_ids"] = [args.episode_id]
    if args.max_steps is not None:
        env_kwargs["max_steps"] = args.max_steps

    def announce(viewer: Any) -> None:
        state = viewer.state()
        print(
            f"humanclaw view: serving {viewer.url} (agent={state.agent}); Ctrl+C to stop",
            file=sys.stderr,
            flush=True,
        )

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        final = run_viewer(
            env_kwargs,
            port=args.port,
            policy=args.agent,
            fps=args.fps,
            duration_s=args.duration_s,
            host=args.host,
            paused=args.paused,
            seed=args.seed,
            on_ready=announce,
        )
    except ViewerUnavailableError as exc:
        return _fail(str(exc))
    except (ValueError, PermissionError, FileNotFoundError) as exc:
        return _fail(str(exc))
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(
        f"humanclaw view: stopped after {final.total_steps} step(s) in"
        f" {final.episodes_started} episode(s)",
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanclaw view``."""
    args = tyro.cli(ViewArgs, args=argv, prog="humanclaw view")
    return view(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
