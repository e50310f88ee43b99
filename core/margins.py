"""``core.margins``, the path named by README.md or docs/ before issue 37 item 6; the module is ``core.maths.margins``."""

from core.maths.margins import leads_from, plateau, runs

__all__ = [
    "leads_from", "plateau", "runs"
]
