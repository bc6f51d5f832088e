"""Section titles of the plain-text documents (claimcheck.sources.headings), for the coverage table."""
from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.sources import headings, load_sources

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def docs():
    return load_sources(REPO).documents


def titles(doc):
    return {h.title: h for h in doc.headings}


@pytest.mark.parametrize("key, title, level", [
    ("foundations", "Self-Attention机制", 0),
    ("foundations", "核心公式", 0),
    ("foundations", "Step 3：缩放", 0),
    ("foundations", "为什么需要缩放？", 0),
    ("foundations", "Rotary Position Embedding (RoPE)", 0),
    ("foundations", "第12章：QK 特征谱局部化理论 (ICLR 2026)", 1),
    ("foundations", "13.4.1 渐近正交性", 3),
    ("linear-algebra", "三、低秩分解与近似", 1),
    ("linear-algebra", "2.3 缩放因子的必要性", 2),
    ("spectral", "3. Rank Collapse 现象", 1),
    ("spectral", "2.1 基本谱定理", 2),
    ("index", "核心公式速查", 0),
    ("index", "2025 关键论文", 0),  # a year, not a section number
])
def test_real_section_titles_are_found(docs, key, title, level):
    found = titles(docs[key])
    assert title in found, f"{title!r} not found among the headings of {key}"
    assert found[title].level == level
    assert docs[key].lines[found[title].line - 1].strip() == title


@pytest.mark.parametrize("key, line", [
    ("foundations", "import torch"),
    ("foundations", "def stable_softmax(logits, dim=-1):"),
    ("foundations", "probs = F.softmax(logits, dim=-1)"),
    ("foundations", "标准Scaled Dot-Product Attention定义为："),  # introduces a formula
    ("foundations", "Softmax\t$O(n^2)$\t$O(n^2)$"),  # a table row
    ("foundations", "ACL Anthology: 2025.emnlp-main.561"),
    ("spectral", "1. Rank Collapse：长上下文中注意力矩阵退化为接近均匀"),  # a list item
    ("spectral", "6. Foret et al. (2021) — SAM (Sharpness-Aware Minimization)"),  # a reference
    ("spectral", "---"),
])
def test_code_table_rows_list_items_and_references_are_not_titles(docs, key, line):
    assert line not in titles(docs[key])


def test_heading_of_gives_the_section_in_force(docs):
    doc = docs["spectral"]
    assert doc.heading_of(35) == "2.1 基本谱定理"
    assert doc.heading_of(30) == "2.1 基本谱定理"
    assert doc.heading_of(29) == "2. 注意力矩阵的谱性质"


def test_every_document_has_a_plausible_number_of_sections(docs):
    for key, doc in docs.items():
        found = doc.headings
        assert 20 <= len(found) <= len(doc.lines) // 5, key
        assert [h.line for h in found] == sorted({h.line for h in found}), key


def test_synthetic_document():
    lines = ["Title", "", "第1章：开始", "", "A sentence that ends with a period.", "", "1.1 小节", "",
             "1. first item", "2. second item", "", "x = f(y)", "", "    indented code", "", "Ein Abschnitt", ""]
    assert [(h.line, h.title, h.level) for h in headings(lines)] == [
        (1, "Title", 0), (3, "第1章：开始", 1), (7, "1.1 小节", 2), (16, "Ein Abschnitt", 0)]
