"""Batch evaluation: many episodes, resumable, in parallel processes or on Ray.

Every episode runs through :func:`run_one_episode`, which calls the single episode loop
(:func:`humanclaw_gym.evaluation.run_episode`) with the requested wrappers. The local
executor runs it in ``workers`` processes (each builds its env once and reuses a scene
across that scene's episodes); the Ray executor runs the very same function as Ray tasks.
Outputs go to a deterministic directory per episode::

    <output>/<scene_id>_ep<episode_id>_<category>/rollout_00/
        stepNNN_*.json            (VLM agents)
        trajectory_before.npz, trajectory_after.npz, replay_manifest.json
        metrics.json              (--metrics)
        ego.mp4, exo.mp4          (--video)
        final_ego.png             (the last ego image)
        episode_result.json       (written last)

``--resume`` skips an episode only when every artifact the current flags require exists
and verifies (replay hashes, metrics schema); anything else is run again from scratch.
``<output>/run_fingerprint.json`` records what defines the results (agent, model config
without secrets, seed, max steps, episodes, backends, metric rules, package version; see
:mod:`humanclaw_gym.evaluation.fingerprint`): a run whose settings differ from the
recorded ones is refused before any episode runs, naming the differing fields.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import InitVar, asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from humanclaw_gym.backends.config import BACKEND_FIELDS, BackendConfig
from humanclaw_gym.evaluation.episode import EpisodeSpec

__all__ = [
    "BatchSummary",
    "EpisodeSpec",
    "RunConfig",
    "list_episode_specs",
    "rollout_complete",
    "rollout_dir",
    "run_batch",
    "run_one_episode",
]


@dataclass(frozen=True)
class RunConfig:
    """Everything a worker needs to run episodes (picklable, for processes and Ray).

    The simulator side is ``backend`` (a :class:`~humanclaw_gym.backends.config.BackendConfig`);
    its fields may also be given as constructor shorthands, e.g. ``RunConfig(motion="flow")``,
    which override ``backend``'s. They are not stored: read ``config.backend.motion``.
    ``profile`` is a resolved :class:`~humanclaw_gym.profiles.RunProfile` (``--profile
    paper``): the workers' envs are made from it (its record goes into every replay
    manifest and the run fingerprint); ``backend`` is then the profile's.
    """

    agent: str = "oracle"
    output: str = "outputs/run"
    model_config: str | None = None
    metrics: bool = False
    metric_rules: str = "paper"
    video: bool = False
    seed: int = 0
    max_steps: int | None = None
    via_server: str | None = None
    instruction_template: str | None = None
    backend: BackendConfig = field(default_factory=BackendConfig)
    profile: Any = None
    physics: InitVar[str | None] = None
    physics_options: InitVar[Any] = None
    renderer: InitVar[str | None] = None
    motion: InitVar[str | None] = None
    motion_checkpoint: InitVar[str | None] = None
    motion_options: InitVar[Any] = None
    body_model_dir: InitVar[str | None] = None
    body_model_gender: InitVar[str | None] = None
    scene_dataset: InitVar[str | None] = None
    body_asset: InitVar[str | None] = None

    def __post_init__(self, *shorthands: Any) -> None:
        changes = {
            name: value
            for name, value in zip(BACKEND_FIELDS, shorthands, strict=True)
            if value is not None
        }
        from humanclaw_gym.metrics.rules import check_rules

        check_rules(self.metric_rules, "metric_rules")
        if not isinstance(self.backend, BackendConfig):
            raise ValueError(f"backend must be a BackendConfig, got {type(self.backend).__name__}")
        if changes:
            object.__setattr__(self, "backend", self.backend.replace(**changes))


@dataclass
class BatchSummary:
    """Counts and per-episode outcomes of a batch."""

    completed: int = 0
    skipped: int = 0
    failed: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0
    metrics_summary: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------
# episode selection and output layout
# --------------------------------------------------------------------------------------
def list_episode_specs(selection: str) -> list[EpisodeSpec]:
    """Episodes of ``"one"`` (the first val100 episode), ``"val100"``, ``"val"``, a split
    directory, or a JSON file listing episode ids (``["id", ...]`` or
    ``[{"episode_id": ..., "scene_id": ...}, ...]``, resolved against ``val``); see
    :func:`humanclaw_gym.episodes.selection.select_episodes`."""
    from humanclaw_gym.episodes.selection import select_episodes

    return [
        EpisodeSpec(split, ep.scene_id, ep.episode_id, ep.object_category)
        for split, ep in select_episodes(selection)
    ]


def rollout_dir(output: str | os.PathLike[str], spec: EpisodeSpec, rollout_index: int = 0) -> Path:
    """The deterministic output directory of one episode rollout."""
    return (
        Path(output)
        / f"{spec.scene_id}_ep{spec.episode_id}_{spec.category}"
        / f"rollout_{rollout_index:02d}"
    )


def rollout_complete(directory: Path, config: RunConfig) -> bool:
    """True when every artifact the flags require exists and verifies."""
    result_path = directory / "episode_result.json"
    if not result_path.is_file():
        return False
    try:
        result = json.loads(result_path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if result.get("ended_by") not in ("stop", "truncated"):
        return False
    if not (directory / "final_ego.png").is_file():
        return False
    try:
        from humanclaw_gym.replay import load_bundle

        bundle = load_bundle(directory)
        if not bundle.manifest.get("complete", False):
            return False
    except Exception:
        return False
    if config.metrics:
        try:
            metrics = json.loads((directory / "metrics.json").read_text())
        except (OSError, json.JSONDecodeError):
            return False
        if not str(metrics.get("schema", "")).startswith("humanclaw_metrics_"):
            return False
    if config.video:
        for name in ("ego.mp4", "exo.mp4"):
            p = directory / name
            if not p.is_file() or p.stat().st_size == 0:
                return False
    return True


# --------------------------------------------------------------------------------------
# the per-episode function (local workers and Ray tasks)
# --------------------------------------------------------------------------------------
_WORKER_ENVS: dict[tuple[Any, ...], Any] = {}


def _base_env(config: RunConfig, split: str, privileged: bool) -> Any:
    """One env per (process, config): scenes are reused across episodes of the same scene."""
    key = (split, config.backend.key(), config.max_steps, privileged, config.instruction_template)
    env = _WORKER_ENVS.get(key)
    if env is None:
        from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

        source: dict[str, Any] = (
            {"backend": config.backend}
            if config.profile is None
            else {"profile": replace(config.profile, backend=config.backend)}
        )
        env = FindNavInteractEnv(
            split=split,
            **source,
            privileged=privileged,
            max_steps=config.max_steps,
            instruction_template=config.instruction_template,
        )
        _WORKER_ENVS[key] = env
    return env


def close_worker_envs() -> None:
    """Close the envs cached in this process."""
    while _WORKER_ENVS:
        _, env = _WORKER_ENVS.popitem()
        env.close()


def run_one_episode(spec: EpisodeSpec, config: RunConfig) -> dict[str, Any]:
    """Run one episode with the configured policy and wrappers; never raises for an
    episode failure (the error is recorded in the returned dict and episode_result.json)."""
    from humanclaw_gym.evaluation.episode import run_episode, write_json_atomic
    from humanclaw_gym.evaluation.policies import load_policy

    out = rollout_dir(config.output, spec)
    _clear_rollout(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    summary: dict[str, Any] = {
        "episode_id": spec.episode_id,
        "scene_id": spec.scene_id,
        "category": spec.category,
        "dir": str(out),
    }
    env = None
    wrappers: list[Any] = []
    try:
        policy = load_policy(config.agent, model_config=config.model_config, seed=config.seed)
        if config.via_server:
            from humanclaw_gym.evaluation.remote import run_via_server

            result = run_via_server(config.via_server, policy, spec, out)
        else:
            privileged = bool(getattr(policy, "requires_privileged", False))
            env = _base_env(config, spec.split, privileged)
            wrapped, wrappers = _wrap(env, out, config)
            try:
                result = run_episode(
                    wrapped,
                    policy,
                    episode_id=spec.episode_id,
                    output_dir=out,
                    on_end=lambda r: _write_final_png(out, r),
                    raise_errors=False,
                )
            finally:
                for w in wrappers:
                    w.detach()
        if not (out / "final_ego.png").is_file():  # the server path has no on_end hook
            _write_final_png(out, result)
        summary.update(
            status="failed" if result.ended_by == "error" else "completed",
            ended_by=result.ended_by,
            steps=result.steps,
            error=result.error,
            metrics=result.metrics,
        )
    except Exception as exc:  # setup failures (policy, env, wrappers)
        summary.update(
            status="failed", ended_by="error", steps=0, error=f"{type(exc).__name__}: {exc}"
        )
        write_json_atomic(
            out / "episode_result.json",
            {
                "schema": "humanclaw_episode_result_v1",
                **{k: summary[k] for k in ("episode_id", "scene_id")},
                "ended_by": "error",
                "error": summary["error"],
                "steps": 0,
            },
        )
    summary["wall_time_s"] = time.perf_counter() - t0
    return summary


def _wrap(env: Any, out: Path, config: RunConfig) -> tuple[Any, list[Any]]:
    """Attach the per-episode wrappers (trajectory always; metrics and video on request)."""
    from humanclaw_gym.replay.layout import flat_dir
    from humanclaw_gym.wrappers import MetricsWrapper, TrajectoryWrapper, VideoWrapper

    wrapped = TrajectoryWrapper(env, out, episode_dir_fn=flat_dir)
    wrappers = [wrapped]
    if config.metrics:
        wrapped = MetricsWrapper(wrapped, out, episode_dir_fn=flat_dir, rules=config.metric_rules)
        wrappers.append(wrapped)
    if config.video:
        wrapped = VideoWrapper(wrapped, out, episode_dir_fn=flat_dir)
        wrappers.append(wrapped)
    return wrapped, wrappers


def _write_final_png(out: Path, result: Any) -> None:
    if result.final_observation is not None:
        _write_png(out / "final_ego.png", result.final_observation)


def _write_png(path: Path, image: Any) -> None:
    """Atomic PNG write of an ``uint8 (H, W, 3)`` image."""
    from PIL import Image

    from humanclaw_gym.fileio import atomic_path

    with atomic_path(path) as tmp:
        Image.fromarray(image).save(tmp, format="PNG")


_KNOWN_OUTPUTS = (
    "final_ego.png",
    "report.html",
    "trajectory_before.npz",
    "trajectory_after.npz",
    "replay_manifest.json",
    "metrics.json",
    "ego.mp4",
    "exo.mp4",
    "episode_result.json",
)


def _clear_rollout(directory: Path) -> None:
    """Remove only files this evaluator writes (never anything else a user put there)."""
    if not directory.is_dir():
        return
    for child in directory.iterdir():
        name = child.name
        if child.is_file() and (
            name in _KNOWN_OUTPUTS
            or (name.startswith("step") and name.endswith(".json"))
            or name.endswith(".tmp")
        ):
            child.unlink()


# --------------------------------------------------------------------------------------
# executors
# --------------------------------------------------------------------------------------
def _worker_init() -> None:
    # The renderer's Mesa defaults (no rasteriser or shader-cache threads): this also runs
    # in the caller's own process (workers=1), which may fork async vector envs later.
    from humanclaw_gym.render.moderngl_backend import apply_mesa_defaults

    apply_mesa_defaults()
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _run_local(
    specs: Sequence[EpisodeSpec],
    config: RunConfig,
    workers: int,
    on_result: Callable[[dict[str, Any]], None],
) -> None:
    if workers <= 1:
        _worker_init()
        try:
            for spec in specs:
                on_result(run_one_episode(spec, config))
        finally:
            close_worker_envs()
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # Group by scene so that each worker builds few scenes; keep deterministic order.
    pending = list(specs)
    while pending:
        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=_worker_init
        ) as pool:
            futures = {pool.submit(run_one_episode, spec, config): spec for spec in pending}
            pending = []
            for fut in as_completed(futures):
                spec = futures[fut]
                try:
                    on_result(fut.result())
                except BrokenProcessPool as exc:
                    on_result(
                        {
                            "episode_id": spec.episode_id,
                            "scene_id": spec.scene_id,
                            "category": spec.category,
                            "status": "failed",
                            "ended_by": "error",
                            "steps": 0,
                            "error": f"worker process died: {exc}",
                        }
                    )


def _run_ray(
    specs: Sequence[EpisodeSpec],
    config: RunConfig,
    ray_address: str | None,
    workers: int,
    on_result: Callable[[dict[str, Any]], None],
) -> None:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(
            "--executor ray needs the 'ray' extra: pip install 'humanclaw-gym[ray]'"
        ) from exc
    started_here = False
    if not ray.is_initialized():
        if ray_address:
            ray.init(address=ray_address, ignore_reinit_error=True, log_to_driver=False)
        else:
            ray.init(
                num_cpus=max(1, workers),
                ignore_reinit_error=True,
                log_to_driver=False,
                include_dashboard=False,
            )
        started_here = True
    try:
        task = ray.remote(num_cpus=1)(_ray_task)
        refs = [task.remote(spec, config) for spec in specs]
        remaining = list(refs)
        while remaining:
            done, remaining = ray.wait(remaining, num_returns=1)
            on_result(ray.get(done[0]))
    finally:
        if started_here:
            ray.shutdown()


def _ray_task(spec: EpisodeSpec, config: RunConfig) -> dict[str, Any]:
    _worker_init()
    return run_one_episode(spec, config)


def check_run_config(config: RunConfig) -> None:
    """Refuse a config that would fail in every episode, before any worker starts.

    Raises:
        ValueError: an agent that cannot be imported (``PolicySpecError``), an unknown
            backend, an option it does not accept, a missing body model, an instruction
            template that cannot be read (``InstructionTemplateError``).
    """
    from humanclaw_gym.evaluation.policies import check_policy_spec

    check_policy_spec(config.agent)
    if config.instruction_template is not None:
        from humanclaw_gym.episodes.instructions import resolve_instruction_template

        if config.via_server:
            raise ValueError(
                "--instruction-template: a benchmark server sets the instructions of its "
                "episodes; the option is only available for local runs"
            )
        resolve_instruction_template(config.instruction_template)
    if config.via_server:
        if config.metrics and config.metric_rules != "paper":
            raise ValueError(
                "--metric-rules: a benchmark server scores episodes by the paper rules; "
                f"{config.metric_rules!r} is only available for local runs"
            )
        return  # the server owns the simulator
    config.backend.check()


def run_batch(
    specs: Iterable[EpisodeSpec],
    config: RunConfig,
    *,
    workers: int = 1,
    resume: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
    progress: bool = True,
    episodes: Mapping[str, Any] | None = None,
) -> BatchSummary:
    """Run many episodes; see the module docstring.

    Before any episode runs, the run's fingerprint (:mod:`.fingerprint`) is compared with
    the one the output directory records, or recorded there.

    Args:
        specs: the episodes to run.
        config: the run's settings.
        workers: worker processes (local) or concurrent tasks (Ray).
        resume: skip episodes whose requested artifacts are complete and verified.
        executor: ``"local"`` or ``"ray"``.
        ray_address: an existing Ray cluster (default: start a local one).
        progress: show a progress bar.
        episodes: the fingerprint's ``episodes`` setting
            (:func:`~humanclaw_gym.evaluation.fingerprint.episodes_record` of the selection
            before any limit); default: the list ``specs`` itself.

    Raises:
        ValueError: bad arguments or config, an episode listed twice.
        RunFingerprintError: the output directory holds results of other settings (the
            message lists the differing fields); nothing has run.
    """
    from humanclaw_gym.evaluation.fingerprint import (
        check_fingerprint,
        episodes_record,
        run_fingerprint,
    )

    specs = list(specs)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be 'local' or 'ray', got {executor!r}")
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        key = (spec.scene_id, spec.episode_id)
        if key in seen:
            raise ValueError(f"episode {spec.episode_id} of {spec.scene_id} is listed twice")
        seen.add(key)
    config = replace(config, output=str(Path(config.output)))
    check_run_config(config)
    if episodes is None:
        episodes = episodes_record(None, ((s.split, s.scene_id, s.episode_id) for s in specs))
    fingerprint = run_fingerprint(config, episodes)
    check_fingerprint(config.output, fingerprint, resume=resume)
    summary = BatchSummary()
    t0 = time.perf_counter()
    todo = []
    for spec in specs:
        if resume and rollout_complete(rollout_dir(config.output, spec), config):
            summary.skipped += 1
            summary.results.append(
                {
                    "episode_id": spec.episode_id,
                    "scene_id": spec.scene_id,
                    "category": spec.category,
                    "status": "skipped",
                }
            )
        else:
            todo.append(spec)

    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="episodes", unit="ep", dynamic_ncols=True)
    successes = 0

    def on_result(res: dict[str, Any]) -> None:
        nonlocal successes
        summary.results.append(res)
        if res.get("status") == "completed":
            summary.completed += 1
        else:
            summary.failed += 1
        m = res.get("metrics") or {}
        if m.get("nav_success_20cm"):
            successes += 1
        if bar is not None:
            done = summary.completed + summary.failed
            postfix = {"fail": summary.failed}
            if config.metrics:
                postfix["NavSR@20cm"] = f"{100.0 * successes / max(done, 1):.0f}%"
            bar.set_postfix(postfix)
            bar.update(1)

    try:
        if executor == "local":
            _run_local(todo, config, workers, on_result)
        else:
            _run_ray(todo, config, ray_address, workers, on_result)
    finally:
        if bar is not None:
            bar.close()
    summary.results.sort(key=lambda r: (r["scene_id"], r["episode_id"]))
    summary.wall_time_s = time.perf_counter() - t0
    if config.metrics:
        from humanclaw_gym.metrics import aggregate_metric_files

        try:
            summary.metrics_summary = aggregate_metric_files(
                Path(config.output), rules=config.metric_rules
            )
        except FileNotFoundError:  # no episode finished: nothing to summarise
            summary.metrics_summary = None
        if summary.metrics_summary is not None:
            from humanclaw_gym.evaluation.episode import write_json_atomic
            from humanclaw_gym.provenance import run_environment

            summary.metrics_summary["environment"] = run_environment()
            write_json_atomic(Path(config.output) / "metrics_summary.json", summary.metrics_summary)
    return summary
