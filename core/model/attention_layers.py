"""Which module of a model is which attention layer, found from the model's own module tree: each module's key
``(stack, layer)`` (the block number in its path; the stack "self" for a one-stack model, else "encoder", "decoder"
or "cross"), the modules that call the attention interface in the model's order, and the model a module was found in.
The recording (``core.model.recording``) and the lookup of a model's parts (``core.model.parts``) read these.
"""

from __future__ import annotations

import weakref

import torch

SINGLE_STACK = "self"  # the stack name of a model with one stack of attention layers (``Recorder.records``)


def record_keys(model: torch.nn.Module) -> dict[int, tuple[str, int]]:
    """``id(module) → (stack, layer)`` for every module of ``model`` inside a numbered block (see the module
    docstring): the block number is the first number in the module's path."""
    encoder = model.get_encoder() if getattr(model.config, "is_encoder_decoder", False) else None
    in_encoder = {id(m) for m in encoder.modules()} if encoder is not None else set()
    keys = {}
    for name, module in model.named_modules():
        layer = next((int(part) for part in name.split(".") if part.isdigit()), None)
        if layer is None:
            continue
        if encoder is None:
            stack = SINGLE_STACK
        elif id(module) in in_encoder:
            stack = "encoder"
        else:  # a decoder's self-attention is causal, its cross-attention is not (what each module declares)
            stack = "decoder" if getattr(module, "is_causal", True) else "cross"
        keys[id(module)] = (stack, layer)
    return keys


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules that call the attention interface, in the model's order: attention classes (``…Attention``,
    with a ``config``) inside a numbered block. Found once per model."""
    found = getattr(model, "_explorer_attention_modules", None)
    if found is None:
        keys = cached_record_keys(model)
        found = [m for m in model.modules()
                 if id(m) in keys and hasattr(m, "config") and type(m).__name__.endswith("Attention")]
        model._explorer_attention_modules = found
    if found and found[0] not in _MODEL_OF:
        for module in found:
            _MODEL_OF[module] = weakref.ref(model)
    return found


def recorded_by(model: torch.nn.Module, records) -> bool:
    """True when every ``LayerRecord`` of ``records`` was recorded on ``model`` itself: a result kept from an earlier
    load of the same checkpoint holds records of that load's modules, which views of this load cannot use."""
    own = {id(m) for m in attention_modules(model)}
    return all(id(record.module) in own for record in records)


_MODEL_OF: weakref.WeakKeyDictionary[torch.nn.Module, weakref.ref] = weakref.WeakKeyDictionary()


def model_of(attention: torch.nn.Module) -> torch.nn.Module | None:
    """The model ``attention`` was found in by ``attention_modules`` (so a record's module leads to the model's
    parts, ``core.model.parts.layer_parts``), or None."""
    ref = _MODEL_OF.get(attention)
    return None if ref is None else ref()


def cached_record_keys(model: torch.nn.Module) -> dict[int, tuple[str, int]]:
    """``record_keys(model)``, computed once per model."""
    keys = getattr(model, "_explorer_keys", None)
    if keys is None:
        keys = record_keys(model)
        model._explorer_keys = keys
    return keys
