"""Interventions: forward passes run with some activations replaced. One spec says what to replace where and with
what; one function runs a model under it. What a pass keeps (``core.model.trace``, ``core.model.recording.Recorder``)
is a separate matter, as TransformerLens keeps ``run_with_hooks`` apart from ``run_with_cache``.

A ``Replace`` names one activation (``site``), where it is (``stack``, ``layer``, ``head``, token ``positions``,
batch ``rows``), and what it becomes (``value``). ``B`` batch rows, ``T`` tokens of the pass, ``d`` head size::

    site "head"        [B, T, d]       a head's output before the attention output projection (its slice of the
                                       projection's input), replaced inside the attention function by
                                       ``Recorder(replace=…)``
    site "resid_pre"   [B, T, hidden]  the residual stream entering block ``layer`` (``hidden_states[layer]``)
    site "resid_post"  [B, T, hidden]  the residual stream leaving block ``layer``
    site "mlp_out"     [B, T, hidden]  block ``layer``'s MLP output (``core.model.parts``: ``mlp``, else ``mlp_output``)
    site "embeddings"  [B, T, hidden]  the input embedding module's output (``get_input_embeddings()``: the word
                                       embeddings; positions and token types are added after it, Gemma's scale in it)

    value "zero"       zeros
    value "mean"       each row's mean over all the pass's tokens (mean ablation)
    value a tensor     another run's activation: ``[T, …]`` for every row, or ``[B, T, …]`` (or ``[1, T, …]``) row by
                       row; the replaced positions take the tensor's own positions
    value a function   ``f(activation) -> activation`` of the whole ``[B, T, …]`` activation; the replaced cells take
                       its result (with ``rows`` and ``positions`` None, the result may have another batch size:
                       ``batch_copies``)

``positions`` and ``rows`` (tuples of indices, None = all) select the cells replaced; the others keep the model's
values. The replacements of one site apply in the spec's order, each reading what the ones before left.

Example: heads 2 and 5 of layer 3 knocked out in batch row 0, and row 1's residual stream entering block 4 at token 7
taken from a clean run ``clean [T, hidden]``::

    spec = Intervention((Replace("head", 3, 2, rows=(0,)), Replace("head", 3, 5, rows=(0,)),
                         Replace("resid_pre", 4, value=clean, positions=(7,), rows=(1,))))
    with intervened(model, spec):
        logits = model(input_ids).logits           # or: run_with_interventions(model, spec, input_ids=input_ids)

Everything acts only on passes run in the calling thread, inside the ``with`` block, and is removed on leaving, also
after an exception (``core.model.hooks``); a ``Recorder`` opened inside keeps recording under the replacements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Literal

import torch

from core.model.attention_layers import SINGLE_STACK
from core.model.hooks import hooked, replacing_input, replacing_output
from core.model.parts import parts_of
from core.model.recording import Recorder

Site = Literal["head", "resid_pre", "resid_post", "mlp_out", "embeddings"]
SITES = ("head", "resid_pre", "resid_post", "mlp_out", "embeddings")
Value = Literal["zero", "mean"] | torch.Tensor | Callable[[torch.Tensor], torch.Tensor]
VALUES = ("zero", "mean")


@dataclass(frozen=True, eq=False)
class Replace:
    """One replacement (see the module docstring): ``site`` of block ``layer`` (and ``head``) of ``stack`` ("self",
    or an encoder-decoder's "encoder", "decoder", "cross"), at ``positions`` of batch ``rows``, becomes ``value``."""

    site: Site
    layer: int | None = None
    head: int | None = None
    value: Value = "zero"
    positions: tuple[int, ...] | None = None
    rows: tuple[int, ...] | None = None
    stack: str = SINGLE_STACK

    def __post_init__(self) -> None:
        if self.site not in SITES:
            raise ValueError(f"a site is one of {', '.join(SITES)}, not {self.site!r}")
        if (self.site == "embeddings") != (self.layer is None):
            raise ValueError(f"site {self.site!r} takes {'no layer' if self.site == 'embeddings' else 'a layer'}")
        if (self.site == "head") != (self.head is not None):
            raise ValueError(f"site {self.site!r} takes {'a head' if self.site == 'head' else 'no head'}")
        if isinstance(self.value, str) and self.value not in VALUES:
            raise ValueError(f"a value is 'zero', 'mean', a tensor or a function, not {self.value!r}")
        for name in ("positions", "rows"):
            chosen = getattr(self, name)
            if chosen is not None:
                object.__setattr__(self, name, tuple(int(i) for i in chosen))

    @property
    def whole(self) -> bool:
        """Every cell of the activation is replaced (no ``positions``, no ``rows``)."""
        return self.positions is None and self.rows is None


@dataclass(frozen=True, eq=False)
class Intervention:
    """What a forward pass replaces: ``replacements`` in order (an empty spec changes nothing)."""

    replacements: tuple[Replace, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "replacements", tuple(self.replacements))

    def __add__(self, other: Intervention) -> Intervention:
        return Intervention(self.replacements + other.replacements)


def replace_heads(heads: Iterable[tuple], value: Value = "zero", *, rows: tuple[int, ...] | None = None) -> Intervention:
    """Heads ``(layer, head)`` (or ``(stack, layer, head)``) replaced by ``value`` ("zero": knocked out; "mean": mean
    ablation) in batch ``rows`` (None: all)."""
    found = []
    for key in heads:
        stack, layer, head = key if len(key) == 3 else (SINGLE_STACK, *key)
        found.append(Replace("head", int(layer), int(head), value=value, rows=rows, stack=stack))
    return Intervention(tuple(found))


def batch_copies(layer: int, copies: int, stack: str = SINGLE_STACK) -> Intervention:
    """A batch of one entering block ``layer`` leaves it as ``copies`` equal rows: the blocks before it run once for
    all of them (a replacement at this block or later cannot change them); masks and positions keep their batch of
    one and broadcast. Put it before replacements that pick ``rows`` of the copies."""
    def expand(x: torch.Tensor) -> torch.Tensor:
        return x.expand(copies, *x.shape[1:]).contiguous() if x.shape[0] == 1 else x
    return Intervention((Replace("resid_pre", int(layer), value=expand, stack=stack),))


def _cells(replace: Replace, x: torch.Tensor) -> tuple:
    """The index of ``x``'s replaced cells ``[rows, positions]``."""
    def index(chosen: tuple[int, ...] | None) -> torch.Tensor | slice:
        return slice(None) if chosen is None else torch.tensor(chosen, dtype=torch.long, device=x.device)
    rows, positions = index(replace.rows), index(replace.positions)
    if isinstance(rows, torch.Tensor) and isinstance(positions, torch.Tensor):
        return rows[:, None], positions[None, :]
    return rows, positions


def _tensor_cells(value: torch.Tensor, replace: Replace, x: torch.Tensor) -> torch.Tensor:
    """``value`` (``[T, …]``, ``[1, T, …]`` or ``[B, T, …]``) at the replaced cells, broadcastable to ``x[_cells(…)]``."""
    value = value.to(x.dtype)
    if value.dim() == x.dim() - 1:
        value = value[None]
    elif replace.rows is not None and value.shape[0] > 1:
        value = value[list(replace.rows)]
    return value if replace.positions is None else value[:, list(replace.positions)]


def _whole(value: Value, x: torch.Tensor) -> torch.Tensor:
    """What the whole activation ``x`` becomes (it may be ``value`` itself or a view: never written into)."""
    if isinstance(value, torch.Tensor):
        value = value.to(x.dtype)
        return value[None].expand(x.shape[0], *value.shape) if value.dim() == x.dim() - 1 else value
    if callable(value):
        return value(x)
    return torch.zeros_like(x) if value == "zero" else x.mean(dim=1, keepdim=True).expand_as(x)


def _apply(x: torch.Tensor, replacements: list[Replace]) -> torch.Tensor:
    """``x`` with ``replacements`` applied in order (one site's activation); ``x`` itself is never written into."""
    out, owned = x, False
    for replace in replacements:
        value = replace.value
        if replace.whole:
            out, owned = _whole(value, out), False
            continue
        cells = _cells(replace, out)
        if isinstance(value, torch.Tensor):
            new = _tensor_cells(value, replace, out)
        elif callable(value):
            new = value(out)[cells]
        elif value == "zero":
            new = 0.0
        else:  # each row's mean over the tokens, read before any cell of this replacement is written
            new = out.mean(dim=1, keepdim=True)
            new = new if replace.rows is None else new[list(replace.rows)]
        if not owned:
            out, owned = out.clone(), True
        out[cells] = new
    return out


def _head_replacement(replacements: list[Replace]):
    """What ``Recorder.replace`` takes for one head: None (zeros, its fast path) or a function of ``[B, T, d]``."""
    if len(replacements) == 1 and replacements[0].whole and isinstance(replacements[0].value, str) \
            and replacements[0].value == "zero":
        return None
    return lambda x: _apply(x, replacements)


def _grouped(spec: Intervention) -> dict[tuple, list[Replace]]:
    groups: dict[tuple, list[Replace]] = {}
    for replace in spec.replacements:
        groups.setdefault((replace.site, replace.stack, replace.layer, replace.head), []).append(replace)
    return groups


@contextmanager
def intervened(model: torch.nn.Module, spec: Intervention | Iterable[Replace]) -> Iterator[None]:
    """Inside this block, every forward pass of ``model`` (or of a module inside it, such as its base model) run in
    this thread replaces what ``spec`` says. Raises ``UnsupportedArchitecture`` (a sentence, ``core.model.parts.parts_of``)
    for a layer of a model whose attention the app does not record, ``ValueError`` for a layer or head it does not
    have."""
    spec = spec if isinstance(spec, Intervention) else Intervention(tuple(spec))
    groups = _grouped(spec)
    hooks, heads = [], {}
    parts = parts_of(model) if any(site != "embeddings" for site, *_ in groups) else None
    for (site, stack, layer, head), replacements in groups.items():
        def apply(x: torch.Tensor, replacements=replacements) -> torch.Tensor:
            return _apply(x, replacements)
        if site == "embeddings":
            hooks.append(replacing_output(model.get_input_embeddings(), apply))
            continue
        layers = parts.stacks.get(stack, ())
        if not 0 <= layer < len(layers):
            raise ValueError(f"there is no layer {layer} in the {stack!r} stack ({len(layers)} layers)")
        part = layers[layer]
        if site == "head":
            if not 0 <= head < parts.heads:
                raise ValueError(f"there is no head {head} in layer {layer} ({parts.heads} heads)")
            heads[(stack, layer, head)] = _head_replacement(replacements)
        elif site == "resid_pre":
            hooks.append(replacing_input(part.block, apply))
        elif site == "resid_post":
            hooks.append(replacing_output(part.block, apply))
        else:
            hooks.append(replacing_output(part.mlp if part.mlp is not None else part.mlp_output, apply))
    with ExitStack() as stack:
        stack.enter_context(hooked(hooks))
        if heads:
            stack.enter_context(Recorder(model, keep_tensors=False, replace=heads))
        yield


def run_with_interventions(model: torch.nn.Module, spec: Intervention | Iterable[Replace], **inputs):
    """``model(**inputs)`` under ``spec`` (``intervened``): its output as the model returns it."""
    with intervened(model, spec):
        return model(**inputs)
