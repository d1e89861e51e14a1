"""Batch evaluation: many episodes, resumable, in parallel processes or on Ray.

Every episode runs through :func:`run_one_episode`, which calls the single episode loop
(:func:`humanclaw_gym.evaluation.run_episode`) with the requested wrappers. The local
executor runs it in ``workers`` processes (each builds its env once and reuses a scene
across that scene's episodes) that write into ``output`` directly; the Ray executor
(:mod:`.ray_executor`) runs the very same function as Ray tasks in node-local scratch and
sends each episode folder back to the driver, which writes it into ``output`` atomically
(:mod:`.artifacts`), so a cluster needs no shared disk. Outputs go to a deterministic
directory per episode::

    <output>/<scene_id>_ep<episode_id>_<category>/rollout_00/
        stepNNN_*.json            (VLM agents)
        trajectory_before.npz, trajectory_after.npz, replay_manifest.json
        metrics.json              (--metrics)
        ego.mp4, exo.mp4          (--video)
        final_ego.png             (the last ego image)
        goal_rgb.png              (image-goal tasks: the goal picture)
        node.json                 (the CPU record of the node that ran it)
        episode_result.json       (written last)

The episodes are those of the run's task (``RunConfig.task``: a registered task name,
``"module:Class"`` or a task class; default the benchmark's ``find_nav_interact``): its
episode selection, its env (``HumanClaw-v0`` composed from it) and its metric trackers.

``--resume`` skips an episode only when every artifact the current flags require exists
and verifies (replay hashes, metrics schema); anything else is run again from scratch.
``<output>/run_fingerprint.json`` records what defines the results (task, agent, model
config without secrets, seed, max steps, episodes, backends, metric rules, package version; see
:mod:`humanclaw_gym.evaluation.fingerprint`): a run whose settings differ from the
recorded ones is refused before any episode runs, naming the differing fields.

Whatever the executor, an episode counts as completed only when the driver finds its
folder complete and verified in ``output`` (a run whose artifacts did not reach the driver
fails; it never exits 0). The summary groups the episodes by the CPU record in their
``node.json`` (``cpu_records``); ``mixed_cpus`` is True when one run's episodes ran on CPUs
with different records, whose figures are not bit-comparable (``docs/baselines.md``).

One run at a time writes to an output directory: ``<output>/.humanclaw_run.lock`` is held
(``filelock``, an OS lock that dies with its process, so a lock left by a killed run is
taken over) and a second run is refused with :class:`OutputInUseError`.

Interrupts: SIGINT (Ctrl-C) and SIGTERM stop a batch within seconds. No episode is
submitted any more, the workers are stopped, every episode that did not finish is removed
from the output (no half-written folder stays; a complete earlier result is kept) and
:class:`BatchInterrupted` carries the summary of what finished. Worker processes ignore
SIGINT (the parent decides) and exit by themselves when the parent is gone, e.g. killed.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import InitVar, asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from humanclaw_gym.backends.config import BACKEND_FIELDS, BackendConfig
from humanclaw_gym.evaluation.episode import EpisodeSpec
from humanclaw_gym.evaluation.episode import failed_summary as _failed
from humanclaw_gym.evaluation.status import POLICY_STATUS_LOGGER

__all__ = [
    "LOCK_FILE",
    "BatchInterrupted",
    "BatchSummary",
    "EpisodeSpec",
    "OutputInUseError",
    "PolicyPreflightError",
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
    manifest and the run fingerprint); ``backend`` is then the profile's. ``task`` names the
    task (a registered name, ``"module:Class"`` or a task class, see
    :func:`humanclaw_gym.tasks.resolve_task`).
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
    task: Any = "find_nav_interact"
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


LOCK_FILE = ".humanclaw_run.lock"
"""The lock a run holds in its output directory while it writes there."""

_WATCHDOG_PERIOD_S = 0.5


@dataclass
class BatchSummary:
    """Counts and per-episode outcomes of a batch.

    ``cpu_records`` groups the run's episodes by the CPU record of the node that ran them
    (:func:`~humanclaw_gym.provenance.episode_cpu_groups`); ``mixed_cpus`` says that more
    than one record occurs.
    ``not_run`` counts the episodes an interrupt stopped before they finished (their
    results have ``status == "not_run"``); ``interrupted`` names the signal, else None.
    """

    completed: int = 0
    skipped: int = 0
    failed: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0
    metrics_summary: dict[str, Any] | None = None
    cpu_records: list[dict[str, Any]] = field(default_factory=list)
    mixed_cpus: bool = False
    not_run: int = 0
    interrupted: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class OutputInUseError(RuntimeError):
    """Another run holds the output directory's lock (two runs would mix their results)."""


class BatchInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a batch; the finished part is on disk and summarised.

    Attributes:
        summary: what finished (``not_run`` episodes left no files).
        signum: the signal that stopped the batch.
    """

    def __init__(self, summary: BatchSummary, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.summary = summary
        self.signum = signum


# --------------------------------------------------------------------------------------
# episode selection and output layout
# --------------------------------------------------------------------------------------
def list_episode_specs(selection: str | None, task: Any = "find_nav_interact") -> list[EpisodeSpec]:
    """The episodes a selection names for ``task`` (its ``select_episodes``; None: the
    task's default split). For the benchmark's task: ``"one"`` (the first val100 episode),
    ``"val100"``, ``"val"``, a split directory, or a JSON file listing episode ids
    (``["id", ...]`` or ``[{"episode_id": ..., "scene_id": ...}, ...]``, resolved against
    ``val``); see :func:`humanclaw_gym.episodes.selection.select_episodes`.

    Raises:
        UnknownTaskError: an unknown task; ValueError: an unknown selection.
    """
    from humanclaw_gym.tasks import resolve_task

    cls = resolve_task(task)
    if selection is None:
        selection = cls.spec.default_split
    return [
        EpisodeSpec(split, ep.scene_id, ep.episode_id, cls.episode_label(ep))
        for split, ep in cls.select_episodes(selection)
    ]


def rollout_dir(output: str | os.PathLike[str], spec: EpisodeSpec, rollout_index: int = 0) -> Path:
    """The deterministic output directory of one episode rollout.

    Raises:
        ValueError: the directory would not lie inside ``output`` (an id holding a path
            separator or ``..``, or a link out of ``output``); episode readers refuse such
            ids already (:func:`~humanclaw_gym.episodes.schema.check_id`).
    """
    name = f"{spec.scene_id}_ep{spec.episode_id}_{spec.category}"
    path = Path(output) / name / f"rollout_{rollout_index:02d}"
    base = os.path.realpath(output)
    if (
        name in (".", "..")
        or os.sep in name
        or (os.altsep and os.altsep in name)
        or os.path.commonpath([base, os.path.realpath(path)]) != base
    ):
        raise ValueError(
            f"episode {spec.episode_id[:60]!r} of scene {spec.scene_id[:60]!r}: its output "
            f"folder {name[:120]!r} does not stay inside the output directory {output}"
        )
    return path


def rollout_complete(directory: Path, config: RunConfig) -> bool:
    """True when every artifact the flags require exists and verifies (a ``node.json``
    that is there but not a well-formed record makes the episode incomplete)."""
    result_path = directory / "episode_result.json"
    if not result_path.is_file():
        return False
    try:
        result = json.loads(result_path.read_text())
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(result, dict) or result.get("ended_by") not in ("stop", "truncated"):
        return False
    from humanclaw_gym.provenance import node_record_problem

    if node_record_problem(directory) is not None:  # damaged: rerun, which rewrites it
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
        except (OSError, ValueError, RecursionError):
            return False
        if (
            not isinstance(metrics, dict)
            or metrics.get("schema") not in _task_suite(config).schemas
        ):
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
def _task_suite(config: RunConfig) -> Any:
    """The metric suite of the run's task."""
    from humanclaw_gym.metrics.trackers import suite_for_spec
    from humanclaw_gym.tasks import resolve_task

    return suite_for_spec(resolve_task(config.task).spec)


_WORKER_ENVS: dict[tuple[Any, ...], Any] = {}


def _base_env(config: RunConfig, split: str, privileged: bool) -> Any:
    """One env per (process, config): scenes are reused across episodes of the same scene."""
    key = (
        split,
        config.backend.key(),
        config.max_steps,
        privileged,
        config.instruction_template,
        config.task,
    )
    env = _WORKER_ENVS.get(key)
    if env is None:
        from humanclaw_gym.envs.env import HumanClawEnv

        source: dict[str, Any] = (
            {"backend": config.backend}
            if config.profile is None
            else {"profile": replace(config.profile, backend=config.backend)}
        )
        env = HumanClawEnv(
            config.task,
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
    from humanclaw_gym.provenance import write_node_record

    out = rollout_dir(config.output, spec)
    _clear_rollout(out)
    out.mkdir(parents=True, exist_ok=True)
    write_node_record(out)
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
                    on_end=lambda r: _write_final_png(out, r, env),
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
                "task": _task_record(config),
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


def _task_record(config: RunConfig) -> dict[str, Any] | None:
    """The run's task as results record it (None when it cannot be resolved)."""
    from humanclaw_gym.tasks import UnknownTaskError, resolve_task

    try:
        return resolve_task(config.task).spec.record()
    except UnknownTaskError:
        return None


def _write_final_png(out: Path, result: Any, env: Any = None) -> None:
    """The last ego image: the observation itself, or its ``"rgb"`` entry; for an
    observation without an ego RGB image, the ego camera of the final state (``env``).
    An observation with a goal picture (``"goal_rgb"``) also gives ``goal_rgb.png``."""
    obs = result.final_observation
    if isinstance(obs, dict):
        goal = obs.get("goal_rgb")
        if getattr(goal, "ndim", 0) == 3 and getattr(goal, "dtype", None) == "uint8":
            _write_png(out / "goal_rgb.png", goal)
        obs = obs.get("rgb")
    if obs is None or getattr(obs, "ndim", 0) != 3 or getattr(obs, "dtype", None) != "uint8":
        if env is None or getattr(env.unwrapped, "simulation", None) is None:
            return
        from humanclaw_gym.image_sizes import EGO_SIZE_PX

        obs = env.unwrapped.simulation.render("ego", EGO_SIZE_PX).rgb
    _write_png(out / "final_ego.png", obs)


def _write_png(path: Path, image: Any) -> None:
    """Atomic PNG write of an ``uint8 (H, W, 3)`` image."""
    from PIL import Image

    from humanclaw_gym.fileio import atomic_path

    with atomic_path(path) as tmp:
        Image.fromarray(image).save(tmp, format="PNG")


_KNOWN_OUTPUTS = (
    "final_ego.png",
    "goal_rgb.png",
    "report.html",
    "trajectory_before.npz",
    "trajectory_after.npz",
    "replay_manifest.json",
    "metrics.json",
    "ego.mp4",
    "exo.mp4",
    "node.json",
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
def _worker_init(stop: Any = None, parent_pid: int | None = None, status_queue: Any = None) -> None:
    """Prepare a worker process (and, without arguments, the caller's own process).

    In a worker process (``parent_pid`` given): SIGINT is ignored (a Ctrl-C reaches the
    whole process group; the parent decides what stops), and a watchdog thread ends the
    process within :data:`_WATCHDOG_PERIOD_S` once ``stop`` is set or the parent is gone
    (it was killed: the worker is an orphan). With ``status_queue``, the policy's status
    lines (:mod:`.status`) go to the parent's progress bar through it.
    """
    if status_queue is not None:
        logging.getLogger(POLICY_STATUS_LOGGER).addHandler(
            logging.handlers.QueueHandler(status_queue)
        )
    # The renderer's Mesa defaults (no rasteriser or shader-cache threads): this also runs
    # in the caller's own process (workers=1), which may fork async vector envs later.
    from humanclaw_gym.render.moderngl_backend import apply_mesa_defaults

    apply_mesa_defaults()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if parent_pid is None:
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(
        target=_watch_parent, args=(stop, parent_pid), name="humanclaw-watchdog", daemon=True
    ).start()


def _watch_parent(stop: Any, parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid or (stop is not None and stop.is_set()):
            os._exit(1)  # mid-episode: the parent removes (or a resume redoes) the folder
        time.sleep(_WATCHDOG_PERIOD_S)


class _Stop:
    """What SIGINT / SIGTERM asked for during a batch.

    The handler records the first signal. While an episode runs in this very process
    (``raise_now``), it also raises :class:`_Interrupt` at once, as Python's own SIGINT
    does; otherwise the executor loops poll :attr:`signum` between results.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.raise_now = False

    def handler(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if self.raise_now:
            self.raise_now = False
            raise _Interrupt(signum)

    @property
    def requested(self) -> bool:
        return self.signum is not None


class _Interrupt(BaseException):
    """Raised inside an in-process episode by :meth:`_Stop.handler`."""


@contextmanager
def _catch_interrupts(stop: _Stop) -> Iterator[None]:
    """Route SIGINT and SIGTERM to ``stop`` (main thread only: Python delivers signals
    there; elsewhere the defaults stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, stop.handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while worker processes start: a child inherits the ignored signal
    through ``exec``, so a Ctrl-C during its start-up cannot kill it with a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_local(
    specs: Sequence[EpisodeSpec],
    config: RunConfig,
    workers: int,
    on_result: Callable[[dict[str, Any]], None],
    stop: _Stop | None = None,
    status: Any = None,
) -> None:
    stop = stop or _Stop()
    if workers <= 1:
        _worker_init()
        try:
            if status is not None:
                status.attach()
            for spec in specs:
                if stop.requested:
                    return
                stop.raise_now = True
                try:
                    result = run_one_episode(spec, config)
                except _Interrupt:
                    return
                finally:
                    stop.raise_now = False
                on_result(result)
        finally:
            if status is not None:
                status.detach()
            close_worker_envs()
        return
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = mp.get_context("spawn")
    halt = ctx.Event()  # set: every worker exits within its watchdog period
    status_queue = None if status is None else status.listen(ctx)
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=ctx,
        initializer=_worker_init,
        initargs=(halt, os.getpid(), status_queue),
    )
    try:
        with _sigint_ignored():  # the workers start while the specs are submitted
            futures = {pool.submit(run_one_episode, spec, config): spec for spec in specs}
        pending = set(futures)
        while pending and not stop.requested:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for fut in done:
                spec = futures[fut]
                try:
                    on_result(fut.result())
                except BrokenProcessPool as exc:
                    if stop.requested:
                        break
                    on_result(_failed(spec, f"worker process died: {exc}"))
    finally:
        if stop.requested:
            halt.set()
        pool.shutdown(wait=True, cancel_futures=True)
        if status is not None:
            status.detach()


def _run_ray(
    specs: Sequence[EpisodeSpec],
    config: RunConfig,
    ray_address: str | None,
    workers: int,
    on_result: Callable[[dict[str, Any]], None],
    resources: Mapping[str, float] | None = None,
    stop: _Stop | None = None,
    status: _BarStatus | None = None,
) -> None:
    from humanclaw_gym.evaluation.ray_executor import EpisodeRunner, run_ray

    stop = stop or _Stop()
    run_ray(
        specs,
        config,
        on_result,
        EpisodeRunner(run_one_episode, rollout_dir, _clear_rollout, _worker_init),
        address=ray_address,
        workers=workers,
        resources=resources,
        should_stop=lambda: stop.requested,
        on_status=None if status is None else status.set_line,
    )


def _checked_delivery(res: dict[str, Any], config: RunConfig) -> dict[str, Any]:
    """A completed episode whose folder the driver cannot find complete and verified in
    ``config.output`` is a failure (artifacts written where the driver cannot see them
    must never make a run exit 0)."""
    if res.get("status") != "completed":
        return res
    spec = EpisodeSpec("", res["scene_id"], res["episode_id"], res["category"])
    directory = rollout_dir(config.output, spec)
    if rollout_complete(directory, config):
        return res
    return {
        **res,
        "status": "failed",
        "error": f"the episode's artifacts did not reach the driver: {directory} is "
        "missing or incomplete",
    }


def check_run_config(config: RunConfig) -> None:
    """Refuse a config that would fail in every episode, before any worker starts.

    Raises:
        ValueError: an unknown task (``UnknownTaskError``, listing the registered ones) or
            one whose trackers are not registered, an agent that cannot be imported
            (``PolicySpecError``), an unknown backend, an option it does not accept, a
            missing body model, an instruction template that cannot be read
            (``InstructionTemplateError``).
    """
    from humanclaw_gym.evaluation.policies import check_policy_spec
    from humanclaw_gym.tasks import DEFAULT_TASK, resolve_task

    spec = resolve_task(config.task).spec  # UnknownTaskError (a ValueError) names the task
    if spec.id != DEFAULT_TASK and (config.profile is not None or config.via_server):
        raise ValueError(
            f"task {spec.id!r}: --profile and --via-server run the benchmark's task "
            f"{DEFAULT_TASK!r} only"
        )
    if config.metrics:
        _task_suite(config)  # a tracker the task names but nobody registered
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


class PolicyPreflightError(ValueError):
    """The policy's ``preflight()`` check refused the run (e.g. its model endpoint is
    unreachable or refuses the key); nothing was written."""


def check_policy(config: RunConfig, *, preflight: bool = True) -> None:
    """Build the configured policy once and drop it, so that a model config that does not
    load, a missing API key or an unreadable checkpoint fails here, once, before anything
    is written, instead of in every episode.

    With ``preflight`` (the default), a policy that has a ``preflight()`` method gets it
    called once here: a policy that talks to a model endpoint checks that the endpoint
    answers (``docs/policies.md``). This instance runs no episode, so whatever the check
    costs is counted in no episode's usage.

    Raises:
        PolicySpecError: the policy's package is missing (an ``ImportError``).
        PolicyPreflightError: ``preflight()`` raised; its message, on one line.
        Exception: what building the policy raises (``ModelConfigError``, a missing key).
    """
    from humanclaw_gym.evaluation.policies import PolicySpecError, load_policy

    try:
        policy = load_policy(config.agent, model_config=config.model_config, seed=config.seed)
    except ImportError as exc:
        raise PolicySpecError(f"agent {config.agent!r} cannot be built: {exc}") from exc
    try:
        check = getattr(policy, "preflight", None) if preflight else None
        if callable(check):
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - the policy's refusal, whatever its type
                text = " ".join(str(exc).split()) or type(exc).__name__
                raise PolicyPreflightError(f"agent {config.agent!r} preflight: {text}") from exc
    finally:
        close = getattr(policy, "close", None)
        if callable(close):
            close()


def check_episode_scenes(specs: Iterable[EpisodeSpec], config: RunConfig) -> None:
    """Refuse episodes whose scene cannot be loaded (by name; nothing is loaded), before
    any worker starts: an unknown scene is never replaced by another one.

    Raises:
        SceneNotInstalledError / SceneDatasetError: naming the scene(s).
    """
    if config.via_server:
        return  # the server checks its own plan
    from humanclaw_gym.episodes.io import check_scenes_installed

    dataset = None
    if config.backend.scene_dataset is not None:
        from humanclaw_gym.scenes.hssd import open_scene_dataset

        dataset = open_scene_dataset(config.backend.scene_dataset)
    check_scenes_installed(specs, dataset)


def check_episode_starts(specs: Iterable[EpisodeSpec], config: RunConfig) -> None:
    """Refuse an episode whose start its scene does not hold, before any worker starts:
    the check every reset makes (:func:`~humanclaw_gym.episodes.resolve.check_start`),
    made once for the whole run where the scene is cheap to read: a scene read from a
    SceneSpec file (the shipped homes, a scene file path, ``$HUMANCLAW_SCENE_DIR``). Each
    scene is read once and its limits kept for all its episodes; a generated training home
    (``hc_train_<n>``) and a scene of the run's scene dataset are checked at reset only.
    Episodes whose records have no ``start_position`` (another task's) are not checked.

    Raises:
        EpisodeFormatError: naming the split, the episode, ``start_position`` and the
            scene's extent.
    """
    if config.via_server:
        return  # the server checks its own plan
    from humanclaw_gym.episodes.io import _training_scene, load_scene

    dataset = None
    if config.backend.scene_dataset is not None:
        from humanclaw_gym.scenes.hssd import open_scene_dataset

        dataset = open_scene_dataset(config.backend.scene_dataset)
    cheap = [
        s
        for s in specs
        if not _training_scene(s.scene_id)
        and not (dataset is not None and dataset.has_scene(s.scene_id))
    ]
    if not cheap:
        return
    from humanclaw_gym.episodes.resolve import check_start, start_limits
    from humanclaw_gym.episodes.schema import EpisodeFormatError
    from humanclaw_gym.tasks import resolve_task

    task = resolve_task(config.task)
    records: dict[str, dict[tuple[str, str], Any]] = {}
    limits: dict[str, Any] = {}
    for spec in cheap:
        split = records.get(spec.split)
        if split is None:
            split = records[spec.split] = {
                (ep.scene_id, ep.episode_id): ep for ep in task.load_episodes(spec.split)
            }
        episode = split.get((spec.scene_id, spec.episode_id))
        if getattr(episode, "start_position", None) is None:
            continue  # not in its split (the episode fails and says so) or no start
        scene = limits.get(spec.scene_id)
        if scene is None:
            scene = limits[spec.scene_id] = start_limits(load_scene(spec.scene_id))
        try:
            check_start(episode, scene)
        except EpisodeFormatError as exc:
            raise EpisodeFormatError(f"{spec.split}: {exc}") from None


@contextmanager
def output_lock(output: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold ``<output>/.humanclaw_run.lock`` (created with ``output``) for one run.

    The lock is an OS file lock (``filelock``): it ends with its process, so the lock of a
    run that was killed is taken over by the next run at once.

    Raises:
        OutputInUseError: another live process holds the lock.
    """
    from filelock import FileLock, Timeout

    directory = Path(output)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    lock = FileLock(path, timeout=0, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        raise OutputInUseError(
            f"output directory {directory} is in use by another humanclaw run (it holds "
            f"{path}); wait for that run to finish or choose another --output"
        ) from None
    try:
        yield path
    finally:
        lock.release()


def _clear_unfinished(directory: Path, config: RunConfig) -> None:
    """Remove what an unfinished episode left (never a complete result, never a user's
    own file), and its folders when they are empty."""
    if rollout_complete(directory, config):
        return
    _clear_rollout(directory)
    for folder in (directory, directory.parent):
        try:
            folder.rmdir()
        except OSError:  # not empty (other rollouts, a user's file) or already gone
            break


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
    ray_resources: Mapping[str, float] | None = None,
    notice: Callable[[str], None] | None = None,
    preflight: bool = True,
) -> BatchSummary:
    """Run many episodes; see the module docstring.

    Before anything is written, the config, the episodes' scenes and starts
    (:func:`check_episode_starts`), the run's fingerprint
    (:mod:`.fingerprint`, against the one the output directory records) and the policy
    (built once, when there are episodes) are checked; then the output directory is
    locked and the fingerprint recorded there if new.

    Args:
        specs: the episodes to run.
        config: the run's settings.
        workers: worker processes (local) or concurrent tasks (Ray).
        resume: skip episodes whose requested artifacts are complete and verified.
        executor: ``"local"`` or ``"ray"``.
        ray_address: an existing Ray cluster (default: start a local one); checked to
            answer before anything is written.
        progress: show a progress bar.
        episodes: the fingerprint's ``episodes`` setting
            (:func:`~humanclaw_gym.evaluation.fingerprint.episodes_record` of the selection
            before any limit); default: the list ``specs`` itself.
        ray_resources: what each Ray task asks for (see
            :func:`~humanclaw_gym.evaluation.ray_executor.run_ray`); default one CPU.

        notice: called with one line for the user (e.g. what a rerun overwrites); default:
            printed to stderr.
        preflight: call the policy's ``preflight()`` check, if it has one, once before
            anything is written (:func:`check_policy`).

    Raises:
        ValueError: bad arguments or config, an episode listed twice.
        SceneNotInstalledError: an episode's scene cannot be found.
        EpisodeFormatError: an episode starts outside its scene (:func:`check_episode_starts`).
        OutputInUseError: another run is writing to ``config.output``.
        RayAddressError: ``ray_address`` does not answer (nothing was written).
        RayClusterError: no node of the Ray cluster offers ``ray_resources``.
        PolicyPreflightError: the policy's preflight check refused the run.
        RunFingerprintError: the output directory holds results of other settings (the
            message lists the differing fields); nothing has run.
        BatchInterrupted: SIGINT or SIGTERM (see the module docstring); it carries the
            summary of what finished.
    """
    from humanclaw_gym.evaluation.fingerprint import (
        check_fingerprint,
        episodes_record,
        run_fingerprint,
    )

    if notice is None:

        def notice(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

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
    for spec in specs:
        rollout_dir(config.output, spec)  # every output folder stays inside the output
    check_run_config(config)
    check_episode_scenes(specs, config)
    check_episode_starts(specs, config)
    if executor == "ray":
        from humanclaw_gym.evaluation.ray_executor import check_ray_address

        check_ray_address(ray_address)
    if episodes is None:
        episodes = episodes_record(None, ((s.split, s.scene_id, s.episode_id) for s in specs))
    fingerprint = run_fingerprint(config, episodes)
    check_fingerprint(config.output, fingerprint, resume=resume, write=False)
    if specs:
        check_policy(config, preflight=preflight)
    with output_lock(config.output):  # the first write: the output directory and its lock
        check_fingerprint(config.output, fingerprint, resume=resume)
        return _run_locked(
            specs, config, workers, resume, executor, ray_address, progress, notice, ray_resources
        )


def _run_locked(
    specs: list[EpisodeSpec],
    config: RunConfig,
    workers: int,
    resume: bool,
    executor: str,
    ray_address: str | None,
    progress: bool,
    notice: Callable[[str], None],
    ray_resources: Mapping[str, float] | None = None,
) -> BatchSummary:
    summary = BatchSummary()
    t0 = time.perf_counter()
    todo = []
    overwritten = []
    for spec in specs:
        directory = rollout_dir(config.output, spec)
        if resume and rollout_complete(directory, config):
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
            if not resume and (directory / "episode_result.json").is_file():
                overwritten.append(directory)
    if overwritten:
        notice(
            f"humanclaw run: {len(overwritten)} episode folder(s) in {config.output} hold "
            f"results of an earlier run and will be overwritten, e.g. {overwritten[0]} "
            "(--resume keeps the complete ones)"
        )

    bar = None
    status = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="episodes", unit="ep", dynamic_ncols=True)
        status = _BarStatus(bar)
    successes = 0
    # the running success rate: the benchmark's NavSR@20cm, another task's "success"
    benchmark = _task_suite(config).task == "find_nav_interact"
    headline = ("NavSR@20cm", "nav_success_20cm") if benchmark else ("SR", "success")
    finished: set[tuple[str, str]] = set()

    def on_result(res: dict[str, Any]) -> None:
        nonlocal successes
        res = _checked_delivery(res, config)
        summary.results.append(res)
        finished.add((res["scene_id"], res["episode_id"]))
        if res.get("status") == "completed":
            summary.completed += 1
        else:
            summary.failed += 1
        m = res.get("metrics") or {}
        if m.get(headline[1]):
            successes += 1
        if bar is not None:
            done = summary.completed + summary.failed
            postfix = {"fail": summary.failed}
            if config.metrics:
                postfix[headline[0]] = f"{100.0 * successes / max(done, 1):.0f}%"
            status.show(postfix)
            bar.update(1)

    stop = _Stop()
    with _catch_interrupts(stop):
        try:
            if executor == "local":
                _run_local(todo, config, workers, on_result, stop, status)
            else:
                _run_ray(todo, config, ray_address, workers, on_result, ray_resources, stop, status)
        finally:
            if bar is not None:
                bar.close()
        if stop.requested:  # the workers are gone: nothing writes any more
            for spec in todo:
                if (spec.scene_id, spec.episode_id) in finished:
                    continue
                _clear_unfinished(rollout_dir(config.output, spec), config)
                summary.not_run += 1
                summary.results.append(
                    {
                        "episode_id": spec.episode_id,
                        "scene_id": spec.scene_id,
                        "category": spec.category,
                        "status": "not_run",
                    }
                )
            summary.interrupted = signal.Signals(stop.signum).name
    summary.results.sort(key=lambda r: (r["scene_id"], r["episode_id"]))
    summary.wall_time_s = time.perf_counter() - t0
    _record_cpus(summary, specs, config)
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

            summary.metrics_summary["environment"] = {
                **run_environment(),
                "episode_cpus": summary.cpu_records,
                "mixed_cpus": summary.mixed_cpus,
            }
            write_json_atomic(Path(config.output) / "metrics_summary.json", summary.metrics_summary)
    if stop.requested:
        raise BatchInterrupted(summary, stop.signum)
    return summary


class _BarStatus(logging.Handler):
    """The progress bar's fields plus the latest status line of a policy that waits
    (:mod:`.status`; e.g. a model endpoint being retried), logged in this process, sent
    through a queue by the local executor's workers, or handed to :meth:`set_line` by the
    Ray executor."""

    def __init__(self, bar: Any) -> None:
        super().__init__(logging.INFO)
        self.bar = bar
        self.fields: dict[str, Any] = {}
        self.line = ""
        self._listener: logging.handlers.QueueListener | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.set_line(record.getMessage())

    def set_line(self, line: str) -> None:
        """Show ``line`` (``""`` clears it); the Ray executor's lines come in here."""
        with self.lock:
            self.line = line
            self.show()

    def show(self, fields: Mapping[str, Any] | None = None) -> None:
        with self.lock:  # an RLock: emit() holds it already
            if fields is not None:
                self.fields = dict(fields)
            postfix = dict(self.fields)
            if self.line:
                postfix["waiting"] = self.line
            self.bar.set_postfix(postfix)

    def attach(self) -> None:
        """Show the status lines logged in this process."""
        logging.getLogger(POLICY_STATUS_LOGGER).addHandler(self)

    def listen(self, ctx: Any) -> Any:
        """A queue for worker processes (see :func:`_worker_init`), drained into the bar."""
        queue = ctx.Queue()
        self._listener = logging.handlers.QueueListener(queue, self)
        self._listener.start()
        return queue

    def detach(self) -> None:
        logging.getLogger(POLICY_STATUS_LOGGER).removeHandler(self)
        if self._listener is not None:
            self._listener.stop()
            self._listener = None


def _record_cpus(summary: BatchSummary, specs: Sequence[EpisodeSpec], config: RunConfig) -> None:
    """Group the run's episodes by the CPU record of the node that ran them."""
    from humanclaw_gym.provenance import episode_cpu_groups

    summary.cpu_records = episode_cpu_groups(rollout_dir(config.output, s) for s in specs)
    summary.mixed_cpus = sum(g["cpu"] is not None for g in summary.cpu_records) > 1
