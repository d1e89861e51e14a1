"""Descriptions of the registered skills derived from the skill table.

The benchmark server's action spec, the agent prompts' skill table and the docs all read
these functions, so a skill added to the table (or registered at run time) appears
everywhere without further edits.
"""

from __future__ import annotations

from typing import Any

from humanclaw_gym.skills.catalog import skill_specs
from humanclaw_gym.skills.spec import Choice, Range, SkillSpec

__all__ = ["describe_skills", "param_schema", "skill_table_rows"]


def param_schema(rule: Choice | Range) -> dict[str, Any]:
    """JSON-schema-like description of one parameter rule (``default`` when it has one)."""
    if isinstance(rule, Choice):
        out: dict[str, Any] = {"type": "string", "enum": list(rule.values)}
    else:
        out = {
            "type": "number",
            "minimum": rule.low,
            "maximum": rule.high,
            "unit": rule.unit,
            "inclusive": True,
        }
    if rule.default is not None:
        out["default"] = rule.default
    return out


def _describe(spec: SkillSpec) -> dict[str, Any]:
    return {
        "id": spec.id,
        "key": spec.key,
        "name": spec.display_name,
        "text": spec.usage(),
        "example": spec.example,
        "params": {name: param_schema(rule) for name, rule in spec.params.items()},
        "meaning": spec.meaning,
    }


def describe_skills() -> list[dict[str, Any]]:
    """One JSON-ready record per registered skill, in id order: ``id``, ``key``, ``name``
    (display name), ``text`` (grammar, e.g. ``Turn<left|right><10..120>``), ``example``,
    ``params`` (see :func:`param_schema`) and ``meaning``."""
    return [_describe(spec) for spec in skill_specs()]


def skill_table_rows() -> list[tuple[int, str, str, str]]:
    """``(id, display name, text grammar, meaning)`` per registered skill, for tables in
    prompts and docs."""
    return [(s.id, s.display_name, s.usage(), s.meaning) for s in skill_specs()]
