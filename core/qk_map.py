"""``core.qk_map``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.attention_heads.qk_map``."""

from core.attention_heads.qk_map import (
    BATCH_SIZE,
    MAX_CORPUS_TOKENS,
    METHODS,
    UMAP_EPOCHS,
    CorpusQueriesKeys,
    LayerQueriesKeys,
    QueryKeyMap,
    QueryKeyMapError,
    normalise,
    project_points,
    query_key_map,
    record_corpus,
)

__all__ = [
    "BATCH_SIZE", "CorpusQueriesKeys", "LayerQueriesKeys", "MAX_CORPUS_TOKENS", "METHODS", "normalise",
    "project_points", "query_key_map", "QueryKeyMap", "QueryKeyMapError", "record_corpus", "UMAP_EPOCHS"
]
