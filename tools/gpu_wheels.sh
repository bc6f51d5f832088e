#!/usr/bin/env bash
# Download, on a machine with the package index, the wheels a GPU machine without network lacks, into
# .whl/ (ignored by git). tools/gpu_check.sh unpacks them there. The defaults fit a CPython 3.12 x86-64
# Linux image that already holds torch, triton, numpy, scipy, hypothesis, pytest, pytest-xdist, pyyaml,
# sympy and matplotlib; name others as arguments, e.g. `bash tools/gpu_wheels.sh asv==0.6.4`.
#
#   bash tools/gpu_wheels.sh [NAME==VERSION ...]      (PY_VERSION=3.12 by default)
set -eu
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download --no-deps --only-binary=:all: --python-version "${PY_VERSION:-3.12}" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl jsonschema jsonschema-specifications referencing rpds-py latex2mathml "$@"
ls -l .whl
