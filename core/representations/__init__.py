"""What does a word's vector become, layer by layer? Comparing a word in two texts, contextuality, drift, senses and
placement, corpora. Pages: Compare, Drift, Senses."""
