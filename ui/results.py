"""Every cached result of the app, each declared once: its kind (the shelf's name), its computation and its budget.

How a declaration works, and the turn rule, are in ``ui/store.py``. A page reads a result by calling it::

    analysis = analyses(model_name, text, max_tokens=limit)              # one Analysis per model, text and limit
    stats = head_stats(model_name, text, "attention", max_tokens=limit)  # the view's options after the text(s)

What a result is computed from goes in the ``Run`` (model, texts the model reads, token limit, knock-out); what only
selects or draws it is an option. Budgets: one 512-token analysis of a 12-layer, 12-head model holds about 150 MB of
attention (81 MB + its recorded pass of 19 MB for all-MiniLM-L6-v2; 27 MB + 27 MB for SmolLM2-135M at 128 tokens).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core.attention_heads.attention import attention_view, norm_weighted, rollout
from core.attention_heads.cross_attention import pair_attention_view
from core.attention_heads.head_statistics import analysis_statistics, corpus_statistics
from core.attention_heads.induction import induction_scores, repeat_loss
from core.attention_heads.long_attention import pooled_head, thumbnails, zoom
from core.attention_heads.long_context import long_context_profile
from core.attention_heads.neuron_view import queries_and_keys
from core.attention_heads.qk_map import query_key_map, record_corpus
from core.attention_heads.qk_map_quality import nearest_key_agreement, position_order
from core.attention_heads.retrieval import (
    answer_log_probability,
    answer_success,
    bundled_haystack,
    haystack_of_length,
    model_answer,
    retrieval_scores,
)
from core.causal import patching
from core.causal.effects import ablate_heads, head_importance
from core.causal.effects_compare import target_change
from core.causal.flow import contributions_of
from core.causal.flow_pair import PairFlow, pair_contributions_of, pair_pass
from core.causal.flow_reading import Flow, measures_of
from core.causal.flow_stack import TraceStack
from core.causal.logit_attribution import attribution_of
from core.causal.token_attribution import token_attribution
from core.maths.alignment import align_layout
from core.maths.projection import fit_projection, project
from core.model.inference import analysis_of, analyze
from core.model.recording import is_recordable
from core.model.run import Run
from core.model.seq2seq import analyze_pair, generate_target, pair_of
from core.model.text_limits import token_limit
from core.model.tokens import token_labels
from core.model.trace import record
from core.model.trace_prefix import prefix_of_text
from core.outputs.causal_lm import encode
from core.outputs.generation import generate, last_logits
from core.outputs.lens import logit_lens
from core.outputs.predictions import MAX_TOP_K, predict
from core.representations.contextuality import embed_corpus_and_contextuality
from core.representations.senses import occurrence_embeddings, separation, separation_interval
from core.teaching import about
from core.workshop.views import place_entry, previous_token_scores, room_sentences
from ui.bounded_cache import nbytes_of
from ui.models import language_model_of, loaded_model
from ui.store import Result

QK_THUMBNAIL_POINTS = 300  # queries (and as many keys) drawn per small multiple of Queries and keys


def of_model(run: Run) -> Run:
    """The run of ``run``'s model alone (no text, limit or knock-out): what is the same for every text."""
    return replace(run, texts=(), max_tokens=None, ablation=None)


# --- one text: every page ---------------------------------------------------------------------------------------------

def _whole_text(model, run: Run) -> Run:
    """``run`` without its token limit when its text (an encoder-decoder's source and target) fits under it (the same
    pass: nothing is cut), so that pages with different limits (Home the model's, Attention its own) read one trace."""
    lengths = [len(model.tokenizer(**{"text_target" if i else "text": text}, truncation=False)["input_ids"])
               for i, text in enumerate(run.texts)]
    return run if run.max_tokens is None or max(lengths) > token_limit(model, run.max_tokens) else replace(run, max_tokens=None)


def _trace(model, run: Run, progress=None):
    if run.ablation is not None:
        raise ValueError("a trace records the model as loaded; a knock-out is an intervention (core.causal.effects)")
    whole = _whole_text(model, run)  # an encoder-decoder's run: (source, target)
    if whole != run:  # the same trace as the text's without a limit (kept under both runs: one object)
        return traces.at(whole, progress=progress)
    if model.is_encoder_decoder:
        return record(model, run.texts, max_tokens=run.max_tokens, progress=progress)
    longer = traces.peek_at(replace(run, max_tokens=None)) if run.max_tokens is not None else None
    found = None if longer is None else prefix_of_text(model, longer, run.text, run.max_tokens)  # a decoder's: no pass
    return found if found is not None else record(model, run.text, max_tokens=run.max_tokens, progress=progress)


# one recorded pass per text (core.model.trace): what every read-only view of that text is computed from. SmolLM2-135M
# at 4,096 tokens holds about 300 MB (residual stream and each block's call); at 512 tokens or fewer also every
# layer's weights once a view asked for them (283 MB at 512). A page reads it through ui.trace_progress.trace_of
# (progress by layer and Stop); a result computed from it reads traces.at(run).
traces = Result("traces", _trace, entries=8, megabytes=2400, size_of=lambda trace: trace.nbytes)


def _analysis(model, run: Run):
    if run.ablation is None and is_recordable(model.model):  # read from the text's one trace (no pass of its own)
        whole = _whole_text(model, run)
        return analyses.at(whole) if whole != run else analysis_of(traces.at(run), model)
    if run.ablation is None:  # a family the app does not record: one plain pass with output_attentions
        return analyze(model, run.text, max_tokens=run.max_tokens)
    return ablate_heads(model, run.text, run.ablation.heads, method=run.ablation.method, max_tokens=run.max_tokens)


# plain runs (read from traces, whose weights they share) and knocked-out runs (an intervention: their own pass) of one
# text; a plain run's size is its own arrays (its trace is counted on the traces shelf)
analyses = Result("analyses", _analysis, entries=96, megabytes=2000, size_of=lambda analysis: analysis.nbytes)
rollouts = Result("rollouts", lambda model, run: rollout(analyses.at(run)), entries=16, megabytes=600,
                  reads="nothing", turn=False)
# A knocked-out run's norm-weighted attention is computed from that run's hidden states; a knocked-out head keeps its
# weights and value norms there (ablation removes its output, not its attention). Raises UnsupportedArchitecture.
norm_weighted_attention = Result("norm-weighted", lambda model, run: norm_weighted(model, analyses.at(run)),
                                 entries=16, megabytes=600)


def _attention_view(model, run: Run, source: str, special: str, words: bool):
    matrices = {"raw": lambda: None, "norm-weighted": lambda: norm_weighted_attention.at(run),
                "rollout": lambda: rollouts.at(run)[:, None]}[source]()
    return attention_view(analyses.at(run), matrices=matrices, special=special, words=words)


# the matrices a view shows, per (source, special tokens, word level): changing layer or head only slices them
attention_views = Result("attention-views", _attention_view, entries=8, megabytes=600, reads="nothing", turn=False)
neuron_view_queries_keys = Result("queries-keys", lambda model, run: queries_and_keys(model, analyses.at(run)),
                                  entries=8, megabytes=600)


def _head_stats(model, run: Run, weighting: str):
    matrices = norm_weighted_attention.at(run) if weighting == "norm-weighted" else None
    return analysis_statistics(analyses.at(run), model.tokenizer, matrices)


head_stats = Result("head-stats", _head_stats, entries=64, megabytes=50, turn=False)  # (table, roles)
predictions = Result("predictions", lambda lm, run: predict(lm, run.text, MAX_TOP_K, max_tokens=run.max_tokens),
                     entries=64, megabytes=400, reads="language model")
# one per model: a pass over 8 reference sentences
reference_anisotropy = Result("reference-anisotropy", lambda model, run: about.reference_anisotropy(model),
                              entries=3, megabytes=1)
model_facts = Result("model-facts", lambda model, run: about.model_facts(
    model, analyses.at(run), reference_anisotropy.at(of_model(run))), entries=32, megabytes=50, turn=False)

# figures and the tables under them: options are the figure's name and everything it is drawn with; ``build`` (not in
# the key) draws it. A figure is shared by every session: never modify it (ui.figures.fitted restyles a copy).
figures = Result("figures", lambda model, run, *options, build: build(), entries=64, megabytes=400, reads="nothing",
                 turn=False)
# a layer's heads packed for the head switch (viz.head_cells.layer_cells with its digest), sized by their codes
head_cells = Result("head-cells", lambda model, run, *options, build: build(), entries=32, megabytes=200,
                    reads="nothing", turn=False, size_of=lambda layer: sum(map(len, layer["heads"])))
# A figure pinned to the slide deck (ui.deck): the run is the model's alone, the options (page, view query, figure
# name); kept with keep_at when pinned, or when the view is drawn again from its link (compute is never asked to draw
# it: ui.view_figures draws a pin that is not kept from its link, or its view does when opened, reading the results
# above).
pinned_figures = Result("pinned-figures", lambda model, run, page, query, name, *, pinned: pinned, entries=64,
                        megabytes=200, reads="nothing", turn=False, size_of=lambda pinned: pinned.size)


# --- long texts on the Attention page: each head pooled to screen pixels, zooms, thumbnails ---------------------------

long_pooled_heads = Result("long-pooled-heads", lambda model, run, layer, head, pixels: pooled_head(
    model, analyses.at(run), layer, head, pixels), entries=600, megabytes=400)
# no model run, but read inside long_zooms' turn (see the turn rule in ui/store.py)
long_labels = Result("long-labels", lambda model, run: token_labels(analyses.at(run)), entries=16, megabytes=10,
                     reads="nothing")
long_zooms = Result("long-zooms", lambda model, run, layer, head, queries, keys: zoom(
    model, analyses.at(run), layer, head, queries, keys, long_labels.at(run)), entries=64, megabytes=100)
long_thumbnails = Result("long-thumbnails", lambda model, run, layers, how, pixels, progress=None: thumbnails(
    model, analyses.at(run), layers, how, pixels, progress), entries=16, megabytes=200)


# --- a corpus: Head statistics, Drift (500 documents × 13 hidden states × 768 dims × 4 poolings is about 80 MB) -------

corpus_head_stats = Result("corpus-head-stats", lambda model, run, progress=None: corpus_statistics(
    model, run.texts, max_tokens=run.max_tokens, progress=progress), entries=64, megabytes=50)
# (CorpusEmbeddings, Contextuality): every pooling of every hidden state and the words' self-similarity, one pass
corpus_passes = Result("corpus-passes", lambda model, run, progress=None: embed_corpus_and_contextuality(
    model, list(run.texts), max_tokens=run.max_tokens, progress=progress), entries=8, megabytes=800)


# --- causal tools: Does it matter?, Predictions' lens ---------------------------------------------------------------

def _measured_model(run: Run, measure: str):
    """The model with its language-model head for ``measure == "target"`` (raises ``NoLanguageModelHead``), else
    the base model."""
    return language_model_of(run.model) if measure == "target" else loaded_model(run.model)


head_importances = Result("head-importance", lambda model, run, measure, method, target, progress=None: head_importance(
    _measured_model(run, measure), run.text, measure=measure, method=method, target=target, progress=progress,
    max_tokens=run.max_tokens), entries=32, megabytes=400, reads="nothing")
# the run carries the knock-out: top-k predictions and log p(target) before and after it
target_changes = Result("target-changes", lambda lm, run, target, k: target_change(
    lm, run.text, run.ablation.heads, method=run.ablation.method, target=target, k=k, max_tokens=run.max_tokens),
    entries=32, megabytes=400, reads="language model")
attributions = Result("attributions", lambda model, run, method, measure, steps, target, progress=None: token_attribution(
    _measured_model(run, measure), run.text, method=method, measure=measure, steps=steps, target=target,
    max_tokens=run.max_tokens, progress=progress), entries=32, megabytes=400, reads="nothing")
logit_lenses = Result("logit-lens", lambda lm, run, k, start: logit_lens(lm, analyses.at(run), k=k, start=start),
                      entries=32, megabytes=400, reads="language model")


# --- language-model tools: next-token logits, generation, patching, direct logit attribution, induction --------------

next_token_logits = Result("next-logits", lambda lm, run: last_logits(lm, encode(lm, run.text, run.max_tokens)),
                           entries=64, megabytes=50, reads="language model")
# options: the generate keyword arguments as sorted (name, value) pairs; a generation written a chunk at a time (with
# Stop) is kept here by ui.lm_writer when it is finished
generations = Result("generations", lambda lm, run, *options, progress=None: generate(
    lm, run.text, **dict(options), max_tokens=run.max_tokens, progress=progress), entries=64, megabytes=50,
    reads="language model")
PATCHERS = {"residual": patching.patch_residual, "heads": patching.patch_heads, "mlp": patching.patch_mlps}
# texts: (clean, corrupted)
patches = Result("patches", lambda lm, run, kind, answer, wrong, progress=None: PATCHERS[kind](
    lm, *run.texts, answer, wrong, progress=progress), entries=32, megabytes=100, reads="language model")

# read from the text's trace (traces: no pass where a page already holds it), asked for after the checks that need none
logit_attributions = Result("logit-attributions", lambda lm, run, answer, wrong: attribution_of(
    lm, lambda: traces.at(run), answer, wrong), entries=32, megabytes=100, reads="language model")
inductions = Result("induction-scores", lambda model, run, length, seed: induction_scores(
    model, length=length, seed=seed), entries=16, megabytes=50)  # from the trace of its repeated tokens: one pass
# (plain, knocked out): the loss on each copy of the induction test's tokens
repeat_losses = Result("repeat-losses", lambda lm, run, length, seed, heads: (
    repeat_loss(lm, inductions.at(run, length, seed)), repeat_loss(lm, inductions.at(run, length, seed), heads)),
    entries=64, megabytes=1, reads="language model")


# --- information flow: the contributions of one trace; 128 tokens of SmolLM2 ~18 MB (the trace is on its own shelf) ---

def _flow(model, run: Run, progress=None) -> Flow:
    trace = traces.at(run)
    kept = TraceStack(trace, keep=True)  # each block computed once for the shares and the measures, then let go
    found = contributions_of(kept, list(trace.tokens("self").tokens), progress)
    for array in (found.attention, found.attention_residual, found.mlp, found.mlp_residual):
        array.setflags(write=False)
    return Flow(TraceStack(trace), found, measures_of(kept, found))


flows = Result("flows", _flow, entries=8, megabytes=400,
               size_of=lambda flow: nbytes_of((flow.contributions, flow.measures)))  # the trace is counted on its shelf


def _pair_flow(model, run: Run, progress=None) -> PairFlow:
    pair = pairs.at(run)  # the pair's trace, read block by block (no pass of its own)
    recorded = pair_pass(pair.trace, model)
    found = pair_contributions_of(recorded, pair.source.tokens, pair.target.tokens, progress)
    for array in (found.attention, found.attention_residual, found.cross_attention, found.cross_residual,
                  found.mlp, found.mlp_residual):
        array.setflags(write=False)
    return PairFlow(recorded, found)


# --- encoder-decoders: texts (source, target) -----------------------------------------------------------------------

def _pair(model, run: Run):
    """The pair's one trace read (``pair_of``: no pass of its own), or a plain pass for a model the app does not record."""
    if is_recordable(model.model):
        return pair_of(traces.at(run), model)
    return analyze_pair(model, *run.texts, max_tokens=run.max_tokens)


generated_targets = Result("generated-targets", lambda model, run, progress=None: generate_target(
    model, run.text, max_tokens=run.max_tokens, progress=progress), entries=64, megabytes=10)
pairs = Result("pairs", _pair, entries=16, megabytes=1000, size_of=lambda pair: nbytes_of(
    (pair.cross_attentions, pair.source, pair.target)))  # its own arrays: the trace is counted on its shelf
pair_views = Result("pair-views", lambda model, run, stack, special, words: pair_attention_view(
    pairs.at(run), stack, special=special, words=words), entries=8, megabytes=600, reads="nothing", turn=False)
pair_flows = Result("pair-flows", _pair_flow, entries=8, megabytes=400)


# --- long context and needle in a haystack: the run is the model's alone; lengths, needles and depths are options ----

def _haystack(model, run: Run, tokens: int, room_for_special: bool) -> str:
    """The bundled haystack cut at a sentence end to at most ``tokens`` tokens (less the special tokens the tokenizer
    adds, with ``room_for_special``)."""
    added = len(model.tokenizer("", add_special_tokens=True)["input_ids"]) if room_for_special else 0
    return haystack_of_length(model.tokenizer, bundled_haystack(), tokens - added)


haystacks = Result("haystacks", _haystack, entries=48, megabytes=200)


def _long_context(model, run: Run, source: str, progress=None):
    """The profile of the sidebar's text from its trace (``traces``, shared with the other read-only pages of that
    text and limit); of the bundled long text from a trace of its own, not kept (it is no page's text)."""
    trace = traces.at(run) if source == "sidebar" else record(model, run.text, max_tokens=run.max_tokens)
    return long_context_profile(trace, progress=progress)


# texts: the text read; max_tokens: the tokens read; source: "sidebar" or "haystack". [L, H, T] float32 sink shares:
# 8.8 MB for SmolLM2 at 8,192
long_context_profiles = Result("long-context", _long_context, entries=16, megabytes=200)
needle_scores = Result("needle-scores", lambda lm, run, tokens, needle, question, answer, depth: retrieval_scores(
    lm, haystacks.at(run, tokens, False), needle, question, answer, depth), entries=32, megabytes=200,
    reads="language model")
# long enough for an expected answer of ``answer_tokens`` tokens
needle_answers = Result("needle-answers", lambda lm, run, prompt_ids, answer_tokens: model_answer(
    lm, prompt_ids, answer_tokens), entries=32, megabytes=200, reads="language model")
needle_knock_outs = Result("needle-knock-outs", lambda lm, run, token_ids, answer_span, heads: answer_log_probability(
    lm, token_ids, answer_span, heads), entries=32, megabytes=200, reads="language model")
# one small AnswerSuccess per (length, depth) cell of the depth × length grid
needle_grid_cells = Result("needle-grid-cells", lambda lm, run, tokens, needle, question, answer, depth: answer_success(
    lm, haystacks.at(run, tokens, False), needle, question, answer, depth), entries=512, megabytes=10,
    reads="language model")


# --- queries and keys over a corpus: SmolLM2, one layer of the 3,000-token sample corpus is 9 MB; MiniLM 6 layers 55 MB

qk_corpora = Result("qk-corpus", lambda model, run, layers, progress=None: record_corpus(
    model, list(run.texts), max_tokens=run.max_tokens, layers=None if layers is None else set(layers),
    progress=progress), entries=6, megabytes=600)
# options: (layers recorded, layer, head, rotary, method); random state 0
qk_maps = Result("qk-maps", lambda model, run, layers, layer, head, rotary, method: query_key_map(
    None, None, layer, head, method=method, rotary=rotary, corpus=qk_corpora.at(run, layers)), entries=64,
    megabytes=200, reads="nothing", turn=False)
qk_agreements = Result("qk-agreements", lambda model, run, *options: nearest_key_agreement(qk_maps.at(run, *options)),
                       entries=64, megabytes=1, reads="nothing", turn=False)


def _qk_thumbnails(model, run: Run, layers, shown: tuple[int, ...], rotary: bool, method: str):
    """For every head of the layers ``shown``: ``(layer, head, query_xy [n, 2], key_xy [n, 2], position order)``, the
    same ``n`` ≤ ``QK_THUMBNAIL_POINTS`` tokens in every panel (evenly spaced over the corpus); the order is measured
    on all points."""
    corpus = qk_corpora.at(run, layers)
    n = corpus.num_tokens
    drawn = np.unique(np.linspace(0, n - 1, min(n, QK_THUMBNAIL_POINTS)).round().astype(int))
    positions = np.concatenate([corpus.position, corpus.position])
    panels = []
    for layer in shown:
        for head in range(corpus.layers[layer].queries.shape[0]):
            coords = qk_maps.at(run, layers, layer, head, rotary, method).coords
            panels.append((layer, head, coords[drawn].copy(), coords[n + drawn].copy(), position_order(coords, positions)))
    for _, _, queries, keys, _ in panels:
        queries.setflags(write=False)
        keys.setflags(write=False)
    return panels


qk_thumbnails = Result("qk-thumbnails", _qk_thumbnails, entries=16, megabytes=200, reads="nothing", turn=False)


# --- senses: texts are the sentences, the word an option; 2,000 occurrences × 13 layers × 768 dims is about 80 MB ---

occurrences = Result("occurrences", lambda model, run, word, progress=None: occurrence_embeddings(
    model, list(run.texts), word, progress=progress), entries=8, megabytes=400)
# random state 0, so moving the layer slider never re-runs the model and a view is drawn the same way every time
projections = Result("projections", lambda model, run, word, layer, method: project(
    occurrences.at(run, word).vectors[layer], method, random_state=0), entries=128, megabytes=400, reads="nothing",
    turn=False)
# keeps the fitted estimator (whose transform places a new occurrence in the same map): fewer entries
fitted_projections = Result("fitted-projections", lambda model, run, word, layer, method: fit_projection(
    occurrences.at(run, word).vectors[layer], method, random_state=0), entries=16, megabytes=400, reads="nothing",
    turn=False)


def _aligned_projection(model, run: Run, word: str, layer: int, method: str) -> np.ndarray:
    """``projections`` of ``layer`` rotated, reflected, shifted and scaled onto the same method's layout of the last
    hidden state, so every layer is drawn in one frame and moving the slider moves the same points."""
    last = occurrences.at(run, word).num_layers
    reference = projections.at(run, word, last, method)
    if layer == last:
        return reference
    return align_layout(projections.at(run, word, layer, method), reference)


aligned_projections = Result("aligned-projections", _aligned_projection, entries=128, megabytes=400, reads="nothing",
                             turn=False)
separations = Result("separations", lambda model, run, word, labels: separation(
    occurrences.at(run, word).vectors, list(labels)), entries=128, megabytes=50, reads="nothing", turn=False)
separation_intervals = Result("separation-intervals", lambda model, run, word, labels: separation_interval(
    occurrences.at(run, word).vectors, list(labels)), entries=128, megabytes=50, reads="nothing", turn=False)


# --- workshop rooms: a learner's sentence placed on the room's map; the measured previous-token scores --------------

def _room_placement(model, run: Run, word: str, layer: int, method: str):
    """The first occurrence of ``word`` in the entry ``run.text`` placed on the map of the word's built-in sentences
    (``core.workshop.views.place_entry``); None when the entry lacks the word."""
    sentences, labels = room_sentences(word)
    bundled = replace(run, texts=tuple(sentences))
    return place_entry(room_occurrences.at(run, word), occurrences.at(bundled, word), labels,
                       fitted_projections.at(bundled, word, layer, method), layer)


# one learner's entry: [layers + 1, 1, hidden] float32, 10 kB on MiniLM, 71 kB on SmolLM2 (its own shelf, so a room's
# entries never push the bundled sentences' occurrences off theirs)
room_occurrences = Result("room-occurrences", lambda model, run, word: occurrence_embeddings(model, [run.text], word),
                          entries=1024, megabytes=100)
# one entry's [2] place and 3 neighbours: a few kB; a room of 300 entries fits
room_placements = Result("room-placements", _room_placement, entries=2048, megabytes=50, reads="nothing", turn=False)
# texts: the bundled sentences the scores are measured on
previous_token = Result("previous-token-scores", lambda model, run: previous_token_scores(model, run.texts),
                        entries=8, megabytes=5)
