"""The Ray executor: episodes as Ray tasks on any node, their folders back to the driver.

Each episode is one Ray task that runs :func:`~humanclaw_gym.evaluation.batch.run_one_episode`
in node-local scratch (a fresh temporary directory under the node's ``TMPDIR``), then
streams the whole episode folder (bundles, metrics, VLM step records, images, videos,
``node.json``) back through Ray's object store: first a header (the episode's summary and
the folder's manifest), then the files' bytes in chunks (:mod:`.artifacts`). The driver
writes the folder atomically into ``--output``; the scratch directory is removed. So a
cluster needs no shared disk, and a worker or node lost mid-episode leaves nothing at the
driver: the episode is reported failed (``--resume`` runs it again; Ray does not retry it).

While an episode's policy waits (a model endpoint being retried), the status line it
reports (:mod:`.status`) travels to the driver through a small Ray queue and shows on the
run's progress bar, as with the local executor.

The driver keeps at most ``workers`` episodes in flight. Each task asks Ray for
``num_cpus=1`` unless ``resources`` says otherwise: ``{"CPU": 0.25}`` lets four episodes
share a core (agents that mostly wait on a model endpoint), a custom resource such as
``{"vlm_node": 1}`` places episodes on the nodes started with it (``ray start
--resources '{"vlm_node": 8}'``).

What every node needs: the same humanclaw-gym (and Ray, Python) installation, the files the
run names by path (a split directory, a scene dataset, checkpoints, a body model; the model
config file is sent with each task) and the environment variables the agent reads (an API
key: export it before ``ray start``, worker processes inherit the node's environment).
"""

from __future__ import annotations

import logging
import shutil
import socket
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from humanclaw_gym.evaluation import artifacts
from humanclaw_gym.evaluation.artifacts import FolderReceiver, folder_chunks, folder_manifest
from humanclaw_gym.evaluation.episode import failed_summary as _failed
from humanclaw_gym.evaluation.status import POLICY_STATUS_LOGGER

__all__ = [
    "EpisodeRunner",
    "RayAddressError",
    "RayClusterError",
    "check_ray_address",
    "parse_task_resources",
    "run_ray",
]

_CONNECT_TIMEOUT_S = 5.0
_UNCONSUMED_CHUNKS = 4  # chunks a task may stream ahead of the driver (bounds memory)


@dataclass(frozen=True)
class EpisodeRunner:
    """What this executor needs of the batch runner, handed in by it (this module does not
    import :mod:`.batch`): module-level functions, so that Ray pickles them by reference.

    Attributes:
        run: ``run(spec, config) -> summary``, one episode into ``config.output``.
        folder: ``folder(output, spec) -> Path``, the episode's folder under ``output``.
        clear: ``clear(folder)``, removes what an earlier run left in an episode folder.
        init: ``init()``, prepares a worker process.
    """

    run: Callable[[Any, Any], dict[str, Any]]
    folder: Callable[[str, Any], Path]
    clear: Callable[[Path], None]
    init: Callable[[], None]


class RayAddressError(ValueError):
    """``--ray-address`` names no reachable Ray cluster (checked before anything is written)."""


class RayClusterError(ValueError):
    """The Ray cluster cannot run the episode tasks as asked (no node offers the resources)."""


def parse_task_resources(items: Sequence[str]) -> dict[str, float]:
    """``("CPU=0.25", "vlm_node=1")`` -> ``{"CPU": 0.25, "vlm_node": 1.0}``.

    Raises:
        ValueError: an item that is not ``NAME=AMOUNT`` with an amount > 0, or a name
            given twice.
    """
    resources: dict[str, float] = {}
    for item in items:
        name, sep, amount = item.partition("=")
        name = name.strip()
        try:
            value = float(amount)
        except ValueError:
            value = -1.0
        if not sep or not name or not value > 0 or value != value or value == float("inf"):
            raise ValueError(
                f"--ray-task-resources {item!r} is invalid: allowed NAME=AMOUNT with an amount "
                "> 0, e.g. CPU=0.25 or vlm_node=1"
            )
        if name in resources:
            raise ValueError(f"--ray-task-resources names {name!r} twice")
        resources[name] = value
    return resources


def check_ray_address(address: str | None) -> None:
    """Refuse an address where no Ray cluster answers, before anything is written.

    ``ray.init`` waits a long time for a cluster that is not there; this check opens one
    TCP connection to ``HOST:PORT`` (also in ``ray://HOST:PORT``) with a 5 s timeout.
    ``None`` (start a local cluster) and ``"auto"``/``"local"`` are left to Ray.

    Raises:
        RayAddressError: not ``HOST:PORT``, or nothing accepts a connection there.
    """
    if address is None or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayAddressError(
            f"--ray-address {address!r} is invalid: allowed HOST:PORT of a Ray head node "
            "(its GCS port, 6379 by default), 'auto', or none to start a local cluster"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RayAddressError(
            f"--ray-address {address}: no Ray cluster can be reached there ({reason}); "
            "start one with 'ray start --head' or give the head node's HOST:PORT"
        ) from None


# ---------------------------------------------------------------------------------------
# the task (runs on a Ray worker)
# ---------------------------------------------------------------------------------------
class _StatusToQueue(logging.Handler):
    """Puts the policy's status lines (:mod:`.status`) of a task into the driver's queue;
    a line that cannot be sent (the run is over) is dropped: it is only a display."""

    def __init__(self, queue: Any) -> None:
        super().__init__(logging.INFO)
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record.getMessage())
        except Exception:  # noqa: BLE001 - a full or gone queue must not fail the episode
            pass


def _episode_task(
    runner: EpisodeRunner,
    spec: Any,
    config: Any,
    model_config_text: bytes | None,
    chunk_bytes: int,
    status_queue: Any = None,
) -> Any:
    """Run one episode in node-local scratch; yield its header, then its folder's chunks.
    With ``status_queue``, the policy's status lines go into it while the episode runs."""
    runner.init()
    scratch = Path(tempfile.mkdtemp(prefix="humanclaw-episode-"))
    status = None if status_queue is None else _StatusToQueue(status_queue)
    if status is not None:
        logging.getLogger(POLICY_STATUS_LOGGER).addHandler(status)
    try:
        local = replace(config, output=str(scratch / "out"))
        if model_config_text is not None:
            local = replace(
                local, model_config=_node_model_config(config, model_config_text, scratch)
            )
        try:
            summary = runner.run(spec, local)
        finally:  # the worker process runs other tasks next
            if status is not None:
                logging.getLogger(POLICY_STATUS_LOGGER).removeHandler(status)
        directory = runner.folder(local.output, spec)
        manifest = folder_manifest(directory)
        yield {"summary": summary, "manifest": manifest}
        yield from folder_chunks(directory, manifest, chunk_bytes)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _node_model_config(config: Any, text: bytes, scratch: Path) -> str:
    """The driver's model config on this node: its own path when this node sees the same
    file (a shared disk), else the driver's bytes written into scratch."""
    assert config.model_config is not None
    original = Path(config.model_config)
    try:
        if original.read_bytes() == text:
            return str(original)
    except OSError:
        pass
    copy = scratch / "model_config" / original.name
    copy.parent.mkdir(parents=True)
    copy.write_bytes(text)
    return str(copy)


# ---------------------------------------------------------------------------------------
# the driver side
# ---------------------------------------------------------------------------------------
def run_ray(
    specs: Sequence[Any],
    config: Any,
    on_result: Callable[[dict[str, Any]], None],
    runner: EpisodeRunner,
    *,
    address: str | None = None,
    workers: int = 1,
    resources: Mapping[str, float] | None = None,
    should_stop: Callable[[], bool] | None = None,
    chunk_bytes: int | None = None,
    on_status: Callable[[str], None] | None = None,
) -> None:
    """Run ``specs`` as Ray tasks, at most ``workers`` at a time; ``on_result`` receives each
    episode's summary after its folder was written under ``config.output``.

    Args:
        specs: the episodes (:class:`~humanclaw_gym.evaluation.batch.EpisodeSpec`).
        config: the run's settings, a :class:`~humanclaw_gym.evaluation.batch.RunConfig`
            (``config.output`` is the driver's directory).
        on_result: called on the driver with each summary (``dir`` = the driver's folder);
            an episode whose folder did not arrive is a failed summary saying why.
        runner: the batch runner's episode functions.
        address: an existing cluster (``ray.init(address=...)``); None starts a local one
            with ``workers`` CPUs, whatever ``RAY_ADDRESS`` or an earlier ``ray start``
            recorded (use ``"auto"`` to join the cluster Ray finds that way).
        workers: episodes in flight at once.
        resources: what each task asks Ray for (``CPU`` and ``GPU`` map to ``num_cpus`` /
            ``num_gpus``); default ``{"CPU": 1}``.
        should_stop: polled between results; True stops submitting and cancels the tasks
            in flight (their folders never reach the driver).
        chunk_bytes: the largest chunk of file bytes per object (default
            :data:`~humanclaw_gym.evaluation.artifacts.CHUNK_BYTES`).
        on_status: called on the driver with each status line a task's policy reports
            (:mod:`.status`; ``""`` clears it), in the order they arrive; they travel
            through a Ray queue (an actor using no CPU) made for the run when this is given.

    Raises:
        RuntimeError: Ray is not installed.
        RayClusterError: no node of the cluster offers what a task asks for.
    """
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(
            "--executor ray needs the 'ray' extra: pip install 'humanclaw-gym[ray]'"
        ) from exc
    if not specs:
        return
    wanted = {"CPU": 1.0, **dict(resources or {})}
    chunk_bytes = chunk_bytes or artifacts.CHUNK_BYTES
    started_here = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            # "local": a cluster of this run's own. Without it ray.init joins whatever
            # RAY_ADDRESS or the last `ray start` record (ray_current_cluster in Ray's
            # temp dir) names, a cluster that may be long gone or someone else's.
            ray.init(
                address="local",
                num_cpus=max(1, workers, int(wanted["CPU"] + 0.999)),
                log_to_driver=False,
                include_dashboard=False,
            )
        started_here = True
    running: dict[Any, Any] = {}
    status_queue = None
    try:
        _check_feasible(ray, wanted, address)
        if on_status is not None:
            from ray.util.queue import Queue

            status_queue = Queue(actor_options={"num_cpus": 0})
        task = ray.remote(_episode_task).options(
            max_retries=0,
            _generator_backpressure_num_objects=_UNCONSUMED_CHUNKS,
            **_task_options(wanted),
        )
        model_config_text = (
            Path(config.model_config).read_bytes() if config.model_config is not None else None
        )
        pending = list(specs)
        stop = should_stop or (lambda: False)
        while (pending or running) and not stop():
            while pending and len(running) < workers:
                spec = pending.pop(0)
                ref = task.remote(
                    runner, spec, config, model_config_text, chunk_bytes, status_queue
                )
                running[ref] = spec
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
            _drain_status(status_queue, on_status)
            for generator in ready:
                spec = running.pop(generator)
                on_result(_receive(ray, generator, spec, config, runner))
    finally:
        for generator in running:  # stopped: cancel what is still in flight
            ray.cancel(generator, force=True)
        if status_queue is not None:
            status_queue.shutdown(force=True)
        if started_here:
            ray.shutdown()


def _drain_status(queue: Any, on_status: Callable[[str], None] | None) -> None:
    """Hand every status line waiting in ``queue`` to ``on_status``, oldest first."""
    if queue is None or on_status is None:
        return
    waiting = queue.qsize()
    if waiting:
        for line in queue.get_nowait_batch(waiting):  # the driver alone takes from it
            on_status(str(line))


def _task_options(wanted: Mapping[str, float]) -> dict[str, Any]:
    custom = {k: v for k, v in wanted.items() if k not in ("CPU", "GPU")}
    options: dict[str, Any] = {"num_cpus": wanted["CPU"]}
    if "GPU" in wanted:
        options["num_gpus"] = wanted["GPU"]
    if custom:
        options["resources"] = custom
    return options


def _check_feasible(ray: Any, wanted: Mapping[str, float], address: str | None) -> None:
    offers = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    if any(all(offer.get(k, 0.0) >= v for k, v in wanted.items()) for offer in offers):
        return
    asked = ", ".join(f"{k}={v:g}" for k, v in wanted.items())
    names = sorted({k for offer in offers for k in offer if not k.startswith("node:")})
    where = f"the Ray cluster at {address}" if address else "the local Ray cluster"
    raise RayClusterError(
        f"no node of {where} offers {asked} for an episode task (resources on offer: "
        f"{', '.join(names) or 'none'}); start a node with them or change --ray-task-resources"
    )


def _receive(
    ray: Any, generator: Any, spec: Any, config: Any, runner: EpisodeRunner
) -> dict[str, Any]:
    """Write one task's folder into the driver's output; a failed summary if it cannot."""
    target = runner.folder(config.output, spec)
    try:
        header = ray.get(next(generator))
    except StopIteration:
        return _failed(spec, "the episode task returned nothing")
    except Exception as exc:  # the worker or its node died, the task was cancelled
        return _failed(spec, f"the episode's worker was lost: {_one_line(exc)}")
    try:
        with FolderReceiver(target, header["manifest"], clear_target=runner.clear) as receiver:
            for ref in generator:
                receiver.write(ray.get(ref))
    except Exception as exc:  # a short or altered file, a full disk, the worker lost
        return _failed(spec, f"artifacts did not reach the driver: {_one_line(exc)}")
    summary = dict(header["summary"])
    summary["dir"] = str(target)
    return summary


def _one_line(exc: BaseException) -> str:
    """The first line of an error; a task's own exception rather than Ray's wrapper."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]
