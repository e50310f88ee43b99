"""``core.patching``, the path named by issue 37 (constraints); the module is ``core.causal.patching``."""

from core.causal.patching import MAX_BATCH_TOKENS, Kind, Patching, UnequalLengths, patch_heads, patch_mlps, patch_residual

__all__ = [
    "Kind", "MAX_BATCH_TOKENS", "patch_heads", "patch_mlps", "patch_residual", "Patching", "UnequalLengths"
]
