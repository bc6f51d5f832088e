"""asv benchmarks of transformer-claims (see benchmarks/README.md).

asv builds and installs the project into its own virtualenv for every commit it benchmarks,
and the benchmarks import that copy. ``asv run --python=same`` runs in the current environment
instead, where the project may not be installed: then the checkout that holds this folder is
put on ``sys.path``, and its ``impl`` is benchmarked.
"""
import importlib.util
import os
import sys

if importlib.util.find_spec("impl") is None:
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
