"""Every relative link and anchor in README.md and docs/*.md resolves, by GitHub's rules.

Links are read with a CommonMark parser (markdown-it-py), so code spans and code blocks are
not links. A relative target must name a file or folder of the repository; an anchor
(``file.md#part`` or ``#part``) must name a heading of that Markdown file as GitHub slugs it
(lower case; characters other than letters, digits, ``_``, ``-`` and spaces dropped; spaces
become ``-``; the second heading of one slug gets ``-1``, the third ``-2``, ...) or an
explicit ``<a id="...">`` / ``<a name="...">``.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_HTML_ANCHOR = re.compile(r"""<a\s+[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_LINE_ANCHOR = re.compile(r"L\d+(-L\d+)?")
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def github_slug(text: str) -> str:
    """The anchor GitHub gives a heading of ``text`` (before de-duplication)."""
    kept = []
    for ch in text.lower():
        category = unicodedata.category(ch)
        if ch in " -" or category[0] in "LMN" or category == "Pc":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def _inline_text(token) -> str:
    """The text of a heading as GitHub reads it: code spans and link texts included,
    markup and HTML tags left out."""
    return "".join(
        child.content for child in token.children or () if child.type in ("text", "code_inline")
    )


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors a Markdown file offers on GitHub."""
    text = path.read_text(encoding="utf-8")
    tokens = _parser().parse(text)
    seen: dict[str, int] = {}
    out: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        slug = github_slug(_inline_text(tokens[i + 1]))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    out.update(_HTML_ANCHOR.findall(text))
    return frozenset(out)


def links(path: Path) -> list[tuple[int, str]]:
    """``(line, target)`` of every link and image in a Markdown file."""
    found = []
    parser = _parser()
    for token in parser.parse(path.read_text(encoding="utf-8")):
        line = (token.map or [0])[0] + 1
        children = token.children
        if token.type == "html_block":
            # a line that starts with a figure marker (<!--r:...-->) opens an HTML block:
            # the links in the rest of it are still read (and should resolve)
            children = parser.parseInline(_COMMENT.sub("", token.content))[0].children
        elif token.type != "inline":
            continue
        for child in children or ():
            if child.type == "link_open":
                found.append((line, str(child.attrs.get("href", ""))))
            elif child.type == "image":
                found.append((line, str(child.attrs.get("src", ""))))
    return found


def broken_links(path: Path) -> list[str]:
    """One line per link of ``path`` that does not resolve."""
    problems = []
    for line, target in links(path):
        where = f"{path.relative_to(ROOT)}:{line}: {target}"
        if not target or _SCHEME.match(target) or target.startswith("//"):
            continue  # absolute URLs are not checked here (no network)
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        resolved = (path.parent / file_part).resolve() if file_part else path
        try:
            resolved.relative_to(ROOT)
        except ValueError:
            problems.append(f"{where}: points outside the repository")
            continue
        if not resolved.exists():
            problems.append(f"{where}: no such file or folder")
            continue
        if not anchor:
            continue
        if resolved.suffix.lower() != ".md":
            if not _LINE_ANCHOR.fullmatch(anchor):
                problems.append(f"{where}: anchor into a file that is not Markdown")
            continue
        if unquote(anchor) not in anchors(resolved):
            problems.append(f"{where}: no heading or anchor #{anchor} in {file_part or path.name}")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_the_docs_have_links_to_check() -> None:
    assert len(DOCS) > 10
    assert sum(len(links(p)) for p in DOCS) > 100


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Metric rules (paper and strict)", "metric-rules-paper-and-strict"),
        ("CPU records across nodes", "cpu-records-across-nodes"),
        ("`--resume` and `run_fingerprint.json`", "--resume-and-run_fingerprintjson"),
        ("What it does *not* protect against", "what-it-does-not-protect-against"),
        ("Étape 2: ça marche", "étape-2-ça-marche"),
    ],
)
def test_slugs_follow_githubs_rules(tmp_path: Path, heading: str, slug: str) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(f"# {heading}\n\ntext\n\n## {heading}\n", encoding="utf-8")
    assert anchors(doc) == {slug, f"{slug}-1"}


def test_the_checker_finds_a_broken_anchor_and_a_missing_file(tmp_path: Path) -> None:
    docs = ROOT / "docs"
    doc = docs / "metrics.md"
    fake = tmp_path / "fake.md"
    fake.write_text(
        "# Title\n\n[ok](#title) [bad](#nope) `[code](#not-a-link)`\n\n"
        f"[file]({doc}) [gone]({docs / 'no_such.md'}) "
        f"[anchor]({doc}#metric-rules) [http](https://example.org/#x)\n",
        encoding="utf-8",
    )
    # the checker resolves relative to the file: check a copy placed inside the repository
    problems = [p.split(": ", 1)[1] for p in _broken_as_if_in(fake, docs)]
    assert problems == [
        "#nope: no heading or anchor #nope in .link_check_fake.md",
        f"{docs / 'no_such.md'}: no such file or folder",
        f"{doc}#metric-rules: no heading or anchor #metric-rules in {doc}",
    ]


def _broken_as_if_in(path: Path, folder: Path) -> list[str]:
    """broken_links() of a Markdown file read as though it lay in ``folder``."""
    twin = folder / f".link_check_{path.name}"
    twin.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    try:
        anchors.cache_clear()
        return broken_links(twin)
    finally:
        twin.unlink()
        anchors.cache_clear()


def test_the_readme_says_that_serve_needs_its_token() -> None:
    """A new user ran ``humanclaw serve`` from the README's table and got a refusal that the
    README never mentioned."""
    from humanclaw_gym.server.transport import TOKEN_ENV

    rows = [
        line for line in (ROOT / "README.md").read_text().splitlines() if "humanclaw serve" in line
    ]
    assert rows and all(TOKEN_ENV in row for row in rows)
