"""torch's intra-op thread count for the learned motion generators (``flow`` and ``paper``).

Both generators take ``num_threads`` (an int >= 1, or None to leave torch alone): a
generator sets it for the process when it is made; a batched service sets it for its model
call only and restores the caller's count afterwards. torch is imported when a function here
runs, never at import time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def require_torch(generator: str) -> Any:
    """``torch``, or an ImportError saying that ``generator`` needs the torch extra."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(
            f"the {generator!r} motion generator needs PyTorch: pip install 'humanclaw-gym[torch]'"
        ) from exc
    return torch


#: Most torch threads a generator may ask for: more than any machine's cores, fewer than
#: the count at which torch's thread pool fails (``torch.set_num_threads(100000)`` crashes
#: the process).
MAX_NUM_THREADS = 1024


def check_num_threads(num_threads: Any) -> int | None:
    """``num_threads`` if it is an int in ``[1, MAX_NUM_THREADS]`` or None; otherwise a
    one-line ValueError."""
    if num_threads is not None and (
        isinstance(num_threads, bool)
        or not isinstance(num_threads, int)
        or not 1 <= num_threads <= MAX_NUM_THREADS
    ):
        shown = (
            repr(num_threads) if len(repr(num_threads)) <= 40 else f"{repr(num_threads)[:40]}..."
        )
        raise ValueError(
            f"num_threads={shown} is invalid: allowed an int in [1, {MAX_NUM_THREADS}] or None"
        )
    return num_threads


def set_num_threads(torch: Any, num_threads: int | None) -> None:
    """Set torch's thread count for the process (None: leave it as it is)."""
    if num_threads is not None and torch.get_num_threads() != num_threads:
        torch.set_num_threads(num_threads)


@contextlib.contextmanager
def torch_threads(generator: str, num_threads: int | None) -> Iterator[None]:
    """Run the block on ``num_threads`` torch threads, restoring the caller's count after."""
    if num_threads is None:
        yield
        return
    torch = require_torch(generator)
    old = torch.get_num_threads()
    set_num_threads(torch, num_threads)
    try:
        yield
    finally:
        set_num_threads(torch, old)
