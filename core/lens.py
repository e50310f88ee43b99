"""``core.lens``, the path named by issue 37 (constraints) and the README; the module is ``core.outputs.lens``."""

from core.outputs.lens import LENS_SUPPORTED, MAX_K, Lens, MissingLanguageModelHead, language_model_of, logit_lens

__all__ = [
    "language_model_of", "Lens", "LENS_SUPPORTED", "logit_lens", "MAX_K", "MissingLanguageModelHead"
]
