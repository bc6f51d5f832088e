"""Writing the claim-status report from saved evidence results: ``claims report --from-results``.

The evidence run (``pytest properties/``) saves ``results/claims-results.json``; rendering turns it
into ``report/index.html`` (:func:`claimcheck.html.render`: panels, plots drawn with matplotlib,
the packed measurements) and ``report/claims.md`` (:func:`claimcheck.report.render_markdown`).
The target (issue 14) is rendering in at most 10 s after the evidence run, so it is timed here,
beside the size of what it writes (deterministic, so a jump is a regression, not noise).
Each timing is a cold render: the per-question plot cache is emptied in ``setup``.
"""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "claims-results.json"


class RenderReport:
    """One rendering of the whole report (every claim of ``claims.yaml``) from the saved results."""

    version = "1"
    params = [["markdown", "html"]]
    param_names = ["surface"]
    number = 1  # one cold render per sample: setup empties the plot cache before each
    repeat = (1, 3, 60.0)
    warmup_time = 0.0
    timeout = 300

    def setup(self, surface):
        if not RESULTS.exists():
            raise NotImplementedError(f"no saved evidence results at {RESULTS}: run `pytest properties/` first")
        from claimcheck import html, report
        from claimcheck.registry import load_registry
        from claimcheck.sources import load_sources

        results = json.loads(RESULTS.read_text(encoding="utf-8"))
        self.data = report.build(load_registry(ROOT / "claims.yaml"), load_sources(ROOT), results, None)
        html._question_plots.cache_clear()
        self.render = html.render if surface == "html" else report.render_markdown

    def time_render(self, surface):
        self.render(self.data)

    def track_bytes(self, surface):
        return len(self.render(self.data).encode())

    track_bytes.unit = "bytes"
