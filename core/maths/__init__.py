"""Numbers every page may need, with no model: margins for noisy comparisons, cosine similarity, Spearman's rank test,
2-D projections and their alignment."""
