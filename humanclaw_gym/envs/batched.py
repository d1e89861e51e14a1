"""A natively batched vector env: N humanoids stepped together in one process.

``gym.make_vec("HumanClawFindNavInteract-v0", num_envs=N,
vectorization_mode="vector_entry_point", mode="batched", physics="mujoco")`` builds a
:class:`BatchedVectorEnv`. Its sub-envs are ordinary
:class:`~humanclaw_gym.envs.FindNavInteractEnv` instances (sub-env ``i`` plays episode shard
``i`` of ``N``, as in the sync and async modes), each pinned to a thread of its own: its
simulation, its motion generator and its renderer (whose GL context belongs to the thread
that made it) only ever run there. A step hands every sub-env its action at once:

* **motion**: generators that declare ``capabilities.batched`` (``motion="flow"``) compute
  all chunks in ONE model call through their batching service before the sub-envs step
  (with as many torch threads as this process has CPUs, when the service takes a
  ``num_threads``);
  the procedural generator's chunks are computed in ``motion_workers`` worker processes
  (:class:`~humanclaw_gym.motion.pool.ProceduralMotionPool`; numpy code holding the GIL
  would otherwise run one sub-env at a time), all of them submitted before the sub-envs
  step, and each sub-env picks its own chunk up as soon as it is ready;
* **physics**: the MuJoCo backend runs a whole chunk (60 substeps and the compiled drive
  maths) in one call that does not hold the GIL, so the N simulations advance
  concurrently on the threads and next to the Python of the other sub-envs (pybullet's
  stepping was measured not to overlap);
* **images**: each sub-env renders its own ego image on its thread. One render pass for all
  sub-envs is not possible with the built-in renderers: each holds one scene in its own GL
  context and the sub-envs play different scenes.

What still holds the GIL is each sub-env's Python (the env step, the draw calls; the
rasterising runs without it, see ``docs/rendering.md``): measured throughput is in
``docs/performance.md``. Results are those of N
single envs with the same shards, seeds and actions, bit for bit (every sub-env's
computation is its own; threads change only when it runs; with ``motion="flow"`` the
batched model call rounds differently, as in the sync vector env). Autoreset is
Gymnasium's ``NEXT_STEP``, as in the other modes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate, iterate

__all__ = ["BatchedVectorEnv"]

#: The interpreter's thread switch interval while the sub-envs step (s). A sub-env whose
#: simulation step returns must get the GIL back from one running Python (motion, render);
#: with the default 5 ms it waits up to that long after every 1/120 s substep. Measured with
#: 8 MuJoCo sub-envs on 2 cores: 43.4 env steps/s against 40.0 with the default (2 runs each).
_SWITCH_INTERVAL_S = 5e-4


@contextmanager
def _short_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(min(old, _SWITCH_INTERVAL_S))
    try:
        yield
    finally:
        sys.setswitchinterval(old)


class BatchedVectorEnv(gym.vector.SyncVectorEnv):
    """N sub-envs stepped together, one thread per sub-env (see the module docstring).

    Args:
        env_fns: one callable per sub-env that builds it (called on that sub-env's thread).
        max_concurrent: how many sub-envs may run at the same moment (default: twice the
            number of CPUs this process may use); the others wait for a slot. A sub-env
            spends much of its step waiting for its chunk or in code that does not hold the
            GIL, so a few more than the cores keep them busy (measured in
            ``docs/performance.md``).
        copy: return copies of the batched observations (Gymnasium's ``copy``).
        motion_workers: worker processes for the procedural generator's chunks (default:
            the number of CPUs this process may use, 0 on one CPU; 0 = compute them on
            the sub-envs' threads). Started on the first step that needs them.

    Actions: the batched Gymnasium encoding (a dict of ``(N, ...)`` arrays, as for the sync
    and async vector envs), or a sequence of N single actions (SkillCalls, their text,
    Decisions or single-env dicts).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        max_concurrent: int | None = None,
        copy: bool = True,
        motion_workers: int | None = None,
    ) -> None:
        fns = list(env_fns)
        if not fns:
            raise ValueError("env_fns must hold at least one sub-env factory")
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        if motion_workers is None:
            motion_workers = cpus if cpus > 1 else 0
        if isinstance(motion_workers, bool) or not isinstance(motion_workers, int):
            raise ValueError(f"motion_workers must be an int >= 0, got {motion_workers!r}")
        if motion_workers < 0:
            raise ValueError(f"motion_workers must be an int >= 0, got {motion_workers}")
        if max_concurrent is None:
            max_concurrent = 2 * max(1, cpus)
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
            raise ValueError(f"max_concurrent must be an int >= 1, got {max_concurrent!r}")
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be an int >= 1, got {max_concurrent}")
        self.max_concurrent = max_concurrent
        self.motion_workers = motion_workers
        self._cpus = max(1, cpus)
        self._motion_pool: Any = None
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._threads = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"humanclaw-env{i}")
            for i in range(len(fns))
        ]
        pinned = [self._pinned(i, fn) for i, fn in enumerate(fns)]
        try:
            super().__init__(pinned, copy=copy, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
        except BaseException:
            for pool in self._threads:
                pool.shutdown(wait=True)
            raise

    def _pinned(self, i: int, fn: Callable[[], gym.Env]) -> Callable[[], gym.Env]:
        return lambda: self._threads[i].submit(fn).result()

    # ------------------------------------------------------------------------------------
    def _run(self, i: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Run ``fn`` on sub-env ``i``'s thread, within the concurrency limit."""

        def job() -> Any:
            with self._slots:
                return fn(*args, **kwargs)

        return self._threads[i].submit(job)

    @staticmethod
    def _gather(futures: list[Future | None]) -> list[Any]:
        """Results in order; the first error is raised after every job has finished."""
        results: list[Any] = []
        error: BaseException | None = None
        for future in futures:
            if future is None:
                results.append(None)
                continue
            try:
                results.append(future.result())
            except BaseException as exc:  # wait for the others first
                results.append(None)
                error = error or exc
        if error is not None:
            raise error
        return results

    def _single_actions(self, actions: Any) -> list[Any]:
        if isinstance(actions, (list, tuple)):
            if len(actions) != self.num_envs:
                raise ValueError(
                    f"actions: a sequence of {self.num_envs} single actions is needed "
                    f"(one per sub-env), got {len(actions)}"
                )
            return list(actions)
        return list(iterate(self.action_space, actions))

    def _check_actions(self, actions: list[Any]) -> list[Any]:
        """Validate every stepping sub-env's action before any of them steps: a bad action
        raises (naming the sub-env) with no simulator state changed, as in a single env.

        Returns:
            The actions with each stepping sub-env's as a SkillCall or Decision (validated
            here once; the sub-envs do not validate them again).
        """
        from humanclaw_gym.envs.simulation import check_sub_env_executable
        from humanclaw_gym.skills import SkillCall, SkillCallError
        from humanclaw_gym.skills.spaces import validated_action

        checked = list(actions)
        for i, action in enumerate(actions):
            if self._autoreset_envs[i]:
                continue
            try:
                checked[i] = validated_action(action)
            except SkillCallError as exc:
                raise SkillCallError(
                    exc.field,
                    exc.value,
                    exc.allowed,
                    skill=exc.skill,
                    message=f"sub-env {i}: {exc}",
                ) from exc
            call = checked[i] if isinstance(checked[i], SkillCall) else checked[i].action
            check_sub_env_executable(self.envs[i], call, i)  # a skill its generator lacks
        return checked

    def _stage_batched_motion(self, actions: list[Any]) -> None:
        """Hand every sub-env's motion skill (``actions`` as :meth:`_check_actions` returns
        them) to its generator's batching service, which computes all chunks in one model
        call (generators declaring ``batched``), or to the procedural worker processes
        (procedural generators, ``motion_workers > 0``)."""
        from humanclaw_gym.skills import SkillCall

        pairs = []
        service = None
        for i, action in enumerate(actions):
            if self._autoreset_envs[i]:
                continue
            motion = getattr(self.envs[i].unwrapped, "motion_generator", None)
            if motion is None:
                continue
            batched = getattr(motion.capabilities, "batched", False)
            if not batched and not self._pool_supports(motion):
                continue
            call = action if isinstance(action, SkillCall) else action.action
            if call.is_stop:
                continue
            if not batched:
                self._procedural_pool().stage(motion, call)
                continue
            if service is None:
                factory = getattr(motion, "batch_service", None)
                if factory is None:
                    import sys

                    module = sys.modules.get(type(motion).__module__)
                    factory = getattr(module, "BatchedMotionService", None)
                if factory is None:
                    return
                service = factory()
                if getattr(service, "num_threads", 0) is None:
                    # the model call is the only work while it runs: give it every core
                    service.num_threads = self._cpus
            pairs.append((motion, call))
        if service is not None and len(pairs) > 1:
            service.stage(pairs)

    # ------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-envs concurrently (Gymnasium's seeding: ``seed + i``; a
        ``reset_mask`` option resets only the masked ones)."""
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs}"
                f" but got length={len(seeds)}."
            )
        options = dict(options) if options is not None else None
        mask = np.ones(self.num_envs, dtype=np.bool_)
        if options is not None and "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"))
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({self.num_envs},) "
                    "with at least one True value"
                )
        with _short_switch_interval():
            futures = [
                self._run(i, self.envs[i].reset, seed=seeds[i], options=options)
                if mask[i]
                else None
                for i in range(self.num_envs)
            ]
            results = self._gather(futures)
        infos: dict[str, Any] = {}
        for i, result in enumerate(results):
            if result is None:
                continue
            self._env_obs[i], env_info = result
            self._terminations[i] = self._truncations[i] = self._autoreset_envs[i] = False
            infos = self._add_info(infos, env_info, i)
        self._observations = concatenate(
            self.single_observation_space, self._env_obs, self._observations
        )
        return self._batched_obs(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every sub-env with its action at once (``NEXT_STEP`` autoreset: a sub-env
        that ended on the previous step is reset instead and its action ignored)."""
        singles = self._check_actions(self._single_actions(actions))
        self._stage_batched_motion(singles)
        with _short_switch_interval():
            futures = []
            for i in range(self.num_envs):
                env = self.envs[i]
                if self._autoreset_envs[i]:
                    futures.append(self._run(i, env.reset))
                else:
                    futures.append(self._run(i, env.step, singles[i]))
            results = self._gather(futures)
        infos: dict[str, Any] = {}
        for i, result in enumerate(results):
            if self._autoreset_envs[i]:
                self._env_obs[i], env_info = result
                self._rewards[i] = 0.0
                self._terminations[i] = self._truncations[i] = False
            else:
                (
                    self._env_obs[i],
                    self._rewards[i],
                    self._terminations[i],
                    self._truncations[i],
                    env_info,
                ) = result
            infos = self._add_info(infos, env_info, i)
        self._observations = concatenate(
            self.single_observation_space, self._env_obs, self._observations
        )
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (
            self._batched_obs(),
            np.copy(self._rewards),
            np.copy(self._terminations),
            np.copy(self._truncations),
            infos,
        )

    def _batched_obs(self) -> Any:
        if not self.copy:
            return self._observations
        from copy import deepcopy

        return deepcopy(self._observations)

    # ------------------------------------------------------------------------------------
    def render(self) -> tuple[Any, ...]:
        """Every sub-env's ``render()``, each on its own thread."""
        return tuple(self._gather([self._run(i, e.render) for i, e in enumerate(self.envs)]))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method (or read an attribute) of every sub-env, on its own thread."""

        def one(env: gym.Env) -> Any:
            attr = env.get_wrapper_attr(name)
            return attr(*args, **kwargs) if callable(attr) else attr

        return tuple(self._gather([self._run(i, one, e) for i, e in enumerate(self.envs)]))

    def _pool_supports(self, motion: Any) -> bool:
        if self.motion_workers == 0:
            return False
        from humanclaw_gym.motion.pool import ProceduralMotionPool

        return ProceduralMotionPool.supports(motion)

    def _procedural_pool(self) -> Any:
        if self._motion_pool is None:
            from humanclaw_gym.motion.pool import ProceduralMotionPool

            self._motion_pool = ProceduralMotionPool(self.motion_workers)
        return self._motion_pool

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the motion workers, close every sub-env on its own thread, then stop the
        threads."""
        pool, self._motion_pool = getattr(self, "_motion_pool", None), None
        if pool is not None:
            pool.close()
        if not hasattr(self, "envs"):
            return
        futures = [
            pool.submit(env.close) for pool, env in zip(self._threads, self.envs, strict=True)
        ]
        try:
            self._gather(list(futures))
        finally:
            for pool in self._threads:
                pool.shutdown(wait=True)
