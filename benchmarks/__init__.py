"""asv benchmarks of transformer-claims (see benchmarks/README.md).

asv builds and installs the project into its own virtualenv for every commit it benchmarks,
and the benchmarks import that copy. ``asv run --python=same`` runs in the current environment
instead, where the project may not be installed: then the checkout that holds asv.conf.json
(``ASV_CONF_DIR``, set by asv) is put on ``sys.path``, and its ``impl`` is benchmarked.
"""
import importlib.util
import os
import sys

if importlib.util.find_spec("impl") is None and os.environ.get("ASV_CONF_DIR"):
    sys.path.insert(0, os.environ["ASV_CONF_DIR"])
