"""Policy for the property suite: Hypothesis profiles and torch defaults.

Profiles (chosen by ``CLAIMS_PROFILE``; otherwise ``ci`` when the ``CI`` variable is set, as
on CI, and ``dev`` elsewhere):

* ``ci``: derandomized (fixed seed per test, so a CI run cannot flake), 50 examples, no database;
* ``dev``: random, 100 examples, the local example database remembers failures;
* ``thorough``: random, 1000 examples, for a long run before a release.

``deadline=None`` everywhere: tensor code has first-call costs (allocation, kernel selection)
that make Hypothesis' per-example deadline meaningless.
"""
import os

import torch

# Without CUDA our Triton kernel runs in Triton's interpreter; the variable must be set before
# triton is first imported (impl/triton_attention.py sets it too, which can be too late).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hypothesis import HealthCheck, settings  # noqa: E402

_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
               print_blob=True)
settings.register_profile("ci", parent=settings.get_profile("ci"), max_examples=50, **_common)
# Explicit parents: with CI set, Hypothesis makes its own `ci` profile the default, which a profile
# registered without a parent would silently inherit (derandomize included).
settings.register_profile("dev", parent=settings.get_profile("default"), max_examples=100, **_common)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000, **_common)

_choice = os.environ.get("CLAIMS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
if _choice not in ("ci", "dev", "thorough"):
    raise ValueError(f"CLAIMS_PROFILE={_choice!r}: expected one of ci, dev, thorough")
settings.load_profile(_choice)

torch.set_num_threads(1)  # xdist runs one worker per core; more threads only oversubscribe
