"""Does a part matter for the answer? Knock-outs, activation patching, token and direct logit attribution, information-
flow routes. Pages: Does it matter?, Patching, Information flow."""
