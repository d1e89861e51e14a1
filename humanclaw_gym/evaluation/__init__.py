"""Evaluation: the single episode loop, policy resolution, batch runs (local / Ray)."""

from __future__ import annotations

from humanclaw_gym.evaluation.episode import EpisodeResult, StepRecord, run_episode

__all__ = ["EpisodeResult", "StepRecord", "run_episode"]
