"""Every attention backend against the float64 reference, in every precision, mask and head layout.

The matrix and its rule live in :mod:`claimcheck.kernel` (shared with ``claims kernel``): a
backend computing in precision p errs, against the float64 reference, by at most ``c`` times the
error of the naive reference computed in the same precision p, plus a floor of a few units of
p's epsilon (DESIGN.md; FlashAttention's tests/test_flash_attn.py). Every case (backend x dtype x
mask) sees the fixed problems of :func:`claimcheck.kernel.fixed_problems` at the tier of
``--kernel-tier`` and problems drawn with a seed of its own. The default tier, ``smoke``, has 4 and
8 query heads over 2 key/value heads, odd lengths, n_q < n_k and n_q > n_k, scores up to 110, the
caller's scale 0.3 and key padding under each declared causal alignment; it leaves FlexAttention's
CPU compiles (about 50 s in a fresh cache) to the ci tier and checks Triton's interpreter in float32
only, each left-out cell a skip that says so. ``--kernel-tier ci`` (make test's kernel part, and
``claims kernel``'s default) adds 137 queries over 131 keys (across 64- and 128-wide key tiles and a 128-row query
tile), one query against 130 keys, 1025 keys, 8193 keys of values with mean 1, one key, a batch of 3 with a group of
3 query heads a key/value head, head dims 128 and 256, and FlexAttention and Triton in every dtype. Each
observed ratio is recorded
as ``error_ratio[backend=...,dtype=...,mask=...,out|dq|dk|dv]``.

``pytest properties/test_backends.py --backend mypkg.attn:fn`` runs the same matrix on a user's
function instead of the registry's backends (capabilities from ``fn.claims_capabilities``).

Every backend runs on every device type it declares (``cpu``, ``cuda``): on a machine without a
GPU the CUDA cells are skipped with that reason, on a GPU machine they run the GPU kernels.
Backends that cannot run here (a missing package, Triton compiled for the GPU with CPU tensors)
and mask features a backend does not declare are skipped with their reason; problems a kernel's
own library refuses (SDPA's CUDA eligibility rules) are recorded, and a case whose every problem
is refused is skipped with torch's reason. Behaviour that differs between backends (fully masked
rows) is asserted against each backend's declaration and recorded: nan or zero, or either when
nothing is declared (anything else, such as the mean of V, fails).
"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from claimcheck import claim_assert, kernel, record
from impl.attention import Mask, attention
from impl.backends import BACKENDS, available, supports
from properties.assertions import relative_error
from properties.strategies.attention import MASK_KINDS, fixed_problem

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Drawn examples per (backend, dtype, mask) case, as a fraction of the profile's: ~135 cases share the
# budget, each also runs 3 fixed problems; the interpreter runs Triton kernels in numpy (~0.1 s a call)
EXAMPLE_SHARE = {"triton": 50}
DEFAULT_SHARE = 8
DEVICES = ("cpu", "cuda")  # every declared one is a cell; one without hardware here skips with that reason


def _declared_devices(backend) -> list[str]:
    return [d for d in DEVICES if d in backend.devices]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _backends(config) -> dict:
    """The backends under test: the registry's, or the one function given with ``--backend``."""
    spec = config.getoption("backend", default=None)
    if not spec:
        return BACKENDS
    try:
        backend = kernel.resolve(spec)
    except (ValueError, ImportError) as exc:
        raise pytest.UsageError(f"--backend {spec}: {exc}") from exc
    return {backend.name: backend}


def pytest_generate_tests(metafunc):
    if "flex_dtype" in metafunc.fixturenames:
        metafunc.parametrize("flex_dtype", _flex_dtypes(metafunc.config))
    if "backend_name" not in metafunc.fixturenames:
        return
    backends = _backends(metafunc.config)
    if "mask_kind" in metafunc.fixturenames:
        cells = [(b, dev, d, m) for b in backends if b != "flex" for dev in _declared_devices(backends[b])
                 for d in DTYPES for m in kernel.CASE_KINDS]  # the features that change the call too
        metafunc.parametrize("backend_name,device,dtype,mask_kind", cells,
                             ids=[f"{b}-{dev}-{_name(d)}-{m}" for b, dev, d, m in cells])
    elif "device" in metafunc.fixturenames and "backend_name" in metafunc.fixturenames:
        cells = [(b, dev) for b in backends if b != "flex" for dev in _declared_devices(backends[b])]
        metafunc.parametrize("backend_name,device", cells, ids=[f"{b}-{dev}" for b, dev in cells])


SLOW_WHY = {"flex": "FlexAttention compiles a graph per dtype, mask structure and shape on CPU (about 50 s for "
                    "float32 in a fresh cache)",
            "triton": "Triton runs in its interpreter on CPU (about 3 s a case)"}


def slow_skip(tier: kernel.Tier, backend: str, dtype: torch.dtype) -> str | None:
    """Why the property suite leaves ``backend`` in ``dtype`` to a larger tier, or None when it checks it."""
    kept = tier.dtypes_for(backend)
    if kept is None or _name(dtype) in kept:
        return None
    where = f"in {', '.join(kept)} only" if kept else "in no dtype"
    return (f"tier {tier.name} checks {backend} {where}: {SLOW_WHY.get(backend, 'its CPU path is slow')}; "
            f"--kernel-tier ci (make test's kernel part) and claims kernel {backend} check every dtype")


def _flex_dtypes(config) -> list:
    """FlexAttention's dtypes at the tier: a dtype the tier leaves out is a skip that says so."""
    tier = kernel.get_tier(config.getoption("kernel_tier"))
    return [pytest.param(d, id=_name(d), marks=() if slow_skip(tier, "flex", d) is None
                         else pytest.mark.skip(reason=slow_skip(tier, "flex", d)))
            for d in DTYPES]


@pytest.fixture(scope="session")
def backends(request) -> dict:
    return _backends(request.config)


@pytest.fixture(scope="session")
def tier(request) -> kernel.Tier:
    return kernel.get_tier(request.config.getoption("kernel_tier"))


def _skip_unless_runs(backend, device: str, dtype: torch.dtype, mask_features=frozenset()) -> None:
    ok, reason = available(backend, device, dtype)
    if not ok:
        pytest.skip(reason)
    ok, reason = supports(backend, device, mask_features)
    if not ok:
        pytest.skip(reason)


def _assert_case(backend, result: kernel.CaseResult, spec: str, tier: str) -> None:
    """Record every error ratio of a case, re-raise a crash, and assert the case's verdict."""
    where = f"backend={backend.name},device={result.case.device},dtype={_name(result.case.dtype)},mask={result.case.mask}"
    for problem, c in result.checks:
        record(f"error_ratio[{where},{c.part}]", c.ratio)
    for problem, reason in result.declined:
        record(f"declined[{where},{problem}]", reason)
    if result.error is not None:
        raise result.error
    if result.status == "declined":
        pytest.skip(result.message)
    failing = result.failing
    message = result.message + (f"; the output matches: {result.diagnosis}" if result.diagnosis else "")
    claim_assert(result.ok, f"{where}: {message}", checks=result.failed_checks, problem=failing and failing.label,
                 shape=failing and failing.shape, spec=failing and str(failing.spec),
                 repro=kernel.repro(spec, backend, result.case, failing, tier))


@pytest.mark.claim("flash-attention.exact-no-approximation")
def test_backend_error_is_within_c_times_the_naive_same_precision_error(backends, backend_name, device, dtype,
                                                                         mask_kind, tier, request):
    backend = backends[backend_name]
    case = kernel.Case(dtype, mask_kind, device)
    if (why := slow_skip(tier, backend_name, dtype)) is not None and backend is BACKENDS.get(backend_name):
        pytest.skip(why)
    _skip_unless_runs(backend, device, dtype, case.features())
    current = settings()
    examples = max(1, current.max_examples // EXAMPLE_SHARE.get(backend_name, DEFAULT_SHARE))
    # derandomized (ci): a seed of the case's own; otherwise fresh random examples each run
    result = kernel.run_case(backend, case, examples, base_seed=0 if current.derandomize else None, tier=tier.name)
    for label, why in kernel.undeclared_problems(backend, tier.name):
        record(f"not declared[backend={backend_name},{label}]", why)
    _assert_case(backend, result, request.config.getoption("backend", default=None) or backend_name, tier.name)


@pytest.mark.claim("flash-attention.exact-no-approximation")
@settings(max_examples=2)  # each new (dtype, mask structure, shape) is a ~6 s CPU compile: fixed shapes, few seeds
@pytest.mark.parametrize("device", _declared_devices(BACKENDS["flex"]))
@given(flex_seed=st.integers(0, 2**31 - 1))
def test_flex_attention_error_is_within_c_times_the_naive_same_precision_error(backends, device, flex_dtype, tier,
                                                                               flex_seed):
    """FlexAttention, one test per dtype: one pytest node runs in one process, so torch.compile's first,
    slow compile happens once a dtype; every mask in one GQA shape (4 over 2 heads, n_q = 24 < n_k = 40),
    with ordinary, large and very negative logits (largest score 110, or every score below -110: the same graph), key padding, a sink, a softcap
    and ALiBi under each causal alignment (the mask_mod reads it from a tensor: the same graph), and in float32 the caller's
    scale 0.3 (one more compile: the scale is a constant of the graph) and the fully masked rows. At
    the ci tier, the kernel-scale shapes of :func:`claimcheck.kernel.fixed_problems` too (one compile a
    shape and dtype: unmasked, causal both ways, key padding and a sliding window share it; a score_mod (a
    bias, ALiBi, a softcap) would be one more each). ALiBi and a softcap share the bias's graph. 8 over 2
    heads and n_q > n_k would each be one more compile a dtype (``claims kernel flex`` runs them all, a
    compile each)."""
    if "flex" not in backends:
        pytest.skip("--backend: checking the given function only")
    flex, dtype = BACKENDS["flex"], flex_dtype
    _skip_unless_runs(flex, device, dtype)
    backward = flex.devices[device].backward
    for kind in [m for m in MASK_KINDS if supports(flex, device, kernel.Case(dtype, m, device).features())[0]]:
        problems = [fixed_problem(kind, flex_seed), fixed_problem(kind, flex_seed, max_logit=kernel.LARGE_LOGIT),
                    fixed_problem(kind, flex_seed, max_logit=kernel.NEGATIVE_LOGIT)]
        if kind in kernel.CAUSAL_JOINS:  # the causal flag is a tensor the mask_mod reads: the same graph
            problems += [fixed_problem(kind, flex_seed, causal=a) for a in ("top-left", "bottom-right")]
        if kind == "none" and dtype == torch.float32:
            problems.append(fixed_problem(kind, flex_seed, scale=kernel.SCALE))
        if "kernel-scale" in tier.groups and kind not in ("additive", "alibi", "softcap"):  # a score_mod: a compile each
            base = {p.label for p in kernel.fixed_problems(flex, kind, device, "smoke")}
            problems += [p for p in kernel.fixed_problems(flex, kind, device, tier.name) if p.label not in base]
        for problem in problems:
            checks = kernel.check_problem(flex.fn, dtype, problem, backward, device)
            where = f"backend=flex,device={device},dtype={_name(dtype)},mask={kind}"
            for c in checks:
                record(f"error_ratio[{where},{c.part}]", c.ratio)
            claim_assert(all(c.ok for c in checks), f"{where}: " + "; ".join(c.message for c in checks if not c.ok),
                         problem=str(problem.spec), label=problem.label)
    if dtype == torch.float32:
        check_fully_masked_rows(flex, device)


COMPILED_SHAPES_ONLY = {"flex": "one more CPU compile for one more shape (~4 s); the convention is checked with "
                                "key padding and a -inf bias in the shapes already compiled"}


@pytest.mark.claim("flash-attention.exact-no-approximation")
def test_fully_masked_rows_follow_the_backends_declared_convention(backends, backend_name, device):
    """A row with no allowed key has no softmax (0/0): the reference gives NaN, fused kernels 0.

    The rows that do see keys must still be right (float32 against float64).
    """
    check_fully_masked_rows(backends[backend_name], device)


def check_fully_masked_rows(backend, device: str) -> None:
    _skip_unless_runs(backend, device, torch.float32)
    skip = lambda kind: (COMPILED_SHAPES_ONLY.get(backend.name) if kind == "causal-bottom-right"  # noqa: E731
                         and device == "cpu" else None)
    for row in kernel.check_fully_masked(backend, device, skip):
        record(f"fully_masked_row[backend={backend.name},device={device},mask={row.mask}]",
               f"not supported: {row.message}" if row.seen == "not supported" else row.seen)
        claim_assert(row.ok, f"fully masked rows ({row.mask}): {row.message}", backend=backend.name, mask=row.mask,
                     declared=backend.fully_masked, seen=row.seen, visible_rows_error=row.visible_error)


@pytest.mark.claim("flash-attention.snippet-flash-attn-func-causal-attention")
@pytest.mark.parametrize("n_q,n_k", [(7, 7), (5, 9), (9, 5)])
def test_causal_alignments_agree_exactly_when_query_and_key_lengths_match(n_q, n_k):
    """flash_attn_func(causal=True) aligns the mask bottom-right (flash-attn >= 2.1), SDPA's is_causal
    top-left: the same mask for self-attention (n_q = n_k), different ones otherwise (recorded)."""
    gen = torch.Generator().manual_seed(n_q * 16 + n_k)
    q, k, v = (torch.randn((1, 2, n, 8), generator=gen, dtype=torch.float64) for n in (n_q, n_k, n_k))
    top_left = attention(q, k, v, mask=Mask(causal="top-left"))
    bottom_right = attention(q, k, v, mask=Mask(causal="bottom-right"))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    same = torch.equal(top_left.nan_to_num(), bottom_right.nan_to_num())
    record(f"causal alignments agree [n_q={n_q}, n_k={n_k}]", same)
    # two float64 evaluations of the same masked formula: sums of <= 9 keys and 8 dims, a few dozen eps at most
    claim_assert(relative_error(sdpa, top_left) <= 1e-12, "SDPA's is_causal is not top-left aligned", n_q=n_q, n_k=n_k)
    claim_assert(same == (n_q == n_k), "top-left and bottom-right alignment agree exactly when n_q = n_k",
                 n_q=n_q, n_k=n_k, agree=same)
