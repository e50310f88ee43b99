"""Where does each token look, and how does one head compute it? Attention matrices as the views show them, one head
taken apart, head statistics, induction, long-context profiles, query-key maps, cross-attention, retrieval heads.
Pages: Attention, Maxima, Head statistics, Inside one head, Long context, Queries and keys, Needle in a haystack,
encoder-decoder views."""
