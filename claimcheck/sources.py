"""The documents under verification: loading, integrity, quote anchors and code line ranges."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

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
        """The section heading in force at ``line`` (see :func:`headings`)."""
        current = "(preamble)"
        for n, title in self.headings:
            if n > line:
                break
            current = title
        return current

    @cached_property
    def headings(self) -> list[tuple[int, str]]:
        return headings(self.lines)


def headings(lines: list[str]) -> list[tuple[int, str]]:
    """Section headings of a plain-text document: chapter lines ("第N章…") and lines that follow
    a ``---`` rule; numbered section titles ("1.2 ..."). Returned as (line, title)."""
    found: list[tuple[int, str]] = []
    for i, raw in enumerate(lines):
        text = raw.strip()
        if not text or len(text) > 60:
            continue
        prev = lines[i - 1].strip() if i else ""
        prev2 = lines[i - 2].strip() if i > 1 else ""
        after_rule = prev == "---" or (prev == "" and prev2 == "---")
        chapter = text.startswith("第") and "章" in text[:6]
        numbered = text[:1].isdigit() and "." in text[:4] and not text.endswith(("。", "：", ":")) and "$" not in text
        if chapter or (after_rule and not text.startswith(("#", "•", "|", "$"))) or numbered:
            found.append((i + 1, text))
    return found


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
