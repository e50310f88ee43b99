"""The one base of every error ``core`` raises on purpose: its message is a sentence for the user.

Its own module, with no heavy import, so that a helper process (``core.maths.projection.run_isolated``) can raise and
catch these without importing torch. ``ui.errors`` shows any ``UserFacingError`` as its message and logs the rest.
"""

from __future__ import annotations


class UserFacingError(Exception):
    """An input or a model the app cannot handle. The message is a sentence meant for the user."""


class AnalysisError(UserFacingError, ValueError):
    """The text cannot be analysed (a ``ValueError`` too: it is a bad input)."""


class PassStopped(Exception):
    """Not an error: raised inside a forward pass to end it once what was wanted is recorded, and caught where the pass
    was started (never reaches a page)."""
