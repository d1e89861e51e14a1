"""Reading a model's reply as one JSON object, the way real VLMs actually answer.

Reasoning models wrap their answer in ``<think>...</think>`` blocks and prose, chat models
like Markdown code fences, small models leave trailing commas or write Python-style single
quotes. :func:`read_reply_json` finds the object anyway and says what it had to do, so that
every recovery can be counted in the step record instead of burning a retry.

The order of the steps, and what each recovery is called in :attr:`ReplyJSON.recoveries`:

1. ``think_block``: closed ``<think>...</think>`` (also ``<thinking>``, ``<reasoning>``)
   blocks are removed. ``think_block_unopened``: a closing tag without its opening tag (the
   opening tag was part of the chat template) drops everything before it.
   ``think_block_unclosed``: an opening tag that is never closed; the text before it is
   searched first, then the block itself (there the *last* object wins: it is the model's
   latest thought, the answer it never got to close).
2. ``code_fence``: Markdown fence lines (```` ```json ````, ```` ``` ````) are removed.
3. The rest is read as JSON. If that is not an object, the first ``{`` that starts an
   object is taken, as the reference agent does: ``prose_around`` when text surrounds it,
   ``several_objects`` when another object follows it. An object starts at a ``{`` when
   it decodes strictly there or, failing that, when its brace-balanced span reads as JSON
   after repairs (``trailing_comma``, ``single_quotes``, ``python_literals`` for
   True/False/None).
4. Last resort, ``json_inside_think``: an object that only exists inside a removed think
   block.

Closed think blocks, fences and the first strictly decoding ``{`` are the reference
release's reader, so a reply whose first object is strict JSON gives the reference's object
here. The differences are deliberate: a closing think tag without an opening one (the
reference may take an object drafted inside the reasoning), an unclosed think block, and a
first object that needs a repair (the reference skips it and may take a nested fragment
such as an empty ``additional_info``, which then reads as Stop/Stand).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RECOVERIES",
    "ReplyExtractionError",
    "ReplyJSON",
    "ResponseFormatError",
    "read_reply_json",
]

RECOVERIES: tuple[str, ...] = (
    "think_block",
    "think_block_unopened",
    "think_block_unclosed",
    "code_fence",
    "prose_around",
    "several_objects",
    "trailing_comma",
    "single_quotes",
    "python_literals",
    "json_inside_think",
)
"""Every recovery name :func:`read_reply_json` can report, in the order it tries them."""

_THINK_TAGS = "think|thinking|reasoning"
_CLOSED_THINK_RE = re.compile(rf"<({_THINK_TAGS})>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)
_CLOSE_TAG_RE = re.compile(rf"</(?:{_THINK_TAGS})\s*>", re.IGNORECASE)
_OPEN_TAG_RE = re.compile(rf"<(?:{_THINK_TAGS})>", re.IGNORECASE)
_FENCE_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?")
_PREVIEW_CHARS = 160
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


class ResponseFormatError(ValueError):
    """A model reply could not be turned into what a stage expects."""


class ReplyExtractionError(ResponseFormatError):
    """No JSON object could be read from a model reply (a retry is the only way on)."""


@dataclass(frozen=True)
class ReplyJSON:
    """The object read from a reply and the recoveries that were needed.

    Attributes:
        data: the JSON object.
        recoveries: names from :data:`RECOVERIES`, in the order they were applied (each at
            most once); empty when the reply was a bare JSON object.
    """

    data: dict[str, Any]
    recoveries: tuple[str, ...] = ()


def read_reply_json(text: Any) -> ReplyJSON:
    """Read a model reply as one JSON object (see the module docstring for the steps).

    Args:
        text: the reply text.

    Returns:
        The object and the recoveries applied.

    Raises:
        ReplyExtractionError: no JSON object could be read, with a preview of the reply.
    """
    if not isinstance(text, str):
        raise ReplyExtractionError(f"reply must be text, got {type(text).__name__}")
    recoveries: list[str] = []
    thoughts: list[str] = []

    def strip_closed(match: re.Match[str]) -> str:
        thoughts.append(match.group(2))
        return " "

    body, closed = _CLOSED_THINK_RE.subn(strip_closed, text)
    if closed:
        recoveries.append("think_block")
    closing = list(_CLOSE_TAG_RE.finditer(body))
    if closing:
        recoveries.append("think_block_unopened")
        thoughts.append(body[: closing[0].start()])
        body = body[closing[-1].end() :]
    unclosed: str | None = None
    opening = _OPEN_TAG_RE.search(body)
    if opening:
        recoveries.append("think_block_unclosed")
        unclosed = body[opening.end() :]
        body = body[: opening.start()]

    found = _read_body(body, recoveries)
    if found is None and unclosed is not None:
        found = _read_body(unclosed, recoveries, last=True)
    if found is None:
        for thought in thoughts:
            found = _read_body(thought, recoveries)
            if found is not None:
                recoveries.append("json_inside_think")
                break
    if found is None:
        preview = " ".join(text.split())
        if len(preview) > _PREVIEW_CHARS:
            preview = preview[: _PREVIEW_CHARS - 3] + "..."
        raise ReplyExtractionError(f"no JSON object could be read from the reply: {preview!r}")
    return ReplyJSON(found, tuple(dict.fromkeys(recoveries)))


# ---- one text body -----------------------------------------------------------------------------


def _read_body(body: str, recoveries: list[str], *, last: bool = False) -> dict[str, Any] | None:
    """Find one object in ``body``; append the recoveries used (only on success)."""
    fenced = bool(_FENCE_RE.search(body))
    clean = _FENCE_RE.sub("", body).strip() if fenced else body.strip()
    local: list[str] = ["code_fence"] if fenced else []
    if not clean:
        return None
    try:
        value = json.loads(clean)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        recoveries.extend(local)
        return value

    objects = list(_objects(clean))
    if not objects:
        return None
    start, end, data, fixes = objects[len(objects) - 1 if last else 0]
    local.extend(fixes)
    if clean[:start].strip() or clean[end:].strip():
        local.append("prose_around")
    if len(objects) > 1:
        local.append("several_objects")
    recoveries.extend(local)
    return data


def _objects(text: str) -> Iterator[tuple[int, int, dict[str, Any], list[str]]]:
    """Every top-level object in ``text``, left to right: from each ``{``, the object that
    strictly decodes there, else the repaired brace-balanced span, else nothing."""
    decoder = json.JSONDecoder()
    position = 0
    while True:
        start = text.find("{", position)
        if start < 0:
            return
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            yield start, end, value, []
            position = end
            continue
        repaired = _repaired_object(text, start)
        if repaired is None:
            position = start + 1
            continue
        end, value, fixes = repaired
        yield start, end, value, fixes
        position = end


# ---- lenient repair ----------------------------------------------------------------------------


def _repaired_object(text: str, start: int) -> tuple[int, dict[str, Any], list[str]] | None:
    end = _balanced_end(text, start)
    if end is None:
        return None
    repaired = _repair(text[start:end])
    if repaired is None:
        return None
    candidate, fixes = repaired
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError:
        return None
    return (end, value, fixes) if isinstance(value, dict) else None


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the brace that closes ``text[start]``, honouring both quote styles."""
    depth = 0
    quote: str | None = None
    index = start
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 2
                continue
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _repair(span: str) -> tuple[str, list[str]] | None:
    """Rewrite single-quoted strings, trailing commas and Python literals as JSON."""
    out: list[str] = []
    fixes: list[str] = []
    index = 0
    while index < len(span):
        char = span[index]
        if char in "\"'":
            end = _string_end(span, index)
            if end is None:
                return None
            raw = span[index + 1 : end]
            if char == "'":
                out.append(json.dumps(_unescape_single(raw), ensure_ascii=False))
                if "single_quotes" not in fixes:
                    fixes.append("single_quotes")
            else:
                out.append(span[index : end + 1])
            index = end + 1
            continue
        if char == ",":
            rest = span[index + 1 :].lstrip()
            if rest[:1] in ("}", "]"):
                if "trailing_comma" not in fixes:
                    fixes.append("trailing_comma")
                index += 1
                continue
        if char.isalpha():
            match = re.match(r"[A-Za-z_]+", span[index:])
            word = match.group(0) if match else char
            if word in _PY_LITERALS:
                out.append(_PY_LITERALS[word])
                if "python_literals" not in fixes:
                    fixes.append("python_literals")
            else:
                out.append(word)
            index += len(word)
            continue
        out.append(char)
        index += 1
    return "".join(out), fixes


def _string_end(text: str, start: int) -> int | None:
    quote = text[start]
    index = start + 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == quote:
            return index
        index += 1
    return None


def _unescape_single(raw: str) -> str:
    """Content of a single-quoted string: ``\\'`` is a quote, other escapes read as JSON's."""
    text = raw.replace("\\'", "'")
    try:
        return json.loads('"' + text.replace('"', '\\"') + '"')
    except json.JSONDecodeError:
        return text
