"""The fixed episode plan of a server run and its claim ledger.

The plan is declared when the server starts: the episodes of the selected split, in an
order derived from ``--seed`` (scenes shuffled by the seed, the episodes of one scene kept
together in split order so that a scene is built once), optionally cut to the first
``limit`` entries. ``open`` claims the next pending entry; the claim is written to disk
*before* the simulator is touched, and an entry once claimed is never handed out again,
whatever happens to it afterwards (a failed or abandoned episode stays recorded as such).

Files in the server's output directory (both private to the evaluator side, mode ``0600``:
they reveal the plan):

* ``plan.json``: the declared plan (written once at start);
* ``claims.json``: the ledger, rewritten atomically on every change.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from humanclaw_gym.episodes.order import scene_grouped_order as plan_order
from humanclaw_gym.fileio import write_json_record

__all__ = ["PLAN_SCHEMA", "STATUSES", "EpisodePlan", "PlanEntry", "plan_order"]
# ``plan_order`` is the one episode-order rule of the package (the env's seeded order).

PLAN_SCHEMA = "humanclaw_server_plan_v1"
LEDGER_SCHEMA = "humanclaw_server_claims_v1"

STATUSES = ("pending", "claimed", "running", "completed", "failed", "abandoned")
"""Life of a plan entry: pending -> claimed (open) -> running (reset) -> one final state."""

_FINAL = frozenset({"completed", "failed", "abandoned"})


@dataclass(frozen=True)
class PlanEntry:
    """One declared episode of the plan (public identity only)."""

    index: int
    split: str
    episode_id: str
    scene_id: str
    target_category: str
    max_steps: int

    @property
    def directory_name(self) -> str:
        """``<scene>_ep<id>_<category>``, the episode's directory in the output dir."""
        from humanclaw_gym.replay.layout import safe_name

        return safe_name(f"{self.scene_id}_ep{self.episode_id}_{self.target_category}")


class EpisodePlan:
    """The declared plan and its claim ledger.

    Args:
        entries: the plan, in order.
        selection: the ``--episodes`` value it came from (recorded).
        seed: the plan seed (recorded).
        output_dir: where ``plan.json`` and ``claims.json`` go (created).
        declare: write both files now; ``False`` only checks that ``output_dir`` is fresh
            and leaves the writing to :meth:`declare` (``humanclaw serve`` binds its port
            first, so that a busy port leaves nothing behind).

    Raises:
        FileExistsError: ``output_dir`` exists and is not empty (every run needs a fresh
            output directory; earlier results are never overwritten).
    """

    def __init__(
        self,
        entries: list[PlanEntry],
        selection: str,
        seed: int,
        output_dir: str | Path,
        *,
        declare: bool = True,
    ) -> None:
        if not entries:
            raise ValueError(f"the plan for episodes={selection!r} is empty")
        self.entries = tuple(entries)
        self.episodes: tuple[Any, ...] | None = None  # the records, when built from a selection
        self.selection = selection
        self.seed = int(seed)
        self.output_dir = Path(output_dir)
        ids = "\n".join(f"{e.split}/{e.scene_id}/{e.episode_id}" for e in self.entries)
        self.digest = hashlib.sha256(ids.encode()).hexdigest()
        self._ledger: list[dict[str, Any]] = [{"status": "pending"} for _ in self.entries]
        self._next = 0
        self._check_fresh()
        if declare:
            self.declare()

    def _check_fresh(self) -> None:
        if self.output_dir.exists() and (
            not self.output_dir.is_dir() or any(self.output_dir.iterdir())
        ):
            raise FileExistsError(
                f"output dir {self.output_dir} is not empty; use a fresh output directory for "
                "every run (earlier results are never overwritten)"
            )

    def declare(self) -> None:
        """Write ``plan.json`` and the empty ledger ``claims.json`` (once, into a fresh
        output directory).

        Raises:
            FileExistsError: the output directory is no longer empty.
        """
        self._check_fresh()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        plan_path = self.output_dir / "plan.json"
        write_json_record(plan_path, self._plan_record(), private=True)
        self._save()

    @classmethod
    def from_selection(
        cls,
        selection: str,
        seed: int,
        output_dir: str | Path,
        limit: int | None = None,
        *,
        declare: bool = True,
    ) -> EpisodePlan:
        """Build the plan for ``--episodes`` (``one``, ``val100``, ``val``, a split dir or a
        JSON list of ids), ``--seed`` and an optional ``--limit`` prefix (``declare``: see
        the class).

        Raises:
            ValueError: bad selection, seed or limit (naming the value and what is allowed).
        """
        from humanclaw_gym.episodes.selection import select_episodes

        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed={seed!r} is invalid: allowed an int >= 0")
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(f"limit={limit!r} is invalid: allowed None or an int >= 1")
        selected = select_episodes(selection)
        order = plan_order([ep.scene_id for _, ep in selected], seed)
        if limit is not None:
            order = order[:limit]
        entries = []
        for k, i in enumerate(order):
            split, ep = selected[i]
            entries.append(
                PlanEntry(
                    k, split, ep.episode_id, ep.scene_id, ep.object_category, int(ep.max_steps)
                )
            )
        plan = cls(entries, selection, seed, output_dir, declare=declare)
        plan.episodes = tuple(selected[i][1] for i in order)
        return plan

    # -- queries -------------------------------------------------------------------------
    @property
    def next_entry(self) -> PlanEntry | None:
        """The entry the next ``open`` claims, or None when the plan is exhausted."""
        return self.entries[self._next] if self._next < len(self.entries) else None

    def status(self, index: int) -> str:
        return str(self._ledger[index]["status"])

    def public_view(self) -> dict[str, Any]:
        """Plan identity, counts and per-entry status (no scores, no private errors)."""
        counts = {s: 0 for s in STATUSES}
        for rec in self._ledger:
            counts[rec["status"]] += 1
        splits = sorted({e.split for e in self.entries})
        return {
            "selection": self.selection,
            "split": splits[0] if len(splits) == 1 else splits,
            "seed": self.seed,
            "size": len(self.entries),
            "digest_sha256": self.digest,
            "next_index": self._next if self._next < len(self.entries) else None,
            "counts": counts,
            "episodes": [
                {
                    "index": e.index,
                    "episode_id": e.episode_id,
                    "scene_id": e.scene_id,
                    "target_category": e.target_category,
                    "status": self._ledger[e.index]["status"],
                }
                for e in self.entries
            ],
        }

    # -- transitions -----------------------------------------------------------------------
    def claim(self) -> PlanEntry:
        """Claim the next pending entry and persist the claim before returning it.

        Raises:
            LookupError: the plan is exhausted.
        """
        entry = self.next_entry
        if entry is None:
            raise LookupError("the plan is exhausted")
        self._next += 1
        self._ledger[entry.index] = {"status": "claimed", "claimed_unix_s": time.time()}
        self._save()
        return entry

    def mark(self, index: int, status: str, **fields: Any) -> None:
        """Move entry ``index`` to ``status`` (recording ``fields``) and persist.

        Raises:
            ValueError: unknown status, or the entry is pending or already final.
        """
        if status not in STATUSES or status == "pending":
            raise ValueError(f"status={status!r} is invalid: allowed {STATUSES[1:]}")
        rec = self._ledger[index]
        if rec["status"] == "pending" or rec["status"] in _FINAL:
            raise ValueError(f"plan entry {index} is {rec['status']}; it cannot become {status}")
        rec.update(fields)
        rec["status"] = status
        if status in _FINAL:
            rec["finished_unix_s"] = time.time()
        self._save()

    # -- files -----------------------------------------------------------------------------
    def _plan_record(self) -> dict[str, Any]:
        return {
            "schema": PLAN_SCHEMA,
            "selection": self.selection,
            "seed": self.seed,
            "digest_sha256": self.digest,
            "entries": [
                {
                    "index": e.index,
                    "split": e.split,
                    "episode_id": e.episode_id,
                    "scene_id": e.scene_id,
                    "target_category": e.target_category,
                    "max_steps": e.max_steps,
                    "directory": e.directory_name,
                }
                for e in self.entries
            ],
        }

    def _save(self) -> None:
        ledger = {
            "schema": LEDGER_SCHEMA,
            "digest_sha256": self.digest,
            "claims": [
                {"index": e.index, "episode_id": e.episode_id, **self._ledger[e.index]}
                for e in self.entries
            ],
        }
        write_json_record(self.output_dir / "claims.json", ledger, private=True)
