"""Instruction wording chosen at run time: a shipped template or a JSON template file.

Every episode carries its instruction (:attr:`Episode.instruction`, written when the
episode was made or imported: template ``v1`` for our splits, ``touch`` for the reference
release's episodes). ``gym.make(..., instruction_template=...)``, ``humanclaw run
--instruction-template`` and ``humanclaw rollout --instruction-template`` rewrite it for
every episode from another template, e.g. the reference release's own wording, which a
user copies from their release checkout into a file (this library does not ship it)::

    {
      "schema": "humanclaw_instruction_template_v1",
      "find": "Find the {noun} and ...",
      "sit": "... {noun}.",
      "nouns": {"tv": "TV"}
    }

Fields: ``find`` (required; the instruction of every episode), ``sit`` (appended after a
space for interact episodes: bed, couch, toilet), ``interact_find`` (replaces ``find`` for
interact episodes), ``nouns`` (the name spoken per target category; default the category
with ``_`` read as a space). The texts may use the one placeholder ``{noun}``; ``{{`` and
``}}`` write literal braces. Anything else is refused with a one-line
:class:`InstructionTemplateError` naming the file and what is allowed.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from humanclaw_gym.episodes.schema import (
    INSTRUCTION_TEMPLATES,
    Episode,
    InstructionTemplate,
)
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

__all__ = [
    "INSTRUCTION_TEMPLATE_SCHEMA",
    "InstructionTemplateError",
    "apply_instruction_template",
    "instruction_template_record",
    "load_instruction_template",
    "resolve_instruction_template",
]

INSTRUCTION_TEMPLATE_SCHEMA = "humanclaw_instruction_template_v1"
_TEXT_FIELDS = ("find", "sit", "interact_find")
_FIELDS = ("schema", *_TEXT_FIELDS, "nouns")
_MAX_BYTES = 64 * 1024


class InstructionTemplateError(ValueError):
    """An instruction template is not usable; the message names the file and what is allowed."""


def _check_text(path: Path, field: str, value: Any, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InstructionTemplateError(
            f"{path}: field {field!r} must be a non-empty string, got {value!r}"
        )
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        raise InstructionTemplateError(
            f"{path}: field {field!r} is not a valid template ({exc}); the only placeholder "
            "allowed is {noun} (write {{ and }} for literal braces)"
        ) from None
    for _, name, spec, conversion in parts:
        if name is not None and (name != "noun" or spec or conversion):
            shown = (
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise InstructionTemplateError(
                f"{path}: field {field!r} uses the placeholder {shown}; the only placeholder "
                "allowed is {noun} (write {{ and }} for literal braces)"
            )
    return value.strip()


def load_instruction_template(path: str | os.PathLike[str]) -> InstructionTemplate:
    """Read a JSON instruction template file (see the module docstring).

    Raises:
        InstructionTemplateError: the file cannot be read or is not such a template
            (one line naming the file, the field and what is allowed).
    """
    p = Path(path).expanduser()
    try:
        if not p.is_file():
            raise InstructionTemplateError(
                f"{p}: no such file (an instruction template is a .json file, or one of "
                f"the names {sorted(INSTRUCTION_TEMPLATES)})"
            )
        if p.stat().st_size > _MAX_BYTES:
            raise InstructionTemplateError(
                f"{p}: {p.stat().st_size} bytes; an instruction template may hold at most "
                f"{_MAX_BYTES} bytes"
            )
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InstructionTemplateError(f"{p}: cannot be read ({exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstructionTemplateError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InstructionTemplateError(
            f"{p}: must be a JSON object with the fields {', '.join(_FIELDS)}, "
            f"got {type(doc).__name__}"
        )
    unknown = sorted(set(doc) - set(_FIELDS))
    if unknown:
        raise InstructionTemplateError(
            f"{p}: unknown field {unknown[0]!r}; allowed: {', '.join(_FIELDS)}"
        )
    if doc.get("schema") != INSTRUCTION_TEMPLATE_SCHEMA:
        raise InstructionTemplateError(
            f"{p}: field 'schema' must be {INSTRUCTION_TEMPLATE_SCHEMA!r}, got {doc.get('schema')!r}"
        )
    find = _check_text(p, "find", doc.get("find"), required=True)
    sit = _check_text(p, "sit", doc.get("sit"), required=False)
    interact_find = _check_text(p, "interact_find", doc.get("interact_find"), required=False)
    raw_nouns = doc.get("nouns", {})
    if not isinstance(raw_nouns, dict):
        raise InstructionTemplateError(
            f"{p}: field 'nouns' must be an object of category -> name, got {raw_nouns!r}"
        )
    nouns = []
    for category, noun in raw_nouns.items():
        if category not in TARGET_CATEGORIES:
            raise InstructionTemplateError(
                f"{p}: nouns[{category!r}] is no target category; allowed: "
                f"{', '.join(TARGET_CATEGORIES)}"
            )
        if not isinstance(noun, str) or not noun.strip() or "{" in noun or "}" in noun:
            raise InstructionTemplateError(
                f"{p}: nouns[{category!r}] must be a non-empty name without braces, got {noun!r}"
            )
        nouns.append((category, noun.strip()))
    return InstructionTemplate(
        find=str(find),
        sit=sit or "",
        interact_find=interact_find,
        nouns=tuple(sorted(nouns)),
    )


def resolve_instruction_template(
    value: str | os.PathLike[str] | InstructionTemplate | None,
) -> InstructionTemplate | None:
    """An :class:`InstructionTemplate` from a template, a shipped name (``"v1"``,
    ``"touch"``) or the path of a ``.json`` template file; ``None`` stays ``None`` (the
    episodes keep their own instructions).

    Raises:
        InstructionTemplateError: an unknown name, or a file that is not a template.
    """
    if value is None or isinstance(value, InstructionTemplate):
        return value
    if isinstance(value, str) and value in INSTRUCTION_TEMPLATES:
        return INSTRUCTION_TEMPLATES[value]
    if not isinstance(value, (str, os.PathLike)):
        raise InstructionTemplateError(
            f"instruction_template must be a .json file, one of {sorted(INSTRUCTION_TEMPLATES)} "
            f"or an InstructionTemplate, got {value!r}"
        )
    path = Path(value)
    if path.suffix != ".json":
        raise InstructionTemplateError(
            f"instruction_template {str(value)!r} is neither a shipped template "
            f"({', '.join(sorted(INSTRUCTION_TEMPLATES))}) nor a .json file"
        )
    return load_instruction_template(path)


def apply_instruction_template(
    episodes: Iterable[Episode], template: InstructionTemplate | None
) -> list[Episode]:
    """The episodes with their instruction written by ``template`` (``None``: unchanged)."""
    if template is None:
        return list(episodes)
    return [
        replace(ep, instruction=template.render(ep.object_category, bool(ep.interact)))
        for ep in episodes
    ]


def instruction_template_record(
    value: str | os.PathLike[str] | InstructionTemplate | None,
) -> dict[str, Any] | None:
    """What a run records of its instruction template: where it came from and its fields
    (so a changed file is a changed setting); ``None`` without one."""
    template = resolve_instruction_template(value)
    if template is None:
        return None
    source: str = "InstructionTemplate"
    if isinstance(value, (str, os.PathLike)):
        source = str(value)
    fields: Mapping[str, Any] = {
        "find": template.find,
        "sit": template.sit,
        "interact_find": template.interact_find,
        "nouns": dict(template.nouns),
    }
    return {"source": source, **fields}
