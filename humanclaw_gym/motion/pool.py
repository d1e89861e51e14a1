"""Procedural motion of several generators computed in worker processes.

The procedural generator is numpy code that holds the GIL. In one process with several
simulations on threads (:class:`~humanclaw_gym.envs.batched.BatchedVectorEnv`) it would
run one sub-env at a time while the cores wait; here each chunk is computed in a worker
process instead, from a pickled copy of the generator (its history, ground height, style
and configuration: a few kilobytes), and the generator adopts the result when its own
``generate`` asks for that call (:meth:`ProceduralMotionGenerator.stage`).

Results are those of the generator computing the chunk itself, bit for bit: the same code
on the same machine, from the same state (tested). The workers are started with ``spawn``
(a process with simulation threads and GL contexts must not ``fork``), lazily on the first
chunk; :meth:`ProceduralMotionPool.close` stops them.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from humanclaw_gym.motion.procedural import ProceduralMotionGenerator, generate_detached
from humanclaw_gym.skills import SkillCall

__all__ = ["ProceduralMotionPool"]


class ProceduralMotionPool:
    """Worker processes that compute procedural chunks for generators living here.

    Args:
        workers: number of worker processes (int >= 1).
    """

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers={workers!r} is invalid: allowed an int >= 1")
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = None
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
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
            )
        future = self._executor.submit(generate_detached, generator, call)
        generator.stage(call, future)
        return future

    def close(self) -> None:
        """Stop the workers (pending chunks are cancelled). Idempotent."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> ProceduralMotionPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
