"""tools/gpu_check.sh, the one prepared run of the GPU checks, works before a GPU is ever lent: it
says why it cannot run without CUDA, and its steps run end to end on the CPU (GPU_CHECK_DEVICE=cpu)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_check.sh"


def _run(tmp_path, **env):
    full = {**os.environ, "PYTHON": sys.executable, **env}
    return subprocess.run(["bash", str(SCRIPT), str(tmp_path)], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=300)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_without_cuda_the_machine_step_fails_saying_why(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = _run(tmp_path, GPU_CHECK_STEPS="machine")
    assert proc.returncode == 1, proc.stdout
    assert "torch.cuda.is_available() is False" in (tmp_path / "env.txt").read_text()
    assert "machine: exit 1" in (tmp_path / "gpu-check.log").read_text()


def test_the_kernel_step_runs_claims_kernel_on_the_chosen_device(tmp_path):
    # the smoke tier and a CPU's time: the step's 45 s limit is sized for a GPU, and this checks the wiring
    proc = _run(tmp_path, GPU_CHECK_DEVICE="cpu", GPU_CHECK_STEPS="kernel", GPU_CHECK_BACKENDS="reference",
                GPU_CHECK_TIER="smoke", GPU_CHECK_KERNEL_LIMIT="240")
    assert proc.returncode == 0, (tmp_path / "gpu-check.log").read_text()[-3000:]
    text = (tmp_path / "kernel.txt").read_text()
    assert "claims kernel: reference on cpu" in text and "cases passed" in text and "FAIL" not in text
