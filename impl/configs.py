"""Model configurations: the LLaMA 3 8B example of index.txt lines 138-144.

The index states 32 layers, d_model = 4096, 32 query heads and 8 key/value heads, d_ff = 14336 and
RoPE base 500000. It states neither the vocabulary size nor whether the embedding and the LM head
are tied: both are assumptions here, taken from Meta's release (Meta-Llama-3-8B ``config.json``:
``vocab_size`` 128256, ``tie_word_embeddings`` false; the model card's "8.03B" parameters).
"""
from __future__ import annotations

from dataclasses import dataclass

from impl import param_counts


@dataclass(frozen=True)
class DecoderConfig:
    """A bias-free pre-norm RMSNorm + GQA + SwiGLU decoder (:class:`impl.blocks.DecoderOnlyModel`)."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab_size: int
    tie_embeddings: bool
    rope_base: float

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def n_params(self) -> int:
        """Total parameters by formula (:func:`impl.param_counts.decoder_only_model_params`)."""
        return param_counts.decoder_only_model_params(self.vocab_size, self.d_model, self.n_layers, self.n_heads,
                                                      self.n_kv_heads, self.d_ff, self.tie_embeddings)

    def model_kwargs(self) -> dict:
        """Keyword arguments of :class:`impl.blocks.DecoderOnlyModel`."""
        return dict(vocab_size=self.vocab_size, d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads,
                    n_kv_heads=self.n_kv_heads, d_ff=self.d_ff, tie_embeddings=self.tie_embeddings)


# index.txt lines 140-144; vocab_size and tie_embeddings are the assumptions stated above.
LLAMA3_8B = DecoderConfig(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_ff=14336,
                          vocab_size=128_256, tie_embeddings=False, rope_base=500_000.0)

# The model card's figure (huggingface.co/meta-llama/Meta-Llama-3-8B: "8.03B" parameters).
LLAMA3_8B_PUBLISHED_BILLIONS = 8.03
