"""Seeded tasks: copy, associative recall, modular addition, a bigram chain, and the documents' own text.

Each task is a function ``(generator, batch, ...) -> (ids (B, n), targets (B, n))`` of next-token
prediction; ``targets`` is ``-100`` (ignored by ``cross_entropy``) where no answer is scored. The
``generator`` is a ``torch.Generator`` seeded by the caller, so a batch is a pure function of the seed.
Vocabularies keep token 0 as a separator / beginning-of-sequence token.
"""
from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

IGNORE = -100
Batch = tuple[torch.Tensor, torch.Tensor]


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def copy_task(g: torch.Generator, batch: int, seq_len: int, vocab: int) -> Batch:
    """``[0, x_1..x_m, 0, x_1..x_m]`` with ``m = (seq_len - 2) // 2``: the second half is scored."""
    m = (seq_len - 2) // 2
    x = torch.randint(1, vocab, (batch, m), generator=g)
    sep = torch.zeros(batch, 1, dtype=torch.long)
    ids = torch.cat([sep, x, sep, x], dim=1)  # (B, 2m + 2)
    targets = torch.full_like(ids, IGNORE)
    targets[:, m + 1:-1] = ids[:, m + 2:]  # after the second separator, predict the copy
    return ids, targets


def associative_recall(g: torch.Generator, batch: int, seq_len: int, vocab: int) -> Batch:
    """Pairs ``k_1 v_1 .. k_p v_p`` then a query key ``k_j``: the next token must be ``v_j`` (scored alone).

    Keys come from ``1 .. vocab/2 - 1`` without repetition within a sequence, values from ``vocab/2 .. vocab - 1``.
    """
    half = vocab // 2
    pairs = (seq_len - 1) // 2
    if pairs > half - 1:
        raise ValueError(f"{pairs} distinct keys do not fit in a key vocabulary of {half - 1}")
    keys = torch.stack([torch.randperm(half - 1, generator=g)[:pairs] + 1 for _ in range(batch)])  # (B, p)
    values = torch.randint(half, vocab, (batch, pairs), generator=g)
    pick = torch.randint(0, pairs, (batch,), generator=g)
    rows = torch.arange(batch)
    ids = torch.cat([torch.stack([keys, values], dim=2).reshape(batch, -1), keys[rows, pick][:, None]], dim=1)
    targets = torch.full_like(ids, IGNORE)
    targets[:, -1] = values[rows, pick]
    return ids, targets


def modular_addition(g: torch.Generator, batch: int, p: int) -> Batch:
    """``[a, b, p] -> (a + b) mod p``: vocabulary ``p + 1`` (token ``p`` is '='); only the answer is scored."""
    a, b = torch.randint(0, p, (batch,), generator=g), torch.randint(0, p, (batch,), generator=g)
    ids = torch.stack([a, b, torch.full_like(a, p)], dim=1)  # (B, 3)
    targets = torch.full_like(ids, IGNORE)
    targets[:, -1] = (a + b) % p
    return ids, targets


def markov_text(g: torch.Generator, batch: int, seq_len: int, vocab: int, table_seed: int = 0) -> Batch:
    """A stand-in corpus: a fixed sparse random bigram chain (3 successors per token), every position scored.

    A synthetic "language" whose next-token loss has a known floor (``log 3`` nats).
    """
    table = torch.randint(1, vocab, (vocab, 3), generator=torch.Generator().manual_seed(table_seed))
    ids = torch.empty(batch, seq_len, dtype=torch.long)
    ids[:, 0] = torch.randint(1, vocab, (batch,), generator=g)
    for t in range(1, seq_len):
        ids[:, t] = table[ids[:, t - 1], torch.randint(0, 3, (batch,), generator=g)]
    targets = torch.full_like(ids, IGNORE)
    targets[:, :-1] = ids[:, 1:]
    return ids, targets


SOURCES = Path(__file__).resolve().parents[1] / "sources"


@functools.lru_cache(maxsize=None)
def corpus(vocab: int) -> torch.Tensor:
    """The four documents (``sources/*.txt``) as character ids: the ``vocab - 1`` most frequent characters
    get ids ``1..vocab-1`` (by frequency, ties by code point), every other character id 0. The small text
    corpus the repository ships (no package in the environment ships one)."""
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(SOURCES.glob("*.txt")))
    counts = Counter(text)
    ranked = sorted(counts, key=lambda ch: (-counts[ch], ord(ch)))[: vocab - 1]
    index = {ch: i + 1 for i, ch in enumerate(ranked)}
    return torch.tensor([index.get(ch, 0) for ch in text], dtype=torch.long)


def document_text(g: torch.Generator, batch: int, seq_len: int, vocab: int) -> Batch:
    """Random windows of :func:`corpus`, every position but the last scored (next character)."""
    ids_all = corpus(vocab)
    start = torch.randint(0, ids_all.numel() - seq_len, (batch,), generator=g)
    ids = torch.stack([ids_all[s:s + seq_len] for s in start.tolist()])  # (B, n)
    targets = torch.full_like(ids, IGNORE)
    targets[:, :-1] = ids[:, 1:]
    return ids, targets


@dataclass(frozen=True)
class Task:
    """A named task with its vocabulary: ``sample(g, batch, seq_len)`` draws one batch."""

    name: str
    vocab: int
    sample: Callable[[torch.Generator, int, int], Batch]


def copy(vocab: int = 16) -> Task:
    return Task("copy", vocab, lambda g, b, n: copy_task(g, b, n, vocab))


def recall(vocab: int = 32) -> Task:
    return Task("associative-recall", vocab, lambda g, b, n: associative_recall(g, b, n, vocab))


def modular(p: int = 23) -> Task:
    return Task(f"mod-{p}-addition", p + 1, lambda g, b, n: modular_addition(g, b, p))


def text(vocab: int = 32) -> Task:
    return Task("markov-text", vocab, lambda g, b, n: markov_text(g, b, n, vocab))


def documents(vocab: int = 128) -> Task:
    return Task("document-text", vocab, lambda g, b, n: document_text(g, b, n, vocab))
