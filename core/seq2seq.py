"""``core.seq2seq``, the path named by issue 37 (constraints) and the README; the module is ``core.model.seq2seq``."""

from core.model.seq2seq import MAX_GENERATED_TOKENS, PairAnalysis, analyze_pair, decoder_start_token_id, generate_target, shift_right

__all__ = [
    "analyze_pair", "decoder_start_token_id", "generate_target", "MAX_GENERATED_TOKENS", "PairAnalysis",
    "shift_right"
]
