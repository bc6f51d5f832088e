"""The multi-head parameter table of foundations.txt lines 123-129 (d_model=512, h=8, d_k=d_v=64).

Every figure is compared with parameters counted on a real module, ``torch.nn.MultiheadAttention``.
"""
import pytest
import torch

from claimcheck import claim_assert, control, refutes

D_MODEL, H = 512, 8
D_K = D_V = D_MODEL // H


def _module(h: int = H) -> torch.nn.MultiheadAttention:
    return torch.nn.MultiheadAttention(D_MODEL, h, bias=True)


def _counts() -> dict[str, int]:
    m = _module()
    return {
        "qkv_weights": m.in_proj_weight.numel(),  # W_Q, W_K, W_V of all heads, stacked
        "qkv_biases": m.in_proj_bias.numel(),
        "out_weights": m.out_proj.weight.numel(),
        "out_biases": m.out_proj.bias.numel(),
        "total": sum(p.numel() for p in m.parameters()),
    }


@pytest.mark.claim("multi-head.param-count-wqkv-formula")
@pytest.mark.parametrize("formula", [pytest.param(3 * H * D_MODEL * D_K, id="3h*d_model*d_k"), pytest.param(
    3 * D_MODEL * D_K, id="3d_model*d_k", marks=control("the factor h dropped: 3 d_model d_k"))])
def test_qkv_projection_weights_number_3_h_dmodel_dk(formula):
    counted = _counts()["qkv_weights"]
    claim_assert(counted == formula, "3 h d_model d_k does not count the W_Q, W_K, W_V weights",
                 counted=counted, formula=formula)


@pytest.mark.claim("multi-head.param-count-wqkv-value")
@refutes(reason="the document's own configuration (d_model=512, h=8, d_k=64); the count is exact, so one "
                "configuration suffices")
def test_qkv_projection_weights_are_98304():
    counted = _counts()["qkv_weights"]
    claim_assert(counted == 98_304, "W_Q^i, W_K^i, W_V^i of all heads do not hold 98,304 weights",
                 counted=counted, printed_product="3 x 512 x 64 = 98,304 (the factor h = 8 is dropped)")


@pytest.mark.claim("multi-head.param-count-wqkv-value")
@pytest.mark.parametrize("figure", [pytest.param(786_432, id="786432"), pytest.param(
    98_304, id="98304", marks=control("the printed figure 3 x 512 x 64 = 98,304, the factor h = 8 dropped",
                                      models="multi-head.param-count-wqkv-value"))])
def test_qkv_projection_weights_are_786432(figure):
    counts = _counts()
    claim_assert(counts["qkv_weights"] == figure, "the corrected figure 3 x 8 x 512 x 64 = 786,432 is wrong",
                 counted=counts["qkv_weights"], figure=figure)
    # one head's W_Q^i, W_K^i, W_V^i are d_k rows each of the stacked (3 d_model, d_model) weight: 3 x 64 x 512
    one_head = _module().in_proj_weight.view(3, H, D_K, D_MODEL)[:, 0].numel()
    claim_assert(one_head == 98_304 and counts["qkv_biases"] == 1_536,
                 "98,304 is not one head's count, or the biases are not 3 x 512", one_head=one_head,
                 biases=counts["qkv_biases"])


@pytest.mark.claim("multi-head.param-count-wo")
@pytest.mark.parametrize("stated", [pytest.param((H, 262_144), id="8x64x512"), pytest.param(
    (1, 32_768), id="64x512", marks=control("the factor h dropped: d_v x d_model = 32,768"))])
def test_output_projection_weights_are_262144(stated):
    heads, figure = stated
    counted = _counts()["out_weights"]
    claim_assert(counted == heads * D_V * D_MODEL == figure, "W^O does not hold 8 x 64 x 512 = 262,144 weights",
                 counted=counted)


@pytest.mark.claim("multi-head.param-total-360k")
@refutes(reason="the document's own configuration; exact count of a real module")
def test_total_is_about_360k():
    total = _counts()["total"]
    claim_assert(abs(total - 360_000) <= 0.05 * 360_000, "the module does not have about 360K parameters",
                 counted_total=total, weights=4 * D_MODEL * D_MODEL, biases=4 * D_MODEL)


@pytest.mark.claim("multi-head.param-total-360k")
@pytest.mark.parametrize("stated", [pytest.param(1_050_624, id="4d^2+4d"), pytest.param(
    98_304 + 262_144, id="360K", marks=control("the document's total, 98,304 + 262,144 = 360,448",
                                               models="multi-head.param-total-360k"))])
def test_total_is_4_dmodel_squared_plus_biases(stated):
    c = _counts()
    claim_assert(c["total"] == 4 * D_MODEL**2 + 4 * D_MODEL == stated, "total is not 4 d^2 + 4 d", stated=stated, **c)


@pytest.mark.claim("multi-head.param-comparable-single-head")
@refutes(reason="the document's own configuration; exact counts")
def test_multi_head_total_is_comparable_to_one_512_by_512_matrix():
    total = _counts()["total"]
    claim_assert(total <= 1.5 * 512 * 512, "multi-head attention is not comparable to one 512 x 512 matrix (262K)",
                 counted_total=total, ratio=total / (512 * 512))


@pytest.mark.claim("multi-head.param-comparable-single-head")
@pytest.mark.parametrize("single_head", [
    pytest.param(lambda: sum(p.numel() for p in torch.nn.MultiheadAttention(D_MODEL, 1, bias=True).parameters()),
                 id="full-width-head"),
    pytest.param(lambda: 512 * 512, id="one-512x512-matrix", marks=control(
        "one 512 x 512 matrix (262,144) as the single head's count, as the claim has it",
        models="multi-head.param-comparable-single-head"))])
def test_multi_head_has_exactly_the_parameters_of_full_width_single_head_attention(single_head):
    multi = sum(p.numel() for p in _module().parameters())
    single = single_head()
    claim_assert(multi == single, "h heads of width d/h and one head of width d differ in parameters",
                 multi=multi, single=single)


@pytest.mark.claim("multi-head.config-512-8-dk-64")
@pytest.mark.parametrize("h", [pytest.param(H, id="8-heads"), pytest.param(
    16, id="16-heads", marks=control("16 heads: d_model / h = 32, not 64"))])
def test_example_configuration_has_d_k_equal_d_model_over_h(h):
    m = _module(h)
    claim_assert(D_MODEL % h == 0 and D_MODEL // h == 64 == m.head_dim, "d_k = d_v = d_model / h does not give 64",
                 d_model=D_MODEL, h=h, head_dim=m.head_dim)
