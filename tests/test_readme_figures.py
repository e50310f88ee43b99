"""The figures docs/pages.md quotes (they left the README for it), re-measured on the inputs it names (bundled model)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from core.model.inference import analyze
from core.teaching.examples import BANK_MONEY, BANK_RIVER

PAGES_DOC = (Path(__file__).resolve().parent.parent / "docs" / "pages.md").read_text(encoding="utf-8")
PAGES_FLAT = re.sub(r"\s+", " ", PAGES_DOC)

pytestmark = pytest.mark.integration


def quoted(text: str) -> bool:
    return re.sub(r"\s+", " ", text) in PAGES_FLAT


def test_inputs_are_named():
    assert quoted(f'text "{BANK_RIVER}" the share of attention on [CLS]/[SEP]')
    assert quoted("on all-MiniLM-L6-v2 and the sample corpus (mean pooling)")


def test_drift_and_self_similarity_figures(bundled):
    from core.representations.contextuality import contextuality
    from core.representations.corpus import sample_corpus
    from core.representations.drift import baseline_table, embed_corpus

    docs = [d.text for d in sample_corpus()]
    pooled = baseline_table(embed_corpus(bundled, docs))["anisotropy"]
    assert quoted(f"{pooled.iloc[0]:.3f} at hidden state 1 and {pooled.iloc[-1]:.3f} at hidden state 6")
    context = contextuality(bundled, docs)
    table = context.table
    assert quoted(f"random words from different documents have {table['anisotropy'].iloc[1]:.3f} and {table['anisotropy'].iloc[-1]:.3f}")
    assert quoted(f"({context.num_words} words, {context.num_sentences} sentences)")
    assert quoted(f"goes from {table['self_similarity'].iloc[0]:.3f} at hidden state 0")
    assert quoted(f"to {table['self_similarity'].iloc[-1]:.3f} at hidden state 6, and to {table['self_similarity_adjusted'].iloc[-1]:.3f} "
                  f"above the {table['anisotropy'].iloc[-1]:.3f} baseline")


def test_attention_figures_on_the_named_text(bundled):
    from core.attention_heads.attention import norm_weighted, special_share
    from core.teaching.about import model_facts, neighbour_sink_sentence

    analysis = analyze(bundled, BANK_RIVER)
    facts = model_facts(bundled, analysis)
    assert quoted(f"its [CLS] receives {facts.received[0]:.2f} of all attention")
    assert quoted(f"and [SEP] {facts.received[-1]:.2f}")
    raw = special_share(analysis.attentions, analysis.special_mask)
    weighted = special_share(norm_weighted(bundled, analysis), analysis.special_mask)
    assert quoted(f"{raw.min() * 100:.0f}–{raw.max() * 100:.0f} % (raw) to {weighted.min() * 100:.0f}–{weighted.max() * 100:.0f} % (norm-weighted)")
    sentence = neighbour_sink_sentence(analysis)
    numbers = re.findall(r"(\d+)%", sentence)
    assert quoted(f"{numbers[0]} % of tokens attend most to themselves or a neighbour in layer 0 and {numbers[1]} % in layer 5")
    assert quoted(f"{numbers[2]} % attend most to a special token in layer 0 and {numbers[3]} % in layer 5")


def test_compare_control_figures(bundled):
    from core.representations.compare import SAME_SENSE_CONTROL, word_similarity

    a, b, c = (analyze(bundled, t) for t in (BANK_RIVER, BANK_MONEY, SAME_SENSE_CONTROL))
    cross = word_similarity(a, b, "bank")["cosine_similarity"].to_numpy()
    control = word_similarity(a, c, "bank")["cosine_similarity"].to_numpy()
    assert quoted(" → ".join(f"{x:.3f}" for x in cross[1:-1]))
    assert quoted(f"read the cross-sense {cross[-1]:.3f} against the control's {control[-1]:.3f}")
    assert quoted(f'(by default "{SAME_SENSE_CONTROL}")')


def test_senses_figures(bundled):
    from core.representations.senses import builtin_set, knn_chance_level, occurrence_embeddings, separation

    sentences, senses = builtin_set("bank")
    occ = occurrence_embeddings(bundled, sentences, "bank")
    labels = [senses[i] for i in occ.sentence_ids]
    table = separation(occ.vectors, labels)
    assert quoted(f"{knn_chance_level(labels):.2f} for 12 + 12")
    assert quoted(f"silhouette {table['silhouette'].iloc[0]:.2f}".replace("-", "−"))
    late = table["knn_accuracy"].iloc[1:]
    assert quoted(f'"bank" reaches {late.min():.2f}–{late.max():.2f} from hidden state 1 on')
    peak = int(table["silhouette"].idxmax())
    assert quoted(f"silhouette up to {table['silhouette'].max():.2f} (hidden state {peak})")
    assert np.isfinite(table["knn_accuracy"]).all()


def test_senses_layer_zero_figure(bundled):
    from core.representations.senses import builtin_set, occurrence_embeddings, separation

    sentences, senses = builtin_set("bat")
    occ = occurrence_embeddings(bundled, sentences, "bat")
    table = separation(occ.vectors, [senses[i] for i in occ.sentence_ids])
    assert quoted(f"every built-in word has 1-NN accuracy {table['knn_accuracy'].iloc[0]:.2f} there")
    late = table["knn_accuracy"].iloc[1:]
    assert quoted(f'"bat" is the hardest, {late.min():.2f}–{late.max():.2f}')


def test_readme_notebook_example(bundled):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    analysis = analyze(bundled, BANK_RIVER)
    assert f'analyze(model, "{BANK_RIVER}")' in readme
    assert f"a.attentions.shape     # {analysis.attentions.shape}" in readme
    assert f"a.hidden_states.shape  # {analysis.hidden_states.shape}" in readme
    first, last = analysis.tokens[:4], analysis.tokens[-1]
    assert f"a.tokens               # [{', '.join(repr(t) for t in first)}, ..., {last!r}]" in readme
    assert analysis.special_mask.tolist() == [t in ("[CLS]", "[SEP]") for t in analysis.tokens]
