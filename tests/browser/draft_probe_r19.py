import pytest
from tests.model_factory import build_tiny_bert_mlm
from tests.browser.test_navigation import navigate
pytestmark = pytest.mark.browser

def test_probe(app_page, tmp_path):
    app_page.patience_ms = 300_000
    app_page.context.set_default_timeout(300_000)
    for name, path, q in [("attention", "attention", {"layer": "1"}), ("stats", "stats", {"stat": "previous"})]:
        d = "/tmp/r19_mlm5" if name == "attention" else str(build_tiny_bert_mlm(tmp_path / name))
        app_page.open(path, {"model": d, **q})
        navigate(app_page, "predictions")
        t = app_page.page.locator('[data-testid="stMain"]').inner_text()
        print("PROBE", name, "Candidates to show" in t, t[t.find("info"):][:200].replace("\n", " ") if "Candidates to show" not in t else "", flush=True)
