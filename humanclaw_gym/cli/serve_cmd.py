"""``humanclaw serve``: the authenticated JSON-RPC benchmark server on loopback.

Starting the server declares the episode plan and binds the port; it builds no
environment, runs no physics and calls no model (that happens on the first ``open``).
The bearer token comes from ``HUMANCLAW_SERVER_TOKEN`` only (never a flag, never logged).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from humanclaw_gym.cli.backend_args import BackendArgs, Flattened

__all__ = ["ServeArgs", "main", "serve"]


@dataclass
class ServeArgs:
    """Serve a fixed episode plan over JSON-RPC 2.0 (POST /rpc) on 127.0.0.1.

    The token is read from HUMANCLAW_SERVER_TOKEN (32-256 URL-safe characters). Each run
    needs a fresh --output-dir; artifacts go to OUTPUT_DIR/<scene>_ep<id>_<category>/.
    """

    output_dir: Path
    """where the plan, claim ledger and per-episode artifacts go (must be new or empty)"""
    port: int = 8765
    """TCP port; 0 picks a free one (see --ready-file)"""
    episodes: str = "val100"
    """one | val100 | val | a split directory | a .json list of episode ids"""
    seed: int = 0
    """seed of the plan order (scenes shuffled, episodes of a scene kept together)"""
    limit: int | None = None
    """declare only the first N episodes of the seeded order"""
    max_steps: int | None = None
    """step-limit override for smoke tests (default: each episode's own, 100)"""
    host: str = "127.0.0.1"
    """bind address; only 127.0.0.1 / localhost are accepted"""
    ready_file: Path | None = None
    """write {url, port, pid, ...} as JSON here once the server listens"""
    backend: Annotated[BackendArgs, Flattened] = field(default_factory=BackendArgs)
    """simulator backends"""
    log_level: Literal["debug", "info", "warning"] = "info"
    """log verbosity (logs go to stderr; never tokens, bodies or images)"""


def _fail(message: str) -> int:
    print(f"humanclaw serve: error: {message}", file=sys.stderr)
    return 2


def _check_scenes(plan: Any, backend: Any) -> None:
    from humanclaw_gym.episodes.io import check_scenes_installed

    dataset = None
    if backend.scene_dataset is not None:
        from humanclaw_gym.scenes.hssd import open_scene_dataset

        dataset = open_scene_dataset(backend.scene_dataset)
    check_scenes_installed(plan.episodes or (), dataset)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def serve(args: ServeArgs) -> int:
    """Run the server until SIGINT/SIGTERM; returns the exit code."""
    from humanclaw_gym.fileio import write_json_record
    from humanclaw_gym.server.plan import EpisodePlan
    from humanclaw_gym.server.protocol import WIRE_PROTOCOL, benchmark_protocol
    from humanclaw_gym.server.service import BenchService
    from humanclaw_gym.server.transport import (
        TokenError,
        check_bind_host,
        make_server,
        token_from_env,
    )

    try:
        check_bind_host(args.host)
    except ValueError as exc:
        return _fail(str(exc))
    if not 0 <= args.port <= 65535:
        return _fail(f"--port {args.port} is invalid: allowed 0..65535")
    if args.max_steps is not None and args.max_steps < 1:
        return _fail(f"--max-steps {args.max_steps} is invalid: allowed >= 1")
    try:
        token = token_from_env()
    except TokenError as exc:
        return _fail(str(exc))
    try:
        backend = args.backend.to_config().check()
    except (ValueError, FileNotFoundError) as exc:
        return _fail(str(exc))
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        plan = EpisodePlan.from_selection(
            args.episodes, args.seed, args.output_dir, limit=args.limit, declare=False
        )
    except (ValueError, FileExistsError, FileNotFoundError, KeyError) as exc:
        return _fail(str(exc))
    try:  # an unknown scene is refused now, not at the episode's reset
        _check_scenes(plan, backend)
    except (ValueError, KeyError) as exc:
        return _fail(exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc))
    service = BenchService(plan, backend=backend, max_steps=args.max_steps)
    try:
        server = make_server(service, token, host=args.host, port=args.port)
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    del token
    try:  # the port is ours: only now is anything written (a busy port leaves nothing)
        plan.declare()
    except OSError as exc:
        server.server_close()
        return _fail(str(exc))
    port = int(server.server_address[1])
    url = f"http://127.0.0.1:{port}/rpc"
    if args.ready_file is not None:
        write_json_record(
            args.ready_file,
            {
                "url": url,
                "host": "127.0.0.1",
                "port": port,
                "pid": os.getpid(),
                "wire_protocol": WIRE_PROTOCOL,
                "benchmark_protocol": benchmark_protocol(),
                "plan_size": len(plan.entries),
                "plan_digest_sha256": plan.digest,
            },
        )
    print(
        f"humanclaw serve: listening on {url} ({len(plan.entries)} episodes planned)",
        file=sys.stderr,
        flush=True,
    )
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        print("humanclaw serve: shutting down", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
        service.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanclaw serve``."""
    args = tyro.cli(ServeArgs, args=argv, prog="humanclaw serve")
    return serve(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
