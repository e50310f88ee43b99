"""``core.lm_parts``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.outputs.causal_lm``."""

from core.outputs.causal_lm import SUPPORTED, causal_parts, encode, single_token

__all__ = [
    "causal_parts", "encode", "single_token", "SUPPORTED"
]
