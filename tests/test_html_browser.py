"""report/index.html in a real headless Chromium, driven through the DevTools protocol.

Chromium talks the protocol over a pipe (``--remote-debugging-pipe``: it reads commands on file
descriptor 3 and writes replies and events on 4, each message NUL-terminated), so no extra
package and no network port is needed. The page must load with no console error and no
network request other than the page itself; typing in the filter must narrow the table;
clicking a row must open that claim's panel with its status and why. A screenshot of each
state is kept under ``results/`` (git-ignored) as a test artifact.

Without Chromium the test is skipped locally; CI installs it (``.ci/run``) and sets
``CLAIMS_REQUIRE_CHROMIUM=1``, which turns the skip into a failure.
"""
from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from claimcheck import html, report
from claimcheck.asv_results import load_asv_results
from claimcheck.registry import load_registry
from claimcheck.sources import load_sources

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "results" / "browser"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-pipe", "--window-size=1280,900")
TIMEOUT = 60.0


def find_chromium() -> str | None:
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class DevTools:
    """A minimal DevTools-protocol client over Chromium's debugging pipe."""

    def __init__(self, binary: str, profile: Path):
        # The shell gives chromium our stdin as fd 3 and our stdout as fd 4, then points its own
        # stdin and stdout elsewhere, so that the protocol has the pipes to itself.
        script = 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2'
        self.proc = subprocess.Popen(["sh", "-c", script, binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []
        self.session: str | None = None

    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        self.proc.stdin.write(json.dumps(message).encode() + b"\0")
        self.proc.stdin.flush()
        reply = self._until(lambda m: m.get("id") == self.next_id, f"the reply to {method}")
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str) -> dict:
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        event = self._until(lambda m: m.get("method") == method, method)
        self.events.remove(event)
        return event

    def _until(self, wanted, what: str) -> dict:
        deadline = time.monotonic() + TIMEOUT
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"chromium sent no {what} within {TIMEOUT:.0f} s")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()}) while waiting for {what}")
                self.buffer += chunk

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the element (scrolled into view first)."""
        box = self.evaluate(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            el.scrollIntoView({{block: "center"}}); const r = el.getBoundingClientRect();
            return {{x: r.left + r.width / 2, y: r.top + r.height / 2}}; }})()""")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"], "button": "left",
                                                   "clickCount": 1})

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                found.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                found.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.loadingFailed":
                found.append(f"failed load: {params.get('errorText')}")
        return found

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def browser(tmp_path):
    binary = find_chromium()
    if binary is None:
        reason = "chromium is not installed (apt-get install chromium); CI installs it"
        if os.environ.get("CLAIMS_REQUIRE_CHROMIUM"):
            pytest.fail(f"CLAIMS_REQUIRE_CHROMIUM is set but {reason}")
        pytest.skip(reason)
    client = DevTools(binary, tmp_path / "chromium-profile")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def page_url(tiny_project, tmp_path) -> str:
    results = json.loads(tiny_project.results_path.read_text())
    data = report.build(load_registry(tiny_project.root / "claims.yaml"), load_sources(tiny_project.root), results,
                        load_asv_results(tiny_project.root))
    out = tmp_path / "report"
    report.write(data, out, html=html.render)
    return (out / "index.html").as_uri()


VISIBLE_ROWS = "Array.from(document.querySelectorAll('#claims-table tbody tr')).filter(r => !r.hidden).map(r => r.dataset.id)"
OPEN_PANEL = """(() => { const open = Array.from(document.querySelectorAll('article.claim'))
    .filter(a => getComputedStyle(a).display !== 'none');
    return open.map(a => ({id: a.id, text: a.innerText, width: a.getBoundingClientRect().width})); })()"""


def test_report_page_loads_filters_and_opens_a_claim_in_chromium(browser, page_url):
    browser.open(page_url)
    assert browser.evaluate("document.title") == "Claim-status report"
    all_rows = browser.evaluate(VISIBLE_ROWS)
    assert len(all_rows) == 7
    browser.screenshot(ARTIFACTS / "report-loaded.png")

    # typing in the search box narrows the table
    browser.click("#q")
    browser.send("Input.insertText", {"text": "eigenvalue"})
    assert browser.evaluate(VISIBLE_ROWS) == ["spectral.eigenvalues-positive", "spectral.trace-is-n"]
    assert browser.evaluate("document.getElementById('shown').textContent") == "2 of 7 claims"

    # a select narrows it further; clearing brings every row back
    browser.evaluate("(() => { const s = document.getElementById('f-verdict'); s.value = 'fails';"
                     " s.dispatchEvent(new Event('change')); })()")
    assert browser.evaluate(VISIBLE_ROWS) == ["spectral.eigenvalues-positive"]
    browser.click("#reset")
    browser.evaluate("new Promise(r => setTimeout(r, 50))")
    assert len(browser.evaluate(VISIBLE_ROWS)) == 7

    # clicking a row (not its link) opens that claim's panel: status, why, counterexample
    assert browser.evaluate(OPEN_PANEL) == []
    browser.click("#row-spectral\\.eigenvalues-positive td.stmt")
    browser.evaluate("new Promise(r => setTimeout(r, 100))")
    assert browser.evaluate("location.hash") == "#claim-spectral.eigenvalues-positive"
    (panel,) = browser.evaluate(OPEN_PANEL)
    assert panel["id"] == "claim-spectral.eigenvalues-positive" and panel["width"] > 300
    assert "refuted" in panel["text"] and "Why: counterexample found" in panel["text"]
    assert "eigenvalues (computed for this report): 1, -1" in panel["text"]
    browser.screenshot(ARTIFACTS / "report-claim-open.png")

    # a link to a claim it rests on opens that one instead
    browser.click("#claim-spectral\\.eigenvalues-positive dl.links a")
    browser.evaluate("new Promise(r => setTimeout(r, 100))")
    assert [p["id"] for p in browser.evaluate(OPEN_PANEL)] == ["claim-softmax.row-stochastic"]

    # the panel closes, and sorting by status puts 'open' before 'refuted' before 'verified'
    browser.click("#claim-softmax\\.row-stochastic a.close")
    browser.evaluate("new Promise(r => setTimeout(r, 100))")
    assert browser.evaluate(OPEN_PANEL) == []
    browser.click("th[data-sort=status]")
    statuses = browser.evaluate("Array.from(document.querySelectorAll('#claims-table tbody tr')).map(r => r.dataset.status)")
    assert statuses == sorted(statuses)

    assert browser.problems() == []
    assert {url for url in browser.requests() if not url.startswith("data:")} == {page_url}


def test_summary_card_filters_the_table_by_status(browser, page_url):
    browser.open(page_url)
    browser.click('.card[data-value="refuted"]')
    browser.evaluate("new Promise(r => setTimeout(r, 50))")
    assert browser.evaluate(VISIBLE_ROWS) == ["spectral.eigenvalues-positive"]
    assert browser.evaluate("document.getElementById('f-status').value") == "refuted"
    assert browser.problems() == []


def wait_for(browser: DevTools, condition: str, timeout_ms: int = 5000) -> None:
    """Poll a JavaScript condition until it holds (the page unpacks panels asynchronously)."""
    ok = browser.evaluate(f"""new Promise((resolve) => {{ const t0 = Date.now(); (function poll() {{
        if ({condition}) resolve(true); else if (Date.now() - t0 > {timeout_ms}) resolve(false);
        else setTimeout(poll, 20); }})(); }})""")
    assert ok, f"timed out waiting for {condition}"


def open_at_first_screen(browser: DevTools, url: str) -> None:
    """Load a page in a 1400 x 900 viewport (the first screen a reader sees)."""
    browser.open("about:blank")
    browser.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 900, "deviceScaleFactor": 1,
                                                        "mobile": False})
    browser.send("Page.navigate", {"url": url})
    browser.wait_event("Page.loadEventFired")


# each kind of finding in view in the first screen: its name, count, how far off its worst is and that worst
KINDS_IN_VIEW = """Array.from(document.querySelectorAll('#findings table.kinds tbody tr')).filter(tr => {
    const r = tr.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }).map(tr => {
    const off = tr.querySelector('td.off'); return {kind: tr.cells[0].textContent, count: tr.cells[1].textContent,
    off: off.textContent, off_whole: off.scrollWidth <= off.clientWidth, href: tr.querySelector('td.what a').hash}; })"""


def test_findings_lead_the_first_screen_worst_first(browser, page_url, tiny_project):
    open_at_first_screen(browser, page_url)
    first = browser.evaluate("""(() => { const tr = document.querySelector('#findings table.kinds tbody tr');
        const r = tr.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, href: tr.querySelector('td.what a').hash,
        counts: document.getElementById('summary').getBoundingClientRect().top}; })()""")
    results = json.loads(tiny_project.results_path.read_text())
    data = report.build(load_registry(tiny_project.root / "claims.yaml"), load_sources(tiny_project.root), results, None)
    assert first["href"] == f"#claim-{data['findings'][0]['id']}"  # the worst finding, by claimcheck/findings.py
    assert 0 <= first["top"] and first["bottom"] <= 900 and first["bottom"] < first["counts"]  # above the counts
    browser.screenshot(ARTIFACTS / "report-first-screen.png")
    assert browser.problems() == []


@pytest.fixture(scope="module")
def registry_page_url(tmp_path_factory) -> str:
    """This repository's registry rendered without results: every finding, as the real report ranks them."""
    data = report.build(load_registry(REPO / "claims.yaml"), load_sources(REPO), None, None)
    out = tmp_path_factory.mktemp("registry-report")
    (out / "index.html").write_text(html.render(data), encoding="utf-8")
    return (out / "index.html").as_uri()


def test_the_first_screen_shows_each_kind_of_finding_with_a_wrong_number_and_its_factor(browser, registry_page_url):
    open_at_first_screen(browser, registry_page_url)
    browser.screenshot(ARTIFACTS / "report-first-screen-findings.png")
    shown = {k["kind"]: k for k in browser.evaluate(KINDS_IN_VIEW)}
    assert len(shown) >= 4 and {"wrong numbers", "wrong formulas", "wrong exponents", "misattributions"} <= set(shown)
    number = shown["wrong numbers"]
    assert re.fullmatch(r"x[0-9.]+", number["off"]) and number["off_whole"], number  # its factor, not cut off
    assert int(number["count"]) > 1 and number["href"].startswith("#claim-")

    # a kind's count opens the full ranked list, showing that kind only
    browser.click("#findings table.kinds a[data-finding-kind=wrong-number]")
    browser.evaluate("new Promise(r => setTimeout(r, 100))")
    ranked = browser.evaluate("""(() => { const d = document.getElementById('findings-all'); return {open: d.open,
        kinds: Array.from(d.querySelectorAll('tbody tr')).filter(tr => !tr.hidden).map(tr => tr.dataset.findingKind),
        offs: Array.from(d.querySelectorAll('tbody tr')).filter(tr => !tr.hidden).map(tr => tr.cells[1].textContent)}; })()""")
    assert ranked["open"] and set(ranked["kinds"]) == {"wrong-number"} and len(ranked["kinds"]) == int(number["count"])
    assert ranked["offs"][0] == number["off"]  # the worst of the kind leads its list
    browser.click("#findings-all > summary")
    browser.evaluate("new Promise(r => setTimeout(r, 50))")
    assert browser.evaluate("Array.from(document.querySelectorAll('#findings-all tbody tr')).every(tr => !tr.hidden)")
    assert browser.problems() == []


def test_a_deep_link_opens_the_claim_with_its_measurements_unpacked(browser, page_url):
    browser.open(page_url + "#claim-spectral.eigenvalues-positive")
    wait_for(browser, "document.getElementById('claim-spectral.eigenvalues-positive').dataset.ready === 'true'")
    (panel,) = browser.evaluate(OPEN_PANEL)
    assert panel["id"] == "claim-spectral.eigenvalues-positive"
    assert "eigenvalues (computed for this report): 1, -1" in panel["text"]
    assert "test_eigenvalues_have_nonnegative_real_part" in panel["text"]
    # plots arrive with their panel, drawn, with no id shared with anything else on the page
    browser.evaluate("location.hash = 'claim-complexity.quadratic-time'")
    wait_for(browser, "document.getElementById('claim-complexity.quadratic-time').dataset.ready === 'true'")
    box = browser.evaluate("""(() => { const s = document.querySelector('#claim-complexity\\\\.quadratic-time svg');
        const r = s.getBoundingClientRect(); return {w: r.width, h: r.height}; })()""")
    assert box["w"] > 300 and box["h"] > 150
    ids = browser.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)")
    assert len(ids) == len(set(ids))
    browser.screenshot(ARTIFACTS / "report-plot-open.png")
    assert browser.problems() == []


def test_the_claim_graph_links_claims_and_shows_what_rests_on_a_refuted_claim(browser, page_url):
    browser.open(page_url)
    nodes = browser.evaluate("Array.from(document.querySelectorAll('#graph .node')).map(n => "
                             "({id: n.dataset.id, status: n.dataset.status, refuted: n.classList.contains('on-refuted')}))")
    by_id = {n["id"]: n for n in nodes}
    assert by_id["spectral.eigenvalues-positive"]["status"] == "refuted"
    assert by_id["spectral.gap-bound"]["refuted"] and not by_id["softmax.row-stochastic"]["refuted"]
    browser.click('#graph .node[data-id="spectral.gap-bound"] rect')
    browser.evaluate("new Promise(r => setTimeout(r, 100))")
    assert browser.evaluate("location.hash") == "#claim-spectral.gap-bound"
    browser.evaluate("location.hash = 'graph'")
    browser.click("#graph-refuted")
    dimmed = browser.evaluate("Array.from(document.querySelectorAll('#graph .node.dim')).map(n => n.dataset.id)")
    assert "spectral.gap-bound" not in dimmed and "spectral.eigenvalues-positive" not in dimmed  # and what it rests on
    assert "softmax.row-stochastic" in dimmed
    browser.screenshot(ARTIFACTS / "report-graph.png")
    assert browser.problems() == []
