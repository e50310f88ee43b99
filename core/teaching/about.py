"""Facts about the loaded model that a learner needs before reading the literature's findings into it.

Everything here is computed from the model (attention sinks, anisotropy, key/value sharing, how positions
enter, the normalisation) except the description of each bundled checkpoint, which is what its model card
says it is and how it is shipped here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from core.attention_heads.attention import attention_maxima
from core.maths.margins import plateau
from core.maths.numbers import percent, percent_span
from core.model.analysis import Analysis
from core.model.inference import analyze_many
from core.model.models import BUNDLED_LM, DEFAULT_MODEL, LoadedModel, bundled_name
from core.model.tokens import token_labels
from core.representations.drift import anisotropy_level

BUNDLED_DESCRIPTION = (
    "all-MiniLM-L6-v2 is a sentence encoder from sentence-transformers: "
    "nreimers/MiniLM-L6-H384-uncased (microsoft/MiniLM-L12-H384-uncased with every second layer kept) fine-tuned "
    "with a contrastive objective on about 1 billion sentence pairs, so that the mean of its last hidden states "
    "places similar sentences close together. It is not an MLM-pretrained BERT and has no language-model head: "
    "findings about BERT-base (which heads do what, where attention sinks are) need not hold for it."
)
BUNDLED_LM_DESCRIPTION = (
    "SmolLM2-135M-Instruct is HuggingFaceTB's 135-million-parameter SmolLM2 language model, instruct-tuned: after "
    "pre-training on text it was fine-tuned to follow instructions and chat. The copy bundled here comes from a "
    "4-bit (Q4_1) GGUF file whose weights were expanded to float32, so its predictions differ slightly from the "
    "original release."
)
DESCRIPTIONS = {DEFAULT_MODEL: BUNDLED_DESCRIPTION, BUNDLED_LM: BUNDLED_LM_DESCRIPTION}
SINK_FACTOR = 2.0  # a token is called a sink when it receives at least this many times its even-spread share
# Short sentences from different topics: tokens of different sentences are the anisotropy baseline.
REFERENCE_SENTENCES = (
    "The bank of the river was covered in reeds.",
    "The central bank raised interest rates again.",
    "He plays the bass in a jazz trio.",
    "The crane lifted the steel beam onto the roof.",
    "Click the mouse twice to open the file.",
    "The plant employs two thousand workers.",
    "Every spring the swallows return to the barn.",
    "The keys to the old cabinet are missing.",
)


@dataclass(frozen=True)
class ModelFacts:
    """``received``: per token of the analysed text, the share of attention it receives (mean over layers,
    heads and query tokens); ``even``: ``[T]`` what each token would receive if every query spread its attention
    evenly over the tokens it sees (``even_share``). ``anisotropy``: per hidden state 0..L, mean cosine between
    tokens of different reference sentences. ``kv_heads``: key/value heads per layer (None: one per query head);
    ``rotary``: positions enter as rotary embeddings inside attention; ``position_free_start``: hidden state 0 is
    the token embedding alone (times one constant), so it carries no position; ``norm``: "RMSNorm" or
    "LayerNorm" (None when not found), ``norm_class`` the module's class name."""

    name: str
    model_type: str
    num_layers: int
    num_heads: int
    hidden_size: int
    is_decoder: bool
    tokens: list[str]
    special_mask: np.ndarray
    received: np.ndarray
    anisotropy: np.ndarray
    description: str | None
    even: np.ndarray | None = None
    kv_heads: int | None = None
    rotary: bool = False
    position_free_start: bool | None = None
    norm: str | None = None
    norm_class: str | None = None


def attention_received(analysis: Analysis) -> np.ndarray:
    """``[T]``: mean over layers, heads and query tokens of the attention each key token receives (sums to 1)."""
    if analysis.attentions is None:
        raise ValueError("the analysis has no attention weights")
    return analysis.attentions.mean(axis=(0, 1, 2))


def even_share(num_tokens: int, is_decoder: bool) -> np.ndarray:
    """``[T]``: ``attention_received`` under even attention. Encoder: 1/T each. Decoder (causal): query i spreads
    1/(i + 1) over tokens 0..i, so token j receives (1/T) · Σ_{i≥j} 1/(i + 1): position 0 gets H_T / T, not 1/T."""
    t = num_tokens
    if not is_decoder:
        return np.full(t, 1.0 / t)
    per_query = 1.0 / np.arange(1, t + 1)  # [T]: what query i gives each token it sees
    return np.cumsum(per_query[::-1])[::-1] / t


def _architecture(model: LoadedModel, analysis: Analysis) -> dict:
    """Key/value heads, rotary positions, position-free hidden state 0 and the normalisation, read from the
    model's config and modules and checked on ``analysis`` (see ``ModelFacts``)."""
    net, config = model.model, model.model.config
    kv = getattr(config, "num_key_value_heads", None)
    facts: dict = {"kv_heads": kv if isinstance(kv, int) and 0 < kv < model.num_heads else None}
    facts["rotary"] = any(name.endswith("inv_freq") for name, _ in net.named_buffers())
    embeddings = net.get_input_embeddings()
    if embeddings is not None and analysis.num_tokens > 0 and not model.is_encoder_decoder:
        # the embedding rows themselves, not the module's call (which counters of passes would count): a module that
        # scales them (Gemma's sqrt(hidden)) is fitted by ``scale`` below
        e = embeddings.weight.detach()[torch.tensor(analysis.input_ids, device=model.device)].double().cpu().numpy()
        h = analysis.hidden_states[0].astype(np.float64)  # [T, D]
        scale = float((h * e).sum() / max((e * e).sum(), 1e-30))
        facts["position_free_start"] = bool(np.allclose(h, scale * e, rtol=1e-4, atol=1e-5 * np.abs(h).max()))
    hidden = model.hidden_size
    for module in net.modules():
        weight = getattr(module, "weight", None)
        if "norm" in type(module).__name__.lower() and isinstance(weight, torch.Tensor) and weight.shape == (hidden,):
            # A constant vector has nothing left once the mean is subtracted (LayerNorm returns its bias);
            # divided by its root mean square it becomes all ones, so an RMSNorm returns about its weight.
            probe = torch.full((1, hidden), 3.0, dtype=weight.dtype, device=weight.device)
            with torch.inference_mode():
                out = module(probe)[0]
            bias = getattr(module, "bias", None)
            rest = bias if isinstance(bias, torch.Tensor) else torch.zeros_like(out)
            facts["norm"] = "LayerNorm" if torch.allclose(out, rest, atol=1e-4) else "RMSNorm"
            facts["norm_class"] = type(module).__name__
            break
    return facts


def token_anisotropy(analyses: list[Analysis]) -> np.ndarray:
    """``[L + 1]``: mean cosine between non-special tokens of different analyses, per hidden state."""
    vectors, owners = [], []
    for k, analysis in enumerate(analyses):
        keep = ~analysis.special_mask
        vectors.append(analysis.hidden_states[:, keep])
        owners += [k] * int(keep.sum())
    x = np.concatenate(vectors, axis=1).astype(np.float64)  # [L + 1, n, D]
    x /= np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    owners = np.array(owners)
    different = owners[:, None] != owners[None, :]
    return np.array([(layer @ layer.T)[different].mean() for layer in x])


def reference_anisotropy(model: LoadedModel) -> np.ndarray:
    """``[L + 1]``: ``token_anisotropy`` of ``REFERENCE_SENTENCES`` through ``model`` (the same for every text)."""
    return token_anisotropy(analyze_many(model, list(REFERENCE_SENTENCES), attentions=False))


def model_facts(model: LoadedModel, analysis: Analysis, anisotropy: np.ndarray | None = None) -> ModelFacts:
    """Facts about ``model``: its shape, where the attention of ``analysis`` (the text on screen) goes, and
    how anisotropic each hidden state is on ``REFERENCE_SENTENCES`` (``anisotropy``: ``reference_anisotropy(model)``
    computed before, e.g. cached per model; computed here when None)."""
    return ModelFacts(
        name=model.name,
        model_type=model.model_type,
        num_layers=model.num_layers,
        num_heads=model.num_heads,
        hidden_size=model.hidden_size,
        is_decoder=model.is_decoder,
        tokens=token_labels(analysis),
        special_mask=np.asarray(analysis.special_mask),
        received=attention_received(analysis),
        anisotropy=reference_anisotropy(model) if anisotropy is None else anisotropy,
        description=DESCRIPTIONS.get(bundled_name(model.name) or ""),
        even=even_share(analysis.num_tokens, model.is_decoder),
        **_architecture(model, analysis),
    )


def architecture_lines(facts: ModelFacts) -> list[str]:
    """Sentences on key/value sharing, positions and normalisation, each only when it was found."""
    lines = []
    if facts.kv_heads:
        per = facts.num_heads / facts.kv_heads
        share = f"{per:.0f} query heads per key/value head" if per == int(per) else f"{per:.1f} query heads per key/value head on average"
        lines.append(
            f"Grouped-query attention: in every layer its {facts.num_heads} query heads share {facts.kv_heads} key/value "
            f"head{'s' if facts.kv_heads > 1 else ''} ({share}), so heads of one group compare against the same keys."
        )
    if facts.rotary:
        start = (
            "; nothing is added to the token embeddings, so hidden state 0 is the token embedding alone (no position "
            "embedding)" if facts.position_free_start else ""
        )
        lines.append(f"Positions enter as rotary embeddings (RoPE), which rotate queries and keys inside attention{start}.")
    elif facts.position_free_start is False:
        lines.append("Hidden state 0 is not the token embedding alone: position (or segment) embeddings are added to it.")
    if facts.norm:
        named = f" ({facts.norm_class})" if facts.norm_class and facts.norm_class != facts.norm else ""
        what = ("divides by the root mean square and subtracts no mean" if facts.norm == "RMSNorm"
                else "subtracts the mean and divides by the standard deviation")
        lines.append(f"Normalisation: {facts.norm}{named}, which {what}.")
    return lines


def facts_lines(facts: ModelFacts) -> list[str]:
    """The facts as short markdown-free sentences, each computed from ``facts``."""
    kind = (
        "a decoder: each token sees itself and the tokens before it"
        if facts.is_decoder
        else "an encoder: each token sees every token of the text"
    )
    lines = [
        f"{facts.name} ({facts.model_type}): {facts.num_layers} layers × {facts.num_heads} heads, hidden size "
        f"{facts.hidden_size}; {kind}."
    ]
    if facts.description:
        lines.append(facts.description)
    lines += architecture_lines(facts)
    even = facts.even if facts.even is not None else even_share(len(facts.tokens), facts.is_decoder)
    sink = int(np.argmax(facts.received - even))  # most attention beyond what an even spread gives it
    spread = (
        "an even spread over the tokens each token sees would give it" if facts.is_decoder else "an even spread would give each token"
    )
    share = f"{facts.received[sink]:.2f} of all attention (mean over every layer, head and token; {spread} {even[sink]:.2f})"
    if facts.received[sink] >= SINK_FACTOR * even[sink]:
        line = f"Attention sink on your text: {facts.tokens[sink]} (position {sink}) receives {share}."
    else:
        line = (
            f"No attention sink on your text: the token with most attention beyond an even spread, {facts.tokens[sink]} "
            f"(position {sink}), receives {share}, less than {SINK_FACTOR:.0f} times that."
        )
    others = {}
    for token, share, special in zip(facts.tokens, facts.received, facts.special_mask, strict=True):
        if special and token != facts.tokens[sink]:
            others[token] = others.get(token, 0.0) + float(share)
    if others:
        line += " Other special tokens: " + ", ".join(f"{t} {s:.3f}" for t, s in others.items()) + "."
    if "[SEP]" in facts.tokens and facts.tokens[sink] != "[SEP]":
        line += " Clark et al. (2019) found [SEP] to be BERT-base's main sink; not in this model."
    lines.append(line)
    last, first = float(facts.anisotropy[-1]), float(facts.anisotropy[1]) if len(facts.anisotropy) > 1 else float("nan")
    lines.append(
        f"Anisotropy (mean cosine between tokens of different sentences): {first:.2f} at hidden state 1, {last:.2f} at "
        f"hidden state {facts.num_layers}, the last, which is {anisotropy_level(last)}."
    )
    return lines


# One text's mean cosine per hidden state: hidden states within 0.02 of the lowest are named together, and when the
# last is among them the sentence names no other.
LOWEST_MARGIN = 0.02


def static_similarity_sentence(similarity: np.ndarray, special_mask: np.ndarray) -> str:
    """What ``core.maths.similarity.token_static_similarity`` ``[L + 1, T]`` shows for one text, from its numbers
    (text tokens only; every token when all are special)."""
    keep = ~np.asarray(special_mask, dtype=bool)
    if not keep.any():
        keep = np.ones_like(keep)
    mean = similarity[:, keep].mean(axis=1)
    last = len(mean) - 1
    lowest = int(np.argmin(mean))
    first, final = plateau(-mean, LOWEST_MARGIN)  # the hidden states within the margin of the lowest
    text = f"Over the tokens of your text it averages {mean[last]:.2f} at hidden state {last}, the last"
    if final != last:
        text += (f", and is lowest at hidden state {lowest} ({mean[lowest]:.2f})" if first == final else
                 f", and is lowest at hidden states {first}–{final} (within {LOWEST_MARGIN:g} of {mean[lowest]:.2f})")
    return text + "."


SINK_MARGIN = 0.1  # shares of a few tokens move in steps of 1/T: a pattern must beat its opposite by this much


def _layer_ranges(layers: np.ndarray) -> str:
    """``[12, 13, 14, 17]`` as "12–14, 17"."""
    runs: list[list[int]] = []
    for layer in layers.tolist():
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def neighbour_sink_sentence(analysis: Analysis, *, matrices: np.ndarray | None = None, heads="max") -> str:
    """Whether "early layers attend to neighbours, later ones to a few sink tokens" holds on this text, from
    ``core.attention_heads.attention.attention_maxima`` (token level; ``matrices`` default: the raw attention; empty when
    every token is special). The sink candidates are the special tokens and the first token, special or not (a
    decoder's first token is seen by every token and serves as its sink even without a BOS): the sentence
    measures how many maxima land on them, it does not assume they do."""
    special = np.asarray(analysis.special_mask, dtype=bool)
    if special.all():
        return ""
    sink = special.copy()
    sink[0] = True
    first_is_plain = not special[0]
    if sink.all():
        return ""
    as_sinks = replace(analysis, special_mask=sink)  # the maxima left out / included by the sink mask
    text_only = attention_maxima(as_sinks, matrices=matrices, heads=heads, skip_special=True)
    with_sinks = attention_maxima(as_sinks, matrices=matrices, heads=heads, skip_special=False)
    asking = ~sink[with_sinks.queries]
    on_sink = sink[with_sinks.targets[:, asking]].mean(axis=1)  # [layers]
    local = (np.abs(text_only.distances) <= 1).mean(axis=1)
    first, last = 0, len(local) - 1
    first_token = f"“{token_labels(analysis)[0]}”"
    if not first_is_plain:
        what, them, target = "special tokens", "them", "a special token"
    elif special.any():
        what, them, target = f"the first token {first_token} and special tokens", "them", "one of them"
    else:
        what, them, target = f"the first token {first_token}", "it", "it"
    text = (
        f"On this text, with {what} left out, {percent(local[first])} of tokens attend most to themselves or a "
        f"neighbour in layer {first} and {percent(local[last])} in layer {last}; with {them} included, "
        f"{percent(on_sink[first])} attend most to {target} in layer {first} and {percent(on_sink[last])} in layer {last}."
    )
    most = np.flatnonzero(on_sink >= 0.5)
    if first_is_plain and len(most):
        text += (f" At least half of them do in {len(most)} of the {len(on_sink)} layers ({_layer_ranges(most)}): "
                 "a first token serves as the sink whether or not it is a special token.")
    if local[first] - local[last] > SINK_MARGIN and on_sink[last] - on_sink[first] > SINK_MARGIN:
        sinks = "special tokens" if not first_is_plain else "the first token"
        return text + (
            f" So here, as Clark et al. (2019) found for BERT, early layers look at their neighbours and later ones "
            f"park attention on {sinks}; seeing it needs the {sinks} both left out and included."
        )
    return text + (
        " The pattern reported for BERT (early layers look at neighbours, later ones at a few sink tokens) does not "
        "show clearly on this text."
    )


def special_share_sentence(raw: np.ndarray, weighted: np.ndarray) -> str:
    """The range over layers of ``core.attention_heads.attention.special_share`` ``[layers]``, raw and norm-weighted, in words."""
    raw, weighted = np.asarray(raw, dtype=float), np.asarray(weighted, dtype=float)
    if np.isnan(raw).all() or np.isnan(weighted).all():
        return ""
    return (
        f"On this text the share on special tokens is {percent_span(raw[~np.isnan(raw)])} of raw attention and "
        f"{percent_span(weighted[~np.isnan(weighted)])} of "
        f"norm-weighted attention across the {len(raw)} layers."
    )
