"""``core.hooks``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.model.hooks``."""

from core.model.hooks import Hook, Kind, first_tensor, hooked, keeping_call, main_input, replacing_input, replacing_output, with_input

__all__ = [
    "first_tensor", "Hook", "hooked", "keeping_call", "Kind", "main_input", "replacing_input", "replacing_output",
    "with_input"
]
