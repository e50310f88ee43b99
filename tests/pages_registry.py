"""The pages app.py registers, read from its PAGES table without running Streamlit."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _page_table() -> list[tuple[str, str, str, str]]:
    """app.py's PAGES: ``(file, title, icon, url path)`` per page."""
    tree = ast.parse((ROOT / "app.py").read_text())
    table = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES"
    )
    return [ast.literal_eval(entry) for entry in table.elts]


def landed_pages() -> list[tuple[str, str]]:
    """``(file, url path)`` for every page in app.py's PAGES."""
    return [(file, path) for file, _title, _icon, path in _page_table()]


def page_titles() -> dict[str, str]:
    """The navigation title of every page in app.py's PAGES, by url path ("" for home)."""
    return {path: title for _file, title, _icon, path in _page_table()}
