"""The ``humanclaw`` command line.

Each subcommand lives in its own module ``humanclaw_gym.cli.<name>`` that defines
``main(argv: list[str]) -> int`` (built with tyro). The table below maps the public
command name to that module and a one-line summary; modules are imported only when their
command runs, so ``humanclaw --help`` stays instant and loads no simulator.

Errors: a user's mistake (see :mod:`humanclaw_gym.cli.errors`) is one line on stderr and
exit code 2; Ctrl-C is exit code 130 without a traceback; only bugs print a traceback.
``--debug`` (anywhere on the command line) or ``HUMANCLAW_DEBUG=1`` shows the traceback
of every error.
"""

from __future__ import annotations

import importlib
import os
import sys

# command -> (module, summary)
COMMANDS: dict[str, tuple[str, str]] = {
    "episodes": (
        "humanclaw_gym.cli.episodes_cmd",
        "List a split: counts by category, difficulty and scene.",
    ),
    "scenes": ("humanclaw_gym.cli.scenes_cmd", "Inspect procedural scenes (render-map, show)."),
    "rollout": (
        "humanclaw_gym.cli.run_cmd:rollout_main",
        "Run one episode in-process (smoke tests, debugging).",
    ),
    "run": (
        "humanclaw_gym.cli.run_cmd",
        "Evaluate a policy on one episode, val100, val or a list; resumable, parallel.",
    ),
    "metrics": (
        "humanclaw_gym.cli.metrics_cmd",
        "Aggregate metrics.json files under a directory into the paper table.",
    ),
    "render": (
        "humanclaw_gym.cli.render_cmd",
        "Delayed render of a saved rollout into ego/exo MP4 (no physics).",
    ),
    "render-batch": (
        "humanclaw_gym.cli.render_cmd:batch_main",
        "Delayed render of many rollouts in isolated processes.",
    ),
    "report": (
        "humanclaw_gym.cli.report_cmd",
        "Write a self-contained HTML report of one rollout.",
    ),
    "serve": (
        "humanclaw_gym.cli.serve_cmd",
        "Start the authenticated JSON-RPC benchmark server on loopback.",
    ),
    "doctor": (
        "humanclaw_gym.cli.doctor_cmd",
        "Report installed backends and extras; exit 1 if the defaults cannot run.",
    ),
    "view": ("humanclaw_gym.cli.view_cmd", "Browser debug viewer (viser) on 127.0.0.1."),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: humanclaw <command> [options]", "", "commands:"]
    for name, (_, summary) in COMMANDS.items():
        lines.append(f"  {name.ljust(width)}  {summary}")
    lines += [
        "",
        "Run 'humanclaw <command> --help' for the options of one command; add --debug to",
        "see the traceback of an error.",
    ]
    return "\n".join(lines)


def _load(target: str):
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr or "main")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``humanclaw`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("HUMANCLAW_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] in ("--version", "-V"):
        from humanclaw_gym import __version__

        print(f"humanclaw-gym {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"humanclaw: unknown command {name!r}\n", file=sys.stderr)
        print(_usage(), file=sys.stderr)
        return 2
    try:
        func = _load(COMMANDS[name][0])
    except ModuleNotFoundError as exc:
        print(f"humanclaw {name}: not available in this installation ({exc})", file=sys.stderr)
        return 2
    try:
        result = func(rest)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"humanclaw {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from humanclaw_gym.cli.errors import is_user_error, one_line

        if debug or not is_user_error(exc):
            raise
        print(f"humanclaw {name}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
