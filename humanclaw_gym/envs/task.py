"""The find-nav-interact task, where it used to live: see :mod:`humanclaw_gym.tasks`.

Kept so that ``from humanclaw_gym.envs.task import FindNavInteractTask`` keeps working; the
task protocol and every task live in :mod:`humanclaw_gym.tasks`.
"""

from __future__ import annotations

from humanclaw_gym.tasks.base import DEFAULT_MAX_STEPS, RESET_OPTIONS
from humanclaw_gym.tasks.find_nav_interact import FindNavInteractTask, load_episodes

__all__ = ["DEFAULT_MAX_STEPS", "RESET_OPTIONS", "FindNavInteractTask", "load_episodes"]
