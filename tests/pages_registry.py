"""The pages app.py registers, read from its PAGES table without running Streamlit."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def landed_pages() -> list[tuple[str, str]]:
    """``(file, url path)`` for every page in app.py's PAGES."""
    tree = ast.parse((ROOT / "app.py").read_text())
    table = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES"
    )
    entries = [ast.literal_eval(entry) for entry in table.elts]
    return [(file, path) for file, _title, _icon, path in entries]
