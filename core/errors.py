"""The error every computation raises for input it cannot analyse; its message is a sentence for the user.

Its own module, with no heavy import, so that a helper process (``core.projection.run_isolated``) can raise and
catch it without importing torch.
"""

from __future__ import annotations


class AnalysisError(ValueError):
    """The text cannot be analysed. The message is a sentence meant for the user."""
