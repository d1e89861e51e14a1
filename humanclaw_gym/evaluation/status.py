"""A one-line status that a policy can show on the run's progress bar while it waits.

A policy that waits (for a model endpoint that failed and is being retried, say) calls
:func:`report_status` with one line, and with ``""`` once the wait is over. The line is an
``INFO`` record of the logger :data:`POLICY_STATUS_LOGGER`; ``humanclaw run`` shows the
latest one on its progress bar, from the worker processes of the local executor too. Nothing
is shown or printed when no run listens (the record goes nowhere), so a policy may call it
unconditionally. This module imports nothing but :mod:`logging`.
"""

from __future__ import annotations

import logging

__all__ = ["POLICY_STATUS_LOGGER", "report_status"]

POLICY_STATUS_LOGGER = "humanclaw_gym.policy_status"
"""Name of the logger whose ``INFO`` records are the policy's status lines."""

_logger = logging.getLogger(POLICY_STATUS_LOGGER)
_logger.propagate = False  # a status line is for the progress bar, not for the log
_logger.setLevel(logging.INFO)
_logger.addHandler(logging.NullHandler())


def report_status(line: str) -> None:
    """Show ``line`` (one line; ``""`` clears it) on the progress bar of the run, if any."""
    _logger.info("%s", " ".join(str(line).split()))
