"""``core.recorded_pass``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.model.recorded_pass``."""

from core.model.recorded_pass import RecordedPass, attention_weights, record_pass

__all__ = [
    "attention_weights", "record_pass", "RecordedPass"
]
