"""Pages do not read module globals from nested functions.

Streamlit runs a page's script again on every interaction, in a fresh namespace: a function defined by one run (a
fragment, a callback, a figure builder handed to a cache) that reads a global of the page (a widget value, ``model``,
``analysis`` …) sees that run's value, not the current one. So every ``def`` and ``lambda`` in ``app_pages/`` gets what
it needs as arguments (or from its enclosing function); module constants (ALL_CAPS), imports and other functions of
the page are the same in every run and may be read.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PAGES = sorted((Path(__file__).resolve().parents[1] / "app_pages").glob("*.py"))
# Pages and functions other branches are changing at the time of writing; strict: an entry that no longer reads a
# global fails, so it is removed once fixed there
PENDING_PAGES: dict[str, str] = {}
PENDING_FUNCTIONS: dict[str, set[str]] = {}

Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _run_globals(tree: ast.Module) -> set[str]:
    """Names the page's top-level code assigns (not inside a function or class), except ALL_CAPS constants."""
    names: set[str] = set()

    class Stores(ast.NodeVisitor):
        def visit_FunctionDef(self, node):  # a function's own names are its locals
            pass

        visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Store):
                names.add(node.id)

    Stores().visit(tree)
    return {n for n in names if not n.isupper()}


def _own_names(function: Function) -> set[str]:
    """The parameters of ``function`` and the names it binds in its own body (not in functions nested in it)."""
    a = function.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None}
    body = function.body if isinstance(function.body, list) else [function.body]
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            names.difference_update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return names


def global_reads(source: str) -> list[str]:
    """``"line: function reads name"`` for every read of a run global from a def or lambda of ``source``."""
    tree = ast.parse(source)
    run_globals = _run_globals(tree)
    found = []

    def walk(node: ast.AST, enclosing: set[str], function: Function | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for default in (*node.args.defaults, *node.args.kw_defaults):  # evaluated where the function is defined
                if default is not None:
                    walk(default, enclosing, function)
            for decorator in getattr(node, "decorator_list", []):
                walk(decorator, enclosing, function)
            inner = enclosing | _own_names(node)
            for child in (node.body if isinstance(node.body, list) else [node.body]):
                walk(child, inner, node)
            return
        if function is not None and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.id in run_globals and node.id not in enclosing:
            found.append(f"{node.lineno}: {getattr(function, 'name', 'lambda')} reads {node.id}")
        for child in ast.iter_child_nodes(node):
            walk(child, enclosing, function)

    walk(tree, set(), None)
    return found


def test_the_check_finds_a_callback_reading_a_widget_value_and_passes_one_given_it():
    bad = "x = st.slider('x')\ndef show():\n    st.write(x)\nst.button('b', on_click=lambda: st.write(x))\n"
    assert global_reads(bad) == ["3: show reads x", "4: lambda reads x"]
    good = ("LIMIT = 3\nx = st.slider('x')\ndef show(x):\n    y = x + LIMIT\n    return [lambda: y]\n"
            "st.button('b', on_click=show, args=(x,))\n")
    assert global_reads(good) == []


@pytest.mark.parametrize("page", [
    pytest.param(p, id=p.name, marks=[pytest.mark.xfail(strict=True, reason=PENDING_PAGES[p.name])]
                 if p.name in PENDING_PAGES else []) for p in PAGES
])
def test_no_page_function_reads_a_global_of_the_page(page):
    found = global_reads(page.read_text())
    pending = PENDING_FUNCTIONS.get(page.name, set())
    assert {r.split(": ", 1)[1].split(" reads ")[0] for r in found} >= pending, "a pending function is fixed: unlist it"
    assert [r for r in found if r.split(": ", 1)[1].split(" reads ")[0] not in pending] == []
