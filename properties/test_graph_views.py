"""GNN versus Transformer graphs (linear-algebra.txt lines 394-407): what is static in a GNN.

The document contrasts a GNN, whose graph is "static (given by the input)", with a Transformer, whose
graph is "dynamic (built adaptively by attention)". Its own GNN update (line 398) carries edge weights
alpha_ij over the neighbourhood N(i). In a graph convolution (GCN, Kipf & Welling 2017) alpha is the
normalised adjacency D^-1/2 (A + I) D^-1/2, fixed by the graph; in a graph attention layer (GAT,
Velickovic et al. 2018) alpha_ij = softmax over j in N(i) of LeakyReLU(a^T [W h_i || W h_j]), recomputed
from the node features like attention weights, while the neighbourhood N(i) stays the given one.
Both layers are written out here from those formulas; nothing is trained.
"""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

from claimcheck import claim_assert, control, record, refutes

PATH3 = torch.tensor([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=torch.float64)  # the path 1 - 2 - 3


def _gcn_weights(adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """GCN edge weights D^-1/2 (A + I) D^-1/2: a function of the graph alone (h is ignored)."""
    a = adj + torch.eye(adj.shape[0], dtype=adj.dtype)
    d = a.sum(-1).rsqrt()
    return d[:, None] * a * d[None, :]


def _gat_weights(adj: torch.Tensor, h: torch.Tensor, w: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
    """GAT edge weights: softmax over j in N(i) (with self-loops) of LeakyReLU_0.2(a^T [W h_i || W h_j])."""
    z = h @ w.T
    k = w.shape[0]
    logits = F.leaky_relu((z @ att[:k])[:, None] + (z @ att[k:])[None, :], 0.2)
    mask = (adj + torch.eye(adj.shape[0], dtype=adj.dtype)) > 0
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


@pytest.mark.claim("attention.la-gnn-static-vs-transformer-dynamic-graph")
@refutes(reason="the path graph on 3 nodes, the smallest graph whose middle node has two neighbours, one GAT layer "
                "with W = I (2-d features) and a = (1, 0, 1, 0); two feature sets that differ at node 3 only")
def test_gnn_edge_weights_are_fixed_by_the_input_graph():
    w, att = torch.eye(2, dtype=torch.float64), torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    h = torch.zeros(3, 2, dtype=torch.float64)
    moved = h.clone()
    moved[2, 0] = 1.0
    before, after = _gat_weights(PATH3, h, w, att), _gat_weights(PATH3, moved, w, att)
    record("GAT weights of node 2 on nodes 1, 2, 3", {"before": before[1].tolist(), "after": after[1].tolist()})
    # before: logits 0 on all three edges of node 2, so 1/3 each; after: node 3's logit is 1 -> e/(e + 2) = 0.58
    claim_assert(torch.equal(before, after), "the same graph, different node features: a graph-attention GNN "
                 "reweights its edges like a Transformer does", before=before, after=after)


@pytest.mark.claim("attention.la-gnn-static-vs-transformer-dynamic-graph")
@pytest.mark.parametrize("fixed_layer", [pytest.param("gcn", id="gcn-fixed"), pytest.param(
    "gat", id="gat-fixed", marks=control("a graph-attention layer taken to weight its edges by the graph alone, as the "
                                         "claim takes every GNN", models="attention.la-gnn-static-vs-transformer-dynamic-graph"))])
@given(n=st.integers(2, 7), seed=st.integers(0, 2**16))
@example(n=3, seed=0)  # a graph with edges, so a feature-dependent weighting shows (an edgeless one has only self-loops)
@settings(max_examples=30)
def test_gnn_neighbourhoods_are_given_and_only_graph_attention_reweights_them(fixed_layer, n, seed):
    gen = torch.Generator().manual_seed(seed)
    adj = (torch.rand((n, n), generator=gen) < 0.5).double().triu(1)
    adj = adj + adj.T
    h, moved = torch.randn((n, 3), generator=gen, dtype=torch.float64), torch.randn((n, 3), generator=gen, dtype=torch.float64)
    w, att = torch.randn((3, 3), generator=gen, dtype=torch.float64), torch.randn((6,), generator=gen, dtype=torch.float64)
    neighbours = (adj + torch.eye(n, dtype=torch.float64)) > 0
    # GCN: the weights are the graph's, whatever the features (the same arithmetic: bit-for-bit equal)
    fixed = _gcn_weights if fixed_layer == "gcn" else lambda adj, feats: _gat_weights(adj, feats, w, att)
    claim_assert(torch.equal(fixed(adj, h), fixed(adj, moved)), "GCN weights depend on the features", layer=fixed_layer)
    for feats in (h, moved):
        g = _gat_weights(adj, feats, w, att)
        # GAT: every weight off the given neighbourhood is exactly 0 (exp(-inf)), rows sum to 1 up to n roundings
        claim_assert(bool((g[~neighbours] == 0).all()) and (g.sum(-1) - 1).abs().max().item() <= 4 * n * 2.0**-52,
                     "GAT put weight outside the given neighbourhood", adj=adj, weights=g)
