"""Small policies used by the evaluation tests (importable as ``tests.helpers_policies``)."""

from __future__ import annotations

from humanclaw_gym import SkillCall

_EPISODES_SEEN = {"n": 0}


class CrashOnSecondEpisode:
    """Turns in place; raises inside ``act`` during the second episode it is reset for."""

    def reset(self, episode_info):
        _EPISODES_SEEN["n"] += 1
        self.crash = _EPISODES_SEEN["n"] == 2

    def act(self, obs, info):
        if self.crash and info["step"] == 1:
            raise RuntimeError("boom: scripted failure")
        return SkillCall.turn("left", 15)


class SignalOnSecondEpisode:
    """Turns in place; sends SIGTERM to its own process in the middle of the second
    episode it is reset for (a user stopping a run while an episode executes)."""

    def reset(self, episode_info):
        _EPISODES_SEEN["signal"] = _EPISODES_SEEN.get("signal", 0) + 1
        self.signal = _EPISODES_SEEN["signal"] == 2

    def act(self, obs, info):
        if self.signal and info["step"] == 1:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGTERM)
        return SkillCall.turn("left", 15)
