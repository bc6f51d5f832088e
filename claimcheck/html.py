"""``report/index.html``: the claim-status report as one self-contained page.

No network fetches (a Content-Security-Policy forbids them): the style sheet and script
(``claimcheck/assets/``) and the plots (inline SVG) are in the page, so it works from file://.
The page has the findings, a summary, a filterable and sortable table of claims, the claim graph,
a coverage table by document section, and one detail panel per claim that opens over the page
when its row is clicked (``#claim-<id>``: the panel is the URL fragment's target, so links and
the back button work, and the panels open even with scripts disabled). A panel's measurements
(references, counterexample, evidence, figures, plots: most of the page's weight) travel in one
gzipped blob (``_pack``) that the script unpacks when the first panel opens; plots are drawn once
per question (a test with all its parametrized cases) and long figure series are summarised.
"""
from __future__ import annotations

import base64
import functools
import gzip
import json
import re
from html import escape
from pathlib import Path
from typing import Any, Callable

from claimcheck import findings as findings_mod
from claimcheck import mathml, plots
from claimcheck.asv_results import BenchmarkRun, format_row
from claimcheck.report import experiments_sentence, larger_text
from claimcheck.runrecord import headline, partial_note

ASSETS = Path(__file__).with_name("assets")
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
MATRIX_LIMIT = 16  # rows and columns of a counterexample matrix shown; larger ones are cut with a note
VECTOR_LIMIT = 64
STATUS_HELP = {
    "verified": "every property ran and held",
    "refuted": "the claim as written is refuted by a counterexample; its correction held",
    "unverifiable": "cannot be checked offline; its consistency checks (if any) passed",
    "open": "recorded, not yet decided",
    "mismatch": "the evidence disagrees with the recorded verdict",
    "error": "a piece of evidence crashed, a check of its machinery failed, or only negative controls ran",
    "skipped": "every piece of evidence was skipped",
    "untested": "no evidence for this claim ran",
}
FILTERS = (("document", "document"), ("topic", "topic"), ("kind", "kind"), ("verdict", "verdict"), ("grade", "grade"),
           ("status", "observed status"))


def render(report: dict[str, Any], progress: Callable[[str], None] | None = None) -> str:
    """The whole page. ``progress`` is told how far the (plot-heavy) claim panels have got."""
    claims = report["claims"]
    panels = []
    for i, c in enumerate(claims, start=1):
        panels.append(_panel(c, report))
        if progress and (i % 50 == 0 or i == len(claims)):
            progress(f"rendered {i}/{len(claims)} claims")
    panels, packed = _pack(panels)
    css = (ASSETS / "report.css").read_text(encoding="utf-8")
    js = (ASSETS / "report.js").read_text(encoding="utf-8")
    return "".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        '<link rel="icon" href="data:,">\n<title>Claim-status report</title>\n',
        f"<style>\n{css}</style>\n</head>\n<body>\n",
        _alarm(report), _header(report), _findings(report), _summary(report), _table(report), _graph(report), _backends(report),
        _coverage(report),
        '<div id="panels">\n', *panels, "</div>\n",
        f'<script type="application/json" id="claim-index">{_json_for_script(_index(report))}</script>\n',
        f'<script type="application/octet-stream" id="packed">{packed}</script>\n',
        f"<script>\n{js}</script>\n</body>\n</html>\n",
    ])


# ---------------------------------------------------------------------------------------------
# page parts


def _header(report: dict) -> str:
    run = report.get("run")
    how = _e(headline(run)) if run else "<b>No evidence results were available</b>: decided claims show as untested"
    asv = report["asv"]
    bench = (f"; benchmark results from {asv['runs']} asv record(s) on {', '.join(map(_e, asv['machines']))}"
             if asv["runs"] else "; no asv benchmark results")
    reuse = _e(experiments_sentence(report.get("experiments")))
    out = [f'<header>\n<h1>Claim-status report</h1>\n<p class="run">{how}{bench}. Generated {_e(report["generated"])}.{reuse}</p>\n',
           _run_record(run),
           '<nav><a href="#findings">Findings</a> <a href="#summary">Summary</a> <a href="#claims">Claims</a> <a href="#graph">Graph</a> <a href="#backends">Backends</a> <a href="#coverage">Coverage</a></nav>\n']
    partial = report["partial"]
    if partial["not_run"] or not partial["results"]:
        items = "".join(f"<li><code>{_e(ev)}</code></li>" for ev in partial["not_run"][:300])
        more = f"<li>... and {len(partial['not_run']) - 300} more</li>" if len(partial["not_run"]) > 300 else ""
        what = ("no evidence results were found" if not partial["results"]
                else f"{len(partial['not_run'])} piece(s) of evidence did not run")
        out.append(f'<div class="banner partial" id="partial"><b>Partial results:</b> {what} '
                   f'({len(partial["claims_affected"])} claims affected).'
                   + (f"<details><summary>evidence that did not run</summary><ul>{items}{more}</ul></details>" if items else "")
                   + "</div>\n")
    if partial["unknown_claims"]:
        out.append('<div class="banner bad">Results name claim ids the registry does not have: '
                   + ", ".join(f"<code>{_e(i)}</code>" for i in partial["unknown_claims"]) + "</div>\n")
    out.append("</header>\n")
    return "".join(out)


def _run_record(run: dict | None) -> str:
    """Which run the page shows: commit, versions, machine, profile; a partial run said loudly."""
    if not run or "commit" not in run:
        return ""
    pk = run.get("packages") or {}
    dev = run.get("device") or {}
    facts = [f"commit <code>{_e((run.get('commit') or '?')[:12])}</code>{' (dirty tree)' if run.get('dirty') else ''}",
             f"started {_e(run.get('started'))}, {_e(run.get('seconds'))} s",
             f"profile {_e(run.get('profile'))}" + (f", seed {_e(run.get('seed'))}" if run.get("seed") is not None else ""),
             f"Python {_e(run.get('python'))}, " + ", ".join(f"{_e(k)} {_e(v)}" for k, v in pk.items() if v),
             f"{_e(dev.get('type'))}{' ' + _e(dev['gpu']) if dev.get('gpu') else ''} on {_e(run.get('cpu'))}"]
    text = '<p class="run-record" id="run-record">Latest run ' + _e(run.get("id")) + ": " + "; ".join(facts) + ".</p>\n"
    note = partial_note(run)
    if note:
        text += f'<div class="banner partial" id="partial-run"><b>PARTIAL.</b> {_e(note.removeprefix("PARTIAL: "))}.</div>\n'
    elif len(run.get("runs") or []) > 1:
        text += (f'<p class="run-record">Composed of {len(run["runs"])} runs of this commit and profile: together '
                 "they reach every piece of evidence.</p>\n")
    return text


ALARM_STATUSES = ("error", "mismatch")  # observed statuses that mean the run itself did not check out
ALARM_LINKS = 20  # claims named in the banner; the rest are one filter away


def _alarm(report: dict) -> str:
    """A red banner, first on the page, when any claim's evidence crashed or disagrees with its verdict."""
    bad = [c for c in report["claims"] if c["status"] in ALARM_STATUSES]
    if not bad:
        return ""
    by_status = [(s, sum(c["status"] == s for c in bad)) for s in ALARM_STATUSES]
    counts = " and ".join(f'<a href="#claims" data-filter="status" data-value="{s}">{n} {s}</a> ({STATUS_HELP[s]})'
                          for s, n in by_status if n)
    links = ", ".join(f'<a href="#claim-{_e(c["id"])}">{_e(c["id"])}</a>' for c in bad[:ALARM_LINKS])
    more = f" and {len(bad) - ALARM_LINKS} more" if len(bad) > ALARM_LINKS else ""
    return (f'<div class="banner alarm" id="alarm" role="alert"><b>{len(bad)} claim(s) did not check out in this run:</b> '
            f"{counts}: {links}{more}.</div>\n")


OFF_HEAD = ('<th title="x8: the true value is 8 times the printed one, x0.5 half of it (a factor alone where the '
            'registry records only how many times off); otherwise what is wrong">off</th>')


def _findings(report: dict) -> str:
    """What the documents get wrong (rule: claimcheck/findings.py), above everything else: each kind of
    finding with its count, how far off its worst is and that worst, then every finding, ranked."""
    found = report.get("findings") or []
    if not found:
        return ""
    n_fails = sum(f["verdict"] == "fails" for f in found)

    def where(f: dict) -> str:
        return f'<td class="where">{_e(f["document"])}:{f["line"]}</td>'

    def what(f: dict, title: bool = False) -> str:  # ``title``: the whole summary on hover, where one line cuts it
        whole = f' title="{_e(f["summary"])}"' if title else ""
        return f'<td class="what"><a href="#claim-{_e(f["id"])}"{whole}>{_e(f["summary"])}</a></td>'

    kinds = "".join(
        f'<tr class="f-{g["worst"]["verdict"]}"><th>{_e(g["name"])}</th>'
        f'<td class="num"><a href="#findings-all" data-finding-kind="{_e(g["kind"] or "")}" '
        f'title="{g["fails"]} fail, {g["count"] - g["fails"]} partly">{g["count"]}</a></td>'
        f'<td class="off">{_e(g["worst"]["off"])}</td>{what(g["worst"], title=True)}{where(g["worst"])}</tr>'
        for g in findings_mod.by_kind(found))
    ranked = "".join(
        f'<tr class="f-{f["verdict"]}" data-finding-kind="{_e(f["kind"] or "")}">'
        f'<td class="num">{f["rank"]}</td><td class="off">{_e(f["off"])}</td>{what(f)}'
        f'<td>{_e(findings_mod.KIND_NAMES.get(f["kind"], ""))}</td>{where(f)}</tr>'
        for f in found)
    return ('<section id="findings">\n<h2>What the documents get wrong</h2>\n'
            f'<p class="findings-count"><b class="v-fails">{n_fails} claims fail</b> (false as stated) and '
            f'<b class="v-partly">{len(found) - n_fails} hold only partly</b> (only under an unstated condition, or '
            'only in part). Each kind, with how far off its worst is: a factor for numbers, else what is wrong.</p>\n'
            f'<table class="findings kinds"><thead><tr><th>kind</th><th class="num">findings</th>{OFF_HEAD}'
            f'<th>the worst of its kind</th><th>where</th></tr></thead><tbody>{kinds}</tbody></table>\n'
            f'<details id="findings-all"><summary>all {len(found)} findings, worst first: code that does not run, '
            'wrong numbers by how far they are off, exponents, formulas, signs and directions, misattributions, '
            'missing conditions, bibliographic details, wording <span id="findings-shown"></span></summary>\n'
            f'<table class="findings ranked"><thead><tr><th class="num">#</th>{OFF_HEAD}<th>what is wrong</th>'
            f'<th>kind</th><th>where</th></tr></thead><tbody>{ranked}</tbody></table></details>\n</section>\n')


def _summary(report: dict) -> str:
    counts = report["counts"]
    total = len(report["claims"])
    d = counts["decided"]
    cards = "".join(
        f'<button type="button" class="card s-{_e(s)}" data-filter="status" data-value="{_e(s)}" '
        f'title="{_e(STATUS_HELP.get(s, ""))}"><span class="n">{n}</span> {_e(s)}</button>'
        for s, n in counts["status"].items() if n)
    decided = (f'<p class="decided"><b>{d["decided"]}</b> of {total} claims decided '
               f'(holds, fails or partly), <b>{d["unverifiable"]}</b> unverifiable offline, '
               f'<b>{d["open"]}</b> open.')
    if counts["rests_on_refuted"]:
        decided += f' <b>{counts["rests_on_refuted"]}</b> claims rest on a refuted claim.'
    decided += (f' <b id="controlled">{counts.get("control_models_falsity", 0)}</b> claims have evidence that rejected a '
                "negative control modelling their own falsity (&#10003; in the table).")
    corr = counts.get("corrections")
    if corr and corr["by_property"]:
        decided += (f' Of the <b>{corr["by_property"]}</b> refuted claims whose correction a property test proves, '
                    f'<b id="corrections-controlled">{corr["with_own_control"]}</b> have such a control of their own '
                    "(the others are listed in docs/corrections-without-control.txt).")
    decided += "</p>"
    tables = "".join(_count_table(title, key, counts[key]) for key, title in
                     (("document", "Document"), ("topic", "Topic"), ("verdict", "Verdict"), ("kind", "Kind")))
    by_doc = _cross_table(report, "document")
    return (f'<section id="summary">\n<h2>Summary</h2>\n<div class="cards">{cards}</div>\n{decided}\n'
            f'<div class="counts">{tables}</div>\n{by_doc}{_grade_legend()}</section>\n')


def _backends(report: dict) -> str:
    """Which attention backends run on this machine, and their error ratios in the evidence."""
    info = report.get("backends")
    if not info:
        return ""
    runs: dict[str, list[str]] = {}
    why: dict[str, set[str]] = {}
    for row in info["availability"]:
        key = f'{row["backend"]} ({row["device"]})'
        if row["runs"]:
            runs.setdefault(key, []).append(row["dtype"])
        else:
            why.setdefault(key, set()).add(f'{row["dtype"]}: {row["reason"]}')
    rows = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(', '.join(runs.get(k, [])) or '-')}</td>"
        f"<td>{_e('; '.join(sorted(why.get(k, set()))) or '-')}</td></tr>"
        for k in dict.fromkeys([*runs, *why]))
    ratios = "".join(
        f"<tr><th>{_e(r['backend'])}</th><td>{_e(r['dtype'])}</td><td class=\"num\">{r['cases']}</td>"
        f"<td class=\"num\">{_num(r['median'])}</td><td class=\"num\">{_num(r['p90'])}</td>"
        f"<td class=\"num\">{_num(r['max'])}</td></tr>" for r in info["error_ratio"])
    return ('<section id="backends">\n<h2>Attention backends</h2>\n'
            '<p>Whether each backend runs on the machine that built this report (skipped evidence names the same '
            'reason), and the error ratios the evidence recorded: a backend\'s error against the float64 '
            'reference divided by the error of the naive reference in the same precision (the bound is 2 for '
            'outputs, 3 for gradients, plus a rounding floor).</p>\n'
            '<table class="cross"><caption>Runs here</caption><thead><tr><th>backend (device)</th><th>runs in</th>'
            f'<th>does not run</th></tr></thead><tbody>{rows}</tbody></table>\n'
            '<table class="cross"><caption>Error ratio per backend and dtype (outputs and gradients)</caption>'
            '<thead><tr><th>backend</th><th>dtype</th><th>cases</th><th>median</th><th>90%</th><th>max</th></tr>'
            f'</thead><tbody>{ratios}</tbody></table>\n{_strength(info.get("strength") or {})}</section>\n')


def _strength(strength: dict) -> str:
    """How hard the backend matrix is to fool: the kernel zoo's and the mutants' kill rates."""
    zoo, mutants = strength.get("zoo"), strength.get("mutants")
    parts = ['<h3 id="suite-strength">Suite strength</h3>\n']
    if zoo:
        rows = "".join(f"<tr><th>{_e(k['kernel'])}</th><td>{_e(k['bug'])}</td><td>{_e(k['caught_by'])}</td>"
                       f"<td>{'killed' if k['caught'] else 'SURVIVED'}</td></tr>" for k in zoo["kernels"])
        parts.append(f'<p>Kernel zoo (<code>tests/kernel_zoo.py</code>): <b>{zoo["killed"]} of {zoo["total"]}</b> '
                     'known-wrong kernels rejected by the check aimed at their bug (the matrix of '
                     '<code>claims kernel</code>, float32 and float16).</p>\n'
                     '<table class="cross"><caption>Known-wrong kernels</caption><thead><tr><th>kernel</th><th>bug</th>'
                     f'<th>caught by (case / check)</th><th>outcome</th></tr></thead><tbody>{rows}</tbody></table>\n')
    else:
        parts.append("<p>Kernel zoo: not measured (run <code>pytest tests/test_kernel_zoo.py</code>).</p>\n")
    parts.append(_gallery(strength.get("gallery")))
    if mutants:
        survived = "".join(f"<li>{_e(m)}</li>" for m in mutants["survived"])
        parts.append(f'<p>Mutants of <code>impl/</code> (<code>make mutants</code>): <b>{mutants["killed"]} of '
                     f'{mutants["total"] - mutants["equivalent"]}</b> killed, {mutants["equivalent"]} listed as '
                     f'equivalent{", scope " + _e(mutants["scope"]) if mutants.get("scope") else ""}.</p>\n'
                     + (f"<p>Survivors:</p><ul>{survived}</ul>\n" if survived else ""))
    else:
        parts.append("<p>Mutants of <code>impl/</code>: not measured (run <code>make mutants</code>).</p>\n")
    return "".join(parts)


def _gallery(rows: list[dict] | None) -> str:
    """The verdicts of the gallery of real kernels (``impl/gallery.py``), each with its command line."""
    if not rows:
        return "<p>Gallery of real kernels: not measured (run <code>pytest tests/test_gallery.py</code>).</p>\n"
    body = "".join(f"<tr><th>{_e(r.get('kernel'))}</th><td>{'accepted' if r.get('accepted') else 'REJECTED'}</td>"
                   f"<td>{_e(r.get('summary'))}{'; the output matches: ' + _e(r['diagnosis']) if r.get('diagnosis') else ''}"
                   f"</td><td><code>{_e(r.get('command'))}</code></td></tr>" for r in rows)
    return ('<table class="cross"><caption>Gallery of real kernels (<code>impl/gallery.py</code>), each under its own '
            'declaration unless its name says otherwise</caption><thead><tr><th>kernel</th><th>verdict</th>'
            f'<th>cases</th><th>command</th></tr></thead><tbody>{body}</tbody></table>\n')


def _count_table(title: str, key: str, counts: dict[str, int]) -> str:
    rows = "".join(f'<tr><td><a href="#claims" data-filter="{key}" data-value="{_e(k)}">{_e(k)}</a></td>'
                   f'<td class="num">{n}</td></tr>' for k, n in counts.items() if n)
    return f'<table class="count"><caption>{title}</caption><tbody>{rows}</tbody></table>'


def _cross_table(report: dict, key: str) -> str:
    statuses = [s for s, n in report["counts"]["status"].items() if n]
    groups: dict[str, dict[str, int]] = {}
    for c in report["claims"]:
        groups.setdefault(c[key], {}).setdefault(c["status"], 0)
        groups[c[key]][c["status"]] += 1
    head = "".join(f'<th class="s-{_e(s)}">{_e(s)}</th>' for s in statuses)
    rows = "".join(
        f"<tr><th>{_e(g)}</th>" + "".join(f'<td class="num">{row.get(s, 0) or ""}</td>' for s in statuses)
        + f'<td class="num">{sum(row.values())}</td></tr>' for g, row in groups.items())
    return (f'<table class="cross"><caption>Observed status by {key}</caption><thead><tr><th></th>{head}'
            f"<th>all</th></tr></thead><tbody>{rows}</tbody></table>\n")


def _table(report: dict) -> str:
    claims = report["claims"]
    selects = []
    for key, label in FILTERS:
        values = sorted({c[key] or "" for c in claims} - {""})
        opts = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)
        selects.append(f'<label>{label} <select id="f-{key}" data-key="{key}"><option value="">all</option>{opts}</select></label>')
    cols = (("id", "id"), ("where", "document:line"), ("section", "section"), ("topic", "topic"),
            ("kind", "kind"), ("verdict", "verdict"), ("grade", "grade"), ("status", "status"),
            ("control", "control"), ("statement", "statement"))
    head = "".join(f'<th data-sort="{k}" tabindex="0" aria-sort="none"{CONTROL_HEAD if k == "control" else ""}>{t}</th>'
                   for k, t in cols)
    rows = "".join(_row(c) for c in claims)
    return ('<section id="claims">\n<h2>Claims</h2>\n<form id="filters" role="search" onsubmit="return false">'
            '<input type="search" id="q" placeholder="search id, statement, quote, section..." autocomplete="off"> '
            + " ".join(selects) + ' <button type="reset" id="reset">clear</button> '
            f'<span id="shown">{len(claims)} of {len(claims)} claims</span></form>\n'
            f'<table id="claims-table"><thead><tr>{head}</tr></thead><tbody>\n{rows}</tbody></table>\n'
            '<p id="none" hidden>No claim matches these filters.</p>\n</section>\n')


def _row(c: dict) -> str:
    # the search text (id, statement, quote, section, ..., correction) is the script's, read from the row and panel
    flag = ' <span class="flag" title="rests on a refuted claim">&#9888;</span>' if c["rests_on_refuted"] else ""
    attrs = " ".join(f'data-{k}="{_e(c[k] or "")}"' for k in ("id", "document", "topic", "kind", "verdict", "grade",
                                                                 "status"))
    return (f'<tr id="row-{_e(c["id"])}" {attrs} data-line="{c["line"]}">'
            f'<td><a href="#claim-{_e(c["id"])}">{_e(c["id"])}</a>{flag}</td>'
            f'<td data-v="{_e(c["document"])}:{c["line"]:06d}">{_e(c["document"])}:{c["line"]}</td>'
            f'<td>{_e(c["section"])}</td><td>{_e(c["topic"])}</td><td>{_e(c["kind"])}</td>'
            f'<td>{_badge("v", c["verdict"])}</td><td>{_grade(c)}</td><td>{_badge("s", c["status"])}</td>'
            f'{_control_cell(c)}<td class="stmt">{_e(_short(c["statement"], 160))}</td></tr>\n')


CONTROL_HEAD = ' title="&#10003;: the evidence rejected a negative control that models this claim\'s own falsity"'


def _control_cell(c: dict) -> str:
    """The table's control column: a mark when a control modelling the claim's own falsity was rejected."""
    n = (c.get("controls") or {}).get("models") or 0
    # the column's heading says what the mark means; the panel gives the count
    return '<td class="control ok" data-v="1">&#10003;</td>' if n else '<td class="control" data-v="0"></td>'


def _coverage(report: dict) -> str:
    out = ['<section id="coverage">\n<h2>Coverage by document section</h2>\n'
           "<p>Every section title found in each document, with the claims recorded in it. "
           "Sections with none are where claims may still be missing.</p>\n"]
    for doc in report["coverage"]:
        rows = []
        for s in doc["sections"]:
            status = ", ".join(f"{n} {k}" for k, n in sorted(s["status"].items()))
            cls = "" if s["claims"] else ' class="empty"'
            pad = f' style="padding-left:{0.3 + 1.2 * max(0, s["level"] - 1):.1f}em"'
            link = (f'<a href="#claims" data-filter="section" data-value="{_e(doc["document"])}:{s["line"]}">'
                    f'{s["claims"]}</a>' if s["claims"] else "0")
            rows.append(f'<tr{cls}><td class="num">{s["line"] or ""}</td><td lang="zh"{pad}>{_e(s["title"])}</td>'
                        f'<td class="num">{link}</td><td class="num">{s["decided"]}</td><td>{_e(status)}</td></tr>')
        out.append(f'<details class="doc"><summary><b>{_e(doc["document"])}</b> <span lang="zh">{_e(doc["title"])}</span>: '
                   f'{doc["claims"]} claims in {doc["sections_with_claims"]} of {len(doc["sections"])} sections</summary>'
                   '<table class="coverage"><thead><tr><th>line</th><th>section</th><th>claims</th><th>decided</th>'
                   f'<th>status</th></tr></thead><tbody>{"".join(rows)}</tbody></table></details>\n')
    out.append("</section>\n")
    return "".join(out)


def _index(report: dict) -> dict:
    """What the script needs beyond the table: each claim's section, for the coverage links."""
    return {c["id"]: f'{c["document"]}:{c["section_line"]}' for c in report["claims"]}


# ---------------------------------------------------------------------------------------------
# the claim graph

GRAPH_COLOURS = {"verified": "#1a7f37", "refuted": "#b35900", "unverifiable": "#6e40c9", "open": "#57606a",
                 "mismatch": "#cf222e", "error": "#cf222e", "skipped": "#9a6700", "untested": "#8c959f"}
NODE_W, NODE_H, GAP_X, GAP_Y, GRAPH_WIDTH = 118, 16, 10, 30, 1360


def _graph(report: dict) -> str:
    """``uses`` and ``contradicts`` between claims as one inline SVG, nodes coloured by observed status,
    claims resting on a refuted claim outlined; each node links to its claim's panel. Layout: each
    connected component in layers (a claim one row below the deepest claim it uses, ordered by the
    mean position of what it uses), components packed left to right, largest first."""
    claims = {c["id"]: c for c in report["claims"]}
    edges = [(a, b, "uses") for a, c in claims.items() for b in c["uses"] if b in claims]
    edges += [(a, b, "contradicts") for a, c in claims.items() for b in c["contradicts"] if b in claims and a < b]
    if not edges:
        return ""
    pos = _graph_layout(claims, edges)
    height = max(y for _, y in pos.values()) + NODE_H + 8
    lines = []
    for a, b, kind in edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        x1, y1, x2, y2 = xa + NODE_W / 2, ya, xb + NODE_W / 2, yb + NODE_H  # user's top to used claim's bottom
        if kind == "contradicts" or ya == yb:
            x1, y1, x2, y2 = xa + NODE_W / 2, ya + NODE_H / 2, xb + NODE_W / 2, yb + NODE_H / 2
        mid = (y1 + y2) / 2
        lines.append(f'<path class="{kind}" data-from="{_e(a)}" data-to="{_e(b)}" '
                     f'd="M{x1:.0f},{y1:.0f} C{x1:.0f},{mid:.0f} {x2:.0f},{mid:.0f} {x2:.0f},{y2:.0f}"/>')
    nodes = []
    for cid, (x, y) in pos.items():
        c = claims[cid]
        on_refuted = " on-refuted" if c["rests_on_refuted"] else ""
        label = _short(cid.split(".", 1)[-1], 21)
        tip = f'{cid}: {c["status"]}' + (f'; rests on refuted {", ".join(c["rests_on_refuted"])}' if on_refuted else "")
        nodes.append(f'<a class="node{on_refuted}" href="#claim-{_e(cid)}" data-id="{_e(cid)}" data-status="{_e(c["status"])}">'
                     f'<title>{_e(tip)}</title><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="3" '
                     f'fill="{GRAPH_COLOURS.get(c["status"], "#8c959f")}" fill-opacity="0.28"/>'
                     f'<text x="{x + 4}" y="{y + 11.5}">{_e(label)}</text></a>')
    legend = " ".join(f'<span class="key" style="border-left:10px solid {col}">&nbsp;{_e(s)}</span>'
                      for s, col in GRAPH_COLOURS.items() if any(c["status"] == s for c in claims.values() if c["id"] in pos))
    resting = sum(1 for cid in pos if claims[cid]["rests_on_refuted"])
    return ('<section id="graph">\n<h2>Claim graph</h2>\n'
            f'<p>{len(pos)} claims linked by {sum(k == "uses" for *_, k in edges)} <code>uses</code> (grey: a claim '
            f'below the claims it uses) and {sum(k == "contradicts" for *_, k in edges)} <code>contradicts</code> '
            f'(red, dashed); fill by observed status; <b>{resting}</b> rest on a refuted claim (dashed outline). '
            'Click a claim to open it. '
            '<label><input type="checkbox" id="graph-refuted"> only what rests on a refuted claim</label></p>\n'
            f'<p class="graph-key">{legend}</p>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {GRAPH_WIDTH} {height:.0f}" width="{GRAPH_WIDTH}" '
            f'height="{height:.0f}" role="img" aria-label="claim graph">'
            f'<g class="edges">{"".join(lines)}</g><g class="nodes">{"".join(nodes)}</g></svg>\n</section>\n')


def _graph_layout(claims: dict[str, dict], edges: list[tuple[str, str, str]]) -> dict[str, tuple[int, int]]:
    """Top-left corner of each linked claim's box (see ``_graph``)."""
    index = {cid: i for i, cid in enumerate(claims)}
    linked = sorted({n for a, b, _ in edges for n in (a, b)}, key=index.__getitem__)
    neighbours: dict[str, set[str]] = {n: set() for n in linked}
    for a, b, _ in edges:
        neighbours[a].add(b)
        neighbours[b].add(a)
    uses = {n: [u for u in claims[n]["uses"] if u in neighbours] for n in linked}
    depth: dict[str, int] = {}

    def layer(n: str, seen: frozenset = frozenset()) -> int:
        if n not in depth:
            below = [layer(u, seen | {n}) for u in uses[n] if u not in seen]
            depth[n] = 1 + max(below) if below else 0
        return depth[n]

    components, done = [], set()
    for n in linked:
        if n in done:
            continue
        comp, stack = [], [n]
        done.add(n)
        while stack:
            m = stack.pop()
            comp.append(m)
            for k in sorted(neighbours[m] - done):
                done.add(k)
                stack.append(k)
        components.append(comp)
    components.sort(key=len, reverse=True)
    pos: dict[str, tuple[int, int]] = {}
    x0 = y0 = row_height = 0
    for comp in components:
        rows: dict[int, list[str]] = {}
        for n in comp:
            rows.setdefault(layer(n), []).append(n)
        order: dict[str, float] = {}
        for d in sorted(rows):  # one barycentre pass: a claim under the mean of what it uses
            rows[d].sort(key=lambda n: (sum(order.get(u, 0) for u in uses[n]) / len(uses[n]) if uses[n] else 0,
                                        index[n]))
            order.update({n: i for i, n in enumerate(rows[d])})
        cols = min(max(len(r) for r in rows.values()), GRAPH_WIDTH // (NODE_W + GAP_X))
        width = cols * (NODE_W + GAP_X)
        if x0 and x0 + width > GRAPH_WIDTH:
            x0, y0, row_height = 0, y0 + row_height + GAP_Y, 0
        y = y0
        for d in sorted(rows):
            for start in range(0, len(rows[d]), cols):  # a layer wider than the page wraps
                for i, n in enumerate(rows[d][start:start + cols]):
                    pos[n] = (x0 + i * (NODE_W + GAP_X), y + 4)
                y += NODE_H + GAP_Y
        row_height = max(row_height, y - y0)
        x0 += width + GAP_X
    return pos


# ---------------------------------------------------------------------------------------------
# one claim


def _panel(c: dict, report: dict) -> str:
    cid = c["id"]
    statuses = {x["id"]: (x["verdict"], x["status"]) for x in report["claims"]}
    parts = [f'<article class="claim" id="claim-{_e(cid)}" aria-label="{_e(cid)}">\n',
             '<a class="close" href="#claims" title="close">&times;</a>\n',
             f'<h2>{_e(cid)}</h2>\n<p class="badges">{_badge("v", c["verdict"])} recorded'
             + (f' ({_grade(c)})' if c["grade"] else "") + ', '
             f'{_badge("s", c["status"])} observed &middot; {_e(c["topic"])} &middot; {_e(c["kind"])} &middot; '
             f'{_e(c["document"])}:{c["line"]} <span lang="zh">({_e(c["section"])})</span></p>\n',
             f'<p class="why s-{_e(c["status"])}"><b>Why:</b> {_e(c["detail"] or STATUS_HELP.get(c["status"], ""))}</p>\n']
    if c["rests_on_refuted"]:
        parts.append('<p class="banner bad rests">Rests on refuted claim(s): '
                     + ", ".join(_claim_link(u, statuses) for u in c["rests_on_refuted"]) + "</p>\n")
    quote = mathml.math_html(c["quote"], whole=True)
    toggle = ('<label class="tex-toggle"><input type="checkbox" class="show-tex"> LaTeX source</label>'
              if 'class="math"' in quote else "")
    parts.append(f'<div class="sidebyside"><div><h3>Document says{toggle}</h3>'
                 f'<blockquote lang="zh">{quote}</blockquote></div>'
                 f'<div><h3>Claim, in English</h3><p>{mathml.math_html(c["statement"])}</p></div></div>\n')
    if c["correction"]:
        parts.append(f'<div class="correction"><h3>Correction</h3><p>{mathml.math_html(c["correction"])}</p></div>\n')
        change = mathml.formula_change(c["statement"], c["correction"]) if c["verdict"] in ("fails", "partly") else None
        if change:
            parts.append('<div class="formula-change"><div><h4>The formula as claimed</h4>'
                         f'<p>{change[0]}</p></div><div><h4>As corrected</h4><p>{change[1]}</p></div></div>\n')
    if c["reason"]:
        title = "Why it cannot be checked offline" if c["verdict"] == "unverifiable" else "Reason"
        parts.append(f"<h3>{title}</h3><p>{_e(c['reason'])}</p>\n")
    if c["cites"] or c["witness"]:
        parts.append(_packed(_records(c, report), "the references of record and the documents' own lines"))
    if c["counterexample"]:
        parts.append(_packed(_counterexample(c["counterexample"]), "the counterexample"))
    if c.get("experiment"):
        parts.append(_experiment(c["experiment"]))
    # the control lines repeat on every panel: packed with the evidence they describe (gzip takes them to a few bytes);
    # the related claims, the printed code and the reviewer notes after it, read only with the panel open, go in the
    # same placeholder (one placeholder costs about 130 bytes, more than a short note's share of the blob)
    packed = [_control(c) + _evidence(c) + _plots(c) + (_benchmarks(c) if c["benchmarks"] else "")]
    links = []
    for label, ids in (("uses", c["uses"]), ("used by", c["used_by"]), ("contradicts", c["contradicts"]),
                       ("same as", [c["same_as"]] if c["same_as"] else [])):
        if ids:
            links.append(f"<dt>{label}</dt><dd>" + ", ".join(_claim_link(i, statuses) for i in ids) + "</dd>")
    if c["snippet"]:
        s = c["snippet"]
        req = (" after " + ", ".join(_claim_link(r, statuses) for r in s["requires"])) if s["requires"] else ""
        code = f"<pre lang=\"zh\">{_e(s['text'])}</pre>" if s.get("text") else ""
        links.append(f"<dt>code</dt><dd>{_e(c['document'])} lines {s['start']}-{s['end']}{req}{code}</dd>")
    if links:
        packed.append(f'<h3>Related</h3><dl class="links">{"".join(links)}</dl>\n')
    if c["notes"]:
        packed.append(f'<details class="notes"><summary>reviewer notes</summary><p>{_e(c["notes"])}</p></details>\n')
    parts.append(_packed("".join(packed), f"the evidence ({len(c['outcomes'])} outcome(s)), its figures and plots"
                         + (", the related claims" if links else "") + (", the reviewer notes" if c["notes"] else "")))
    parts.append("</article>\n")
    return "".join(parts)


GRADE_HELP = {
    "proved": "decided by a symbolic or exact computation",
    "tested": "decided by properties over generated examples",
    "measured": "decided by a benchmark or a seeded experiment (scale stated)",
    "recorded": "decided by a reference of record (the cited work's public record)",
    "internal": "decided by the documents' own text",
}


def _grade_legend() -> str:
    items = "".join(f'<li><span class="grade g-{g}">{g}</span> {_e(h)}</li>' for g, h in GRADE_HELP.items())
    return f'<div class="grade-legend"><b>Evidence grades</b> (what a decided verdict rests on)<ul>{items}</ul></div>\n'


def _grade(c: dict) -> str:
    g = c.get("grade")  # what each grade means is said once, in the summary's legend
    return f'<span class="grade g-{_e(g)}">{_e(g)}</span>' if g else ""


def _records(c: dict, report: dict) -> str:
    """The references a claim cites, its attribution checked field by field, and its witness lines."""
    refs = {r["key"]: r for r in report.get("references", [])}
    items = []
    for key in c["cites"]:
        r = refs.get(key)
        if r is None:
            items.append(f"<li><code>{_e(key)}</code> (no record)</li>")
            continue
        who = ", ".join(r["authors"][:6]) + (" et al." if len(r["authors"]) > 6 else "")
        ids = " ".join(f"{_e(k)}:{_e(v)}" for k, v in r["ids"].items())
        facts = "".join(f'<li><code>{_e(f["key"])}</code>{" = " + _e(f["value"]) if f["value"] is not None else ""}: '
                        f'{_e(f["text"])} <a href="{_e(f["url"])}">source</a> (read {_e(f["date"])})</li>'
                        for f in r["facts"])
        items.append(f'<li id="ref-{_e(key)}-{_e(c["id"])}"><b>{_e(r["title"])}</b>. {_e(who)}. {_e(r["year"] or "")}'
                     f'{" &middot; " + _e(r["venue"]) if r["venue"] else ""} &middot; {ids} &middot; '
                     f'<a href="{_e(r["url"])}">record</a> (read {_e(r["read"][0]["date"])})'
                     + (f"<ul>{facts}</ul>" if facts else "") + "</li>")
    rows = "".join(f'<tr class="{"ok" if k["match"] else "diff"}"><td>{_e(k["field"])}</td><td>{_e(k["document"])}</td>'
                   f'<td>{_e(k["record"])}</td><td>{"matches" if k["match"] else "differs"}'
                   f'{"" if k["core"] else " (peripheral)"}</td></tr>' for k in c["record_checks"])
    table = (f'<table class="record-checks"><thead><tr><th>field</th><th>document</th><th>record</th><th></th>'
             f'</tr></thead><tbody>{rows}</tbody></table>') if rows else ""
    lines = "".join(f'<li>{_e(w["role"])} &middot; {_e(w["source"])}:{w["line"]} <q lang="zh">{_e(w["quote"])}</q></li>'
                    for w in c["witness"])
    return ('<div class="records"><h3>References of record</h3>'
            + (f"<ul>{''.join(items)}</ul>" if items else "") + table
            + (f"<h3>The documents' own lines</h3><ul>{lines}</ul>" if lines else "") + "</div>\n")


def _control(c: dict) -> str:
    """Whether the claim's evidence has been shown able to fail (a negative control that models its own falsity,
    rejected), and apart from that, the checks of the comparator its evidence uses."""
    ctl, cmp = c.get("controls") or {}, c.get("comparator") or {}
    models, other = ctl.get("models") or 0, (ctl.get("rejected") or 0) - (ctl.get("models") or 0)
    parts = []
    if models:
        parts.append(f'<p class="control ok">Evidence shown able to fail: {models} negative control(s) modelling '
                     "this claim's own falsity rejected.</p>\n")
    elif c["verdict"] == "holds" and c["decided"]:
        parts.append('<p class="control none">No negative control modelling this claim\'s own falsity ran for its '
                     "evidence.</p>\n")
    if other > 0:
        parts.append(f'<p class="control other">{other} negative control(s) of the same tests that model other '
                     "claims were rejected.</p>\n")
    if cmp.get("ran"):
        parts.append(f'<p class="comparator">Checks of the comparator (not evidence for the claim): {cmp["passed"]} '
                     f'of {cmp["ran"]} rejected every wrong field.</p>\n')
    return "".join(parts)


def _claim_link(cid: str, statuses: dict[str, tuple[str, str]]) -> str:
    if cid not in statuses:
        return f"<code>{_e(cid)}</code> (not in the registry)"
    verdict, status = statuses[cid]
    return f'<a href="#claim-{_e(cid)}">{_e(cid)}</a> {_badge("s", status)}'


def _packed(content: str, what: str) -> str:
    """A placeholder for ``content``, which ``render`` moves into the page's one packed blob; the
    script puts it back when its panel opens."""
    if not content:
        return ""
    return (f'<div class="packed"><p class="loading">{_e(what[:1].upper() + what[1:])}: loads with the panel '
            f'(scripts).</p><template class="pack">{content}</template></div>\n')


_PACK = re.compile(r'<template class="pack">(.*?)</template>', re.S)


def _pack(panels: list[str]) -> tuple[list[str], str]:
    """The panels with their measurements (evidence tables, counterexamples, figures, plots: most of
    the page) taken out into one gzipped, base64-encoded JSON list, about a tenth of their size;
    each placeholder keeps its index in ``data-pack``."""
    contents: list[str] = []

    def take(m: re.Match) -> str:
        contents.append(m[1])
        return f'<template class="pack" data-pack="{len(contents) - 1}"></template>'
    out = [_PACK.sub(take, p) for p in panels]
    blob = gzip.compress(json.dumps(contents, ensure_ascii=False).encode(), compresslevel=9, mtime=0)
    return out, base64.b64encode(blob).decode()


def unpack(page: str, fragment: str) -> str:
    """``fragment`` of ``page`` with its packed placeholders filled from the page's blob (what the script
    does when a panel opens; for tests and tools)."""
    m = re.search(r'<script type="application/octet-stream" id="packed">([^<]*)</script>', page)
    contents = json.loads(gzip.decompress(base64.b64decode(m[1]))) if m and m[1] else []
    return re.sub(r'<div class="packed"><p class="loading">.*?</p><template class="pack" data-pack="(\d+)"></template></div>',
                  lambda t: contents[int(t[1])], fragment)


CASES_SHOWN = 6  # parametrized cases of one test listed one by one; beyond, the passing ones share one row


def _evidence(c: dict) -> str:
    rows = []
    shown = []
    for question, group in _by_question(c["outcomes"]).items():
        buckets: dict[tuple[str, str], list[dict]] = {}  # passing cases together; skipped ones by reason
        if len(group) > CASES_SHOWN:
            for o in group:
                if o.get("outcome") in ("passed", "skipped"):
                    reason = (o.get("message") or "").strip() if o["outcome"] == "skipped" else ""
                    buckets.setdefault((o["outcome"], reason), []).append(o)
        buckets = {k: v for k, v in buckets.items() if len(v) > 1}
        shared = {id(o) for v in buckets.values() for o in v}
        for (outcome, reason), bucket in buckets.items():
            examples = sum(o.get("examples") or 0 for o in bucket)
            seconds = sum(o.get("seconds") or 0 for o in bucket)
            why = f'<div class="summary">{_e(reason)}</div>' if reason else ""
            rows.append(f'<tr class="cases"><td><code>{_e(question)}</code> &times; {len(bucket)} parametrized cases'
                        f'{why}</td><td>{_e(bucket[0].get("kind") or "")}</td><td>{_badge("o", outcome)}</td>'
                        f'<td class="num">{examples}</td><td class="num">{seconds:.3g}</td></tr>')
        shown += [o for o in group if id(o) not in shared]
    for o in shown:
        message = f"<details><summary>output</summary><pre>{_e(o['message'])}</pre></details>" if o.get("message") else ""
        if o.get("summary") and o.get("outcome") != "passed":
            message = f'<div class="summary">{_e(o["summary"])}</div>' + message
        examples = o.get("examples")
        rows.append(f"<tr><td><code>{_e(o['nodeid'])}</code>{message}</td><td>{_e(o.get('kind') or '')}</td>"
                    f"<td>{_badge('o', o.get('outcome') or 'untested')}</td>"
                    f'<td class="num">{"" if examples is None else examples}</td>'
                    f'<td class="num">{_e(o.get("seconds") if o.get("seconds") is not None else "")}</td></tr>')
    for ev in c["not_run"]:
        rows.append(f'<tr class="notrun"><td><code>{_e(ev)}</code></td><td></td><td>{_badge("o", "did not run")}</td>'
                    "<td></td><td></td></tr>")
    if not rows:
        return "<h3>Evidence</h3><p>None recorded.</p>\n" if not c["benchmarks"] else ""
    table = ('<table class="evidence"><thead><tr><th>test</th><th>kind</th><th>outcome</th>'
             '<th title="Hypothesis examples run, shrinking included">examples</th><th>s</th></tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table>\n')
    figures = _figures(c)
    return f"<h3>Evidence</h3>\n{table}{figures}"


EXPERIMENT_FIGURE = "experiment"


def _experiment(e: dict) -> str:
    """The experiment panel: the pre-registered prediction, the scale, per-seed values, effect, interval,
    outcome, and the controls with their predicted outcomes (the curves are drawn with the evidence's plots)."""
    scale = ", ".join(f"{_e(k)} {_e(v)}" for k, v in e["scale"].items() if k != "extra")
    extra = ", ".join(f"{_e(k)} = {_e(v)}" for k, v in (e["scale"].get("extra") or {}).items())
    head = (f'<div class="experiment"><h3>Experiment <code>{_e(e["name"])}</code></h3>'
            f'<p><b>Registered prediction:</b> {_e(e["prediction"])} '
            f'(<code>{_e(e["metric"])} {_e(e["comparison"])} {_e(e["threshold"])}</code>)</p>'
            f'<p class="registration"><b>{_e(e.get("registration") or "")}</b></p>'
            + (f'<p><b>Uninformative by design</b> (set at registration): {_e(e["uninformative"])}</p>'
               if e.get("uninformative") else "") +
            f'<p><b>Registered scale:</b> {scale}{" (" + extra + ")" if extra else ""}</p>')
    m = e["measured"]
    if m is None:
        return head + "<p>Not run in this evidence run.</p></div>\n"
    seeds = "".join(f"<tr><td>{_e(s)}</td><td class=\"num\">{_e(_num_text(v))}</td></tr>"
                    for s, v in zip(m.get("seeds") or [], m.get("values") or []))
    rows = [(m.get("test", "").split("::")[-1], m)] + [
        (k.get("test", "").split("::")[-1] + (" (superseded design)" if k.get("superseded") else ""), k)
        for k in e["controls"]]
    runs = "".join(f'<tr><td><code>{_e(t)}</code></td><td>{_e(r.get("scale_text"))}</td>'
                   f'<td class="num">{_e(_num_text(r.get("effect")))}</td>'
                   f'<td class="num">[{_e(_num_text(r.get("ci_low")))}, {_e(_num_text(r.get("ci_high")))}]</td>'
                   f'<td>{_e(r.get("outcome"))}</td><td>{_e(_predicted(r))}</td></tr>' for t, r in rows)
    return (head + f'<p class="outcome"><b>{_e(m.get("outcome"))}</b>: {_e(e.get("text"))}</p>'
            + _artefact(m.get("artefact"), m.get("wall_s")) + _larger(e.get("larger") or []) +
            f'<table class="experiment-seeds"><thead><tr><th>seed</th><th>{_e(e["metric"])}</th></tr></thead>'
            f"<tbody>{seeds}</tbody></table>"
            '<table class="experiment-runs"><thead><tr><th>run</th><th>scale</th><th>effect</th>'
            f'<th>t interval</th><th>outcome</th><th title="a control of the mechanism\'s outcome, predicted in its '
            f'test before it ran">predicted</th></tr></thead><tbody>{runs}</tbody></table></div>\n')


def _larger(rows: list[dict]) -> str:
    """The experiment at its scales beyond CI, beside the CI decision: read from stored artefacts, never run here."""
    if not rows:
        return ""
    items = "".join(f'<li class="larger-{_e(r["state"])}">{_e(larger_text(r))}</li>' for r in rows)
    return f'<p><b>At larger scales</b> (stored runs; the verdict rests on the registered scale):</p><ul>{items}</ul>'


def _predicted(r: dict) -> str:
    """``not confirmed (as predicted)`` for a control of the mechanism; empty for the decision and other controls."""
    if not r.get("predicted_text"):
        return ""
    return f"{r['predicted_text']} ({'as' if r.get('as_predicted') else 'NOT as'} predicted)"


def _artefact(a: dict | None, wall_s: Any) -> str:
    """Whether an experiment's per-seed results were reused from their stored artefact, and from when."""
    if not a:
        return "<p class=\"artefact\">Run now, not stored.</p>"
    made = f'made {_e(a.get("created"))} at commit <code>{_e((a.get("commit") or "?")[:10])}</code>'
    if a.get("reused"):
        return f'<p class="artefact">Reused from the artefact <code>{_e(a["path"])}</code> ({made}).</p>'
    return f'<p class="artefact">Run now ({_e(_num_text(wall_s))} s) and stored as <code>{_e(a["path"])}</code> ({made}).</p>'


def _num_text(x) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


FIGURE_ROWS = 8  # figures of one family in one question listed one by one; more are summarised in one row


def _figures(c: dict) -> str:
    """Measured figures per question (a test, all its parametrized cases together) and figure family; a
    family with many figures, or a long list, is summarised into its worst case and quantiles
    (``claims show --full`` and claims.json keep every value)."""
    groups: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for o in c["outcomes"]:
        for f in o.get("figures") or []:
            name = str(f.get("name"))
            if name == EXPERIMENT_FIGURE:  # shown by _experiment, not as a raw figure
                continue
            family = (plots.split_name(name) or (name, ""))[0]
            groups.setdefault((_question(o["nodeid"]), family), []).append((o["nodeid"], f))
    rows = []
    for (question, family), figs in groups.items():
        test = _e(question.split("::")[-1])
        if len(figs) <= FIGURE_ROWS:
            rows += [f"<tr><td><code>{_e(f.get('name'))}</code></td><td>{_value_text(f.get('value'))}</td>"
                     f"<td><code>{_e(nodeid.split('::')[-1])}</code></td></tr>" for nodeid, f in figs]
            continue
        rows.append(f"<tr><td><code>{_e(family)}[...]</code> &times; {len(figs)}</td>"
                    f"<td>{_family_summary(figs)}</td><td><code>{test}</code> ({len({n for n, _ in figs})} cases)</td></tr>")
    if not rows:
        return ""
    return ('<h3>Measured figures</h3><table class="figures"><thead><tr><th>figure</th><th>value</th><th>test</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>\n')


def _family_summary(figs: list[tuple[str, dict]]) -> str:
    """Worst case and quantiles of a family's numeric values (a list counts by its largest entry)."""
    worst: list[tuple[float, str]] = []
    values: list[float] = []
    for _, f in figs:
        v = f.get("value")
        xs = [float(x) for x in (v if isinstance(v, list) else [v]) if _is_num(x)]
        if xs:
            values += xs
            worst.append((max(xs), str(f.get("name"))))
    if not values:
        return f"{len(figs)} non-numeric figures"
    q = plots.quantiles(values, 5)
    top = max(worst)
    return (f"{len(values)} values: min {_num(q[0])}, 25% {_num(q[1])}, median {_num(q[2])}, 75% {_num(q[3])}, "
            f"max {_num(q[4])}; worst <code>{_e(top[1])}</code> = {_num(top[0])}")


def _by_question(outcomes: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for o in outcomes:
        groups.setdefault(_question(o["nodeid"]), []).append(o)
    return groups


def _question(nodeid: str) -> str:
    """A test without its parametrization: ``f.py::test_x[a-b]`` -> ``f.py::test_x``."""
    return nodeid.split("[", 1)[0]


def _plots(c: dict) -> str:
    """One set of plots per question (all the parametrized cases of a test together), drawn once per
    page even when several claims share the test (``_panel`` packs them with the evidence)."""
    by_question: dict[str, list[dict]] = {}
    refuting: set[str] = set()
    for o in c["outcomes"]:
        by_question.setdefault(_question(o["nodeid"]), []).extend(o.get("figures") or [])
        if o.get("kind") == "refutation":
            refuting.add(_question(o["nodeid"]))
    claimed = _claimed_exponent(c)
    out = []
    for question, figures in by_question.items():
        if not figures:
            continue
        law = claimed if question in refuting else None  # the claimed law beside the fit that refutes it
        for p in _question_plots(question, json.dumps(figures, sort_keys=True, default=str), law):
            svg = plots.resalt(p.svg, c["id"])
            out.append(f'<figure class="plot">{svg}<figcaption>{_e(p.title)} &middot; '
                       f'<code>{_e(question.split("::")[-1])}</code></figcaption></figure>')
    if not out:
        return ""
    return f'<h3>Plots</h3>\n<div class="plots">{"".join(out)}</div>\n'


@functools.lru_cache(maxsize=512)
def _question_plots(question: str, figures_json: str, claimed: float | None) -> tuple[plots.Plot, ...]:
    return tuple(plots.figure_plots(_merge_cases(json.loads(figures_json)), salt=question, claimed_exponent=claimed))


def _merge_cases(figures: list[dict]) -> list[dict]:
    """The figures of a question's cases as one list: repeated error ratios pooled, a repeated series
    or fit numbered by its case (so no case's line hides another's)."""
    seen: dict[str, int] = {}
    ratios: dict[str, list] = {}
    out = []
    for f in figures:
        name = str(f.get("name"))
        parts = plots.split_name(name)
        if parts and parts[0] == "error_ratio":
            v = f.get("value")
            ratios.setdefault(name, []).extend(v if isinstance(v, list) else [v])
            continue
        seen[name] = seen.get(name, 0) + 1
        if parts and seen[name] > 1:
            name = f"{parts[0]}[{parts[1]}, case {seen[name]}]"
        out.append({**f, "name": name})
    return [{"name": k, "value": v} for k, v in ratios.items()] + out


def _claimed_exponent(c: dict) -> float | None:
    """The exponent the document claims, for drawing its law beside the fitted one."""
    f = c.get("finding") or {}
    if f.get("kind") == "wrong-exponent" and _is_num(f.get("claimed")):
        return float(f["claimed"])
    values = (c.get("counterexample") or {}).get("values") or {}
    v = values.get("claimed_exponent") if isinstance(values, dict) else None
    return float(v) if _is_num(v) else None


def _benchmarks(c: dict) -> str:
    out = ["<h3>Benchmarks (asv)</h3>\n"]
    for b in c["benchmarks"]:
        if not b["runs"]:
            out.append(f"<p><code>{_e(b['name'])}</code>: no asv results yet; <code>{_e(b.get('fill', ''))}</code> "
                       "records them.</p>\n")
            continue
        out.append(f"<p><code>{_e(b['name'])}</code>: {b['history']} result(s) over {len(b['commits'])} commit(s); "
                   "the latest on each machine:</p>\n")
        runs = []
        for r in b["runs"]:
            names = r["param_names"]
            head = "".join(f"<th>{_e(n)}</th>" for n in names)
            rows = "".join("<tr>" + "".join(f"<td>{_e(p)}</td>" for p in row["params"])
                           + f'<td class="num">{_e(format_row(row, r["unit"]))}</td></tr>'
                           for row in r["rows"][:200])
            out.append(f'<table class="bench"><caption>{_e(r["machine"])} &middot; {_e(r["env"])} &middot; '
                       f'commit {_e(r["commit"][:10])}</caption><thead><tr>{head}<th>{_e(r["type"] or "value")}</th>'
                       f"</tr></thead><tbody>{rows}</tbody></table>\n")
            runs.append(BenchmarkRun(name=b["asv_name"] or b["name"], machine=r["machine"], commit=r["commit"],
                                     env=r["env"], date=r["date"], unit=r["unit"], kind=r["type"],
                                     param_names=tuple(names), params=_params_of(r),
                                     values=tuple(row["value"] for row in r["rows"])))
        p = plots.benchmark_plot(b["name"].split("::")[-1], runs, salt=f"{c['id']}-{b['name']}")
        if p:
            out.append(f'<figure class="plot">{p.svg}<figcaption>{_e(p.title)}</figcaption></figure>\n')
    return "".join(out)


def _params_of(run: dict) -> tuple[tuple[str, ...], ...]:
    """The parameter value lists of a run, recovered from its rows (in asv's product order)."""
    columns: list[list[str]] = [[] for _ in run["param_names"]]
    for row in run["rows"]:
        for i, v in enumerate(row["params"]):
            if v not in columns[i]:
                columns[i].append(v)
    return tuple(tuple(col) for col in columns)


# ---------------------------------------------------------------------------------------------
# counterexamples and values


def _counterexample(cx: dict) -> str:
    how = cx.get("how") or ""
    out = ['<div class="counterexample"><h3>Counterexample</h3>\n']
    if cx.get("message"):
        out.append(f'<p class="message">{_e(cx["message"])}</p>\n')
    if how:
        out.append(f'<p class="how">{_e(how)}' + (f": {_e(cx['reason'])}" if cx.get("reason") else "") + "</p>\n")
    values = cx.get("values") or {}
    if isinstance(values, dict) and values:
        out.append('<dl class="values">')
        for name, value in values.items():
            out.append(f"<dt>{_e(name)}</dt><dd>{_value_html(value)}</dd>")
        out.append("</dl>\n")
    if cx.get("hypothesis"):
        out.append(f"<details><summary>Hypothesis' report</summary><pre>{_e(cx['hypothesis'])}</pre></details>\n")
    if cx.get("detail") and how == "property failed":
        out.append(f"<details open><summary>failure</summary><pre>{_e(cx['detail'])}</pre></details>\n")
    out.append("</div>\n")
    return "".join(out)


def _value_html(value: Any) -> str:
    """A value readably: a matrix as a table with its eigenvalues (square) or singular values,
    a vector as a row, a mapping as a list, anything else as text."""
    shape = _shape(value)
    if shape and len(shape) == 2 and shape[0] and shape[1]:
        return _matrix_html(value, shape)
    if shape and len(shape) == 1:
        return _vector_html(value)
    if shape and len(shape) >= 3:
        slices = "".join(f"<div><span class=\"index\">[{i}]</span>{_value_html(v)}</div>" for i, v in enumerate(value[:4]))
        more = f"<p>... {len(value) - 4} more slices</p>" if len(value) > 4 else ""
        return f'<div class="tensor">shape {_e(" x ".join(map(str, shape)))}{slices}{more}</div>'
    if isinstance(value, dict):
        return '<dl class="nested">' + "".join(f"<dt>{_e(k)}</dt><dd>{_value_html(v)}</dd>" for k, v in value.items()) + "</dl>"
    if isinstance(value, str):
        return f"<pre>{_e(value)}</pre>" if "\n" in value or len(value) > 120 else f"<code>{_e(value)}</code>"
    return f"<code>{_e(_exact(value) if _is_num(value) else json.dumps(value, ensure_ascii=False))}</code>"


def _matrix_html(m: list[list[Any]], shape: tuple[int, ...]) -> str:
    rows, cols = shape
    cut_r, cut_c = min(rows, MATRIX_LIMIT), min(cols, MATRIX_LIMIT)
    body = "".join("<tr>" + "".join(f'<td title="{_e(_exact(x))}">{_e(_num(x))}</td>' for x in row[:cut_c])
                   + ("<td>&hellip;</td>" if cols > cut_c else "") + "</tr>" for row in m[:cut_r])
    if rows > cut_r:
        body += f'<tr><td colspan="{cut_c + (cols > cut_c)}">&hellip; {rows - cut_r} more rows</td></tr>'
    out = f'<div class="matrix"><span class="shape">{rows} x {cols}</span><table class="matrix">{body}</table>'
    spectrum = _spectrum(m, rows, cols)
    if spectrum:
        out += f'<p class="spectrum">{spectrum}</p>'
    return out + "</div>"


def _spectrum(m: list[list[Any]], rows: int, cols: int) -> str:
    """Eigenvalues of a square numeric matrix (by decreasing modulus) or singular values of a
    rectangular one, computed here for the reader; empty when the entries are not all numbers."""
    if rows > 64 or cols > 64 or not all(_is_num(x) for row in m for x in row):
        return ""
    import numpy as np

    a = np.array([[float(x) for x in row] for row in m])
    if not np.isfinite(a).all():
        return ""
    if rows == cols:
        eig = np.linalg.eigvals(a)
        eig = eig[np.argsort(-np.abs(eig), kind="stable")]
        shown = ", ".join(_complex(z) for z in eig[:VECTOR_LIMIT])
        return f"eigenvalues (computed for this report): {_e(shown)}"
    sv = np.linalg.svd(a, compute_uv=False)
    return "singular values (computed for this report): " + _e(", ".join(_num(float(s)) for s in sv[:VECTOR_LIMIT]))


def _vector_html(v: list[Any]) -> str:
    fmt = _exact if len(v) <= 16 else _num
    shown = ", ".join(fmt(x) if _is_num(x) else json.dumps(x, ensure_ascii=False) for x in v[:VECTOR_LIMIT])
    more = f", &hellip; ({len(v)} entries)" if len(v) > VECTOR_LIMIT else ""
    return f'<code class="vector">[{_e(shown)}{more}]</code>'


def _value_text(value: Any) -> str:
    if _is_num(value):
        return f"<code>{_e(_exact(value))}</code>"
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > 300:
        text = text[:300] + " ..."
    return f"<code>{_e(text)}</code>"


def _shape(value: Any) -> tuple[int, ...] | None:
    """The shape of a rectangular nested list, or None."""
    if not isinstance(value, list):
        return ()
    if not value:
        return (0,)
    inner = [_shape(v) for v in value]
    if any(s is None for s in inner) or len(set(inner)) != 1:
        return None
    return (len(value), *inner[0])


def _complex(z: complex) -> str:
    if abs(z.imag) <= 1e-12 * max(1.0, abs(z.real)):
        return _num(float(z.real))
    sign = "+" if z.imag >= 0 else "-"
    return f"{_num(float(z.real))} {sign} {_num(abs(float(z.imag)))}i"


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _num(x: Any) -> str:
    """A number in six significant digits (tables of many numbers)."""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _exact(x: Any) -> str:
    """A number exactly as recorded (the shortest text that reads back as the same float)."""
    return repr(x) if isinstance(x, float) else str(x)


def _badge(kind: str, value: str) -> str:
    cls = value.replace(" ", "-")
    return f'<span class="badge {kind}-{_e(cls)}">{_e(value)}</span>'


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _json_for_script(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
