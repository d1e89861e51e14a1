"""Reading a model's reply as one JSON object, the way real VLMs actually answer.

Two readers, chosen per agent (``reply_reader``):

* ``"reference"`` (the ``psv`` agent's default): the reference release's reader, exactly.
  Closed ``<think>...</think>`` blocks are removed (that tag only, lower case), then every
  `````json`` and ````` marker, then the rest is read as JSON; if that is not an object, the
  first ``{`` from which an object decodes wins (trailing text ignored). Nothing else is
  recovered: a reply the release cannot read is a failed attempt here too.
* ``"tolerant"`` (``--agent psv:tolerant``): also copes with what small and reasoning models
  write, and says what it had to do, so that a recovery is counted in the step record
  instead of burning a retry. Its steps, and what each recovery is called in
  :attr:`ReplyJSON.recoveries`:

  1. ``think_block``: closed ``<think>...</think>``, ``<thinking>`` and ``<reasoning>``
     blocks (any letter case) are removed. ``think_block_unopened``: a closing tag without
     its opening tag (the opening tag was part of the chat template) drops everything
     before it. ``think_block_unclosed``: an opening tag that is never closed; the text
     before it is searched first, then the block itself (there the *last* object wins: it
     is the model's latest thought, the answer it never got to close).
  2. ``code_fence``: Markdown fence lines (```` ```json ````, ```` ``` ````) are removed.
  3. The rest is read as JSON. If that is not an object, the first ``{`` that starts an
     object is taken: ``prose_around`` when text surrounds it, ``several_objects`` when
     another object follows it. An object starts at a ``{`` when it decodes strictly there
     or, failing that, when its brace-balanced span reads as JSON after repairs
     (``trailing_comma``, ``single_quotes``, ``python_literals`` for True/False/None).
  4. Last resort, ``json_inside_think``: an object that only exists inside a removed think
     block.

  Where it differs from the reference: the other think tags and letter cases (the
  reference reads ``<thinking>{"action_id": 1}</thinking>{walk}`` as the object inside
  the tags, this reader as none outside them), a closing tag without an opening one, an
  unclosed block, fence lines instead of fence markers, and a first object that needs a
  repair (the reference skips it and may take a nested fragment such as an empty
  ``additional_info``, which then reads as Stop/Stand).

Both readers take time linear in the reply's length: no step scans the text again from
every ``{`` (the reader this replaced took minutes on brace noise of 256 KB), the tolerant
repairs scan at most :data:`REPAIR_SCAN_CHARS` characters per reply, and a reply longer
than ``max_chars`` is refused before it is read. JSON nested deeper than the interpreter
can decode (about a thousand levels) or holding an integer of more than 4,300 digits is an
unreadable reply in both readers, as it is for the reference (whose decoder raises there).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MAX_REPLY_CHARS",
    "READERS",
    "RECOVERIES",
    "REPAIR_SCAN_CHARS",
    "ReplyExtractionError",
    "ReplyJSON",
    "ResponseFormatError",
    "read_reply_json",
]

READERS: tuple[str, ...] = ("reference", "tolerant")
"""The reply readers: the reference release's rule, or ours with counted recoveries."""

DEFAULT_MAX_REPLY_CHARS = 1 << 20
"""Replies longer than this many characters are refused unread (an agent's
``max_reply_chars``); real answers are a few kilobytes, reasoning included."""

REPAIR_SCAN_CHARS = 1 << 18
"""Characters the tolerant reader's repairs may scan per reply, attempts included (each
attempt costs at least :data:`_REPAIR_ATTEMPT_CHARS`); strict decoding is not limited."""

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
_OPEN_RE = re.compile(rf"<({_THINK_TAGS})>", re.IGNORECASE)
_CLOSE_RE = re.compile(rf"</({_THINK_TAGS})\s*>", re.IGNORECASE)
_FENCE_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?")
_PREVIEW_CHARS = 160
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_REPAIR_ATTEMPT_CHARS = 256
_REPAIR_SPAN_CHARS = 1 << 16

# Where an object can start: "{", JSON whitespace, then "}" or a complete key and ":".
# (A "{" followed by anything else fails at once; filtering with one regex is linear,
# since the key strings of two such positions never overlap.)
_WS = r"[ \t\n\r]*"
_STRING = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
_VIABLE_RE = re.compile(rf"\{{(?={_WS}(?:\}}|{_STRING}{_WS}:))")
_WINDOW = 512  # characters tried first from each candidate (most fail or succeed in it)
_WINDOW_MARGIN = 32  # a failure this close to the window's end may be the window's doing


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


class _Unreadable(Exception):
    """The decoder cannot take the reply at all (nesting, huge integer)."""


def read_reply_json(
    text: Any, *, reader: str = "tolerant", max_chars: int | None = DEFAULT_MAX_REPLY_CHARS
) -> ReplyJSON:
    """Read a model reply as one JSON object (see the module docstring for the steps).

    Args:
        text: the reply text.
        reader: ``"reference"`` (the reference release's rule) or ``"tolerant"``.
        max_chars: longer replies are refused unread (``None``: no limit).

    Returns:
        The object and the recoveries applied.

    Raises:
        ReplyExtractionError: no JSON object could be read, with a preview of the reply.
        ValueError: an unknown ``reader``.
    """
    if reader not in READERS:
        raise ValueError(f"reader={reader!r} is invalid: allowed one of {READERS}")
    if not isinstance(text, str):
        raise ReplyExtractionError(f"reply must be text, got {type(text).__name__}")
    if max_chars is not None and len(text) > max_chars:
        raise ReplyExtractionError(
            f"reply of {len(text)} characters is longer than max_reply_chars={max_chars}; "
            "refused unread"
        )
    try:
        found = _read_reference(text) if reader == "reference" else _read_tolerant(text)
    except _Unreadable as exc:
        raise ReplyExtractionError(f"{exc}: {_preview(text)}") from None
    if found is None:
        raise ReplyExtractionError(f"no JSON object could be read from the reply: {_preview(text)}")
    return found


def _preview(text: str) -> str:
    preview = " ".join(text[: 4 * _PREVIEW_CHARS].split())
    if len(preview) > _PREVIEW_CHARS:
        preview = preview[: _PREVIEW_CHARS - 3] + "..."
    return repr(preview)


# ---- the reference reader ----------------------------------------------------------------------


def _read_reference(text: str) -> ReplyJSON | None:
    recoveries: list[str] = []
    clean = _drop_closed_blocks(text, "<think>", "</think>")
    if len(clean) != len(text):
        recoveries.append("think_block")
    clean = clean.strip()
    unfenced = clean.replace("```json", "").replace("```", "")
    if len(unfenced) != len(clean):
        recoveries.append("code_fence")
    clean = unfenced.strip()
    whole = _loads_whole(clean)
    if isinstance(whole, dict):
        return ReplyJSON(whole, tuple(recoveries))
    first = _StrictObjects(clean).first(0)
    if first is None:
        return None
    start, end, value = first
    if clean[:start].strip() or clean[end:].strip():
        recoveries.append("prose_around")
    return ReplyJSON(value, tuple(recoveries))


def _drop_closed_blocks(text: str, opening: str, closing: str) -> str:
    """``re.sub(opening + ".*?" + closing, "", text, flags=re.DOTALL)`` in linear time (the
    regex rescans to the end of the text from every opening tag without a closing one)."""
    parts: list[str] = []
    position = 0
    while True:
        start = text.find(opening, position)
        if start < 0:
            break
        end = text.find(closing, start + len(opening))
        if end < 0:  # no later opening tag can be closed either
            break
        parts.append(text[position:start])
        position = end + len(closing)
    parts.append(text[position:])
    return "".join(parts)


def _loads_whole(text: str) -> Any:
    """``json.loads(text)``, or None when it is not JSON; the decoder's hard failures (too
    deep, a huge integer) raise :class:`_Unreadable`, as they end the reference's reader."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
    except RecursionError:
        raise _Unreadable("the reply's JSON is nested too deeply to decode") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise _Unreadable(f"the reply's JSON cannot be decoded ({exc})") from None


class _StrictObjects:
    """The leftmost ``{`` of a text from which a JSON object strictly decodes, found in
    time linear in the text.

    Each candidate is first decoded from a short window (most fail or succeed there). A
    candidate whose decoding runs long and fails at position ``e`` tells us about every
    ``{`` it passed as a structural value: an object that closed before ``e`` decodes on
    its own, one still open at ``e`` fails there too. :meth:`_learn` records both with a
    vectorised bracket match, so that no region is decoded again from each of its nested
    ``{`` (the quadratic cost of trying them one by one). Candidates inside strings of
    that decoding see the text with the opposite string parity; they are tried as usual,
    and only one per string can run long.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.decoder = json.JSONDecoder()
        self.known: dict[int, bool] = {}
        self._starts = [m.start() for m in _VIABLE_RE.finditer(text)]

    def first(self, position: int) -> tuple[int, int, dict[str, Any]] | None:
        """``(start, end, object)`` of the leftmost object starting at or after
        ``position``, or None."""
        text = self.text
        for index in range(bisect.bisect_left(self._starts, position), len(self._starts)):
            start = self._starts[index]
            known = self.known.get(start)
            if known is False:
                continue
            if known is None:
                window = text[start : start + _WINDOW]
                try:
                    value, end = self.decoder.raw_decode(window)
                except json.JSONDecodeError as exc:
                    if len(window) < _WINDOW or not (
                        exc.pos >= _WINDOW - _WINDOW_MARGIN or exc.msg.startswith("Unterminated")
                    ):
                        continue  # a real failure, inside the window
                except (RecursionError, ValueError):
                    pass  # decided below, on the whole text
                else:  # the object closed inside the window: the whole text says the same
                    return start, start + end, value
            try:
                value, end = self.decoder.raw_decode(text, start)
            except json.JSONDecodeError as exc:
                self._learn(start, exc.pos)
                continue
            except RecursionError:
                raise _Unreadable("the reply's JSON is nested too deeply to decode") from None
            except ValueError as exc:
                raise _Unreadable(f"the reply's JSON cannot be decoded ({exc})") from None
            return start, end, value
        return None

    def _learn(self, start: int, error: int) -> None:
        """Record which ``{`` decoding from ``start`` passed as structure before failing
        at ``error``: closed ones decode on their own, open ones fail."""
        self.known[start] = False
        segment = self.text[start:error]
        if len(segment) < 2:
            return
        codes = np.frombuffer(segment.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        n = len(codes)
        index = np.arange(n)
        backslash = codes == 0x5C
        # Backslashes right before each character (all inside strings: this is a valid prefix).
        last_other = np.maximum.accumulate(np.where(backslash, -1, index))
        run_before = np.zeros(n, dtype=np.int64)
        run_before[1:] = index[:-1] - last_other[:-1]
        delimiter = (codes == 0x22) & (run_before % 2 == 0)
        quotes_before = np.cumsum(delimiter) - delimiter
        structural = (quotes_before % 2 == 0) & ~delimiter
        opens = structural & ((codes == 0x7B) | (codes == 0x5B))
        closes = structural & ((codes == 0x7D) | (codes == 0x5D))
        depth = np.cumsum(opens.astype(np.int64) - closes.astype(np.int64))
        after_min = np.empty(n, dtype=np.int64)
        after_min[:-1] = np.minimum.accumulate(depth[::-1])[::-1][1:]
        after_min[-1] = np.iinfo(np.int64).max
        objects = np.nonzero(structural & (codes == 0x7B))[0]
        objects = objects[objects > 0]
        closed = after_min[objects] < depth[objects]
        for offset, ok in zip(objects.tolist(), closed.tolist(), strict=True):
            self.known[start + offset] = ok


# ---- the tolerant reader -----------------------------------------------------------------------


def _read_tolerant(text: str) -> ReplyJSON | None:
    recoveries: list[str] = []
    thoughts: list[str] = []
    body = _drop_think_blocks(text, thoughts)
    if thoughts:
        recoveries.append("think_block")
    closing = list(_CLOSE_RE.finditer(body))
    if closing:
        recoveries.append("think_block_unopened")
        thoughts.append(body[: closing[0].start()])
        body = body[closing[-1].end() :]
    unclosed: str | None = None
    opening = _OPEN_RE.search(body)
    if opening:
        recoveries.append("think_block_unclosed")
        unclosed = body[opening.end() :]
        body = body[: opening.start()]

    budget = [REPAIR_SCAN_CHARS]
    found = _read_body(body, recoveries, budget)
    if found is None and unclosed is not None:
        found = _read_body(unclosed, recoveries, budget, last=True)
    if found is None:
        for thought in thoughts:
            found = _read_body(thought, recoveries, budget)
            if found is not None:
                recoveries.append("json_inside_think")
                break
    if found is None:
        return None
    return ReplyJSON(found, tuple(dict.fromkeys(recoveries)))


def _drop_think_blocks(text: str, thoughts: list[str]) -> str:
    """Remove closed think blocks (any of the tags, any case; an opening tag is closed by
    the next closing tag of the same name), keeping their contents in ``thoughts``.
    Linear: the closing tags of each name are listed once and found by bisection."""
    closes: dict[str, list[re.Match[str]]] = {}
    for match in _CLOSE_RE.finditer(text):
        closes.setdefault(match.group(1).lower(), []).append(match)
    starts = {name: [m.start() for m in found] for name, found in closes.items()}
    parts: list[str] = []
    position = 0
    for match in _OPEN_RE.finditer(text):
        if match.start() < position:
            continue  # inside a block already removed
        name = match.group(1).lower()
        found = closes.get(name, [])
        k = bisect.bisect_left(starts.get(name, []), match.end())
        if k == len(found):
            continue  # never closed: left for the unclosed-block rule
        close = found[k]
        parts.append(text[position : match.start()])
        parts.append(" ")
        thoughts.append(text[match.end() : close.start()])
        position = close.end()
    parts.append(text[position:])
    return "".join(parts)


def _read_body(
    body: str, recoveries: list[str], budget: list[int], *, last: bool = False
) -> dict[str, Any] | None:
    """Find one object in ``body``; append the recoveries used (only on success)."""
    fenced = bool(_FENCE_RE.search(body))
    clean = _FENCE_RE.sub("", body).strip() if fenced else body.strip()
    local: list[str] = ["code_fence"] if fenced else []
    if not clean:
        return None
    value = _loads_whole(clean)
    if isinstance(value, dict):
        recoveries.extend(local)
        return value

    objects = _objects(clean, budget)
    first = next(objects, None)
    if first is None:
        return None
    second = next(objects, None)
    chosen = first
    if last and second is not None:
        chosen = second
        for later in objects:
            chosen = later
    start, end, data, fixes = chosen
    local.extend(fixes)
    if clean[:start].strip() or clean[end:].strip():
        local.append("prose_around")
    if second is not None:
        local.append("several_objects")
    recoveries.extend(local)
    return data


def _objects(text: str, budget: list[int]) -> Iterator[tuple[int, int, dict[str, Any], list[str]]]:
    """Every top-level object in ``text``, left to right: from each ``{``, the object that
    strictly decodes there, else the repaired brace-balanced span, else nothing."""
    strict = _StrictObjects(text)
    position = 0
    while True:
        found = strict.first(position)
        limit = found[0] if found is not None else len(text)
        repaired = _first_repaired(text, position, limit, budget)
        if repaired is not None:
            yield repaired
            position = repaired[1]
        elif found is not None:
            yield found[0], found[1], found[2], []
            position = found[1]
        else:
            return


# ---- lenient repair ----------------------------------------------------------------------------


def _first_repaired(
    text: str, position: int, limit: int, budget: list[int]
) -> tuple[int, int, dict[str, Any], list[str]] | None:
    """The first ``{`` in ``[position, limit)`` whose balanced span reads as an object after
    repairs, within the remaining scan budget."""
    start = text.find("{", position, limit)
    while 0 <= start and budget[0] > 0:
        budget[0] -= _REPAIR_ATTEMPT_CHARS
        end = _balanced_end(text, start, budget)
        if end is not None:
            repaired = _repair(text[start:end])
            if repaired is not None:
                candidate, fixes = repaired
                try:
                    value = json.loads(candidate)
                except (ValueError, RecursionError):
                    value = None
                if isinstance(value, dict):
                    return start, end, value, fixes
        start = text.find("{", start + 1, limit)
    return None


# A closed string of either quote style, else a lone quote (a string that does not close),
# else a bracket.
_BALANCE_TOKEN_RE = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[\"']|[{}\[\]]", re.DOTALL)
_SPACE_RE = re.compile(r"\s*")
_WORD_RE = re.compile(r"[A-Za-z_]+")


def _balanced_end(text: str, start: int, budget: list[int]) -> int | None:
    """Index just past the brace that closes ``text[start]``, honouring both quote styles;
    None when there is none within the budget or the span is too long to repair."""
    depth = 0
    stop = min(len(text), start + _REPAIR_SPAN_CHARS, start + max(budget[0], 0))
    for match in _BALANCE_TOKEN_RE.finditer(text, start, stop):
        token = match.group()
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
            if depth == 0:
                budget[0] -= match.end() - start
                return match.end()
        elif len(token) == 1:
            break  # a string that does not close before the stop
    budget[0] -= stop - start
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
            after = _SPACE_RE.match(span, index + 1).end()
            if span[after : after + 1] in ("}", "]"):
                if "trailing_comma" not in fixes:
                    fixes.append("trailing_comma")
                index += 1
                continue
        if char.isalpha():
            match = _WORD_RE.match(span, index)
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
    except (ValueError, RecursionError):
        return text
