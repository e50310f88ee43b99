"""Issue 48: Information flow, then Long context on the sidebar's text, in one AppTest process run the model over that
text once: both read its trace (ui.results.traces). Counted by a process-wide forward pre-hook (PyTorch's public
``register_module_forward_pre_hook``) on the token embedding, over calls that embed the whole text."""

from __future__ import annotations

import pytest
import torch

from tests.lm_factory import build_tiny_llama_lm
from tests.test_app import open_app, page_errors

TEXT = "the river bank was flooded after the storm and the cat sat on the mat"  # a text no other test of this file reads


@pytest.mark.app
def test_information_flow_then_long_context_run_one_full_pass(tmp_path):
    folder = build_tiny_llama_lm(tmp_path / "llama")
    from core.model.models import load_model

    model = load_model(str(folder))
    ids = model.tokenizer(TEXT)["input_ids"]
    vocabulary = model.model.get_input_embeddings().num_embeddings
    passes = []

    def count(module, args):
        if isinstance(module, torch.nn.Embedding) and module.num_embeddings == vocabulary and args \
                and args[0].shape[-1] == len(ids):
            passes.append(module)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    try:
        at = open_app({"model": str(folder), "text": TEXT}, page="app_pages/flow.py")
        assert not page_errors(at), page_errors(at)
        assert at.get("plotly_chart"), "the route figure is drawn"
        after_flow = len(passes)
        at.query_params["source"] = "sidebar"
        at.query_params["length"] = "64"  # the tiny model's window: the limit the Flow page read the text at
        at.switch_page("app_pages/long-context.py").run()
        assert not page_errors(at), page_errors(at)
        assert [c.key for c in at.get("plotly_chart") if c.key][:1] == ["long-context-grid"]
        captions = " ".join(c.value for c in at.caption)
        assert f", {len(ids)} tokens; distance is" in captions  # it measured the sidebar's text, not the bundled one
    finally:
        handle.remove()
    assert after_flow == 1, f"Information flow ran {after_flow} full passes over the text"
    assert len(passes) == 1, f"Information flow and Long context ran {len(passes)} full passes over the text"
