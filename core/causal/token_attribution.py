"""Which input tokens does an output depend on? Gradient × input and integrated gradients.

Both differentiate one number (the measure) with respect to the word embeddings of the input
(the lookup ``x``, ``[T, hidden]``; the model adds position and token-type embeddings itself). The points of the
path replace the input embedding module's output (``core.model.intervention``, site "embeddings").

- ``"embedding"``: the sentence embedding (mean of the last hidden state over the tokens)
  projected on the original sentence embedding's direction, ``f(x) = pool(x) · u`` with
  ``u = pool(x₀) / ‖pool(x₀)‖``; at the input it is the embedding's length.
- ``"target"`` (models with a language-model head): log p(target) at the first mask token
  (masked LMs) or after the last token (causal LMs), as in ``core.causal.effects``.

Gradient × input: ``score_i = Σ_d x_id · ∂f/∂x_id``.
Integrated gradients (Sundararajan et al. 2017): ``score_i = Σ_d (x_id − b_id) ∫₀¹ ∂f/∂x_id(b + α(x − b)) dα``
with the baseline ``b`` = the pad token's embedding (the zero vector if the tokenizer has no
pad token) at every non-special position and the input's own embedding at special positions. A decoder
whose text does not begin with a special token also keeps its first token: every head can see it, and
such models park spare attention there (an attention sink, Xiao et al. 2023); moving its embedding
makes the output jump (SmolLM2-135M, "The Eiffel Tower stands in the city of": 5.1 nats within
Δα = 0.00125 near α ≈ 0.255; with the first token kept, the largest step is 0.08 nats and the path
rises monotonically), so it gets no score, as [CLS] gets none.
Completeness: the scores sum to ``f(x) − f(b)``; ``completeness_gap`` is the relative difference.

The integral is a composite Gauss–Legendre rule: ``steps`` points in equal panels of ``PANEL_NODES``.
Each panel has its own completeness check (its scores should sum to ``f`` at its end minus ``f`` at its
start). On language models the measure can jump by several nats within Δα = 0.005 of the straight path
(SmolLM2-135M: 4.5 nats near α ≈ 0.255 on "The Eiffel Tower stands in the city of"), which an even
rule misses at any affordable number of points; so while the whole gap exceeds ``GAP_THRESHOLD`` the
panels whose checks fail worst are halved (more points where the path is steep), up to
``refinement_budget(steps)`` gradients in all. ``evaluations`` says how many were taken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from core.causal.effects import EffectsError, Measure, Network, Target, check_measure, encode, logits_at, mean_pooled, network, resolve_target
from core.model.analysis import special_token_ids
from core.model.intervention import Replace, intervened
from core.model.models import LoadedModel
from core.outputs.predictions import LanguageModel

AttributionMethod = Literal["integrated_gradients", "gradient_x_input"]
ATTRIBUTION_METHODS = ("integrated_gradients", "gradient_x_input")
MIN_STEPS = 1
# Token positions per backward pass when integrated-gradient steps are batched.
TOKENS_PER_BATCH = 2048
PANEL_NODES = 4  # Gauss–Legendre points per panel of the path
GAP_THRESHOLD = 0.02  # above this completeness gap the scores do not add up, and steep panels are refined
REFINED_STEPS_FACTOR = 4  # at most this many times ``steps`` gradients when panels are refined …
MAX_REFINED_EVALUATIONS = 256  # … and no more than this (or ``steps``), so the slowest choice stays within minutes


@dataclass(frozen=True, eq=False)
class Attribution:
    """Per-token attribution of one measure.

    ``tokens``: the tokenizer's tokens ``[T]``; ``scores``: float32 ``[T]`` (0 at special tokens for
    integrated gradients, whose baseline keeps them); ``special_mask``: bool ``[T]``;
    ``output``: f(input); ``baseline_output``: f(baseline) (integrated gradients, else None);
    ``completeness_gap``: |Σ scores − (f(x) − f(b))| / |f(x) − f(b)| (integrated gradients, else None);
    ``steps``: the points asked for; ``evaluations``: the gradients taken (more than ``steps`` where steep
    panels were refined); ``first_token_kept``: the baseline keeps a decoder's (non-special) first token, the
    attention sink, so its score is 0; ``target``: the target token and position for ``measure="target"``.
    """

    tokens: list[str]
    input_ids: list[int]
    scores: np.ndarray
    special_mask: np.ndarray
    method: AttributionMethod
    measure: Measure
    output: float
    baseline_output: float | None = None
    completeness_gap: float | None = None
    steps: int | None = None
    evaluations: int | None = None
    first_token_kept: bool = False
    target: Target | None = None

    def __post_init__(self) -> None:
        for array in (self.scores, self.special_mask):
            array.setflags(write=False)

    @property
    def total(self) -> float:
        """Σ scores."""
        return float(self.scores.astype(np.float64).sum())

    @property
    def converged(self) -> bool:
        """Integrated gradients whose scores add up to the measure's change within ``GAP_THRESHOLD``."""
        return self.completeness_gap is not None and self.completeness_gap <= GAP_THRESHOLD


def _measure(net: Network, embeds: torch.Tensor, inputs: dict[str, torch.Tensor], measure: Measure,
             direction: torch.Tensor | None, target: Target | None) -> torch.Tensor:
    """``[N]``: the measure for each of ``embeds`` ``[N, T, hidden]`` (word embeddings of the same text), which replace
    the input embedding module's output in a pass over ``N`` copies of the text (``core.model.intervention``)."""
    batch = {k: v.expand(embeds.shape[0], -1) for k, v in inputs.items()}
    with intervened(net.full, [Replace("embeddings", value=embeds)]):
        if measure == "embedding":
            out = net.base(**batch, return_dict=True)
            return mean_pooled(out.last_hidden_state, batch["attention_mask"]) @ direction
        assert target is not None
        logits = logits_at(net, target.position, **batch)
    return logits.log_softmax(-1)[:, target.token_id]


def _gradients(net, embeds, inputs, measure, direction, target) -> tuple[torch.Tensor, torch.Tensor]:
    """(values ``[N]``, gradients ``[N, T, hidden]``) of the measure at ``embeds``; no parameter gradients are kept."""
    with torch.enable_grad():
        embeds = embeds.detach().requires_grad_(True)
        values = _measure(net, embeds, inputs, measure, direction, target)
        (grads,) = torch.autograd.grad(values.sum(), embeds)
    return values.detach(), grads


def _special_mask(net: Network, ids: list[int]) -> np.ndarray:
    special = special_token_ids(net.tokenizer)
    return np.array([i in special for i in ids], dtype=bool)


def refinement_budget(steps: int) -> int:
    """The most gradients integrated gradients take for ``steps`` points when steep panels are refined."""
    return max(steps, min(steps * REFINED_STEPS_FACTOR, MAX_REFINED_EVALUATIONS))


def token_attribution(
    model: LoadedModel | LanguageModel,
    text: str,
    *,
    method: AttributionMethod = "integrated_gradients",
    measure: Measure = "embedding",
    steps: int = 32,
    target: str | int | None = None,
    max_tokens: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Attribution:
    """Attribute ``measure`` of ``text`` to its tokens (see the module docstring).

    ``progress(done, total)``: called after each batch of integration steps (integrated gradients only).
    """
    if method not in ATTRIBUTION_METHODS:
        raise EffectsError(f"The attribution method must be one of {', '.join(ATTRIBUTION_METHODS)}, not {method!r}.")
    if int(steps) < MIN_STEPS:
        raise EffectsError("Integrated gradients needs at least one step.")
    net = network(model)
    check_measure(net, measure)
    inputs = encode(net, text, max_tokens)
    resolved = resolve_target(net, inputs, target) if measure == "target" else None
    ids = inputs["input_ids"][0].tolist()
    special = _special_mask(net, ids)
    embedding = net.full.get_input_embeddings()
    with torch.no_grad():
        x = embedding(inputs["input_ids"]).float()  # [1, T, hidden]
        direction = None
        if measure == "embedding":
            pooled = mean_pooled(net.base(**inputs, return_dict=True).last_hidden_state, inputs["attention_mask"])[0]
            direction = pooled / pooled.norm().clamp(min=1e-30)
    tokens = net.tokenizer.convert_ids_to_tokens(ids)
    common = {"tokens": tokens, "input_ids": ids, "special_mask": special, "method": method, "measure": measure,
              "target": resolved}
    if method == "gradient_x_input":
        value, grads = _gradients(net, x, inputs, measure, direction, resolved)
        scores = (grads[0] * x[0]).sum(-1)
        return Attribution(scores=scores.cpu().numpy().astype(np.float32), output=float(value[0]), **common)

    pad = net.tokenizer.pad_token_id
    kept = special.copy()
    decoder = net.kind == "next" if net.kind is not None else bool(getattr(model, "is_decoder", False))
    first_token_kept = decoder and not special[0]
    kept[0] |= first_token_kept
    with torch.no_grad():
        fill = embedding.weight[pad].float() if pad is not None else torch.zeros(x.shape[-1], device=x.device)
        baseline = x.clone()
        baseline[0, torch.from_numpy(~kept).to(x.device)] = fill
    delta = x - baseline  # [1, T, hidden]
    chunk = max(1, TOKENS_PER_BATCH // x.shape[1])

    def values_at(alphas: list[float]) -> list[float]:
        """f on the path at ``alphas`` (no gradients)."""
        found = []
        with torch.no_grad():
            for start in range(0, len(alphas), chunk):
                a = torch.tensor(alphas[start : start + chunk], dtype=torch.float32, device=x.device)[:, None, None]
                found += _measure(net, baseline + a * delta, inputs, measure, direction, resolved).double().tolist()
        return found

    nodes, weights = np.polynomial.legendre.leggauss(PANEL_NODES)
    nodes, weights = (nodes + 1.0) / 2.0, torch.tensor(weights / 2.0, dtype=torch.float64, device=x.device)
    budget = refinement_budget(int(steps))
    done = 0

    def panel_scores(panels: list[tuple[float, float]], total: int) -> list[torch.Tensor]:
        """Per panel ``(a, c)``: float64 ``[T]``, the scores of the path from α = a to α = c."""
        nonlocal done
        alphas = torch.tensor(np.concatenate([a + (c - a) * nodes for a, c in panels]), dtype=torch.float32,
                              device=x.device)
        per_point = []
        for start in range(0, len(alphas), chunk):
            _, grads = _gradients(net, baseline + alphas[start : start + chunk, None, None] * delta, inputs, measure,
                                  direction, resolved)
            per_point.append((grads.double() * delta.double()).sum(-1))  # [n, T]
            done += len(grads)
            if progress is not None:
                progress(min(done, total), total)
        per_point = torch.cat(per_point).reshape(len(panels), PANEL_NODES, -1)
        return [(per_point[i] * weights[:, None]).sum(0) * (c - a) for i, (a, c) in enumerate(panels)]

    count = max(1, round(int(steps) / PANEL_NODES))
    edges = [i / count for i in range(count + 1)]
    value = dict(zip(edges, values_at(edges)))
    panels = dict(zip(zip(edges[:-1], edges[1:]), panel_scores(list(zip(edges[:-1], edges[1:])), count * PANEL_NODES)))
    difference = value[1.0] - value[0.0]

    def gap() -> float:
        return abs(float(sum(panels.values()).sum()) - difference) / max(abs(difference), 1e-12)

    def panel_error(panel: tuple[float, float]) -> float:
        return abs(float(panels[panel].sum()) - (value[panel[1]] - value[panel[0]]))

    # Halve the panels whose own completeness fails worst, a batch at a time, while the whole gap is too large.
    while gap() > GAP_THRESHOLD and done + 2 * PANEL_NODES <= budget:
        room = min(chunk, budget - done) // (2 * PANEL_NODES)
        worst = sorted(panels, key=panel_error, reverse=True)[: max(1, room)]
        halves = []
        for a, c in worst:
            middle = (a + c) / 2
            halves += [(a, middle), (middle, c)]
        value.update(zip([(a + c) / 2 for a, c in worst], values_at([(a + c) / 2 for a, c in worst])))
        for panel in worst:
            del panels[panel]
        panels.update(zip(halves, panel_scores(halves, budget)))
    scores = sum(panels.values())
    output, base_output = float(value[1.0]), float(value[0.0])
    return Attribution(scores=scores.cpu().numpy().astype(np.float32), output=output, baseline_output=base_output,
                       completeness_gap=gap(), steps=int(steps), evaluations=done, first_token_kept=first_token_kept,
                       **common)


def rollout_to_tokens(rollout: np.ndarray, attribution: Attribution) -> np.ndarray:
    """float64 ``[T]``: how much each input token reaches the measured output through attention rollout
    (last layer of ``core.attention_heads.attention.rollout``, ``[layers, T, T]``): the target position's row for
    ``measure="target"``, the mean of all rows (the mean-pooled sentence embedding) for ``"embedding"``."""
    last = np.asarray(rollout[-1], dtype=np.float64)
    if attribution.target is not None:
        return last[attribution.target.position]
    return last.mean(axis=0)


def unconverged_sentence(attribution: Attribution, more_steps_possible: bool) -> str:
    """Why integrated gradients that do not add up (``completeness_gap`` above ``GAP_THRESHOLD``) are not to be
    read; ``more_steps_possible``: the page offers more integration steps than were taken."""
    difference = attribution.output - attribution.baseline_output
    return (f"The integrated gradients do not add up: their sum is {attribution.total:.4f} against a change of "
            f"{difference:.4f} in the measure (completeness gap {attribution.completeness_gap:.0%}, above "
            f"{GAP_THRESHOLD:.0%}) after {attribution.evaluations} gradients along the path. The gradient changes too "
            "fast between the baseline and the input for this many points, so these scores are not the integral and "
            "no conclusion is drawn from them." + (" More integration steps may help." if more_steps_possible else ""))
