"""Find metrics: objective visibility (semantic pixels) and the policy's own claim.

GeoFindSR asks whether the target was ever in view: at some decision the target instances
cover at least :data:`~humanclaw_gym.metrics.thresholds.FIND_PIXEL_THRESHOLD` pixels of the
semantic render made from the same camera as that decision's ego image. FindSR additionally
asks the policy to have *said so* at that same decision: its ``visible_state`` text must
contain a sentence that names the target and is not negated.

How a sentence is cut, named and negated depends on the metric rules
(:mod:`humanclaw_gym.metrics.rules`). Under ``paper`` (the default) the reference release's
rule applies exactly: the text is stripped and cut only after ``.``/``!``/``?`` followed by
whitespace; a sentence names the target when one of the names of :data:`PAPER_ALIASES` (or
``target``) occurs anywhere in it after lower-casing, also inside a longer word; it is
negated when it contains one of :data:`PAPER_NEGATION_WORDS` as a whole word (any case,
straight apostrophe). The ``strict`` rules are described below.

``strict`` alias table (:func:`category_aliases`; matching is case-insensitive, on whole
words, also accepts a plural ``s``/``es`` and treats ``_``/``-``/spaces alike):

==============  ====================================
category        accepted names
==============  ====================================
chair           chair, armchair
bed             bed
couch           couch, sofa, loveseat
toilet          toilet
tv              tv, television, tv monitor
potted_plant    potted plant, plant, houseplant
==============  ====================================

Any other category name is accepted as itself (underscores read as spaces). The generic
word ``target`` (as in "the target is straight ahead") also counts as naming the target.
``strict`` sentences end at ``.``/``!``/``?`` (also the CJK forms) unless a digit follows,
and at line breaks; negation is any of :data:`NEGATION_WORDS` or any word ending in
``n't``, with curly apostrophes read as straight ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar

from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, check_rules
from humanclaw_gym.metrics.thresholds import FIND_PIXEL_THRESHOLD
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord

__all__ = [
    "FIND_SPEC",
    "FindMetric",
    "NEGATION_WORDS",
    "PAPER_ALIASES",
    "PAPER_NEGATION_WORDS",
    "FindTracker",
    "category_aliases",
    "claims_target_visible",
]

#: The reference release's names per category (``paper`` rules). A category not listed is
#: named by itself with ``_`` read as a space.
PAPER_ALIASES: dict[str, tuple[str, ...]] = {
    "couch": ("couch", "sofa", "loveseat", "sectional"),
    "bed": ("bed", "mattress"),
    "toilet": ("toilet", "commode"),
    "chair": ("chair", "armchair", "stool", "seat"),
    "tv": ("tv", "television", "screen", "monitor"),
    "potted_plant": ("potted plant", "plant", "flower pot", "flowerpot"),
}

#: The reference release's negation words (``paper`` rules): each negates a sentence when it
#: stands as a whole word (regex word boundaries on both sides, any case). ``n't`` alone
#: rarely matches, since a contraction such as "doesn't" has no word boundary before its n.
PAPER_NEGATION_WORDS: tuple[str, ...] = (
    "no",
    "not",
    "cannot",
    "can't",
    "don't",
    "isn't",
    "aren't",
    "n't",
    "without",
    "unable",
    "none",
)
_PAPER_NEGATION = re.compile(
    r"\b(?:" + "|".join(re.escape(w) for w in PAPER_NEGATION_WORDS) + r")\b", re.IGNORECASE
)
_PAPER_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

_ALIASES: dict[str, tuple[str, ...]] = {
    "chair": ("chair", "armchair"),
    "bed": ("bed",),
    "couch": ("couch", "sofa", "loveseat"),
    "toilet": ("toilet",),
    "tv": ("tv", "television", "tv monitor"),
    "potted_plant": ("potted plant", "plant", "houseplant"),
}

#: Words that negate a sentence. Any token ending in ``n't`` (doesn't, couldn't, won't, ...)
#: negates too.
NEGATION_WORDS: frozenset[str] = frozenset(
    {"no", "not", "cannot", "can't", "don't", "isn't", "aren't", "without", "unable", "none"}
)

#: Generic references to the goal object that count as naming it.
_GENERIC_TARGET_WORDS: tuple[str, ...] = ("target",)

# A sentence ends at . ! ? (also the CJK forms) unless a digit follows (decimals), or at a
# line break.
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])(?!\d)\s*|\n+")
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


def _normalise_name(name: str) -> str:
    return " ".join(name.strip().lower().replace("_", " ").replace("-", " ").split())


def category_aliases(category: str, rules: str = DEFAULT_METRIC_RULES) -> tuple[str, ...]:
    """Names under which a target category may be mentioned.

    Args:
        category: a target category such as ``"couch"`` or ``"potted_plant"``. Under
            ``strict`` any case and ``_``/``-``/space are equivalent; under ``paper`` the key
            must match :data:`PAPER_ALIASES` exactly, as in the reference release.
        rules: ``"paper"`` or ``"strict"``.

    Returns:
        ``paper``: the :data:`PAPER_ALIASES` entry, or the category with ``_`` read as a
        space. ``strict``: the canonical spoken name (lower case) first, then the aliases of
        the table in the module docstring, without duplicates.
    """
    if not isinstance(category, str) or not category.strip():
        raise ValueError(f"category must be a non-empty string, got {category!r}")
    if check_rules(rules) == "paper":
        return PAPER_ALIASES.get(category, (category.replace("_", " "),))
    spoken = _normalise_name(category)
    key = spoken.replace(" ", "_")
    names = [spoken, *(_normalise_name(a) for a in _ALIASES.get(key, ()))]
    return tuple(dict.fromkeys(names))


@lru_cache(maxsize=256)
def _name_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = []
    for name in sorted(set(names), key=len, reverse=True):
        words = name.split()
        body = r"[\s_\-]+".join(re.escape(w) for w in words)
        alternatives.append(body)
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(alternatives) + r")(?:s|es)?(?![a-z0-9])")


def _is_negated(sentence: str) -> bool:
    for token in _TOKEN.findall(sentence):
        if token in NEGATION_WORDS or token.endswith("n't"):
            return True
    return False


def _paper_claims(text: str, names: Sequence[str]) -> bool:
    for sentence in _PAPER_SENTENCE_END.split(text.strip()):
        lowered = sentence.lower()
        if any(name in lowered for name in names) and not _PAPER_NEGATION.search(sentence):
            return True
    return False


def claims_target_visible(
    text: Any, target_names: Sequence[str], rules: str = DEFAULT_METRIC_RULES
) -> bool:
    """Whether a policy's ``visible_state`` text affirms that the target is visible.

    Under ``paper`` rules see the module docstring. Under ``strict`` rules the text is split into sentences (at ``.``, ``!``, ``?`` and line breaks). The claim
    holds when at least one sentence names the target (any name in ``target_names``, any
    alias of those names from :func:`category_aliases`, or the word "target") and contains
    none of :data:`NEGATION_WORDS` nor any ``...n't`` contraction. Matching is
    case-insensitive on whole words; plurals (``beds``, ``couches``) match.

    Args:
        text: the policy's visibility statement; ``None`` or empty means no claim. Under
            ``paper`` rules any other value is read as ``str(text)``, as the reference
            does (``["a bed ahead"]`` names the bed; ``0``, ``False``, ``[]`` are empty);
            under ``strict`` rules a value that is not a ``str`` raises ``TypeError``.
        target_names: category and/or instance names of the target, e.g. ``["couch"]``.
        rules: ``"paper"`` or ``"strict"``.

    Returns:
        ``True`` when some sentence affirms the target, else ``False``.
    """
    rules = check_rules(rules)
    if isinstance(target_names, str):
        target_names = [target_names]
    names: list[str] = list(_GENERIC_TARGET_WORDS)
    for name in target_names:
        names.extend(category_aliases(name, rules))
    if len(names) == len(_GENERIC_TARGET_WORDS):
        raise ValueError("target_names must contain at least one name, got an empty sequence")
    if rules == "paper":
        # the reference reads any value as text: str() of it, a falsy value as ""
        return _paper_claims(str(text or ""), names)
    if text is None:
        return False
    if not isinstance(text, str):
        raise TypeError(f"text must be a str or None, got {type(text).__name__}")
    pattern = _name_pattern(tuple(names))
    lowered = text.translate(_APOSTROPHES).lower()
    for sentence in _SENTENCE_SPLIT.split(lowered):
        if sentence and pattern.search(sentence) and not _is_negated(sentence):
            return True
    return False


class FindTracker:
    """Online GeoFind/Find state of one episode.

    Args:
        target_names: names of the target (usually just the category), see
            :func:`claims_target_visible`.
        pixel_threshold: minimum target pixel count for objective visibility.
        rules: the metric rules of the FindSR sentence rule (``"paper"`` or ``"strict"``).
    """

    def __init__(
        self,
        target_names: Sequence[str],
        pixel_threshold: int = FIND_PIXEL_THRESHOLD,
        rules: str = DEFAULT_METRIC_RULES,
    ) -> None:
        self.rules = check_rules(rules)
        self._target_names = tuple(
            [target_names] if isinstance(target_names, str) else target_names
        )
        if not self._target_names:
            raise ValueError("target_names must contain at least one name")
        for name in self._target_names:
            category_aliases(name, self.rules)  # validates
        if (
            isinstance(pixel_threshold, bool)
            or int(pixel_threshold) != pixel_threshold
            or pixel_threshold < 1
        ):
            raise ValueError(f"pixel_threshold must be a positive int, got {pixel_threshold!r}")
        self.pixel_threshold = int(pixel_threshold)
        self.max_target_pixels = 0
        self.first_geo_find_step: int | None = None
        self.first_find_step: int | None = None

    def record(self, step: int, target_pixels: int, visible_state: str | None) -> bool:
        """Score one decision: the pixel count of the image it saw and its claim text.

        Returns:
            ``True`` when this decision satisfies FindSR (visible and affirmed).
        """
        if (
            isinstance(target_pixels, bool)
            or int(target_pixels) != target_pixels
            or target_pixels < 0
        ):
            raise ValueError(f"target_pixels must be a non-negative int, got {target_pixels!r}")
        pixels = int(target_pixels)
        self.max_target_pixels = max(self.max_target_pixels, pixels)
        visible = pixels >= self.pixel_threshold
        if visible and self.first_geo_find_step is None:
            self.first_geo_find_step = int(step)
        found = visible and claims_target_visible(visible_state, self._target_names, self.rules)
        if found and self.first_find_step is None:
            self.first_find_step = int(step)
        return found

    @property
    def geo_find_success(self) -> bool:
        return self.first_geo_find_step is not None

    @property
    def find_success(self) -> bool:
        return self.first_find_step is not None

    def summary(self) -> dict[str, Any]:
        """JSON-ready Find fields of metrics.json."""
        return {
            "find_success": self.find_success,
            "geo_find_success": self.geo_find_success,
            "first_find_step": self.first_find_step,
            "first_geo_find_step": self.first_geo_find_step,
            "max_target_pixels": self.max_target_pixels,
            "find_pixel_threshold": self.pixel_threshold,
        }


#: Declared output of the Find metrics (see :mod:`humanclaw_gym.metrics.fields`).
FIND_SPEC = MetricSpec(
    name="find",
    fields=(
        MetricField(
            "find_success",
            "bool",
            "FindSR: some decision saw the target and its visible_state affirmed it",
            aggregate="FindSR: share of all episodes",
            upstream="success.find_sr",
        ),
        MetricField(
            "geo_find_success",
            "bool",
            "GeoFindSR: some decision's view had >= find_pixel_threshold target pixels",
            aggregate="GeoFindSR: share of all episodes",
            upstream="success.geo_find_sr",
        ),
        MetricField(
            "first_find_step",
            "int",
            "first decision step satisfying FindSR",
            unit="step",
            minimum=0,
            nullable=True,
        ),
        MetricField(
            "first_geo_find_step",
            "int",
            "first decision step satisfying GeoFindSR",
            unit="step",
            minimum=0,
            nullable=True,
        ),
        MetricField(
            "max_target_pixels",
            "int",
            "largest target pixel count of any decision's view",
            unit="px",
            minimum=0,
            upstream="success.max_target_pixel_count",
        ),
        MetricField(
            "find_pixel_threshold",
            "int",
            "pixel count at which the target counts as seen",
            unit="px",
            minimum=1,
            upstream="success.find_pixel_threshold",
        ),
    ),
    columns=(
        Column(
            "FindSR",
            "find_sr_pct",
            "main",
            ".1f",
            Reduce("share", "find_success", scale=100.0),
            0,
            True,
        ),
        Column(
            "GeoFindSR",
            "geo_find_sr_pct",
            "variants",
            ".1f",
            Reduce("share", "geo_find_success", scale=100.0),
            0,
            True,
        ),
    ),
)


class FindMetric:
    """Tracker of GeoFindSR / FindSR (:data:`FIND_SPEC`): each decision's target pixel
    count (the ``"instance"`` need) and its ``visible_state`` claim."""

    spec: ClassVar[MetricSpec] = FIND_SPEC
    needs: ClassVar[frozenset[str]] = frozenset({"instance"})
    thresholds: ClassVar[dict[str, float | int]] = {"find_pixels": FIND_PIXEL_THRESHOLD}

    def on_reset(self, start: EpisodeStart) -> None:
        self._tracker = FindTracker([start.category], rules=start.rules)

    def on_decision(self, decision: DecisionRecord) -> None:
        self._tracker.record(decision.step, decision.target_pixels, decision.visible_state)

    def on_frame(self, frame: FrameRecord) -> None:
        pass

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        return self._tracker.summary()
