"""Issue 19's every-page round trip in Chromium: every page's options survive a tour of the other pages and a reload.

With a tiny masked LM (so Predictions and Effects show their options). ``CHANGES`` / ``NOT_CHANGED`` must equal
the options each page declares (``declared_options`` reads literal keys, keys passed through a helper, and
``COMPUTED_KEYS``), so a new option fails until it is added. It found one defect: two model loads at once (the
start-up warm-up and a page) left transformers patched so that masked LMs were reported headless; fixed by
``core.model.models.WEIGHT_LOAD_LOCK`` (regression test in tests/test_page_state.py).
"""

from __future__ import annotations

import ast
import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.test_navigation import (
    choose,
    flip,
    main,
    navigate,
    path,
    pick_radio,
    press_head,
    press_segment,
    query,
    same_view,
    settle,
    slide_left,
    view,
)
from tests.browser.test_page_roundtrip import patient  # noqa: F401 - fixture used by name
from tests.model_factory import build_tiny_bert_mlm
from tests.pages_registry import ROOT, landed_pages

pytestmark = pytest.mark.browser

# --- every page: options survive a tour of the other pages and a reload ------------------------------------

BASS_LINES = "fish: The bass swam away.\nfish: A bass took the hook.\nmusic: The bass was loud.\nmusic: He tuned the bass."


def write(app, label: str, text: str) -> None:
    """Type ``text`` into the page's text box whose label starts with ``label``, and apply it as a user does
    (Ctrl+Enter in a text area, Enter in a one-line input)."""
    box = main(app.page).get_by_role("textbox", name=re.compile("^" + re.escape(label)))
    box.fill(text)
    settle(app, lambda: box.press("Control+Enter" if box.evaluate("e => e.tagName") == "TEXTAREA" else "Enter"))


def slide_right(app, label: str) -> None:
    slider = main(app.page).locator('[data-testid="stSlider"]').filter(has_text=label).get_by_role("slider")
    settle(app, lambda: slider.press("ArrowRight"))


def press_times(app, label: str, times: int) -> None:
    """Press the button labelled ``label`` ``times`` times."""
    for _ in range(times):
        settle(app, main(app.page).get_by_role("button", name=label).click)  # its name also holds the icon and the key


# The options each page declares that the test does not change, and why.
NOT_CHANGED = {
    ("attention", "bertviz"): "shown only in the BertViz view; the test uses the one-layer view",
    ("tour", "sentence"): "a step shows only its own options; this box is on step 8, and only when the sidebar's text "
                          "has no word with a built-in sense set; the test stays on step 7",
    ("tour", "layer"): "a step shows only its own options; this slider is on step 8, the test stays on step 7",
    ("tour", "track"): "shown only for a causal language model; tests/test_tour_lm.py round-trips ?track= on one",
    ("effects", "target"): "shown only while measuring the prediction; the test measures the sentence embedding",
    **{("patching", key): "patching needs a causal language model: with the test's masked LM the page is a sentence"
       for key in ("clean", "corrupted", "answer", "wrong", "view")},
    **{("needle", key): "a needle in a haystack needs a causal language model: with the test's masked LM the page is "
                        "a sentence" for key in ("needle", "question", "answer", "depth", "length", "heads", "grid")},
    **{("flow", key): "the list of details is labelled with the graph's edge and node counts, and the head box "
                      "appears only for an attention edge; the details are checked in tests/test_flow_page.py"
       for key in ("item", "head")},
}
ABLATED_TOGGLE = {"attention", "maxima", "compare"}
OFF_TOGGLE = "switch Ablated run=false"


def same_view_but_ablated_toggle(app, expected) -> None:
    """``same_view``, with the "Ablated run" switch present and off."""
    for _ in range(40):
        values, titles = view(app)
        now = ([v for v in values if v != OFF_TOGGLE], titles)
        if now == expected and OFF_TOGGLE in values:
            return
        app.page.wait_for_timeout(500)
    assert now == expected and OFF_TOGGLE in values, (now, values)


# url path -> [(action, widget label, choice, the parameter it writes)]: a non-default value for every option
# the page declares (``declared_options``), set by clicking the widget as a user does.
CHANGES = {
    "": [],  # the home page has no option of its own
    "tour": [  # step 7, "Still the same vector?", shows sentences A, B and the control C
        (press_times, "Next", 6, "step"),
        (write, "Sentence A", "I sat by the bank of the stream.", "a"),
        (write, "Sentence B", "The bank lent me some money today.", "b"),
        (write, "Sentence C", "We fished from the bank of the lake.", "c"),
    ],
    "attention": [  # the source last: norm-weighted disables the word-level toggle, which keeps its value
        (choose, "Special tokens", "hide", "special"), (flip, "Word level", None, "words"),
        (pick_radio, "Colour scale", "per head", "scale"), (choose, "Palette", "viridis", "palette"),
        (choose, "Layer (counted from 0)", "1", "layer"), (press_head, "Head", "3", "head"),
        (press_segment, "View", "one layer", "view"), (choose, "Attention source", "norm-weighted", "source"),
    ],
    "maxima": [  # the source last: norm-weighted disables the word-level toggle, which keeps its value
        (pick_radio, "Heads", "one head", "heads"), (choose, "Head (counted from 0)", "2", "head"),
        (flip, "Include special tokens", None, "special"), (flip, "Word level", None, "words"),
        (choose, "Layer (counted from 0)", "1", "layer"), (pick_radio, "Attention source", "norm-weighted", "source"),
    ],
    "stats": [(press_segment, "Average over", "example sentences", "over"), (choose, "Statistic", "previous token", "stat")],
    "inside": [
        (choose, "Layer (counted from 0)", "1", "layer"), (choose, "Head (counted from 0)", "2", "head"),
        (choose, "Query token", re.compile(r"^3: "), "query"),
    ],
    "compare": [  # the texts first: the shared words follow them
        (write, "Text A", "I will sit on the bank of the river.", "text_a"),
        (write, "Text B", "I will walk the bank of a stream with my dog.", "text_b"),
        (choose, "Layer (counted from 0)", "1", "layer"), (choose, "Head (counted from 0)", "2", "head"),
        (choose, "Word in both texts", "of", "word"),
        (write, "Control text", "We sat on the bank of the lake.", "text_c"),
    ],
    "predictions": [(slide_left, "Candidates to show", None, "top_k")],
    "patching": [],  # see NOT_CHANGED
    "needle": [],  # see NOT_CHANGED
    "flow": [(choose, "Token", re.compile(r"^1: "), "token"),
             (slide_right, "Threshold (share of a node's inputs)", None, "threshold")],
    "long-context": [  # the text last: the sidebar's text is shorter, so the length changes first on the bundled text
        (slide_left, "Length (tokens)", None, "length"), (press_segment, "Share", "on the sink", "measure"),
        (choose, "Layer (counted from 0)", "1", "layer"), (press_segment, "Text", "the sidebar's text", "source"),
    ],
    "effects": [  # the knock-out first: the token and position pickers appear below the parts it computes
        (pick_radio, "What to measure", "sentence embedding", "measure"),
        (write, "Heads to knock out", "L1H2", "heads"), (pick_radio, "Ablation", "mean", "ablation"),
        (choose, "Token the heads attend to", re.compile(r"\(position 1\)$"), "token"),
        (slide_right, "Integration steps", None, "steps"),
        (choose, "Position", re.compile(r"\(position 1\)$"), "position"),
    ],
    "drift": [
        (pick_radio, "Compare hidden state k with", "previous", "reference"),
        (choose, "Pooling (tokens → one vector)", "max", "pooling"), (flip, "Subtract baseline", None, "adjust"),
    ],
    "deck": [
        (write, "Deck title", "Heads at work", "title"), (write, "Author line", "A learner", "author"),
        (write, "Date", "1 December 2026", "date"), (press_segment, "Slides in", "Dark", "theme"),
        (flip, "A slide about the model", None, "about"),
    ],
    "room": [],  # no option: its code, key and learner id travel as page parameters once a room is open (test_room_live)
    "senses": [
        (press_segment, "Sentences", "Your sentences", "source"), (choose, "Word", "bass", "word"),
        (write, "One sentence per line", BASS_LINES, "lines"),
        (press_segment, "Projection", "PCA", "method"), (slide_left, "Hidden state", None, "layer"),  # PCA first: no UMAP per layer
    ],
}
# Option keys that are not a literal in the page's source (``key=f"text_{name.lower()}"``), by page and the key
# expression as ``ast.unparse`` writes it: the keys it produces. A new computed key fails the coverage check
# until it is added here.
COMPUTED_KEYS = {
    ("compare", "f'text_{name.lower()}'"): {"text_a", "text_b"},
    ("tour", "n.lower()"): {"a", "b"},
}


HAS_PARAM_JS = "(p) => new URLSearchParams(location.search).has(p)"


def wait_for_param(app, param: str) -> None:
    """A slider's key press can start its rerun after ``settle`` stopped watching: wait for the parameter it writes.
    When the URL holds it already, the rerun that wrote it is the one ``settle`` saw end."""
    if app.page.evaluate(HAS_PARAM_JS, param):
        return
    try:
        app.page.wait_for_function(HAS_PARAM_JS, arg=param, timeout=30_000)
    except PlaywrightTimeout:
        pass  # the assertion after it names the page and widget
    app.wait_until_idle()


# The ui modules a page's steps live in (the tour is a thin page over its tracks: docs/architecture.md, thin pages).
# The language-model track is not shown for this test's masked LM: tests/test_tour_lm.py round-trips its options.
PAGE_MODULES = {"tour": ("ui/tour_attention.py", "ui/tour_kit.py")}


def declared_options(page_file: str, url_path: str) -> set[str]:
    """The URL keys of the options ``page_file`` (and the ui modules that hold its steps, ``PAGE_MODULES``) declares."""
    keys = set()
    for file in (page_file, *PAGE_MODULES.get(url_path, ())):
        keys |= declared_in(file, url_path)
    return keys


def declared_in(page_file: str, url_path: str) -> set[str]:
    """The URL keys of the options ``page_file`` declares with ``option(..., key=...)`` (not the sidebar's
    ``app=True`` ones): literal keys; keys passed through a helper (``def own_text(label, key, default)`` calling
    ``option(..., key=key)``), read at the helper's calls; other computed keys from ``COMPUTED_KEYS``."""
    tree = ast.parse((ROOT / page_file).read_text())
    keys: set[str] = set()
    helpers: dict[str, int] = {}  # function name -> position of the parameter it passes as the key
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "option"):
            continue
        if any(k.arg == "app" for k in node.keywords):
            continue
        key = next(k.value for k in node.keywords if k.arg == "key")
        if isinstance(key, ast.Constant):
            keys.add(key.value)
            continue
        owner = next((f for f in functions if any(n is node for n in ast.walk(f))), None)
        parameters = [a.arg for a in owner.args.args] if owner else []
        if isinstance(key, ast.Name) and key.id in parameters:
            helpers[owner.name] = parameters.index(key.id)
            continue
        computed = COMPUTED_KEYS.get((url_path, ast.unparse(key)))
        assert computed, f"{page_file}: add the keys of key={ast.unparse(key)} to COMPUTED_KEYS"
        keys |= computed
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in helpers:
            argument = node.args[helpers[node.func.id]]
            assert isinstance(argument, ast.Constant), f"{page_file}: {ast.unparse(node)} names its key indirectly"
            keys.add(argument.value)
    return keys | shared_options(tree)


def shared_options(page: ast.Module) -> set[str]:
    """The literal option keys declared inside the ``ui`` functions a page imports and calls
    (``patching_prompts`` of ``ui/lm_views.py``, shared by the Patching page and the tour)."""
    called = {node.func.id for node in ast.walk(page) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    keys: set[str] = set()
    for node in page.body:
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ui.")):
            continue
        module = ast.parse((ROOT / (node.module.replace(".", "/") + ".py")).read_text())
        for function in module.body:
            if isinstance(function, ast.FunctionDef) and function.name in called & {a.name for a in node.names}:
                keys |= {k.value.value for call in ast.walk(function)
                         if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "option"
                         for k in call.keywords if k.arg == "key" and isinstance(k.value, ast.Constant)}
    return keys


def change_one_option(app) -> None:
    """For a page ``CHANGES`` has no entry for: move its first slider one step, or else flip its first switch,
    or else pick another entry in its first selectbox."""
    slider = main(app.page).get_by_role("slider").first
    if slider.count():
        before = slider.input_value()
        settle(app, lambda: slider.press("ArrowRight"))
        if slider.input_value() == before:  # it was at its maximum
            settle(app, lambda: slider.press("ArrowLeft"))
        return
    switch = main(app.page).locator('[data-testid="stCheckbox"]').filter(has=app.page.get_by_role("switch")).first
    if switch.count():
        settle(app, switch.locator("label").first.click)
        return
    box = main(app.page).get_by_role("combobox").first
    assert box.count(), "a page without a slider, a switch or a selectbox: add it to CHANGES"
    current = box.input_value()
    box.click()
    settle(app, app.page.get_by_role("option").filter(has_not_text=current).first.click)


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory) -> str:
    """A 2-layer × 4-head BERT with a masked-LM head, so the predictions page has its option too."""
    return str(build_tiny_bert_mlm(tmp_path_factory.mktemp("models") / "tour-bert"))


def test_every_page_keeps_its_view_through_the_others_and_a_reload(app_page, tiny_mlm_dir):
    """Every page of app.py's PAGES, with a tiny BERT (masked-LM head) chosen by a link.

    1. On each page in turn, every option the page declares (``option(..., key=...)`` in its file, less
       ``NOT_CHANGED``) is set to a non-default value by clicking its widget (``CHANGES``; the table must cover
       every declared option). A page missing from ``CHANGES`` (a page added later) gets one option changed
       generically. After each page: the URL holds the sidebar's and exactly the changed parameters.
    2. Then each page is visited again with the navigation, so between changing a page and coming back the
       test visited every other page (each holding its own changed options): the URL must hold that page's
       parameters and nothing foreign, and the page must show the same widget values and figure titles.
    3. Then each page's URL is loaded afresh (a reload: a new session from the URL), the last one with the
       browser's reload: same parameters, same widget values and figure titles.
    No error element, console error, dialog or outside request anywhere.
    """
    app = app_page
    app_params = {"model": tiny_mlm_dir}
    app.open("", app_params)
    pages = landed_pages()
    expected: dict[str, tuple[dict[str, str], tuple]] = {}
    for file, url_path in pages:
        if path(app.page) != url_path:  # the first page is open already (its own entry in the navigation runs nothing)
            navigate(app, url_path)
        assert query(app.page) == app_params, url_path  # a page not yet changed shows no parameter of its own
        changes = CHANGES.get(url_path)
        if changes is None:
            change_one_option(app)
            assert set(query(app.page)) > set(app_params), (url_path, query(app.page))
        else:
            covered = {param for *_, param in changes} | {p for page, p in NOT_CHANGED if page == url_path}
            assert declared_options(file, url_path) == covered, (url_path, declared_options(file, url_path) ^ covered)
            for action, label, choice, param in changes:
                action(app, label, choice) if choice is not None else action(app, label)
                wait_for_param(app, param)
                assert param in query(app.page), (url_path, label, query(app.page))
            assert set(query(app.page)) == set(app_params) | {param for *_, param in changes}, (url_path, query(app.page))
        app.assert_clean()
        expected[url_path] = (query(app.page), view(app))

    for _file, url_path in pages:
        navigate(app, url_path)
        params, shown = expected[url_path]
        assert query(app.page) == params, url_path
        # Since Effects knocked heads out, the attention, maxima and compare pages offer an "Ablated run" switch
        # (off: the same view); it belongs to this session, not to the page's options or URL.
        same_view_but_ablated_toggle(app, shown) if url_path in ABLATED_TOGGLE else same_view(app, shown)
        app.assert_clean()

    for _file, url_path in pages:
        params, shown = expected[url_path]
        app.open(url_path, params)
        for reload in range(2 if url_path == pages[-1][1] else 1):  # the last page also through the browser's reload
            if reload:
                app.page.reload()
                app.wait_until_idle()
            assert path(app.page) == url_path
            assert query(app.page) == params, url_path
            same_view(app, shown)
            app.assert_clean()
