"""``core.stacks``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.model.stacks``."""

from core.model.stacks import SIDES, STACK_LABELS, AttentionStack, HasStacks, stack_of, stacks_of

__all__ = [
    "AttentionStack", "HasStacks", "SIDES", "STACK_LABELS", "stack_of", "stacks_of"
]
