"""Maths in the report: LaTeX shown as MathML (Chromium renders it natively), the source kept.

The documents' quotes carry LaTeX two ways: inline, between ``$`` signs, amid Chinese text
(``所有指数都在 $(0,1]$ 范围内``), and as a whole formula copied from a display block
(``\\sin (\\alpha +\\beta )=...``). ``math_html`` turns either into HTML: each formula becomes
``<span class="math" data-tex="SOURCE" title="SOURCE"><math>...</math></span>`` (the source on
hover, and shown in place by the page's "LaTeX source" toggle); a formula the converter
(latex2mathml) rejects, or renders with an error, falls back to its source in ``<code class="tex">``.

``formula_change`` finds where a correction restates the claim's formula differently and marks
the change token by token (a ``difflib`` diff: ``<del>`` in the claim, ``<ins>`` in the correction).
"""
from __future__ import annotations

import difflib
import functools
import re
from html import escape

_COMMAND = re.compile(r"\\[A-Za-z]+|\\[{}|,;! ]|[\^_]\{")
_DOLLARS = re.compile(r"\$\$?")
_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s])")  # a token with the space before it (kept for display)
_ENTITY = re.compile(r"&#x([0-9A-Fa-f]+);")
_CLAUSE = re.compile(r"(?<=\.)\s+(?=[A-Z(])|[;:]\s+|,\s+(?=(?:so|i\.e\.|which|where|and|with)\b)")


def looks_like_tex(text: str) -> bool:
    """A LaTeX formula: a control sequence (``\\frac``) or a braced script (``^{``, ``_{``)."""
    return bool(_COMMAND.search(text))


@functools.lru_cache(maxsize=4096)
def tex_to_mathml(tex: str) -> str | None:
    """Inline MathML for ``tex``, or None when the converter fails or reports an error in its output."""
    try:
        from latex2mathml.converter import convert
    except ImportError:  # the dependency is declared; without it every formula shows as source
        return None
    try:
        out = convert(tex.strip())
    except Exception:  # noqa: BLE001 - the converter raises many kinds on input it does not know
        return None
    if "<merror" in out or not out.startswith("<math"):
        return None
    out = out.replace(' xmlns="http://www.w3.org/1998/Math/MathML" display="inline"', "")  # HTML's defaults
    return _ENTITY.sub(_char, out)  # &#x00028; -> ( : the markup is half entities otherwise


def _char(m: re.Match) -> str:
    ch = chr(int(m[1], 16))
    return m[0] if ch in "<>&\"'" else ch


def math_html(text: str, whole: bool = False) -> str:
    """``text`` as HTML with its ``$...$`` formulas (and, with ``whole``, a text that is one bare
    formula) as MathML; everything else escaped."""
    if not text:
        return ""
    if "$" not in text:
        return _formula(text) if whole and looks_like_tex(text) else escape(text)
    parts = _DOLLARS.split(text)
    paired = len(parts) % 2 == 1  # every $ has its partner: odd positions are maths
    out = []
    for i, part in enumerate(parts):
        is_math = (i % 2 == 1) if paired else looks_like_tex(part)
        out.append(_formula(part) if is_math and part.strip() else escape(part))
    return "".join(out)


def _formula(tex: str) -> str:
    source = escape(tex.strip(), quote=True)
    mathml = tex_to_mathml(tex)
    if mathml is None:
        return f'<code class="tex" title="LaTeX the converter could not render">{escape(tex)}</code>'
    return f'<span class="math" data-tex="{source}" title="{source}">{mathml}</span>'


def formula_change(statement: str, correction: str) -> tuple[str, str] | None:
    """The clause of ``statement`` with a formula (``=``) and the clause of ``correction`` that restates
    it most closely, as HTML with the changed tokens marked; None when no clause pair is close
    enough to be the same formula changed (or the two are identical)."""
    best: tuple[float, list[str], list[str]] | None = None
    for a in _clauses(statement):
        ta = _TOKEN.findall(a)
        for b in _clauses(correction):
            tb = _TOKEN.findall(b)
            ratio = difflib.SequenceMatcher(None, _keys(ta), _keys(tb), autojunk=False).ratio()
            if 0.35 <= ratio < 1.0 and (best is None or ratio > best[0]):
                best = (ratio, ta, tb)
    if best is None:
        return None
    _, ta, tb = best
    old, new = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, _keys(ta), _keys(tb), autojunk=False).get_opcodes():
        a, b = "".join(ta[i1:i2]), "".join(tb[j1:j2])
        if op == "equal":
            old.append(escape(a))
            new.append(escape(b))
            continue
        if a:
            old.append(f"{escape(a[:len(a) - len(a.lstrip())])}<del>{escape(a.lstrip())}</del>")
        if b:
            new.append(f"{escape(b[:len(b) - len(b.lstrip())])}<ins>{escape(b.lstrip())}</ins>")
    return "".join(old).strip(), "".join(new).strip()


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE.split(" ".join(text.split())) if "=" in c and len(c) <= 400]


def _keys(tokens: list[str]) -> list[str]:
    return [t.strip() for t in tokens]
