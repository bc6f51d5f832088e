"""A kernel's calling conventions where they differ from the contract, declared and applied around it.

The contract of :func:`impl.attention.attention` is one convention among several that real kernels
use. ``claims kernel`` takes the others as declarations (options, or keys of ``claims_capabilities``)
and applies them around the user's function, so that an adapter needs none of these lines:

=============  ==========================  ===============================================================
declaration    values                      applied around the function
=============  ==========================  ===============================================================
``layout``     ``bhsd`` (the contract's),  q, k, v passed as (B, n, H, d) (flash-attn, ``nn.MultiheadAttention``
               ``bshd``                    with ``batch_first``); the output read back the same way
``out_layout`` ``bhsd``, ``bshd``          the output's own layout when it differs from the inputs' (every
               (default: ``layout``)       attention function of transformers takes BHSD and returns BSHD)
``padding``    ``true-means-keep`` (the    the boolean key padding passed as given, or inverted (True = this
               contract's),                key is padding, ignore it: ``nn.MultiheadAttention``'s
               ``true-means-ignore``       ``key_padding_mask``)
``output``     an index N (default: none:  the function returns a tuple (or list), element N of it is the
               a tensor)                   attention output (``(out, weights)``, ``(out, lse)``)
``strided``    True (default), False       False: the kernel needs contiguous q, k, v; the non-contiguous
                                           problems are listed as outside its declaration, never run
=============  ==========================  ===============================================================

Nothing is guessed: an undeclared convention is the contract's, and the command says so on its
capability line (``layout bhsd (not declared: the contract's)``). When a problem fails or the kernel
crashes, :func:`alternatives` gives the same function under each other convention, so that the
verdict can name the declaration that would make it right (``--layout bshd``).

Non-contiguous inputs (:func:`strided_views`) are part of the contract, not a declaration: every case
sees q, k, v as transposed views of (B, n, H, d) storage and as views of one packed (B, n, 3, H, d)
QKV tensor, the last dimension contiguous in both (as every fused kernel requires).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch

LAYOUTS = ("bhsd", "bshd")
PADDINGS = ("true-means-keep", "true-means-ignore")
STRIDES = ("bshd", "packed", "head-dim")  # ProblemSpec.strides: how the non-contiguous problems lay out q, k, v
KEYS = ("layout", "out_layout", "padding", "output", "strided")  # the capability keys this module reads
_SHAPES = {"bhsd": "(B, H, n, d)", "bshd": "(B, n, H, d)"}


@dataclass(frozen=True)
class Conventions:
    """How a kernel is called, where it differs from the contract (see the module's table)."""

    layout: str = "bhsd"
    out_layout: str | None = None  # None: the layout of the inputs
    padding: str = "true-means-keep"
    output: int | None = None  # the index of the attention output in a returned tuple; None: a tensor
    strided: bool = True
    declared: frozenset = frozenset()  # the keys given (the others are the contract's, and said to be)

    @property
    def returns(self) -> str:
        return self.out_layout or self.layout

    @classmethod
    def from_declaration(cls, declared: dict[str, Any]) -> "Conventions":
        """The conventions of ``declared`` (capabilities after options), ``ValueError`` naming a bad value."""
        given = {k: declared[k] for k in KEYS if declared.get(k) is not None}
        for key in ("layout", "out_layout"):
            if key in given and given[key] not in LAYOUTS:
                raise ValueError(f"{key}={given[key]!r}: expected one of {', '.join(LAYOUTS)} (bhsd: q (B, H, n, d), "
                                 "the contract's; bshd: q (B, n, H, d), as flash-attn takes it)")
        if "padding" in given and given["padding"] not in PADDINGS:
            raise ValueError(f"padding={given['padding']!r}: expected true-means-keep (key_padding True = attend to "
                             "this key, the contract's) or true-means-ignore (True = padding, as "
                             "nn.MultiheadAttention's key_padding_mask)")
        output = given.get("output")
        if output is not None and (isinstance(output, bool) or not isinstance(output, int) or output < 0):
            raise ValueError(f"output={output!r}: expected the index (0, 1, ...) of the attention output in the "
                             "tuple the kernel returns")
        if "strided" in given and not isinstance(given["strided"], bool):
            raise ValueError(f"strided={given['strided']!r}: expected True (takes non-contiguous q, k, v) or False")
        return cls(**given, declared=frozenset(given))

    def describe(self) -> str:
        """The capability line's part: every convention, declared or the contract's (never silent)."""
        def said(key: str, text: str) -> str:
            return text if key in self.declared else f"{text} (not declared: the contract's)"

        out = said("layout", f"layout {self.layout}")
        if self.out_layout is not None and self.out_layout != self.layout:
            out += f", output {self.out_layout}"
        out += "; " + said("padding", "key padding True = " + ("attend" if self.padding == PADDINGS[0] else "ignore"))
        out += "; output " + (f"element {self.output} of a tuple" if self.output is not None
                              else "a tensor (not declared: the contract's)")
        out += "; non-contiguous q, k, v " + ("checked (problems non-contiguous, packed-qkv, strided-head-dim)" if self.strided
                                             else "not checked (declared contiguous only)")
        return out

    def options(self) -> str:
        """The ``claims kernel`` options that declare these conventions (for a repro line)."""
        parts = []
        if self.layout != "bhsd":
            parts.append(f"--layout {self.layout}")
        if self.out_layout is not None and self.out_layout != self.layout:
            parts.append(f"--out-layout {self.out_layout}")
        if self.padding != PADDINGS[0]:
            parts.append(f"--padding {self.padding}")
        if self.output is not None:
            parts.append(f"--output-index {self.output}")
        return " ".join(parts)


CONTRACT = Conventions()


class Adapted:
    """``fn`` called with the contract's arguments: q, k, v (B, H, n, d) and a Mask whose key padding is
    True = attend, turned into ``conventions``; its output turned back into a (B, H_q, n_q, d_v) tensor."""

    def __init__(self, fn: Callable, conventions: Conventions, name: str):
        self.fn, self.conventions, self.name = fn, conventions, name
        self.__name__ = getattr(fn, "__name__", name)

    def __call__(self, q, k, v, scale=None, mask=None, **feature):
        """``feature``: the keyword arguments of a call feature (claimcheck.kernel_features), passed on; packed
        sequences (``cu_seqlens_q``) are (total, H, d) in every layout, and ``return_lse`` returns ``(out, lse)``."""
        c = self.conventions
        packed = "cu_seqlens_q" in feature
        if c.layout == "bshd" and not packed:
            q, k, v = (to_other_layout(t) for t in (q, k, v))
        if c.padding == "true-means-ignore" and mask is not None and mask.key_padding is not None:
            mask = dataclasses.replace(mask, key_padding=~mask.key_padding)
        got = self.fn(q, k, v, scale, mask, **feature)
        if feature.get("return_lse") and isinstance(got, (tuple, list)) and len(got) == 2:
            out, lse = got
            return (out.transpose(1, 2) if c.returns == "bshd" and isinstance(out, torch.Tensor) and out.dim() == 4
                    else out), lse
        if isinstance(got, (tuple, list)):
            if c.output is None:
                raise TypeError(f"{self.name} returned a {type(got).__name__} of {len(got)}, not a tensor: declare "
                                "which element is the attention output (--output-index N, or 'output': N in "
                                "claims_capabilities)")
            if c.output >= len(got):
                raise TypeError(f"{self.name} returned a {type(got).__name__} of {len(got)}; the declared output "
                                f"index {c.output} is past its end")
            got = got[c.output]
        elif c.output is not None:
            raise TypeError(f"{self.name} returned a {type(got).__name__}, not the tuple its declared output index "
                            f"{c.output} reads (declare no output index for a function that returns the tensor)")
        if c.returns == "bshd" and isinstance(got, torch.Tensor) and got.dim() == 4 and not packed:
            got = got.transpose(1, 2)
        return got


def adapt(fn: Callable, conventions: Conventions, name: str) -> Adapted:
    return Adapted(fn, conventions, name)


def of(fn: Callable) -> Conventions:
    """The conventions ``fn`` is called under (the contract's for a registry backend)."""
    return fn.conventions if isinstance(fn, Adapted) else CONTRACT


def to_other_layout(x: torch.Tensor) -> torch.Tensor:
    """(B, H, n, d) -> (B, n, H, d), keeping contiguity as it was: a contiguous input gives a contiguous
    result (what a kernel of that layout is normally handed), a non-contiguous one a non-contiguous view."""
    y = x.transpose(1, 2)
    if x.is_contiguous():
        return y.contiguous()
    return x.contiguous().transpose(1, 2) if y.is_contiguous() else y  # storage already (B, n, H, d): transposed


def alternatives(fn: Callable) -> list[tuple[str, Adapted]]:
    """``(what the kernel would take, the kernel called so)`` for each other convention, for a verdict that
    names the declaration that makes a failing kernel right. Empty for a registry backend."""
    if not isinstance(fn, Adapted):
        return []
    c, out = fn.conventions, []
    other = {"bhsd": "bshd", "bshd": "bhsd"}

    def variant(label: str, **changes) -> None:
        out.append((label, Adapted(fn.fn, dataclasses.replace(c, **changes), fn.name)))

    variant(f"q, k, v and the output in {_SHAPES[other[c.layout]]} layout ({other[c.layout]}, declared "
            f"{c.layout}: --layout {other[c.layout]})", layout=other[c.layout], out_layout=None)
    variant(f"an output in {_SHAPES[other[c.returns]]} layout ({other[c.returns]}, declared {c.returns}: "
            f"--out-layout {other[c.returns]})", out_layout=other[c.returns])
    flipped = PADDINGS[1] if c.padding == PADDINGS[0] else PADDINGS[0]
    variant(f"key padding True = {'ignore' if flipped == PADDINGS[1] else 'attend'} (declared {c.padding}: "
            f"--padding {flipped})", padding=flipped)
    for i in range(4):
        if i != c.output:
            variant(f"the attention output as element {i} of the tuple it returns (--output-index {i})", output=i)
    return out


def shape_hint(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """A wrong output shape that is the expected one with heads and positions swapped, named."""
    if len(got) == 4 and len(want) == 4 and got != want and (got[0], got[2], got[1], got[3]) == tuple(want):
        return " (heads and positions swapped: the output's layout is not the declared one; --out-layout)"
    return ""


def strided_views(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, strides: str
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v (B, H, n, d) with the same values as non-contiguous views: ``bshd``, each a transposed view of
    (B, n, H, d) storage (``x.view(B, n, H, d).transpose(1, 2)`` after a projection); ``packed``, views of one
    (B, n, 3, H, d) tensor (a fused QKV projection; needs H_q = H_kv, n_q = n_k, d_k = d_v); both with the last
    dim contiguous; ``head-dim``, views of (B, H, d, n) storage whose last dim has stride n (a transposed key
    cache): a kernel that assumes a unit stride there reads other tokens' values."""
    if strides == "bshd":
        return tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    if strides == "packed":
        if not (q.shape == k.shape == v.shape):
            raise ValueError(f"packed QKV needs q, k, v of one shape: got {tuple(q.shape)}, {tuple(k.shape)}, "
                             f"{tuple(v.shape)}")
        packed = torch.stack([t.transpose(1, 2) for t in (q, k, v)], dim=2)  # (B, n, 3, H, d)
        return tuple(packed[:, :, i].transpose(1, 2) for i in range(3))
    if strides == "head-dim":
        return tuple(t.transpose(-1, -2).contiguous().transpose(-1, -2) for t in (q, k, v))
    raise ValueError(f"strides={strides!r}: expected one of {', '.join(STRIDES)}")
