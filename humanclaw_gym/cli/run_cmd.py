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

    Each episode of the task (``--task``, default the benchmark's find_nav_interact) runs
    in a worker process (``--workers``) through the one episode loop and writes its
    artifacts to ``OUTPUT/<scene>_ep<id>_<label>/rollout_00/``. ``--resume`` skips episodes
    whose requested artifacts are complete and verified; a run whose settings (task, agent,
    model config, seed, max steps, episodes, backends, metric rules, instruction template,
    version) differ from those recorded in ``OUTPUT/run_fingerprint.json`` is refused,
    naming the differing fields. With ``--metrics`` the task's metric table is printed at
    the end and ``metrics_summary.json`` is written.
    """

    task: str = "find_nav_interact"
    """the task: a registered name (find_nav_interact, ...), module:Class (looked up in the current directory first) or an entry point of the group humanclaw_gym.tasks"""
    episodes: str | None = None
    """default: the task's split (val100). For find_nav_interact: one | val100 | val | a split directory | a .json.gz shard or split header | a .json list of episode ids or subset file (with --profile paper: val100 or val, the release's)"""
    agent: str | None = None
    """psv | psv:v1 | oracle | random | module:Class | checkpoint:PATH (default: oracle; psv with --profile paper)"""
    profile: Literal["paper"] | None = None
    """run the configuration of the published table: the release's episodes, body, physics profile, metric rules, the PSV agent and the paper motion (needs --release, the motion weights and --scene-dataset; docs/paper.md)"""
    release_arithmetic: bool = True
    """with --profile paper: run the reference release's arithmetic (its spawn, first-frame rule, neck/head zeroing, joint drive; docs/paper.md); --no-release-arithmetic runs this package's"""
    output: Path = Path("outputs/run")
    """output directory"""
    model_config: Path | None = None
    """JSON model config for VLM agents (psv)"""
    metrics: bool = False
    """compute the paper metrics (metrics.json per episode + summary)"""
    metric_rules: Literal["paper", "strict"] = "paper"
    """metric rules: paper (the reference release's scoring) or strict (docs/metrics.md)"""
    instruction_template: str | None = None
    """instruction wording for every episode: a JSON template FILE (e.g. the reference release's wording, docs/scenes.md) or v1 | touch; default: each episode's own"""
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
    preflight: bool = True
    """check the agent's model endpoint before the first episode (psv: one small request; docs/agents.md); --no-preflight skips it"""


@dataclass
class RolloutArgs:
    """Run one episode in this process (smoke tests, debugging) and write its artifacts."""

    task: str = "find_nav_interact"
    """the task: a registered name, module:Class or an entry point of humanclaw_gym.tasks"""
    episode_id: str | None = None
    """episode id (default: the first episode of the split)"""
    split: str | None = None
    """split the episode comes from (default: the task's, val100)"""
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
    instruction_template: str | None = None
    """instruction wording: a JSON template FILE (docs/scenes.md) or v1 | touch; default: the episode's own"""
    video: bool = False
    """write ego.mp4 and exo.mp4"""
    max_steps: int | None = None
    """step limit for smoke tests (default 100)"""
    seed: int = 0
    """seed for stochastic policies"""
    backend: Annotated[BackendArgs, Flattened] = field(default_factory=BackendArgs)
    """simulator backends"""
    preflight: bool = True
    """check the agent's model endpoint first (psv: one small request; docs/agents.md); --no-preflight skips it"""


def parse_motion_options(items: tuple[str, ...]) -> tuple[tuple[str, object], ...]:
    """``("steps=10", "seat_guidance=false")`` -> ``(("steps", 10), ("seat_guidance", False))``
    (see :func:`humanclaw_gym.cli.backend_args.parse_options`)."""
    return parse_options(items)


def _config(args: RunArgs | RolloutArgs, profile=None):
    from humanclaw_gym.evaluation.batch import RunConfig

    if profile is not None:
        return RunConfig(
            agent=args.agent or profile.agent,
            output=str(args.output),
            model_config=None if args.model_config is None else str(args.model_config),
            metrics=args.metrics,
            metric_rules=profile.metric_rules,
            video=args.video,
            seed=args.seed,
            max_steps=args.max_steps,
            via_server=None,
            instruction_template=args.instruction_template,
            backend=profile.backend,
            profile=profile,
            task=args.task,
        )
    return RunConfig(
        agent=args.agent or "oracle",
        output=str(args.output),
        model_config=None if args.model_config is None else str(args.model_config),
        metrics=args.metrics,
        metric_rules=args.metric_rules,
        video=args.video,
        seed=args.seed,
        max_steps=args.max_steps,
        via_server=getattr(args, "via_server", None),
        instruction_template=args.instruction_template,
        backend=args.backend.to_config(),
        task=args.task,
    )


def _checked_config(args: RunArgs | RolloutArgs, prog: str, profile=None):
    """The RunConfig of ``args``, or None after printing why it would fail everywhere."""
    from humanclaw_gym.evaluation.batch import check_run_config

    try:
        _check_counts(args)
        config = _config(args, profile)
        check_run_config(config)
    except (ValueError, FileNotFoundError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None
    return config


def _check_counts(args: RunArgs | RolloutArgs) -> None:
    for flag, value in (
        ("--workers", getattr(args, "workers", 1)),
        ("--limit", getattr(args, "limit", None)),
        ("--max-steps", args.max_steps),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{flag} {value} is invalid: allowed an int >= 1")


def _profile(args: RunArgs):
    """The resolved profile of ``--profile`` (None without), or a one-line error."""
    from humanclaw_gym.profiles import resolve_profile

    b = args.backend
    taken = [
        flag
        for flag, given in (
            ("--motion", b.motion != "procedural"),
            ("--motion-checkpoint", b.motion_checkpoint is not None),
            ("--motion-option", bool(b.motion_option)),
            ("--physics-option", bool(b.physics_option)),
            ("--body-asset", b.body_asset is not None),
            ("--body-model-dir", b.body_model_dir is not None),
            ("--metric-rules", args.metric_rules != "paper"),
            ("--via-server", args.via_server is not None),
        )
        if given
    ]
    if taken:
        raise ValueError(
            f"--profile {args.profile} sets {', '.join(taken)} itself: leave them out "
            "(--physics, --renderer, --motion-weights, --scene-dataset and --episodes "
            "val100|val may be given)"
        )
    if args.task != "find_nav_interact":
        from humanclaw_gym.tasks import DEFAULT_TASK, resolve_task

        if resolve_task(args.task).spec.id != DEFAULT_TASK:
            raise ValueError(
                f"--profile {args.profile} runs the benchmark's task {DEFAULT_TASK}, not "
                f"--task {args.task}"
            )
    return resolve_profile(
        args.profile,
        b.release,
        episodes=args.episodes or "val100",
        motion_weights=b.motion_weights,
        scene_dataset=b.scene_dataset,
        physics=b.physics,
        renderer=b.renderer,
        limit=args.limit,
        release_arithmetic=args.release_arithmetic,
    )


def run(args: RunArgs, argv: list[str] | None = None) -> int:
    """Run the batch; returns the exit code (0 all completed, 1 some failed, 130 / 143
    stopped by SIGINT / SIGTERM). User errors raise (the ``humanclaw`` entry point prints
    them as one line, exit code 2) before anything is written."""
    from humanclaw_gym.evaluation.batch import (
        BatchInterrupted,
        OutputInUseError,
        list_episode_specs,
        run_batch,
    )
    from humanclaw_gym.evaluation.fingerprint import RunFingerprintError, episodes_record
    from humanclaw_gym.tasks import resolve_task

    workers = args.workers
    task_cls = resolve_task(args.task)  # an unknown task: one line, exit 2, nothing written
    profile = None
    if args.profile is None and not args.release_arithmetic:
        print(
            "humanclaw run: error: --no-release-arithmetic applies to --profile paper only",
            file=sys.stderr,
        )
        return 2
    if args.profile is not None:
        try:
            profile = _profile(args)
        except ValueError as exc:  # ProfileError: every missing part in one line
            print(f"humanclaw run: error: {exc}", file=sys.stderr)
            return 2
    if profile is not None:
        specs = list_episode_specs(profile.episodes)
        episodes = episodes_record(
            f"{profile.name}:{profile.split}", ((s.split, s.scene_id, s.episode_id) for s in specs)
        )
    elif args.via_server:
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
        selection = args.episodes or task_cls.spec.default_split
        specs = list_episode_specs(selection, task_cls)
        episodes = episodes_record(selection, ((s.split, s.scene_id, s.episode_id) for s in specs))
    config = _checked_config(args, "humanclaw run", profile)
    if config is None:
        return 2
    if args.limit is not None:
        specs = specs[: args.limit]
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
        f"humanclaw run: {len(specs)} episode(s), task={task_cls.spec.id}, agent={config.agent}, "
        f"output={args.output}" + ("" if profile is None else f", profile={profile.name}"),
        flush=True,
    )
    from humanclaw_gym.metrics import MetricsFileError

    interrupted = None
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
            preflight=args.preflight,
        )
    except BatchInterrupted as exc:
        summary, interrupted = exc.summary, exc
    except (RunFingerprintError, OutputInUseError, RayAddressError, RayClusterError) as exc:
        print(f"humanclaw run: error: {exc}", file=sys.stderr)
        return 2
    except MetricsFileError as exc:
        print(
            f"humanclaw run: invalid metrics file, {Path(args.output) / 'metrics_summary.json'}"
            f" was not written: {exc}",
            file=sys.stderr,
        )
        return 1
    if interrupted is not None:
        print(f"\nhumanclaw run: stopped by {summary.interrupted}", file=sys.stderr)
    not_run = f", not run {summary.not_run}" if summary.not_run else ""
    print(
        f"completed {summary.completed}, skipped {summary.skipped}, failed {summary.failed}"
        f"{not_run} in {summary.wall_time_s:.1f} s"
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
    if interrupted is not None:
        print(
            f"{summary.not_run} episode(s) did not run and left no files; to finish the run:\n"
            f"  {_resume_command(argv)}",
            file=sys.stderr,
        )
        return 128 + interrupted.signum
    return 0 if summary.failed == 0 else 1


def _resume_command(argv: list[str] | None) -> str:
    """The command line that continues this run (the same arguments plus ``--resume``)."""
    import shlex

    args = list(sys.argv[2:] if argv is None else argv)
    args = [a for a in args if a != "--debug"]
    if "--resume" not in args:
        args.append("--resume")
    return shlex.join(["humanclaw", "run", *args])


def _mixed_cpu_warning(groups: list[dict]) -> str:
    """The end-of-run warning for a run whose episodes ran on CPUs of different records."""
    parts = []
    for group in groups:
        cpu = group["cpu"]
        if cpu is None:
            continue
        simd = " ".join(cpu.get("numpy_simd") or []) or "none"
        blas = (cpu.get("blas") or {}).get("architecture")
        kernels = f"numpy SIMD: {simd}" + (f", BLAS: {blas}" if blas else "")
        parts.append(f"{group['episodes']} on {cpu.get('model')} ({kernels})")
    return (
        f"humanclaw run: warning: the episodes ran on {len(parts)} different CPU records ("
        + "; ".join(parts)
        + "); their figures are not bit-comparable (docs/baselines.md, Across machines); "
        "each episode's node.json names its CPU"
    )


def rollout(args: RolloutArgs) -> int:
    from humanclaw_gym.evaluation.batch import (
        EpisodeSpec,
        check_episode_scenes,
        check_episode_starts,
        check_policy,
        rollout_dir,
        run_one_episode,
    )
    from humanclaw_gym.tasks import resolve_task

    task_cls = resolve_task(args.task)  # an unknown task: one line, exit 2, nothing written
    split = args.split or task_cls.spec.default_split
    episodes = task_cls.load_episodes(split)
    if args.episode_id is None:
        ep = episodes[0]
    else:
        matches = [e for e in episodes if e.episode_id == args.episode_id]
        if not matches:
            print(
                f"humanclaw rollout: error: episode {args.episode_id!r} is not in split {split!r}",
                file=sys.stderr,
            )
            return 2
        ep = matches[0]
    spec = EpisodeSpec(split, ep.scene_id, ep.episode_id, task_cls.episode_label(ep))
    config = _checked_config(args, "humanclaw rollout")
    if config is None:
        return 2
    # a bad model config or key, an endpoint that does not answer: one line, exit 2,
    # nothing written
    check_policy(config, preflight=args.preflight)
    check_episode_scenes([spec], config)
    check_episode_starts([spec], config)  # a start outside its scene: exit 2, nothing written
    (ep,) = task_cls.load_episodes(
        split, [ep], instruction_template=_template(config.instruction_template)
    )
    instruction = getattr(ep, "instruction", None)
    print(
        f"episode {ep.episode_id} in {ep.scene_id}" + (f": {instruction}" if instruction else ""),
        flush=True,
    )
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
        keys = [
            k
            for k in (
                "nav_success_20cm",
                "final_distance_m",
                "interact_success",
                "collision_rate",
                "motion_jerk_m_s3",
            )
            if k in m
        ] or [  # another task's metrics: its flags and numbers
            k
            for k, v in m.items()
            if isinstance(v, (bool, float)) and k not in ("active_stop", "initial_penetration_m")
        ]
        print("metrics: " + ", ".join(f"{k}={_metric_text(m.get(k))}" for k in keys))
    return 0 if res.get("status") == "completed" else 1


def _template(name: str | None):
    from humanclaw_gym.episodes.instructions import resolve_instruction_template

    return resolve_instruction_template(name)


def _metric_text(value: object) -> str:
    """A metric for the console: ``n/a`` for not applicable (None), floats to 3 decimals."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def main(argv: list[str]) -> int:
    args = tyro.cli(RunArgs, args=argv, prog="humanclaw run")
    return run(args, argv)


def rollout_main(argv: list[str]) -> int:
    args = tyro.cli(RolloutArgs, args=argv, prog="humanclaw rollout")
    return rollout(args)
