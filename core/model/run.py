"""The run key: what a cached result was computed from, in one frozen, hashable value.

Every cache of the app is keyed by a ``Run`` and, beside it, the view's own parameters (layer, head, method …). Two
runs are equal exactly when every field is equal, so a result can never be served for another model, text, token
limit, knock-out or model content. A notebook does not need it: ``core``'s functions take the model and the text.

    run = Run("all-MiniLM-L6-v2", ("The cat sat.",), max_tokens=256)
    run.text            # 'The cat sat.'
    run.digest          # 'e3b0c44298fc' (12 hex digits, the same in every process)
    run.ablated(((0, 2), (3, 5)), "zero")   # the same run with heads 2 of layer 0 and 5 of layer 3 knocked out
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

KNOCKOUT_METHODS = ("zero", "mean")


@dataclass(frozen=True)
class Ablation:
    """Heads knocked out of a run: ``heads`` ``((layer, head), …)`` in ascending order, and how (``"zero"`` or
    ``"mean"``, as ``core.causal.effects.ablate_heads`` takes them)."""

    heads: tuple[tuple[int, int], ...]
    method: str

    @classmethod
    def of(cls, heads, method: str) -> Ablation | None:
        """The ablation of ``heads`` (any order, repeats allowed) by ``method``; None when no head is knocked out."""
        chosen = tuple(sorted({(int(layer), int(head)) for layer, head in heads}))
        return cls(chosen, str(method)) if chosen else None


@dataclass(frozen=True)
class Run:
    """One model run's inputs: ``model`` (its name, as the sidebar and links write it), ``texts`` (one text, a
    corpus, or a source and a target), ``max_tokens`` (the token limit, None = the model's own), ``ablation`` (heads
    knocked out, or None) and ``revision`` (what identifies the model's content: a local folder's files, sizes and
    modification times, so a folder saved again is another run; ``()`` for a hub id or a bundled model)."""

    model: str
    texts: tuple[str, ...] = ()
    max_tokens: int | None = None
    ablation: Ablation | None = None
    revision: tuple = ()

    def __post_init__(self) -> None:
        if not isinstance(self.texts, tuple):
            raise TypeError(f"Run.texts must be a tuple of strings, got {type(self.texts).__name__}")
        if self.ablation is not None and not isinstance(self.ablation, Ablation):
            raise TypeError(f"Run.ablation must be an Ablation or None, got {type(self.ablation).__name__}")

    @property
    def text(self) -> str:
        """The run's one text (raises ``ValueError`` for a run over several)."""
        if len(self.texts) != 1:
            raise ValueError(f"this run reads {len(self.texts)} texts, not one")
        return self.texts[0]

    def ablated(self, heads, method: str) -> Run:
        """This run with ``heads`` knocked out by ``method`` (no heads: the plain run)."""
        return replace(self, ablation=Ablation.of(heads, method))

    def plain(self) -> Run:
        """This run without its knock-out."""
        return replace(self, ablation=None)

    @property
    def digest(self) -> str:
        """12 hexadecimal digits of a hash of every field: short, and the same in every process (``hash()`` is not)."""
        return hashlib.blake2b(repr(self).encode("utf-8"), digest_size=6).hexdigest()
