"""What does the model predict, and from which layer? Masked-word and next-token predictions, sampling and generation,
the logit lens, a language model's parts. Pages: Predictions, Guided tour."""
