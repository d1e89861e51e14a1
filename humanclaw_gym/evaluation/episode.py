"""``run_episode``: the one and only episode loop.

The CLI (``humanclaw run`` / ``rollout``), the Ray executor, the benchmark-server driver and
the tests all call this function, so there is exactly one definition of what an episode is:

1. ``env.reset(options={"episode_id": ...})`` -> first ego image + public info;
2. ``policy.reset(episode_info)`` (the info plus ``output_dir`` when the run writes files);
3. repeat ``decision = policy.act(obs, info)``; ``env.step(decision)`` until ``terminated``
   (active Stop) or ``truncated`` (step limit).

A policy may return a :class:`~humanclaw_gym.policy.Decision` or a bare
:class:`~humanclaw_gym.SkillCall` (wrapped into a Decision). Policies that need hidden state
(the oracle) declare ``requires_privileged = True`` and receive the env through
``attach_env(env)``; that only works on an env made with ``privileged=True``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from humanclaw_gym.fileio import write_json_record
from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import SkillCall

__all__ = ["EpisodeResult", "EpisodeSpec", "StepRecord", "run_episode", "write_json_atomic"]

RESULT_SCHEMA = "humanclaw_episode_result_v1"


@dataclass(frozen=True)
class EpisodeSpec:
    """Identity of one episode to run."""

    split: str
    scene_id: str
    episode_id: str
    category: str


@dataclass(frozen=True)
class StepRecord:
    """What happened at one decision step (public information only)."""

    step: int
    action: str
    visible_state: str | None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeResult:
    """Outcome of one episode run by :func:`run_episode`.

    ``target_category`` is the ``info`` entry of the benchmark's task (None for a task
    without one); ``task`` is the task's record (``{"id", "version"}``; None for an env
    without a task).
    """

    episode_id: str
    scene_id: str
    target_category: str | None
    steps: int
    ended_by: str  # "stop" | "truncated" | "error"
    wall_time_s: float
    actions: list[StepRecord] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    error: str | None = None
    task: dict[str, Any] | None = None
    final_observation: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("final_observation", None)
        d["schema"] = RESULT_SCHEMA
        return d


def failed_summary(spec: EpisodeSpec, error: str) -> dict[str, Any]:
    """The batch summary row of an episode that produced no result (``error``: one line)."""
    return {
        "episode_id": spec.episode_id,
        "scene_id": spec.scene_id,
        "category": spec.category,
        "status": "failed",
        "ended_by": "error",
        "steps": 0,
        "error": error,
    }


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, private: bool = False) -> None:
    """Write run-state JSON (sorted keys, numpy values as plain numbers) atomically; see
    :func:`humanclaw_gym.fileio.write_json_record`."""
    write_json_record(path, data, private=private)


def _as_decision(out: Any) -> Decision:
    if isinstance(out, Decision):
        return out
    if isinstance(out, SkillCall):
        return Decision(action=out)
    raise TypeError(f"policy.act must return a Decision or a SkillCall, got {type(out).__name__}")


def run_episode(
    env: Any,
    policy: Any,
    *,
    episode_id: str | None = None,
    seed: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    on_step: Callable[[int, Decision, Mapping[str, Any]], None] | None = None,
    on_end: Callable[[EpisodeResult], None] | None = None,
    raise_errors: bool = True,
) -> EpisodeResult:
    """Run one episode of ``policy`` in ``env`` (a single, possibly wrapped, env).

    Args:
        env: a ``HumanClaw-v0`` / ``HumanClawFindNavInteract-v0`` env (wrappers allowed).
        policy: any object with ``reset(episode_info)`` and ``act(obs, info)``.
        episode_id: which episode to play (``None``: the env's next one).
        seed: passed to ``env.reset``.
        output_dir: where the policy may write its logs (passed as
            ``episode_info["output_dir"]``); ``episode_result.json`` is written there last.
        on_step: callback after every step with ``(step, decision, info)``.
        on_end: callback with the finished result, called before ``episode_result.json``
            is written, so files it saves exist whenever the result file does (a run
            killed in between leaves no result file and is rerun on resume).
        raise_errors: re-raise an exception after recording it (default) or return a
            result with ``ended_by="error"``.
    """
    if getattr(policy, "requires_privileged", False):
        unwrapped = env.unwrapped
        if not getattr(unwrapped, "privileged", False):
            raise PermissionError(
                f"{type(policy).__name__} needs privileged state; make the env with privileged=True"
            )
        policy.attach_env(env)
    options = {"episode_id": episode_id} if episode_id is not None else None
    t0 = time.perf_counter()
    obs, info = env.reset(seed=seed, options=options)
    out_dir = Path(output_dir) if output_dir is not None else None
    episode_info = dict(info)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        episode_info["output_dir"] = str(out_dir)
    category = info.get("target_category")
    spec = getattr(getattr(env.unwrapped, "task", None), "spec", None)
    result = EpisodeResult(
        episode_id=str(info["episode_id"]),
        scene_id=str(info["scene_id"]),
        target_category=None if category is None else str(category),
        steps=0,
        ended_by="error",
        wall_time_s=0.0,
        task=spec.record() if callable(getattr(spec, "record", None)) else None,
    )
    result.final_observation = obs
    try:
        policy.reset(episode_info)
        while True:
            decision = _as_decision(policy.act(obs, info))
            obs, _reward, terminated, truncated, info = env.step(decision)
            result.final_observation = obs
            result.actions.append(
                StepRecord(
                    step=result.steps,
                    action=str(decision.action),
                    visible_state=decision.visible_state,
                    extras=dict(decision.extras),
                )
            )
            result.steps += 1
            if on_step is not None:
                on_step(result.steps, decision, info)
            if "metrics" in info:
                result.metrics = info["metrics"]
            if terminated:
                result.ended_by = "stop"
                break
            if truncated:
                result.ended_by = "truncated"
                break
    except Exception as exc:
        result.ended_by = "error"
        result.error = f"{type(exc).__name__}: {exc}"
        if raise_errors:
            raise
    finally:
        result.wall_time_s = time.perf_counter() - t0
        if on_end is not None:
            on_end(result)
        if out_dir is not None:
            write_json_atomic(out_dir / "episode_result.json", result.to_dict())
    return result
