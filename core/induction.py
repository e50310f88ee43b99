"""``core.induction``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.attention_heads.induction``."""

from core.attention_heads.induction import InductionScores, RepeatLoss, induction_scores, repeat_loss, repeated_tokens

__all__ = [
    "induction_scores", "InductionScores", "repeat_loss", "repeated_tokens", "RepeatLoss"
]
