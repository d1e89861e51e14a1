"""``humanclaw run`` (batch evaluation) and ``humanclaw rollout`` (one episode in-process)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import tyro

from humanclaw_gym.cli.backend_args import BackendArgs, Flattened, parse_options


@dataclass
class RunArgs:
    """Evaluate a policy on one episode, val100, the full val split or a custom list.

    Each episode runs in a worker process (``--workers``) through the one episode loop and
    writes its artifacts to ``OUTPUT/<scene>_ep<id>_<category>/rollout_00/``. ``--resume``
    skips episodes whose requested artifacts are complete and verified; a run whose
    settings (agent, model config, seed, max steps, episodes, backends, metric rules,
    version) differ from those recorded in ``OUTPUT/run_fingerprint.json`` is refused,
    naming the differing fields. With ``--metrics`` the paper table is printed at the end
    and ``metrics_summary.json`` is written.
    """

    episodes: str = "val100"
    """one | val100 | val | a split directory | a .json list of episode ids"""
    agent: str = "oracle"
    """psv | psv:v1 | oracle | random | module:Class | checkpoint:PATH"""
    output: Path = Path("outputs/run")
    """output directory"""
    model_config: Path | None = None
    """JSON model config for VLM agents (psv)"""
    metrics: bool = False
    """compute the paper metrics (metrics.json per episode + summary)"""
    metric_rules: Literal["paper", "strict"] = "paper"
    """metric rules: paper (the reference release's scoring) or strict (docs/metrics.md)"""
    video: bool = False
    """write ego.mp4 and exo.mp4 per episode"""
    workers: int = 1
    """worker processes (local executor) or episodes in flight (ray); may exceed the CPU
    count for agents that wait on a model endpoint (docs/scaling.md)"""
    resume: bool = False
    """skip episodes whose requested artifacts are complete and verified (same settings only)"""
    executor: Literal["local", "ray"] = "local"
    """run episodes in local processes or as Ray tasks"""
    ray_address: str | None = None
    """HOST:PORT of an existing Ray cluster (default: start a local one); no shared disk needed"""
    ray_task_resources: tuple[str, ...] = ()
    """what each Ray episode task asks for, NAME=AMOUNT (default CPU=1), e.g. CPU=0.25 or a
    custom resource of the nodes to run on"""
    seed: int = 0
    """seed for stochastic policies (random)"""
    backend: Annotated[BackendArgs, Flattened] = field(default_factory=BackendArgs)
    """simulator backends"""
    max_steps: int | None = None
    """override the episode step limit (default 100)"""
    limit: int | None = None
    """run only the first N selected episodes"""
    via_server: str | None = None
    """run through a benchmark server at this URL (token from HUMANCLAW_SERVER_TOKEN)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class RolloutArgs:
    """Run one episode in this process (smoke tests, debugging) and write its artifacts."""

    episode_id: str | None = None
    """episode id (default: the first episode of the split)"""
    split: str = "val100"
    """split the episode comes from"""
    agent: str = "oracle"
    """psv | psv:v1 | oracle | random | module:Class | checkpoint:PATH"""
    model_config: Path | None = None
    """JSON model config for VLM agents (psv)"""
    output: Path = Path("outputs/rollout")
    """output directory"""
    metrics: bool = True
    """compute metrics.json"""
    metric_rules: Literal["paper", "strict"] = "paper"
    """metric rules: paper (the reference release's scoring) or strict (docs/metrics.md)"""
    video: bool = False
    """write ego.mp4 and exo.mp4"""
    max_steps: int | None = None
    """step limit for smoke tests (default 100)"""
    seed: int = 0
    """seed for stochastic policies"""
    backend: Annotated[BackendArgs, Flattened] = field(default_factory=BackendArgs)
    """simulator backends"""


def parse_motion_options(items: tuple[str, ...]) -> tuple[tuple[str, object], ...]:
    """``("steps=10", "seat_guidance=false")`` -> ``(("steps", 10), ("seat_guidance", False))``
    (see :func:`humanclaw_gym.cli.backend_args.parse_options`)."""
    return parse_options(items)


def _config(args: RunArgs | RolloutArgs):
    from humanclaw_gym.evaluation.batch import RunConfig

    return RunConfig(
        agent=args.agent,
        output=str(args.output),
        model_config=None if args.model_config is None else str(args.model_config),
        metrics=args.metrics,
        metric_rules=args.metric_rules,
        video=args.video,
        seed=args.seed,
        max_steps=args.max_steps,
        via_server=getattr(args, "via_server", None),
        backend=args.backend.to_config(),
    )


def _checked_config(args: RunArgs | RolloutArgs, prog: str):
    """The RunConfig of ``args``, or None after printing why it would fail everywhere."""
    from humanclaw_gym.evaluation.batch import check_run_config

    try:
        config = _config(args)
        check_run_config(config)
    except (ValueError, FileNotFoundError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None
    return config


def run(args: RunArgs) -> int:
    from humanclaw_gym.evaluation.batch import list_episode_specs, run_batch
    from humanclaw_gym.evaluation.fingerprint import RunFingerprintError, episodes_record

    workers = args.workers
    if args.via_server:
        # The server owns the episode plan and runs one episode at a time.
        from humanclaw_gym.evaluation.remote import server_plan_specs
        from humanclaw_gym.server.client import ServerClient

        specs = server_plan_specs(args.via_server)
        plan = ServerClient(args.via_server).describe()["plan"]
        episodes = {"selection": "server plan", "sha256": plan["digest_sha256"]}
        if workers != 1:
            print(
                "humanclaw run: --via-server runs one episode at a time (workers=1)",
                file=sys.stderr,
            )
        workers = 1
    else:
        specs = list_episode_specs(args.episodes)
        episodes = episodes_record(
            args.episodes, ((s.split, s.scene_id, s.episode_id) for s in specs)
        )
    if args.limit is not None:
        specs = specs[: args.limit]
    config = _checked_config(args, "humanclaw run")
    if config is None:
        return 2
    from humanclaw_gym.evaluation.ray_executor import (
        RayAddressError,
        RayClusterError,
        parse_task_resources,
    )

    try:
        ray_resources = parse_task_resources(args.ray_task_resources)
    except ValueError as exc:
        print(f"humanclaw run: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"humanclaw run: {len(specs)} episode(s), agent={args.agent}, output={args.output}",
        flush=True,
    )
    from humanclaw_gym.metrics import MetricsFileError

    try:
        summary = run_batch(
            specs,
            config,
            workers=workers,
            resume=args.resume,
            executor=args.executor,
            ray_address=args.ray_address,
            progress=not args.quiet,
            episodes=episodes,
            ray_resources=ray_resources,
        )
    except (RunFingerprintError, RayAddressError, RayClusterError) as exc:
        print(f"humanclaw run: error: {exc}", file=sys.stderr)
        return 2
    except MetricsFileError as exc:
        print(
            f"humanclaw run: invalid metrics file, {Path(args.output) / 'metrics_summary.json'}"
            f" was not written: {exc}",
            file=sys.stderr,
        )
        return 1
    print(
        f"completed {summary.completed}, skipped {summary.skipped}, failed {summary.failed}"
        f" in {summary.wall_time_s:.1f} s"
    )
    for res in summary.results:
        if res.get("status") == "failed":
            print(
                f"  FAILED {res['scene_id']} ep{res['episode_id']}: {res.get('error')}",
                file=sys.stderr,
            )
    if summary.metrics_summary is not None:
        from humanclaw_gym.metrics import format_tables

        print()
        print(format_tables(summary.metrics_summary))
        print(f"\nmetrics summary written to {Path(args.output) / 'metrics_summary.json'}")
    if summary.mixed_cpus:
        print(_mixed_cpu_warning(summary.cpu_records), file=sys.stderr)
    return 0 if summary.failed == 0 else 1


def _mixed_cpu_warning(groups: list[dict]) -> str:
    """The end-of-run warning for a run whose episodes ran on CPUs of different records."""
    parts = []
    for group in groups:
        cpu = group["cpu"]
        if cpu is None:
            continue
        simd = " ".join(cpu.get("numpy_simd") or []) or "none"
        parts.append(f"{group['episodes']} on {cpu.get('model')} (numpy SIMD: {simd})")
    return (
        f"humanclaw run: warning: the episodes ran on {len(parts)} different CPU records ("
        + "; ".join(parts)
        + "); their figures are not bit-comparable (docs/baselines.md, Across machines); "
        "each episode's node.json names its CPU"
    )


def rollout(args: RolloutArgs) -> int:
    from humanclaw_gym.episodes import load_split
    from humanclaw_gym.evaluation.batch import EpisodeSpec, rollout_dir, run_one_episode

    episodes = load_split(args.split)
    if args.episode_id is None:
        ep = episodes[0]
    else:
        matches = [e for e in episodes if e.episode_id == args.episode_id]
        if not matches:
            print(
                f"humanclaw rollout: episode {args.episode_id!r} is not in split {args.split!r}",
                file=sys.stderr,
            )
            return 2
        ep = matches[0]
    spec = EpisodeSpec(args.split, ep.scene_id, ep.episode_id, ep.object_category)
    config = _checked_config(args, "humanclaw rollout")
    if config is None:
        return 2
    print(f"episode {ep.episode_id} in {ep.scene_id}: {ep.instruction}", flush=True)
    res = run_one_episode(spec, config)
    out = rollout_dir(args.output, spec)
    print(
        f"{res['status']}: ended by {res.get('ended_by')} after {res.get('steps')} steps"
        f" in {res['wall_time_s']:.1f} s -> {out}"
    )
    if res.get("error"):
        print(f"error: {res['error']}", file=sys.stderr)
    if (out / "final_ego.png").is_file():
        print(f"final ego frame: {out / 'final_ego.png'}")
    m = res.get("metrics")
    if m:
        keys = (
            "nav_success_20cm",
            "final_distance_m",
            "interact_success",
            "collision_rate",
            "motion_jerk_m_s3",
        )
        print("metrics: " + ", ".join(f"{k}={_metric_text(m.get(k))}" for k in keys if k in m))
    return 0 if res.get("status") == "completed" else 1


def _metric_text(value: object) -> str:
    """A metric for the console: ``n/a`` for not applicable (None), floats to 3 decimals."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def main(argv: list[str]) -> int:
    args = tyro.cli(RunArgs, args=argv, prog="humanclaw run")
    return run(args)


def rollout_main(argv: list[str]) -> int:
    args = tyro.cli(RolloutArgs, args=argv, prog="humanclaw rollout")
    return rollout(args)
