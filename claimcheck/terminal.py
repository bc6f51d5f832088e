"""Text for a terminal: its width, tables cut to it, help wrapped to it, and a suggestion for a misspelt
option, choice or subcommand.

The width is the terminal's (``COLUMNS`` when set), 100 columns when the output is not a terminal.
A table row is one line: the columns keep their natural width while they fit, and when they do not
the cuttable columns are cut from the right, each down to its own minimum (an optional one is left
out instead), the cut marked ``...``. Help is wrapped to the terminal but never wider than
``HELP_WIDTH``; prose is refilled, indented lines (tables, examples) are kept as written, and no
option, word or example is broken inside.
"""
from __future__ import annotations

import argparse
import difflib
import re
import shutil
import textwrap
import unicodedata
from dataclasses import dataclass

DEFAULT_WIDTH = 100  # when the output is not a terminal
HELP_WIDTH = 100  # help is wrapped to the terminal, but read no wider than this
ELLIPSIS = "..."
GAP = "  "  # between the columns of a table


def terminal_width() -> int:
    """Columns of the terminal: ``COLUMNS`` when set, else the terminal's, else ``DEFAULT_WIDTH``."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def cells(text: str) -> int:
    """Columns ``text`` takes on a terminal: two for each wide (CJK) character, one for the others."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def fit(text: str, n: int) -> str:
    """``text`` on one line in at most ``n`` columns, ending in ``...`` where it was cut."""
    text = " ".join(text.split())
    if cells(text) <= n:
        return text
    room, kept = n - len(ELLIPSIS), []
    for ch in text:
        room -= cells(ch)
        if room < 0:
            break
        kept.append(ch)
    return "".join(kept).rstrip() + ELLIPSIS if n >= len(ELLIPSIS) else text[:n]


@dataclass(frozen=True)
class Column:
    """One column of a table: its header, its cells, right-aligned or not, the fewest columns it may be
    cut to (None: never cut), and whether it is left out rather than cut below that."""

    header: str
    cells: list[str]
    right: bool = False
    cut: int | None = None
    optional: bool = False


def widths(columns: list[Column], total: int) -> list[int | None]:
    """Each column's width (None: left out): its natural width (header or widest cell), the cuttable
    columns cut from the right, each down to its minimum (an optional one left out instead), until the
    row fits ``total`` columns or nothing more can be cut."""
    sizes: list[int | None] = [max([cells(c.header), *map(cells, c.cells)]) for c in columns]
    excess = sum(sizes) + len(GAP) * (len(columns) - 1) - total
    for i in reversed(range(len(columns))):
        if excess <= 0:
            break
        c, n = columns[i], sizes[i]
        if c.cut is None:
            continue
        if c.optional and n - excess < c.cut:
            sizes[i], excess = None, excess - n - len(GAP)
        else:
            take = min(excess, max(0, n - c.cut))
            sizes[i], excess = n - take, excess - take
    return sizes


def table(columns: list[Column], total: int | None = None) -> list[str]:
    """A header line and one line per row, fitted to ``total`` columns (default: the terminal's)."""
    sizes = widths(columns, terminal_width() if total is None else total)
    shown = [(c, n) for c, n in zip(columns, sizes) if n is not None]
    rows = zip(*([c.header, *c.cells] for c, _ in shown))
    return [GAP.join(_pad(fit(cell, n), n, c.right) for cell, (c, n) in zip(row, shown)).rstrip() for row in rows]


def _pad(text: str, n: int, right: bool) -> str:
    space = " " * max(0, n - cells(text))
    return space + text if right else text + space


# ---------------------------------------------------------------------------------------------
# help and usage errors


class HelpFormatter(argparse.HelpFormatter):
    """Help wrapped to the terminal, at most ``HELP_WIDTH`` columns: prose is refilled; a paragraph's
    indented lines (a table, an example) are kept as written; no word, option or example is broken."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, width or min(terminal_width(), HELP_WIDTH) - 2)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        """``--status, -s STATUS`` rather than argparse's ``--status STATUS, -s STATUS``."""
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        value = self._format_args(action, self._get_default_metavar_for_optional(action))
        return f"{', '.join(action.option_strings)} {value}"

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_long_words=False, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(_fill_paragraph(p, width, indent) for p in re.split(r"\n\s*\n", text.strip("\n")))


def _fill_paragraph(paragraph: str, width: int, indent: str) -> str:
    """Runs of unindented lines refilled to ``width``; indented lines kept as they are."""
    out: list[str] = []
    prose: list[str] = []
    for line in paragraph.splitlines() + [" "]:  # a last indented line flushes the prose
        if line[:1].isspace():
            if prose:
                out += textwrap.wrap(" ".join(prose), width, initial_indent=indent, subsequent_indent=indent,
                                     break_long_words=False, break_on_hyphens=False)
                prose = []
            if line.strip():
                out.append(indent + line.rstrip())
        else:
            prose.append(line.strip())
    return "\n".join(out)


def suggestion(word: str, choices: list[str]) -> str:
    """``"; did you mean X?"`` for the choice nearest a misspelt ``word``, or nothing."""
    near = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {near[0]}?" if near else ""


class Parser(argparse.ArgumentParser):
    """An argument parser whose help is wrapped by :class:`HelpFormatter` and whose errors suggest the
    option, choice or subcommand meant. Every parser rejects the arguments it does not know itself, so a
    subcommand's misspelt option is reported with the subcommand's usage (argparse's own parser leaves
    them to the top-level one)."""

    def __init__(self, *args, formatter_class: type = HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        namespace, unknown = super().parse_known_args(args, namespace)
        if unknown:
            options = [o for action in self._actions for o in action.option_strings]
            first = unknown[0].split("=", 1)[0]
            hint = suggestion(first, options) if first.startswith("-") else ""
            self.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
        return namespace, unknown

    def _check_value(self, action: argparse.Action, value) -> None:  # argparse's hook for a choice
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            hint = suggestion(str(value), [str(c) for c in action.choices or ()])
            raise argparse.ArgumentError(action, exc.message + hint) from None
