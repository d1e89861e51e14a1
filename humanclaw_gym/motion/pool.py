"""Procedural motion of several generators computed in worker processes.

The procedural generator is numpy code that holds the GIL. In one process with several
simulations on threads (:class:`~humanclaw_gym.envs.batched.BatchedVectorEnv`) it would
run one sub-env at a time while the cores wait; here each chunk is computed in a worker
process instead, from a pickled copy of the generator (its history, ground height, style
and configuration: a few kilobytes), and the generator adopts the result when its own
``generate`` asks for that call (:meth:`ProceduralMotionGenerator.stage`).

Results are those of the generator computing the chunk itself, bit for bit: the same code
on the same machine, from the same state (tested). Each worker is a fresh interpreter
(``python -c``) that imports only this package and serves requests over its stdin/stdout
pipes, so it never re-runs the caller's main module (``multiprocessing``'s spawn would,
which needs an ``if __name__ == "__main__":`` guard in every script). Workers start on
the first chunk; :meth:`ProceduralMotionPool.close` stops them (a process that exits
without closing the pool closes the pipes, and the workers end on that).
"""

from __future__ import annotations

import pickle
import queue
import subprocess
import sys
import threading
from concurrent.futures import Future
from typing import Any

from humanclaw_gym.motion.procedural import ProceduralMotionGenerator, generate_detached
from humanclaw_gym.skills import SkillCall

__all__ = ["ProceduralMotionPool"]

# The worker's bootstrap: take the caller's import path first, then serve.
_BOOTSTRAP = (
    "import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer); "
    "from humanclaw_gym.motion.pool import _serve; _serve()"
)


def _serve() -> None:
    """Worker loop: read ``(generator, call)`` pickles from stdin, answer ``(True,
    result)`` or ``(False, exception)`` on stdout, until stdin closes."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the replies
    while True:
        try:
            generator, call = pickle.load(inp)
        except EOFError:
            return
        try:
            reply: tuple[bool, Any] = (True, generate_detached(generator, call))
        except Exception as exc:  # handed to the caller's future
            reply = (False, exc)
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an unpicklable exception
            data = pickle.dumps((False, RuntimeError(repr(exc))))
        out.write(data)
        out.flush()


class _Worker:
    """One worker process and the thread that feeds it requests from the shared queue."""

    def __init__(self, requests: queue.SimpleQueue) -> None:
        self._requests = requests
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        pickle.dump(list(sys.path), self.proc.stdin)
        self.proc.stdin.flush()
        self.thread = threading.Thread(
            target=self._loop, name=f"humanclaw-motion-worker-{self.proc.pid}", daemon=True
        )
        self.thread.start()

    def _loop(self) -> None:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        failure: str | None = None
        while True:
            item = self._requests.get()
            if item is None:
                return
            payload, future = item
            if not future.set_running_or_notify_cancel():
                continue
            if failure is not None:  # a dead worker answers at once: nothing waits forever
                future.set_exception(RuntimeError(failure))
                continue
            try:
                stdin.write(payload)
                stdin.flush()
                ok, result = pickle.load(stdout)
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                self.proc.poll()
                failure = (
                    f"procedural motion worker (pid {self.proc.pid}) stopped "
                    f"(exit code {self.proc.returncode}): {exc!r}"
                )
                future.set_exception(RuntimeError(failure))
                continue
            if ok:
                future.set_result(result)
            else:
                future.set_exception(result)

    def stop(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class ProceduralMotionPool:
    """Worker processes that compute procedural chunks for generators living here.

    Args:
        workers: number of worker processes (int >= 1).
    """

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers={workers!r} is invalid: allowed an int >= 1")
        self.workers = workers
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[_Worker] = []
        self._closed = False

    @staticmethod
    def supports(generator: Any) -> bool:
        """Whether ``generator`` can be staged here (a procedural generator after reset)."""
        return isinstance(generator, ProceduralMotionGenerator) and generator._history is not None

    def stage(self, generator: ProceduralMotionGenerator, call: SkillCall | Any) -> Future:
        """Start computing ``generator``'s next chunk for ``call`` in a worker and park the
        pending result in the generator (its next ``generate(call)`` picks it up).

        Raises:
            ValueError: ``generator`` is not a reset procedural generator.
            RuntimeError: the pool was closed.
        """
        if not self.supports(generator):
            raise ValueError(
                f"{type(generator).__name__} cannot be staged: allowed a "
                "ProceduralMotionGenerator after reset()"
            )
        if self._closed:
            raise RuntimeError("ProceduralMotionPool.stage: the pool was closed")
        call = SkillCall.coerce(call)
        if not self._workers:
            self._workers = [_Worker(self._requests) for _ in range(self.workers)]
        future: Future = Future()
        payload = pickle.dumps((generator, call), protocol=pickle.HIGHEST_PROTOCOL)
        self._requests.put((payload, future))
        generator.stage(call, future)
        return future

    def close(self) -> None:
        """Stop the workers (chunks not yet started are cancelled). Idempotent."""
        self._closed = True
        while True:  # cancel what no worker has taken yet
            try:
                item = self._requests.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].cancel()
        workers, self._workers = self._workers, []
        for _ in workers:
            self._requests.put(None)
        for worker in workers:
            worker.thread.join()
            worker.stop()

    def __enter__(self) -> ProceduralMotionPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
