"""The house rules the source itself must keep: imports go down the layers (pages -> ui -> viz -> core) and never
in a circle, and no application module patches a third-party library (no replaced functions, no import hooks).

Every ``import`` in a file counts, at module level or inside a function: a deferred import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "viz", "ui", "app_pages")
LAYER = {"core": 0, "viz": 1, "ui": 2, "app_pages": 3, "app": 4, "serve": 4}
# What each layer must never import, beyond the layers above it.
FORBIDDEN_LIBRARIES = {"core": ("streamlit",), "viz": ("streamlit",)}


def _modules() -> dict[str, Path]:
    found = {"app": ROOT / "app.py", "serve": ROOT / "serve.py"}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _imported_names(tree: ast.AST) -> list[tuple[str, int]]:
    """Every module name a file imports, with its line; ``from a import b`` yields ``a.b`` when that is a module."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append((node.module, node.lineno))
            names += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in {"importlib.import_module", "import_module"} \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.append((node.args[0].value, node.lineno))  # an import by name is still a dependency
    return names


def _project_imports(name: str) -> set[str]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    return {imported for imported, _ in _imported_names(tree) if imported in MODULES and imported != name}


def _layer(name: str) -> int:
    return LAYER[name.split(".")[0]]


def test_the_walk_finds_the_application():
    assert {"core.model.inference", "ui.session", "viz.attention", "app_pages.home", "app"} <= set(MODULES)


def test_every_import_goes_down_the_layers():
    upward = [
        f"{name} imports {target}"
        for name in MODULES
        for target in _project_imports(name)
        if _layer(target) > _layer(name)
    ]
    assert upward == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN_LIBRARIES))
def test_core_and_viz_import_no_streamlit(package):
    offending = [
        f"{name}:{line} imports {imported}"
        for name, path in MODULES.items() if name.split(".")[0] == package
        for imported, line in _imported_names(ast.parse(path.read_text(encoding="utf-8")))
        if imported.split(".")[0] in FORBIDDEN_LIBRARIES[package]
    ]
    assert offending == []


# Issue 37 item 6: core's sub-packages by question, lowest first. A module imports only from its own package, the
# packages before it and ``core.errors`` (the one error base, below them all). Issue 49 item 2: nothing else sits at the
# top of core/ (the flat re-exporting modules are gone; a public name has one address, docs/architecture.md).
CORE_PACKAGES = ("model", "maths", "outputs", "attention_heads", "representations", "causal", "teaching", "workshop")
CORE_BASE = ("core", "core.errors")


def _core_rank(name: str) -> int:
    """-1 for the base, else the package's place in ``CORE_PACKAGES``."""
    return -1 if name in CORE_BASE else CORE_PACKAGES.index(name.split(".")[1])


def _upward_core_imports() -> list[str]:
    return [f"{name} imports {target}" for name in MODULES if name.startswith("core")
            for target in _project_imports(name)
            if target.startswith("core") and _core_rank(target) > _core_rank(name)]


def test_every_core_module_is_in_a_package_or_is_the_base():
    assert {name.split(".")[1] for name in MODULES if name.count(".") >= 2 and name.startswith("core.")} == set(CORE_PACKAGES)
    flat = sorted(name for name in MODULES if name.startswith("core.") and name.count(".") == 1
                  and name not in CORE_BASE and name.split(".")[1] not in CORE_PACKAGES)
    assert flat == []


def test_core_packages_import_downward_only():
    assert _upward_core_imports() == []


def test_the_package_order_check_finds_an_upward_import(monkeypatch, tmp_path):
    """The check itself can fail: the model package importing from the causal tools is reported."""
    (tmp_path / "low.py").write_text("from core.causal.effects import ablate_heads\n")
    monkeypatch.setitem(MODULES, "core.model.low", tmp_path / "low.py")
    assert _upward_core_imports() == ["core.model.low imports core.causal.effects"]


def _repository_python_files() -> dict[str, Path]:
    found = {str(path.relative_to(ROOT)): path for folder in ("tests", "bench", "scripts", "deploy")
             for path in sorted((ROOT / folder).rglob("*.py"))}
    return found | {name: path for name, path in MODULES.items()}


OWN_TOP_LEVEL = {"core", "viz", "ui", "app_pages", "app", "serve", "tests", "bench", "scripts", "deploy"}


def _private_imports(tree: ast.AST) -> list[str]:
    """Each ``from <project module> import _name`` in a parsed file (relative imports included): a name another
    module keeps to itself. Dunder names (``__version__``) are public."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in OWN_TOP_LEVEL):
            found += [f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                      for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_name():
    """Issue 49 item 3: what several modules need is public where it belongs (product, tests, bench, scripts)."""
    reaching = {name: found for name, path in _repository_python_files().items()
                if (found := _private_imports(ast.parse(path.read_text(encoding="utf-8"))))}
    assert reaching == {}


@pytest.mark.parametrize(("source", "found"), [
    ("from core.model.inference import _token_limit\n", True),
    ("def f():\n    from viz.fit.width import a, _below_plot as b\n", True),
    ("from .sibling import _helper\n", True),
    ("from tests.model_factory import build_tiny_bert\n", False),
    ("from torch.nn import _reduction\n", False),  # another library's business, not the house's
    ("from core import __doc__\n", False),
])
def test_the_private_import_check_finds_each_kind(source, found):
    assert bool(_private_imports(ast.parse(source))) is found


def _borrowed(path: Path) -> set[str]:
    """Top-level names a module only imports (does not define itself)."""
    defined, imported = set(), set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return imported - defined


def _second_addresses(files: dict[str, Path]) -> list[str]:
    """``from X import N`` where X only imports N from elsewhere: N reached through a second address."""
    found = []
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
                borrowed = _borrowed(MODULES[node.module])
                found += [f"{name}:{node.lineno} imports {alias.name} from {node.module}, which only imports it"
                          for alias in node.names if alias.name in borrowed and f"{node.module}.{alias.name}" not in MODULES]
    return found


def test_every_name_is_imported_from_the_module_that_defines_it():
    """Issue 49 item 3: one address per class and function (``UnsupportedArchitecture`` was importable from
    core.model.recording and core.attention_heads.inside_head)."""
    assert _second_addresses(_repository_python_files()) == []


def test_the_address_check_finds_a_re_export(monkeypatch, tmp_path):
    (tmp_path / "low.py").write_text("class Error(Exception):\n    pass\n")
    (tmp_path / "mid.py").write_text("from core.model.low import Error\n\ndef f():\n    raise Error\n")
    (tmp_path / "user.py").write_text("from core.model.mid import Error, f\n")
    for module in ("low", "mid"):
        monkeypatch.setitem(MODULES, f"core.model.{module}", tmp_path / f"{module}.py")
    assert _second_addresses({"user": tmp_path / "user.py"}) == [
        "user:1 imports Error from core.model.mid, which only imports it"]


def test_no_two_application_classes_share_a_name():
    """One name, one class: two modules defining ``LayerQueriesKeys`` (the on-demand pass's and the query-key map's
    corpus layer) read as one class re-exported under two addresses."""
    where: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(name)
    assert {cls: modules for cls, modules in where.items() if len(modules) > 1} == {}


def _cycle() -> list[str] | None:
    graph = {name: sorted(_project_imports(name)) for name in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in graph[node]:
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in graph:
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_circle():
    assert _cycle() is None, " -> ".join(_cycle() or [])


@pytest.mark.parametrize("a_source", [
    "import b\n",
    # an import by name is a dependency too (the old ``__getattr__`` of core.model.inference made a circle this way)
    "import importlib\ndef f():\n    return importlib.import_module('b')\n",
])
def test_the_circle_check_finds_a_circle(a_source, monkeypatch, tmp_path):
    """The check itself can fail: two modules importing each other are reported."""
    (tmp_path / "a.py").write_text(a_source)
    (tmp_path / "b.py").write_text("from a import x\n")
    monkeypatch.setitem(MODULES, "a", tmp_path / "a.py")
    monkeypatch.setitem(MODULES, "b", tmp_path / "b.py")
    monkeypatch.setitem(LAYER, "a", 0)
    monkeypatch.setitem(LAYER, "b", 0)
    assert _cycle() is not None


def _patches(tree: ast.AST) -> list[str]:
    """Writes onto third-party code: ``name.attr = …`` / ``setattr(name, …)`` where ``name`` was imported from
    outside the project, and any use of ``sys.meta_path`` or ``sys.modules``."""
    outside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            outside |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] not in LAYER}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in LAYER:
                outside |= {a.asname or a.name for a in node.names}
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(target, ast.Attribute) and isinstance(base, ast.Name) and base.id in outside:
                found.append(f"line {node.lineno}: assigns {ast.unparse(target)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"setattr", "delattr"}:
            first = node.args[0] if node.args else None
            while isinstance(first, ast.Attribute):
                first = first.value
            if isinstance(first, ast.Name) and first.id in outside:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys" \
                and node.attr in {"meta_path", "modules", "path_hooks"}:
            found.append(f"line {node.lineno}: uses sys.{node.attr}")
    return found


def test_no_application_module_patches_a_library():
    patched = {name: found for name, path in MODULES.items()
               if (found := _patches(ast.parse(path.read_text(encoding="utf-8"))))}
    assert patched == {}


@pytest.mark.parametrize("source", [
    "import transformers\ntransformers.utils.is_scipy_available = lambda: False\n",
    "from streamlit.runtime import media_file_manager as m\nm.MediaFileManager.add_deferred = None\n",
    "import torch\nsetattr(torch.nn.functional, 'softmax', print)\n",
    "import sys\nsys.meta_path.insert(0, object())\n",
])
def test_the_patch_check_finds_each_kind_of_patch(source):
    assert _patches(ast.parse(source))


MAX_MODULE_LINES = 400


def test_every_application_module_holds_one_thing():
    """Issue 30: no application module over ~400 lines (split by what it is about instead)."""
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    assert len(sizes) > 60  # the walk saw the application
    too_long = {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


HOOK_METHODS = {"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
                "register_full_backward_pre_hook", "register_backward_hook"}
HOOK_MODULE = "core.model.hooks"  # issue 37: the one module of core/ that registers hooks (docs/architecture.md)


def _hook_calls(tree: ast.AST) -> list[str]:
    """Each call of a module-hook registration method in a parsed file, as ``line N: <method>``."""
    return [f"line {node.lineno}: {node.func.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in HOOK_METHODS]


def test_only_one_module_of_core_registers_hooks():
    registering = {name: found for name, path in MODULES.items() if name.startswith("core")
                   and (found := _hook_calls(ast.parse(path.read_text(encoding="utf-8"))))}
    assert set(registering) == {HOOK_MODULE}, registering


def test_the_hook_check_finds_a_registration():
    assert _hook_calls(ast.parse("handle = block.attn.c_proj.register_forward_pre_hook(fn, with_kwargs=True)\n"))
    assert _hook_calls(ast.parse("model.h[0].register_forward_hook(fn)\n"))
    assert not _hook_calls(ast.parse("with hooked([(block, 'pre', fn)]):\n    model(ids)\n"))


# Issue 49 item 4: a page reads widgets, calls core, calls viz and renders (docs/architecture.md, "Thin pages").
# Three things about that can be checked on the source: a page computes nothing with a numerical library (those
# numbers come from core, where they are tested), it reads no other page's options (a helper of its ui module does,
# by name), and a page's own ui module (``ui/<page>_page.py``) serves that one page.
NUMERICAL_LIBRARIES = ("numpy", "torch", "scipy", "sklearn", "re")
NOT_YET_THIN = {  # a page still computing in place, and why it is not moved yet
    "app_pages.flow": "the incoming keys' ranking belongs in core.causal.flow_reading, which another branch edits now",
}
PAGES = sorted(name for name in MODULES if name.startswith("app_pages."))


def _numerical_imports(tree: ast.AST) -> list[str]:
    return [f"line {line}: {imported}" for imported, line in _imported_names(tree)
            if imported.split(".")[0] in NUMERICAL_LIBRARIES]


def test_no_page_computes_with_a_numerical_library():
    computing = {name: found for name in PAGES if name not in NOT_YET_THIN
                 and (found := _numerical_imports(ast.parse(MODULES[name].read_text(encoding="utf-8"))))}
    assert computing == {}
    assert set(NOT_YET_THIN) <= set(PAGES)


def _reads_another_page(tree: ast.AST) -> list[str]:
    """Calls with a ``page=`` keyword (``ui.page_state.option_value(key, page=…)``): another page's option."""
    return [f"line {node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and any(keyword.arg == "page" for keyword in node.keywords)]


def test_no_page_reads_another_pages_options():
    assert {name: found for name in PAGES
            if (found := _reads_another_page(ast.parse(MODULES[name].read_text(encoding="utf-8"))))} == {}


def _page_of(ui_module: str) -> str:
    """``ui.qk_map_page`` -> ``app_pages.qk-map`` (a page file's name may hold a hyphen)."""
    stem = ui_module.removeprefix("ui.").removesuffix("_page")
    return next((page for page in PAGES if page.removeprefix("app_pages.").replace("-", "_") == stem), "")


def test_a_pages_own_ui_module_serves_that_page_only():
    own = sorted(name for name in MODULES if name.startswith("ui.") and name.endswith("_page"))
    assert own  # the walk saw them
    importers = {module: sorted(name for name in MODULES if module in _project_imports(name)) for module in own}
    assert {module: users for module, users in importers.items() if users != [_page_of(module)]} == {}


@pytest.mark.parametrize(("source", "check", "found"), [
    ("import numpy as np\n", _numerical_imports, True),
    ("def f():\n    from torch import nn\n", _numerical_imports, True),
    ("import re\n", _numerical_imports, True),
    ("import pandas as pd\nfrom core.maths.numbers import percent\n", _numerical_imports, False),
    ("value = option_value('text_a', page='compare')\n", _reads_another_page, True),
    ("value = option('text_a')\n", _reads_another_page, False),
])
def test_the_thin_page_checks_find_each_kind(source, check, found):
    assert bool(check(ast.parse(source))) is found


def test_no_page_indexes_an_analysis_s_stored_weights():
    """Issue 48, item 4: a view reads one head through ``core.attention_heads.attention.head_attention`` (stored or
    read from the trace), so it works past the 512 tokens whose weights an analysis keeps; ``analysis.attentions[l, h]``
    worked only below them (Compare, Does it matter? and the tour did)."""
    found = [f"{path.relative_to(ROOT)}:{number}" for folder in ("app_pages", "ui") for path in sorted((ROOT / folder).glob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if ".attentions[" in line]
    assert found == []
