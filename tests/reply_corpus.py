"""A seeded corpus of adversarial model replies (importable as ``reply_corpus``).

Each reply is a random composition of what VLM answers contain: planner objects (strict,
with a trailing comma, single quotes, Python literals, nested ``additional_info``), think
blocks of every tag and letter case (closed, unclosed, closing tag only, nested), code
fences of several languages, prose with braces and quotes, several objects, objects inside
strings, escapes (lone surrogates, ``\\u`` escapes), NaN and Infinity, unterminated strings,
brace noise and moderately deep nesting. The same seed gives the same corpus on every run.
"""

from __future__ import annotations

import json
import random

__all__ = ["adversarial_replies"]

_TAGS = ["think", "thinking", "reasoning", "THINK", "Think", "THINKING", "Reasoning", "thought"]
_FENCES = ["```json\n", "```\n", "```JSON\n", "```python\n", "``` json\n", "```", "``"]
_PROSE = [
    "Here is my decision:",
    "I hope this helps!",
    "The couch is {left} of me.",
    "Let's go: {",
    "}",
    "it's 'fine'",
    'he said "go"',
    "{walk}",
    "{not json}",
    "{'a': 1}",
    "",
    " ",
    "\n",
    "Answer:\n",
    "```",
    "<think>",
    "</think>",
    "{}",
    "[1, 2]",
    "null",
    '"text"',
    "NaN",
]


def _plan(rng: random.Random) -> dict:
    data: dict = {
        "visible_state": rng.choice(["a couch", "", "a {door}", 'a "chair"', "x" * 30]),
        "mid_level_goal": rng.choice(["turn", "go to the bed", "}"]),
        "action_id": rng.choice([0, 1, 2, 3, 5, -1, 9, "2", None, True, 2.5]),
        "action_name": rng.choice(
            ["Turn<left><45>", "Walk<forward><fast>", "Stop/Stand", "", None, "Sit down<0.45>"]
        ),
    }
    if rng.random() < 0.6:
        data["additional_info"] = rng.choice(
            [{}, {"turn_for_sit": True}, {"note": "{x}"}, {"a": {"b": {}}}, []]
        )
    if rng.random() < 0.2:
        data["verdict"] = rng.choice(["accept", "replace"])
    keys = list(data)
    rng.shuffle(keys)
    return {k: data[k] for k in keys[: rng.randint(1, len(keys))]}


def _object_text(rng: random.Random) -> str:
    data = _plan(rng)
    text = json.dumps(data, ensure_ascii=rng.random() < 0.5)
    kind = rng.randrange(10)
    if kind == 0 and text.endswith("}") and len(text) > 2:
        text = text[:-1] + ",}"  # trailing comma
    elif kind == 1:
        text = text.replace('"', "'")  # single quotes
    elif kind == 2:
        text = text.replace("true", "True").replace("null", "None")
    elif kind == 3:
        text = json.dumps(data, indent=2)
    elif kind == 4:
        text = text.replace("2", "NaN", 1)
    elif kind == 5 and len(text) > 4:
        cut = rng.randrange(1, len(text) - 1)
        text = text[:cut]  # unterminated
    elif kind == 6:
        text = text.replace("a", "\\ud800", 1) if '"a' in text else text
    return text


def _noise(rng: random.Random) -> str:
    alphabet = '{}[]":,\\ \n\t01aeTFN.-'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))


def _nested(rng: random.Random) -> str:
    depth = rng.randint(2, 60)
    inner = json.dumps(_plan(rng))
    text = '{"a": ' * depth + inner + "}" * rng.choice([depth, depth - 1, 0])
    return text


def _piece(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(12)
    if kind <= 2:
        return _object_text(rng)
    if kind == 3:
        return rng.choice(_PROSE)
    if kind == 4 and depth < 3:  # a think block of some tag, closed or not
        tag = rng.choice(_TAGS)
        close = rng.choice([tag, tag.lower(), rng.choice(_TAGS), None])
        inner = _piece(rng, depth + 1)
        return f"<{tag}>{inner}" + (f"</{close}>" if close else "")
    if kind == 5:
        return f"</{rng.choice(_TAGS)}>"
    if kind == 6 and depth < 3:
        fence = rng.choice(_FENCES)
        return f"{fence}{_piece(rng, depth + 1)}\n```"
    if kind == 7:
        return _noise(rng)
    if kind == 8:
        return _nested(rng)
    if kind == 9:  # an object inside a JSON string
        return json.dumps({"note": json.dumps(_plan(rng))})
    if kind == 10:
        return json.dumps([_plan(rng)])
    return "{" + _piece(rng, depth + 1) if depth < 3 else "{"


def adversarial_replies(count: int = 5000, seed: int = 26) -> list[str]:
    """``count`` replies, each one to six pieces joined by spaces, newlines or nothing."""
    rng = random.Random(seed)
    replies = []
    for _ in range(count):
        pieces = [_piece(rng) for _ in range(rng.randint(1, 6))]
        replies.append("".join(p + rng.choice(["", " ", "\n"]) for p in pieces))
    return replies
