"""``core.attention``, the path named by issue 37 (constraints) and issue 41 (item 2); the module is ``core.attention_heads.attention``."""

from core.attention_heads.attention import (
    AttentionView,
    HeadReduction,
    Maxima,
    SpecialTokens,
    attention_maxima,
    attention_view,
    head_attention,
    layer_attention,
    merge_words,
    norm_weighted,
    pairs_table,
    reduce_heads,
    rollout,
    row_normalise,
    special_share,
    special_tokens,
    token_view,
    top_attended,
    window_hidden,
    word_groups,
)

__all__ = [
    "attention_maxima", "attention_view", "AttentionView", "head_attention", "HeadReduction", "layer_attention",
    "Maxima", "merge_words", "norm_weighted", "pairs_table", "reduce_heads", "rollout", "row_normalise",
    "special_share", "special_tokens", "SpecialTokens", "token_view", "top_attended", "window_hidden",
    "word_groups"
]
