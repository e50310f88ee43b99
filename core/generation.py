"""``core.generation``, the path named by issue 37 (constraints); the module is ``core.outputs.generation``."""

from core.outputs.generation import (
    Distribution,
    Generation,
    Step,
    branch_from_param,
    branch_to_param,
    generate,
    greedy_ids,
    last_logits,
    next_token_distribution,
    sampling_distribution,
    shape_distribution,
)

__all__ = [
    "branch_from_param", "branch_to_param", "Distribution", "generate", "Generation", "greedy_ids", "last_logits",
    "next_token_distribution", "sampling_distribution", "shape_distribution", "Step"
]
