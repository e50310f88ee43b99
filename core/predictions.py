"""``core.predictions``, the path named by issue 37 (constraints) and the README; the module is ``core.outputs.predictions``."""

from core.outputs.predictions import MAX_TOP_K, MODELS_WITH_HEAD, LanguageModel, NoLanguageModelHead, Predictions, load_language_model, predict

__all__ = [
    "LanguageModel", "load_language_model", "MAX_TOP_K", "MODELS_WITH_HEAD", "NoLanguageModelHead", "predict",
    "Predictions"
]
