"""The one module of ``core/`` that puts hooks on a model's modules (PyTorch's public ``register_forward_hook`` and
``register_forward_pre_hook``); every other module asks it.

A model is shared by every session through the cache, so a hook must never reach another user's pass: ``hooked``
registers hooks for one ``with`` block, they act only on passes run in the thread that registered them, and they
are removed on leaving, also after an exception. A hook is ``(module, kind, fn)``:

- ``"pre"``: ``fn(module, args, kwargs)`` before the module runs; it returns None (only reads) or
  ``(args, kwargs)`` to hand the module other inputs (``with_input`` builds them);
- ``"post"``: ``fn(module, args, output)`` after it; it returns None or an output to use instead;
  ``"post_kwargs"``: the same with the keyword arguments, ``fn(module, args, kwargs, output)``.

Interventions are specified once, in ``core.model.intervention``, which puts a head's replacement in
``core.model.recording.Recorder(replace=…)`` (inside the attention function, not here) and the residual stream's and
whole modules' through this module (``replacing_input``: a block's input; ``replacing_output``: a block's, an MLP's or
the embeddings' output). This module is also for reading activations (the recorded pass, the recorder's inputs,
direct logit attribution, the early stop of a pass) and for keeping the arguments a block was called with
(``keeping_call``).

Example::

    seen = {}
    with hooked([(block, "post", lambda _m, _a, out: seen.update(out=first_tensor(out)))]):
        model(input_ids)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal

import torch

Kind = Literal["pre", "post", "post_kwargs"]
Hook = tuple[torch.nn.Module, Kind, Callable]


@contextmanager
def hooked(hooks: Iterable[Hook]) -> Iterator[None]:
    """Inside this block, every hook of ``hooks`` acts on passes run in this thread (see the module docstring)."""
    owner = threading.get_ident()

    def in_this_thread(fn: Callable) -> Callable:
        def hook(*args):
            return fn(*args) if threading.get_ident() == owner else None
        return hook

    handles = []
    try:
        for module, kind, fn in hooks:
            if kind == "pre":
                handles.append(module.register_forward_pre_hook(in_this_thread(fn), with_kwargs=True))
            elif kind == "post":
                handles.append(module.register_forward_hook(in_this_thread(fn)))
            elif kind == "post_kwargs":
                handles.append(module.register_forward_hook(in_this_thread(fn), with_kwargs=True))
            else:
                raise ValueError(f"a hook is 'pre', 'post' or 'post_kwargs', not {kind!r}")
        yield
    finally:
        for handle in handles:
            handle.remove()


def main_input(args: tuple, kwargs: dict, name: str = "hidden_states") -> torch.Tensor | None:
    """A module's main input as a pre-hook sees it: the first positional argument, else the keyword ``name`` (Llama
    blocks get ``hidden_states`` as a keyword; a linear map's is ``input``)."""
    return args[0] if args else kwargs.get(name)


def with_input(args: tuple, kwargs: dict, value: torch.Tensor, name: str = "hidden_states") -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` a pre-hook returns to hand ``value`` on as the main input, where the old one came."""
    if args:
        return (value, *args[1:]), kwargs
    return args, {**kwargs, name: value}


def first_tensor(value) -> torch.Tensor | None:
    """A module's output as a tensor: itself, or the first element of a tuple (attention modules and blocks return
    ``(hidden, weights, …)``)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def replacing_input(module: torch.nn.Module, replace: Callable[[torch.Tensor], torch.Tensor]) -> Hook:
    """A hook that hands ``module`` ``replace(x)`` instead of its main input ``x`` (patching the residual stream:
    ``module`` a block, whose input is ``hidden_states[l]``)."""
    def pre(_module, args, kwargs):
        return with_input(args, kwargs, replace(main_input(args, kwargs)))
    return module, "pre", pre


def replacing_output(module: torch.nn.Module, replace: Callable[[torch.Tensor], torch.Tensor]) -> Hook:
    """A hook that makes ``module`` return ``replace(y)`` instead of its output ``y``: the output itself, or the first
    tensor of a tuple (a block's ``(hidden, …)``), whose other elements are kept."""
    def post(_module, _args, output):
        if isinstance(output, torch.Tensor):
            return replace(output)
        return (replace(first_tensor(output)), *output[1:])
    return module, "post", post


def keeping_call(module: torch.nn.Module, keep: Callable[[tuple, dict], None]) -> Hook:
    """A hook that hands ``keep(args, kwargs)`` the positional and keyword arguments ``module`` is called with, and
    changes nothing (``core.model.on_demand`` calls a block again on them)."""
    def pre(_module, args, kwargs):
        keep(args, kwargs)
    return module, "pre", pre
