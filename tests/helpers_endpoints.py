"""Small policies for the preflight and status-line tests (``tests.helpers_endpoints``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from humanclaw_gym import SkillCall
from humanclaw_gym.evaluation.status import report_status


class RefusingPreflight:
    """Turns in place; its preflight refuses, as a policy whose endpoint is down would.
    Each preflight call is counted in the file named by ``HUMANCLAW_TEST_PREFLIGHT_LOG``."""

    def preflight(self) -> None:
        log = os.environ.get("HUMANCLAW_TEST_PREFLIGHT_LOG")
        if log:
            with Path(log).open("a") as handle:
                handle.write("preflight\n")
        raise RuntimeError("model endpoint http://127.0.0.1:9/v1: cannot connect (refused)")

    def reset(self, episode_info):
        pass

    def act(self, obs, info):
        return SkillCall.turn("left", 15)


class WaitingPolicy:
    """Turns in place; in each step it reports a wait on the progress bar, waits, and
    clears it (as an agent retrying its endpoint does)."""

    def reset(self, episode_info):
        pass

    def act(self, obs, info):
        report_status(f"endpoint retry for step {info['step']}: attempt 2/5 in 0.4 s")
        time.sleep(0.4)
        report_status("")
        return SkillCall.turn("left", 15)
