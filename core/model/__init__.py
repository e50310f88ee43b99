"""Which model, and what did one forward pass record? Loading (bundled models, settings), the recording attention
function, the one recorded pass, on-demand attention, the model's parts, the Analysis, the run key, token labels and
layer numbering. Every page reads it."""
