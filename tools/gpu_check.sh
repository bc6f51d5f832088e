#!/usr/bin/env bash
# Every check that needs a GPU, in one run sized for a short lease (README: "On a GPU").
#
#   bash tools/gpu_check.sh [OUT]     # logs go to OUT (default: $OUT, else results/gpu)
#
# Steps, each under its own time limit and logged whatever the others do:
#   1. the machine: GPU, driver, torch / CUDA / cuDNN / Triton versions, flash-attn or not;
#   2. `claims kernel NAME --device cuda` for every registry backend that declares CUDA;
#   3. pytest on CUDA: the backend matrix, the Triton grouped-query checks, the kernel zoo;
#   4. the CUDA benchmarks (benchmarks/cuda_run.py) in the time left.
# It installs nothing from the network: packages the machine lacks travel as wheels in .whl/
# (tools/gpu_wheels.sh downloads them) and are unpacked into a temporary folder.
#
# Environment: PYTHON (default python3), GPU_CHECK_COMMIT (the commit the asv results are filed
# under; default: git rev-parse HEAD), GPU_CHECK_BUDGET (seconds for all the steps, default 540),
# GPU_CHECK_STEPS (which steps, default "machine kernel pytest bench": a lease too short for all
# runs them over two calls), GPU_CHECK_BACKENDS (the registry backends of step 2, default: every one
# declaring the device), GPU_CHECK_TIER (the backend matrix's tier in steps 2 and 3, default ci),
# GPU_CHECK_KERNEL_LIMIT (seconds for one plain backend's `claims kernel` in step 2, default 45),
# GPU_CHECK_DEVICE=cpu (the same steps on the CPU: tests this script).
# Exit status: 0 when every step ran and passed, else the number of steps that did not.
set -u
cd "$(dirname "$0")/.."
out=${1:-${OUT:-results/gpu}}
mkdir -p "$out"
py=${PYTHON:-python3}
device=${GPU_CHECK_DEVICE:-cuda}
budget=${GPU_CHECK_BUDGET:-540}
steps=" ${GPU_CHECK_STEPS:-machine kernel pytest bench} "
start=$SECONDS
failed=0
log="$out/gpu-check.log"
: >"$log"
export PYTHONUNBUFFERED=1 CI=true

say() { echo "== $* ($((SECONDS - start)) s)" | tee -a "$log"; }
left() { echo $((budget - (SECONDS - start))); }
# step NAME LIMIT FILE CMD...: run CMD under LIMIT seconds, its output to FILE and the log
step() {
    local name=$1 limit=$2 file=$3
    shift 3
    say "$name (limit ${limit} s)"
    timeout -k 10 "$limit" "$@" >"$file" 2>&1
    local rc=$?
    cat "$file" >>"$log"
    if [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
        say "$name: exit $rc$([ "$rc" -eq 124 ] && echo ' (time limit)')"
    fi
    return 0
}

if ls .whl/*.whl >/dev/null 2>&1; then  # carried wheels: unpack, never fetch
    site=$(mktemp -d)
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl \
        >>"$log" 2>&1 || say "unpacking .whl/ failed (see above)"
    export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ "$device" = cpu ]; then
    export TRITON_INTERPRET=1  # CPU tensors: Triton's interpreter
fi

wants() { [[ "$steps" == *" $1 "* ]]; }

wants machine && step "machine" 60 "$out/env.txt" "$py" - "$device" <<'EOF'
import importlib.util, platform, subprocess, sys
import torch
device = sys.argv[1]
print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| cuDNN", torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
for name in ("triton", "flash_attn", "hypothesis", "jsonschema", "latex2mathml"):
    spec = importlib.util.find_spec(name)
    version = getattr(__import__(name), "__version__", "?") if spec else "not installed"
    print(f"{name}: {version}")
if device == "cuda":
    if not torch.cuda.is_available():
        sys.exit("torch.cuda.is_available() is False: no GPU check can run")
    p = torch.cuda.get_device_properties(0)
    print(f"GPU: {p.name}, sm_{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs")
    print(subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm", "--format=csv"],
                         capture_output=True, text=True).stdout)
EOF

# 2. the registry backends on the device, one `claims kernel` each (few drawn problems: the time is
#    the fixed problems' and each compiled kernel's first call)
wants kernel && backends=${GPU_CHECK_BACKENDS:-$("$py" -c "
import sys
from impl.backends import BACKENDS
print(' '.join(n for n, b in BACKENDS.items() if sys.argv[1] in b.devices))" "$device" 2>>"$log")}
wants kernel && : >"$out/kernel.txt"
for name in ${backends:-}; do
    examples=3 limit=${GPU_CHECK_KERNEL_LIMIT:-45}
    case $name in flex) examples=1 limit=150 ;; triton) examples=1 limit=90 ;; esac  # each new shape compiles
    step "claims kernel $name" "$limit" "$out/kernel-$name.txt" \
        "$py" -m claimcheck.cli kernel "$name" --device "$device" --examples "$examples" --tier "${GPU_CHECK_TIER:-ci}"
    cat "$out/kernel-$name.txt" >>"$out/kernel.txt"
    rm -f "$out/kernel-$name.txt"
done

# 3. the same matrix as pytest evidence on the device, the Triton GQA checks and the zoo
limit=$(( $(left) - 120 > 60 ? $(left) - 120 : 60 ))
limit=$(( limit > 240 ? 240 : limit ))
# the plugin: by its entry point where the project is installed, else named (a bare checkout)
plugin=$("$py" -c "from importlib.metadata import entry_points
print('' if any(e.value == 'claimcheck.plugin' for e in entry_points(group='pytest11')) else '-p claimcheck.plugin')")
wants pytest && step "pytest on $device" "$limit" "$out/pytest.txt" \
    "$py" -m pytest $plugin -p no:cacheprovider -n 4 -q -rs --kernel-tier "${GPU_CHECK_TIER:-ci}" \
    properties/test_backends.py properties/test_triton_attention.py tests/test_kernel_zoo.py \
    -k "$device or triton_" --claims-results "$out/claims-results-$device.json"

# 4. the benchmarks in what is left (cuda_run.py stops starting new points at its budget)
commit=${GPU_CHECK_COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
bench_budget=$(( $(left) - 30 ))
if ! wants bench; then
    :
elif [ "$bench_budget" -lt 30 ]; then
    say "benchmarks: no time left (${bench_budget} s)"
    failed=$((failed + 1))
elif [ -z "$commit" ]; then
    say "benchmarks: no commit (not a git checkout): set GPU_CHECK_COMMIT"
    failed=$((failed + 1))
else
    asv_dir=$(mktemp -d)
    step "benchmarks" $((bench_budget + 90)) "$out/benchmarks.txt" \
        "$py" benchmarks/cuda_run.py --device "$device" --out "$asv_dir/asv-results" --commit "$commit" \
        --budget "$bench_budget"
    tar -czf "$out/asv-results.tar.gz" -C "$asv_dir" asv-results 2>>"$log" || true
fi
say "done: $failed step(s) failed or did not run"
exit "$failed"
