"""One attention head taken apart from a recorded forward pass of the model itself, for every family.

Every model whose attention goes through transformers' attention interface is loaded with ``core.model.recording``'s
attention (BERT and the bundled MiniLM, RoBERTa, XLM-RoBERTa, CamemBERT, ELECTRA, DistilBERT, GPT-2, Llama, Mistral,
Qwen2/3, Gemma 1/2/3, Phi-3, SmolLM2 …). A head is read from what that pass gave the attention function
(``core.attention_heads.head_parts``): the module's input, the queries, keys and values as projected (biases included, after the
rotary embedding where there is one), the shared key/value head, the scaling, the mask (causal, sliding window) and
soft-caps. No family needs code of its own, so no list of families decides anything here; a model whose attention
does not go through the interface (MegatronBERT, RoFormer, GPT-Neo) is refused with a sentence. Shapes: ``T``
tokens, ``d`` the head size. Every recomputation is checked against the attention the model itself returned
(``verify_layer``) before anything built on it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.attention_heads import head_parts as rh
from core.errors import AnalysisError
from core.model.analysis import Analysis
from core.model.attention_layers import SINGLE_STACK
from core.model.models import LoadedModel
from core.model.recording import UnsupportedArchitecture, is_recordable
from core.model.stacks import HasStacks, stack_of

SUPPORTED = ("models whose attention goes through transformers' attention interface: BERT, RoBERTa, XLM-RoBERTa, "
             "CamemBERT, ELECTRA, DistilBERT, the bundled MiniLM, GPT-2, Llama, Mistral, Qwen, Gemma, Phi-3, SmolLM …")
# Largest difference allowed between a recomputed attention weight and the model's own.
VERIFY_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Architecture:
    """How to describe one ``config.model_type`` in words (the computation is the same for every family).

    ``kind``: block layout, "bert", "distilbert", "gpt2" or "recorded" (any other family); ``pre_ln``: a norm
    before attention (the head reads the normalised hidden state); ``embeddings``: what the embedding layer's
    output (``hidden_states[0]``) is made of.
    """

    kind: str
    pre_ln: bool
    embeddings: str


_BERT_EMBEDDINGS = "word + position + token-type embeddings, added (not concatenated), then LayerNorm"
# Wording only: what the pages say about a family's blocks and embeddings.
DESCRIPTIONS = {
    "bert": Architecture("bert", False, _BERT_EMBEDDINGS),
    "roberta": Architecture("bert", False, _BERT_EMBEDDINGS),
    "xlm-roberta": Architecture("bert", False, _BERT_EMBEDDINGS),
    "camembert": Architecture("bert", False, _BERT_EMBEDDINGS),
    "electra": Architecture("bert", False, _BERT_EMBEDDINGS),
    "distilbert": Architecture("distilbert", False, "word + position embeddings, added (not concatenated), then LayerNorm"),
    "gpt2": Architecture("gpt2", True, "word + position embeddings, added (not concatenated)"),
}
RECORDED = Architecture("recorded", True, "token embeddings only: positions enter later, as rotations of queries and keys")


@dataclass(frozen=True)
class HeadComputation:
    """Every step of one head on one input (float64 for exact comparison).

    ``layer_input``: ``[T, hidden]``, what the head reads; ``queries, keys, values``: ``[T, d]``;
    ``scores`` = q·k ``[T, T]``; ``scaled`` = scores × scale, masked entries set to -inf for a decoder;
    ``weights`` = softmax(scaled) per row ``[T, T]``; ``outputs`` = weights @ values ``[T, d]``;
    ``keep_mask``: bool ``[T, T]``, True where a query may look at a key (all True for an encoder,
    lower triangle including the diagonal for a decoder, a band for a sliding-window layer).

    Filled where the family has them: ``queries_before_rotary``,
    ``keys_before_rotary`` ``[T, d]`` (None without rotary embedding; ``queries``/``keys`` are after it),
    ``kv_head`` (the key/value head this query head reads) and ``shared_with`` (every query head reading it),
    ``softcap`` (``scaled`` is then cap·tanh(scores × scale / cap)), ``sliding_window``, and ``bias`` ``[T, S]``: T5's
    relative-position bias added to the scaled scores (None without one). For cross-attention (an encoder-decoder's
    "cross" stack) ``keys``, ``values`` are ``[S, d]`` of the source and the score tables ``[T, S]``;
    ``layer_input`` is None where the record kept no input.
    """

    layer: int
    head: int
    layer_input: np.ndarray | None
    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    scaled: np.ndarray
    weights: np.ndarray
    outputs: np.ndarray
    keep_mask: np.ndarray
    scale: float
    queries_before_rotary: np.ndarray | None = None
    keys_before_rotary: np.ndarray | None = None
    kv_head: int | None = None
    shared_with: tuple[int, ...] = ()
    softcap: float | None = None
    sliding_window: int | None = None
    bias: np.ndarray | None = None


def architecture(model: LoadedModel) -> Architecture:
    """How ``model``'s blocks are described (``DESCRIPTIONS``, else ``RECORDED``).

    Raises ``UnsupportedArchitecture`` (a sentence for the user) for a model whose attention does not go
    through transformers' attention interface, so it is not recorded (MegatronBERT, RoFormer, GPT-Neo …).
    """
    if not is_recordable(model.model):
        raise UnsupportedArchitecture(
            f"Taking heads apart is not available for {model.model_type} models: their attention does not go through "
            "transformers' attention interface, which the app records each head from. "
            f"It supports {SUPPORTED}; attention weights themselves are shown for every model."
        )
    return DESCRIPTIONS.get(model.model_type, RECORDED)


def embeddings_description(model: LoadedModel) -> str:
    """What ``hidden_states[0]`` is for this model, in words (ELECTRA: with its ``embeddings_project``)."""
    text = architecture(model).embeddings
    if text == RECORDED.embeddings and getattr(model.model, "rotary_emb", None) is None:
        text = "this family's input embeddings (it has no rotary embedding)"
    project = getattr(model.model, "embeddings_project", None)
    if project is not None:
        text += (
            f", then `embeddings_project`, a linear map from the embedding size ({project.in_features}) "
            f"to the hidden size ({project.out_features})"
        )
    return text


def check_supported(model: LoadedModel) -> None:
    """Raise ``UnsupportedArchitecture`` unless this module can take the model's heads apart."""
    architecture(model)


def _check_position(model: LoadedModel, layer: int, head: int | None = None) -> None:
    check_supported(model)
    if not 0 <= layer < model.num_layers:
        raise ValueError(f"layer must be in 0..{model.num_layers - 1}, got {layer}")
    if head is not None and not 0 <= head < model.num_heads:
        raise ValueError(f"head must be in 0..{model.num_heads - 1}, got {head}")


def _check_against_model(model: LoadedModel, attentions: np.ndarray | None, layer: int, heads: list[int],
                         weights: list[np.ndarray]) -> None:
    """Raise ``UnsupportedArchitecture`` when recomputed weights differ from the model's own attention (``attentions``
    ``[L, H, Q, K]`` as stored; nothing to check against when None)."""
    if attentions is None:
        return
    worst = max(float(np.abs(w - attentions[layer, h]).max()) for h, w in zip(heads, weights, strict=True))
    if not worst <= VERIFY_TOLERANCE:  # also catches NaN
        raise UnsupportedArchitecture(
            f"Recomputing layer {layer}'s attention from {model.name}'s recorded queries and keys gives weights up to "
            f"{worst:.2g} away from the attention the model itself returned, so this model computes attention in a way "
            "the app does not reproduce. Views built on the recomputation are not shown for it; its attention weights are."
        )


def verify_layer(model: LoadedModel, analysis: Analysis, layer: int) -> None:
    """Recompute every head of block ``layer`` and compare with ``analysis.attentions[layer]``.

    Raises ``UnsupportedArchitecture`` when any weight differs by more than ``VERIFY_TOLERANCE``;
    does nothing for an Analysis computed without attentions.
    """
    _check_position(model, layer)
    if analysis.attentions is None:
        return
    _check_against_model(model, analysis.attentions, layer, list(range(model.num_heads)),
                         list(rh.layer_weights(model, analysis, layer)))


def compute_head(model: LoadedModel, analysis: Analysis, layer: int, head: int) -> HeadComputation:
    """Recompute one head's attention step by step (see ``HeadComputation``) from the recorded pass.

    Raises ``UnsupportedArchitecture`` when the result differs from the model's own attention.
    """
    return compute_stack_head(model, analysis, SINGLE_STACK, layer, head)


def compute_stack_head(model: LoadedModel, analysis: Analysis | HasStacks, stack: str, layer: int,
                       head: int) -> HeadComputation:
    """``compute_head`` of any stack: an ``Analysis``'s "self", or one stack of an encoder-decoder's
    ``core.model.seq2seq.PairAnalysis`` ("encoder", "decoder", "cross": its trace's blocks called again alone; ``bias``
    T5's relative-position bias). The same steps and the same check against the stack's stored weights."""
    found = stack_of(analysis, stack)
    if stack == SINGLE_STACK:
        _check_position(model, layer, head)
        record = rh.records(model, analysis)[layer]
    else:
        if not 0 <= layer < found.num_layers:
            raise ValueError(f"layer {layer} does not exist in the {stack}")
        if not 0 <= head < found.num_heads:
            raise ValueError(f"head must be in 0..{found.num_heads - 1}, got {head}")
        if found.records is None:
            raise AnalysisError("This pair was read without a trace, so its heads cannot be taken apart: read it again.")
        record = found.records[layer]
    kv = head // record.kv_groups
    q, k, v = (rh.as_float64(t[0, i]) for t, i in ((record.queries, head), (record.keys, kv), (record.values, kv)))
    keep = rh.keep_mask(record, len(q), len(k))
    bias = record.position_bias
    bias = None if bias is None else rh.as_float64(bias[0, head if bias.shape[1] > 1 else 0, :len(q), :len(k)])
    scores, scaled = rh.logits(q, k, record, keep, bias)
    weights = rh.softmax(scaled)
    _check_against_model(model, found.attentions, layer, [head], [weights])
    q0, k0 = rh.rotation(record, head)
    shared = tuple(h for h in range(found.num_heads) if h // record.kv_groups == kv)
    layer_input = None if record.inputs is None else rh.as_float64(record.inputs[0])
    return HeadComputation(layer, head, layer_input, q, k, v, scores, scaled, weights, weights @ v, keep,
                           record.scaling, q0, k0, kv, shared, record.softcap, record.sliding_window, bias)


def value_vectors_through_output(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """``[heads, T, hidden]``: f_h(x_j) = v_j^h W_O^h for every head h and token j, ``v_j^h`` the recorded value
    (bias included) of the key/value head h reads.

    What token j would add to the output if head h gave it all its attention
    (Kobayashi et al. 2020); the shared output bias is left out. The layer's recomputed
    attention is first checked against the model's own (``verify_layer``).
    """
    verify_layer(model, analysis, layer)
    return rh.value_vectors_through_output(model, analysis, layer)


def value_norms(model: LoadedModel, analysis: Analysis, layer: int) -> np.ndarray:
    """float64 ``[heads, T]``: the length of each ``value_vectors_through_output`` vector (Kobayashi et al.'s
    ‖f(x)‖), after the same check of the layer (``verify_layer``)."""
    verify_layer(model, analysis, layer)
    return rh.value_norms(model, analysis, layer)
