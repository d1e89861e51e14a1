"""Policies for the scale-out tests (importable as ``tests.helpers_scale``)."""

from __future__ import annotations

import os

from humanclaw_gym import SkillCall

EXIT_EPISODE_ENV = "HUMANCLAW_TEST_EXIT_EPISODE"


class ExitMidEpisode:
    """Turns in place; its whole process exits (as if killed) at the second step of the
    episode named by ``HUMANCLAW_TEST_EXIT_EPISODE``."""

    def reset(self, episode_info):
        self.exit = episode_info["episode_id"] == os.environ.get(EXIT_EPISODE_ENV)

    def act(self, obs, info):
        if self.exit and info["step"] == 1:
            os._exit(3)
        return SkillCall.turn("left", 15)
