"""``core.parts``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.model.parts``."""

from core.model.parts import PROBE_TOKENS, LayerParts, ModelParts, blocks_of, layer_parts, parts_of

__all__ = [
    "blocks_of", "layer_parts", "LayerParts", "ModelParts", "parts_of", "PROBE_TOKENS"
]
