"""Run the experiments at one of their larger scales once, and store the per-seed results as artefacts.

    .venv/bin/python tools/run_scale.py small                                  # every family with a `small` scale
    .venv/bin/python tools/run_scale.py small rank_collapse rope_extrapolation  # these families only

Each registered experiment of a family (its ``EXPERIMENTS``) runs through :func:`experiments.harness.run`
at ``SCALES[<scale>]``, so its artefact lands in ``experiments/artefacts/`` keyed by that scale and by the
code, exactly as the CI scale's do; an artefact whose key still matches is reused, not run again. The
report reads these artefacts (it never trains at a larger scale) and shows each beside the CI-scale
decision. One line per experiment: the outcome, the t interval, the wall time and the artefact.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.larger import FAMILIES, experiments, scales  # noqa: E402  (after the path insert)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scale", help="a scale name of the families' SCALES, e.g. small")
    p.add_argument("families", nargs="*", help=f"modules of experiments/ (default: all of {', '.join(FAMILIES)})")
    args = p.parse_args(argv)
    from experiments.analysis import decide
    from experiments.harness import run

    chosen = args.families or list(FAMILIES)
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        p.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    for name in chosen:
        known = scales(name)
        if args.scale not in known:
            print(f"{name}: no scale {args.scale!r} (it has {', '.join(known)})")
            continue
        scale = known[args.scale]
        for experiment in experiments(name):
            start = time.perf_counter()
            d = decide(experiment, run(experiment, scale))
            print(f"{experiment.name} [{args.scale}]: {d.outcome}, {d.effect:.4g} [{d.ci_low:.4g}, {d.ci_high:.4g}]"
                  f"{' (reused)' if d.cached else ''} in {time.perf_counter() - start:.0f} s -> "
                  f"{(d.artefact or {}).get('path')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
