"""Our Triton kernel (``impl/triton_attention.py``) on grouped-query attention: compiled on a GPU
when the process has CUDA (and ``TRITON_INTERPRET`` unset), else under the interpreter on CPU.

Query head ``h`` must read key/value head ``h // (H_q / H_kv)`` and the backward must sum a key/value
head's dK, dV over exactly the query heads of its group (Ainslie et al. 2023). Two independent checks
on fixed problems with shared key/value heads (4 query heads over 2, 8 over 2; lengths that are not
multiples of the 16-row tile; n_q != n_k):

* a value: forward and backward against the float64 reference, whose key/value heads are gathered
  by an explicit index list (autograd's scatter-add is the oracle for the group sum), under the
  error-ratio rule of ``test_backends.py``;
* a law, exact and tolerance-free: perturbing key/value head j changes the outputs of the query heads
  of group j only, and an upstream gradient on one query head gives dK, dV on its own key/value
  head only.

Both kill the two kernel mutants of issue 13 (a forward reading head ``h % H_kv``; a backward
summing dK, dV over the wrong query heads), which the backend matrix let pass.
"""
import pytest
import torch

from claimcheck import claim_assert, record
from claimcheck.kernel import C_GRAD, C_OUT, FLOOR_ULPS, recompute_floor
from impl.attention import Mask, attention
from properties.assertions import assert_within_reference_error, attention_term_scales

_module = pytest.importorskip("impl.triton_attention")
triton_attention = _module.triton_attention
# where the kernel runs in this process: Triton compiles for CUDA tensors or interprets CPU ones, never both
DEVICE = "cpu" if _module.INTERPRET or not torch.cuda.is_available() else "cuda"


def _triton(q, k, v, causal=None):
    """The kernel on DEVICE, its result back on the CPU (``.to`` is differentiable: gradients return too)."""
    return triton_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), causal=causal).cpu()


# (h_q, h_kv, n_q, n_k, causal): both GQA ratios of issue 13, tails past one 16-row tile, n_q != n_k both ways
CASES = [(4, 2, 17, 20, None), (8, 2, 20, 17, "top-left")]
D = 16  # the kernel's smallest head dimension: the cheapest interpreted tile


def _problem(h_q, h_kv, n_q, n_k, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn((1, h, n, D), generator=gen, dtype=torch.float64)
               for h, n in ((h_q, n_q), (h_kv, n_k), (h_kv, n_k)))
    d_out = torch.randn((1, h_q, n_q, D), generator=gen, dtype=torch.float64)
    return q, k, v, d_out


def _gathered_reference(q, k, v, causal):
    """Standard attention with query head h reading key/value head h // group, by an index list."""
    group = q.shape[1] // k.shape[1]
    heads = [h // group for h in range(q.shape[1])]
    return attention(q, k[:, heads], v[:, heads], mask=Mask(causal=causal))


def _with_grads(fn, q, k, v, d_out):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    return (out.detach(), *torch.autograd.grad((out * d_out).sum(), (q, k, v)))


@pytest.mark.claim("flash-attention.exact-no-approximation")
@pytest.mark.parametrize("h_q,h_kv,n_q,n_k,causal", CASES, ids=[f"{c[0]}over{c[1]}" for c in CASES])
def test_triton_grouped_query_attention_is_within_c_times_the_naive_float32_error(h_q, h_kv, n_q, n_k, causal):
    q, k, v, d_out = (t.float() for t in _problem(h_q, h_kv, n_q, n_k))
    q64, k64, v64, d_out64 = (t.double() for t in (q, k, v, d_out))  # exact for the inputs the kernel gets
    oracle = _with_grads(lambda *a: _gathered_reference(*a, causal), q64, k64, v64, d_out64)
    naive = _with_grads(lambda *a: _gathered_reference(*a, causal), q, k, v, d_out)
    actual = _with_grads(lambda *a: _triton(*a, causal=causal), q, k, v, d_out)
    terms = attention_term_scales(q64, k64, v64, Mask(causal=causal), d_out64)
    for part, a, o, n, c in zip(("out", "dq", "dk", "dv"), actual, oracle, naive, (C_OUT, C_GRAD, C_GRAD, C_GRAD)):
        # the backend matrix's rule (claimcheck.kernel): c x the naive error + 2 ulps of the terms + the
        # float32 rounding of S (and of recomputing P = exp(S - L)) that every algorithm pays
        assert_within_reference_error(a, o, n, c, f"backend=triton,gqa={h_q}/{h_kv},dtype=float32,{part}",
                                      floor_ulps=FLOOR_ULPS, scale=terms[part], extra_floor=recompute_floor(terms, part))


@pytest.mark.claim("flash-attention.exact-no-approximation")
@pytest.mark.parametrize("h_q,h_kv", [(4, 2), (8, 2)], ids=["4over2", "8over2"])
def test_triton_query_heads_read_and_write_only_their_own_key_value_head(h_q, h_kv):
    """Exact: no tolerance. Query head h depends on key/value head h // group and on no other."""
    group = h_q // h_kv
    q, k, v, _ = (t.float() for t in _problem(h_q, h_kv, 16, 16, seed=1))  # one tile per head: the law needs no tail
    base = _triton(q, k, v).detach()
    for j in range(h_kv):
        k2, v2 = k.clone(), v.clone()
        k2[:, j] += 1.0
        v2[:, j] += 1.0
        moved = (_triton(q, k2, v2).detach() != base).flatten(2).any(-1)[0]  # (H_q,)
        expected = torch.tensor([h // group == j for h in range(h_q)])
        claim_assert(torch.equal(moved, expected), "changing one key/value head moved the wrong query heads",
                     kv_head=j, moved=moved.tolist(), expected=expected.tolist())
    h = 1  # reads key/value head 0; a layout (b, group, h_kv) or h % h_kv would route it to head 1
    d_out = torch.zeros_like(base)
    d_out[:, h] = 1.0
    k1, v1 = k.clone().requires_grad_(), v.clone().requires_grad_()
    dk, dv = torch.autograd.grad((_triton(q, k1, v1) * d_out).sum(), (k1, v1))
    touched = [bool(dk[:, j].abs().sum() + dv[:, j].abs().sum()) for j in range(h_kv)]
    record(f"gqa_gradient_heads[{h_q}/{h_kv}]", sum(touched))
    claim_assert(touched == [j == h // group for j in range(h_kv)],
                 "an upstream gradient on one query head reached the wrong key/value heads",
                 query_head=h, touched=touched)


def _reference_lse(q, k, causal):
    """The natural log-sum-exp of each row of scores, with key/value heads gathered as in _gathered_reference."""
    group = q.shape[1] // k.shape[1]
    return attention(q, k[:, [h // group for h in range(q.shape[1])]], k[:, [h // group for h in range(q.shape[1])]],
                     mask=Mask(causal=causal), return_lse=True)[1]


@pytest.mark.claim("flash-attention.exact-no-approximation")
@pytest.mark.parametrize("kernel_name", ["triton", "tiled"])
@pytest.mark.parametrize("h_q,h_kv,n_q,n_k,causal", CASES, ids=[f"{c[0]}over{c[1]}" for c in CASES])
def test_the_log_sum_exp_a_kernel_returns_is_within_c_times_the_naive_float32_error(kernel_name, h_q, h_kv, n_q,
                                                                                      n_k, causal):
    """The log-sum-exp L = m + log l the forward stores for its backward, returned to the caller: against the float64
    log-sum-exp of the scores, by the error-ratio rule (the naive one: torch.logsumexp of float32 scores)."""
    from impl.tiled_attention import flash_attention

    q, k, v, d_out = (t.float() for t in _problem(h_q, h_kv, n_q, n_k))
    q64, k64, v64, d_out64 = (t.double() for t in (q, k, v, d_out))
    if kernel_name == "triton":
        lse = triton_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), causal=causal, return_lse=True)[1].cpu()
    else:
        lse = flash_attention(q, k, v, mask=Mask(causal=causal), block_m=16, block_n=16, return_lse=True)[1]
    terms = attention_term_scales(q64, k64, v64, Mask(causal=causal), d_out64)
    # floor: 2 ulps of max |S| + max |L|, the size of the terms L is summed from (rounding S costs eps |S|)
    assert_within_reference_error(lse, _reference_lse(q64, k64, causal), _reference_lse(q, k, causal), C_OUT,
                                  f"backend={kernel_name},gqa={h_q}/{h_kv},dtype=float32,lse", floor_ulps=FLOOR_ULPS,
                                  scale=terms["logits"])


@pytest.mark.claim("flash-attention.exact-no-approximation")
@pytest.mark.parametrize("kernel_name", ["triton", "tiled"])
@pytest.mark.parametrize("h_q,h_kv,n_q,n_k,causal", CASES, ids=[f"{c[0]}over{c[1]}" for c in CASES])
def test_the_gradient_through_the_log_sum_exp_is_within_c_times_the_naive_float32_error(kernel_name, h_q, h_kv, n_q,
                                                                                         n_k, causal):
    """A loss of the output and of the returned log-sum-exp, sum(O dO) + sum(L dL) (a ring-attention merge, an
    LSE regulariser), reaches q and k through L too: dL_i / dS_ij = P_ij, so dS = P (dP - D + dL). dQ, dK, dV
    against the float64 reference's autograd through torch.logsumexp, by the rule of the backend matrix."""
    from claimcheck.kernel_features import lse_term_scales
    from impl.tiled_attention import flash_attention

    q, k, v, d_out = (t.float() for t in _problem(h_q, h_kv, n_q, n_k, seed=2))
    d_lse = torch.randn((1, h_q, n_q), generator=torch.Generator().manual_seed(3))
    mask = Mask(causal=causal)

    def run(fn, q, k, v):
        q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
        out, lse = fn(q, k, v)
        return torch.autograd.grad((out * d_out.to(out.dtype)).sum() + (lse * d_lse.to(lse.dtype)).sum(), (q, k, v))

    def ours(q, k, v):
        if kernel_name == "triton":
            out, lse = triton_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), causal=causal, return_lse=True)
            return out.cpu(), lse.cpu()
        return flash_attention(q, k, v, mask=mask, block_m=16, block_n=16, return_lse=True)

    reference = lambda q, k, v: attention(q, k, v, mask=mask, return_lse=True)  # noqa: E731
    q64, k64, v64 = (t.double() for t in (q, k, v))
    oracle, naive, actual = run(reference, q64, k64, v64), run(reference, q, k, v), run(ours, q, k, v)
    terms = lse_term_scales(q64, k64, v64, mask, d_out.double(), d_lse.double(), None)
    for part, a, o, n in zip(("dq", "dk", "dv"), actual, oracle, naive):
        assert_within_reference_error(a, o, n, C_GRAD, f"backend={kernel_name},gqa={h_q}/{h_kv},dtype=float32,{part},"
                                      "loss through lse", floor_ulps=FLOOR_ULPS, scale=terms[part],
                                      extra_floor=recompute_floor(terms, part))
