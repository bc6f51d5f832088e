"""The documents under verification: loading, integrity, quote anchors and code line ranges."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

import yaml

QUOTE_WINDOW = 3  # a quote must sit on its line or within this many lines of it


@dataclass(frozen=True)
class Document:
    key: str
    path: Path
    title: str
    original: str
    sha256: str

    @cached_property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @cached_property
    def lines(self) -> list[str]:
        return self.text.split("\n")

    def actual_sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def find_quote(self, quote: str, line: int) -> int | None:
        """The line (1-based) nearest ``line`` within the window whose text contains ``quote``."""
        for delta in sorted(range(-QUOTE_WINDOW, QUOTE_WINDOW + 1), key=abs):
            n = line + delta
            if 1 <= n <= len(self.lines) and quote in self.lines[n - 1]:
                return n
        return None

    def line_range(self, start: int, end: int) -> str:
        """Lines ``start`` to ``end`` inclusive (1-based), as one string."""
        if not 1 <= start <= end <= len(self.lines):
            raise ValueError(f"{self.key}: line range {start}-{end} is outside 1-{len(self.lines)}")
        return "\n".join(self.lines[start - 1:end]) + "\n"

    def heading_of(self, line: int) -> str:
        """The title of the section in force at ``line`` (see :func:`headings`)."""
        current = "(preamble)"
        for h in self.headings:
            if h.line > line:
                break
            current = h.title
        return current

    @cached_property
    def headings(self) -> list[Heading]:
        return headings(self.lines)


class Heading(NamedTuple):
    """A section title of a plain-text document: its 1-based line, its text and its depth
    (1 for a chapter or a top-level number "3."/"三、", 2 for "3.1", ...; 0 when unnumbered)."""

    line: int
    title: str
    level: int


_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)(?:\.\s*|\s+)\S")  # "3. ...", "3.1 ...", "13.4.2 ..." (not "2025 ...")
_CHAPTER = re.compile(r"^第[0-9一二三四五六七八九十百]+[章节部篇]")  # "第12章：..."
_CN_ENUM = re.compile(r"^[一二三四五六七八九十]+、")  # "三、低秩分解与近似"
_CJK = re.compile(r"[\u3400-\u9fff]")
_CODE_START = re.compile(r"^(import|from|def|class|return|for|while|if|elif|else|with|try|except|print|assert|raise|yield|lambda)\b|^[@#>]")
_CODE_SHAPES = re.compile(r"\w\(|\w\s*(=|\+=|-=|==|!=)\s*\S|[{};\[\]]|->|\bself\.")
_ART = set("|│┃└┘┌┐├┤━─═╱╲▁▂▃▄▅▆▇█▏▕→←↑↓")
_SENTENCE_MARKS = ("。", "，", "；", ";", "：", ":", ".", "、")
_FOOTNOTE_MARKS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
MAX_TITLE = 60


def headings(lines: list[str]) -> list[Heading]:
    """Section titles of a plain-text document (the documents lost their markup when copied).

    A title is a paragraph of one line (blank lines, not whitespace-only lines, around it: code
    blocks keep whitespace-only lines inside them), short, and shaped like a title: no sentence
    punctuation at its end or commas inside, no formula (``$$``), table row (tabs), bullet,
    ASCII-art or code. Chapter lines ("第12章：...", "三、..."), numbered titles ("2.3 ..."),
    and unnumbered ones ("核心公式", "Self-Attention机制") are all found; numbered list items
    are not, since a list is a paragraph of several lines.
    """
    found: list[Heading] = []
    for i, raw in enumerate(lines):
        text = raw.strip()
        alone = (i == 0 or lines[i - 1] == "") and (i + 1 == len(lines) or lines[i + 1] == "")
        if alone and raw == raw.lstrip() and _looks_like_title(text):
            found.append(Heading(i + 1, text, _level(text)))
    return found


def _looks_like_title(text: str) -> bool:
    text = text.rstrip(_FOOTNOTE_MARKS).rstrip()
    if not text or len(text) > MAX_TITLE or "\t" in text or text.startswith(("$", "•", "-", "*", "+", "（", "(", "“", '"', "「")):
        return False
    if text.endswith(_SENTENCE_MARKS) or "。" in text or "，" in text or "$$" in text or "et al." in text:
        return False
    if ": " in text and not _CJK.search(text):  # "ACL Anthology: 2025.emnlp-main.561"
        return False
    if any(ch in _ART for ch in text):
        return False
    letters = sum(ch.isalpha() for ch in text)
    if letters < max(1, len(text.replace(" ", "")) // 2) and not _NUMBERED.match(text):
        return False
    if _CODE_START.match(text):
        return False
    return bool(_CJK.search(text)) or not _CODE_SHAPES.search(text)


def _level(text: str) -> int:
    if _CHAPTER.match(text) or _CN_ENUM.match(text):
        return 1
    m = _NUMBERED.match(text)
    return m.group(1).count(".") + 1 if m else 0


@dataclass(frozen=True)
class Sources:
    root: Path
    documents: dict[str, Document]

    def __getitem__(self, key: str) -> Document:
        return self.documents[key]

    def __contains__(self, key: object) -> bool:
        return key in self.documents


def load_sources(root: Path) -> Sources:
    """Read ``<root>/sources/sources.yaml``."""
    folder = root / "sources"
    entries = yaml.safe_load((folder / "sources.yaml").read_text(encoding="utf-8"))
    docs = {
        e["key"]: Document(e["key"], folder / e["file"], e["title"], e["original"], e["sha256"])
        for e in entries
    }
    return Sources(root, docs)
