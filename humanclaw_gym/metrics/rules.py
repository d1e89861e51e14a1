"""The two metric rule sets: ``paper`` (the reference release, bit for bit) and ``strict``.

The published HumanClawBench numbers were produced by the public reference release. Its
scoring code has quirks (substring matching of target names, an incomplete negation list,
episodes without motion scored as 0 % collisions, ...). ``paper`` reproduces every one of
them so that our figures can be put next to the published table; ``strict`` applies the
corrected rules this library used before the two were separated. The default is
``paper``. Every ``metrics.json`` records the rules it was scored with, and aggregation
refuses to average episodes scored under different rules.

:data:`RULES` lists the twelve points where the two differ, each with a one-line example; the
same table is in ``docs/metrics.md`` (a test keeps them in step).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_METRIC_RULES", "METRIC_RULES", "RULES", "RuleDifference", "check_rules"]

#: The rule sets, default first.
METRIC_RULES: tuple[str, ...] = ("paper", "strict")

#: The rules used when none are named (the reference release's behaviour).
DEFAULT_METRIC_RULES = "paper"


def check_rules(rules: object, name: str = "rules") -> str:
    """``rules`` if it names a rule set, else a ``ValueError`` naming ``name`` and the choices."""
    if not isinstance(rules, str) or rules not in METRIC_RULES:
        raise ValueError(f"{name} must be one of {METRIC_RULES}, got {rules!r}")
    return rules


@dataclass(frozen=True)
class RuleDifference:
    """One point where ``paper`` and ``strict`` differ.

    Attributes:
        point: 1..12, the numbering of docs/metrics.md.
        name: short name, e.g. ``"find aliases"``.
        paper: the reference release's rule.
        strict: the corrected rule.
        example: one concrete case and what each rule gives.
    """

    point: int
    name: str
    paper: str
    strict: str
    example: str


#: Every difference between the two rule sets, in the order of docs/metrics.md.
RULES: tuple[RuleDifference, ...] = (
    RuleDifference(
        1,
        "find aliases",
        "couch: couch, sofa, loveseat, sectional; bed: bed, mattress; toilet: toilet, "
        "commode; chair: chair, armchair, stool, seat; tv: tv, television, screen, monitor; "
        "potted_plant: potted plant, plant, flower pot, flowerpot; any other category: itself",
        "chair: chair, armchair; bed: bed; couch: couch, sofa, loveseat; toilet: toilet; "
        "tv: tv, television, tv monitor; potted_plant: potted plant, plant, houseplant",
        '"A commode is ahead." for toilet: paper yes, strict no',
    ),
    RuleDifference(
        2,
        "find matching",
        "a name (or 'target') anywhere in the lower-cased sentence, also inside a longer word",
        "whole words only, plural s/es allowed, _ - and spaces alike",
        '"The bedroom door is open." for bed: paper yes, strict no',
    ),
    RuleDifference(
        3,
        "find negation",
        "the whole words no, not, cannot, can't, don't, isn't, aren't, n't, without, unable, "
        "none (straight apostrophe only)",
        "the same words plus every word ending in n't (doesn't, wasn't), curly apostrophes "
        "read as straight ones",
        '"The bed doesn\'t look close." for bed: paper yes, strict no',
    ),
    RuleDifference(
        4,
        "sentence split",
        "only after . ! ? followed by whitespace (the text is stripped first)",
        "after . ! ? (and the CJK forms) unless a digit follows, and at every line break",
        '"No chair here\\nA bed is ahead" for bed: paper no (one sentence), strict yes',
    ),
    RuleDifference(
        5,
        "Coll. without motion",
        "an episode without a motion step scores 0.0 and stays in the mean",
        "such an episode has no rate (null) and is left out of the mean",
        "episodes with rates 0.5 and none: paper 25.0 %, strict 50.0 %",
    ),
    RuleDifference(
        6,
        "body groups",
        "collars count as arm/hand, the neck as torso",
        "collars count as torso, the neck as head",
        "a left_collar contact: paper arm/hand, strict torso",
    ),
    RuleDifference(
        7,
        "fixed geometry",
        "every body that is not a movable object (scene objects, stage, unknown bodies)",
        "scene objects (id >= 1) that are not movable; a contact with an unknown body "
        "(id < 1) is no collision",
        "a contact with body id -1 above the floor: paper collision, strict none",
    ),
    RuleDifference(
        8,
        "failed model calls",
        "a call that raised costs ceil(prompt characters / 4) input tokens, labelled "
        "estimated_chars_div_4",
        "a call that raised costs 0 tokens, labelled none",
        "one failed call with a 4,001-character prompt: paper 1,001 input tokens, strict 0",
    ),
    RuleDifference(
        9,
        "no floor under the spawn",
        "the floor falls back to the body's lowest point (floor_source body_lowest_point_fallback)",
        "the episode is refused with an error naming it",
        "no ray hit below the body: paper floor = lowest body point, strict ValueError",
    ),
    RuleDifference(
        10,
        "metrics.json layout",
        "both layouts are read; ours is written (the reference layout on request: "
        "humanclaw metrics --format upstream)",
        "the same",
        "a directory with reference and our files aggregates into one table",
    ),
    RuleDifference(
        11,
        "interact target",
        "the pelvis (the body's root link) touching a target instance, or any object whose "
        "Habitat handle contains a target's template name (another instance of the same "
        "template counts)",
        "the pelvis touching one of the resolved target instances (by object id)",
        "two couches of template 'c0ffee', the target is the first and the pelvis lands on "
        "the second: paper contact, strict none",
    ),
    RuleDifference(
        12,
        "visible_state type",
        "any value is read as str(value); a falsy one (0, false, [], {}) as no text",
        "a value that is not a str (or None) is refused with TypeError",
        '["a bed ahead"] for bed: paper yes (its text "[\'a bed ahead\']" names the bed), '
        "strict TypeError",
    ),
)
