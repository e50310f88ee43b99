"""Activation patching against single, unbatched runs patched by hand with other hooks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.causal.patching import Patching, UnequalLengths, patch_heads, patch_mlps, patch_residual
from tests.lm_factory import logit_difference, tiny_lm  # noqa: F401 (fixture)
from viz.patching import patching_heatmap, patching_sentence

CLEAN, CORRUPTED = "I will hike along the bank of a", "I will open along the bank of a"
ANSWER, WRONG = " home", " river"


def _ids(lm, text):
    return lm.tokenizer(text, return_tensors="pt")["input_ids"]


def _blocks(lm):
    base = getattr(lm.model, "transformer", None) or lm.model.model
    return list(base.h) if hasattr(base, "h") else list(base.layers)


def _embedding_module(lm):
    base = getattr(lm.model, "transformer", None) or lm.model.model
    return base.drop if hasattr(base, "drop") else base.embed_tokens  # GPT-2: wte + wpe then dropout


def _diff(lm, ids, hook_module=None, hook=None, pre=False):
    return logit_difference(lm, ids, ANSWER, WRONG, hook_module, hook, pre=pre)


def _output_tensor(output):
    return output[0] if isinstance(output, tuple) else output


def test_residual_cells_equal_single_patched_runs(tiny_lm):
    lm = tiny_lm
    result = patch_residual(lm, CLEAN, CORRUPTED, ANSWER, WRONG)
    clean, corrupted = _ids(lm, CLEAN), _ids(lm, CORRUPTED)
    with torch.no_grad():
        hidden = lm.model(input_ids=clean, output_hidden_states=True).hidden_states
    blocks = _blocks(lm)
    assert result.grid.shape == (len(blocks), clean.shape[1])
    clean_diff, corrupted_diff = _diff(lm, clean), _diff(lm, corrupted)
    assert result.clean_diff == pytest.approx(clean_diff, abs=1e-5)
    for layer, t in [(0, 2), (1, 2), (1, clean.shape[1] - 1), (0, 0), (1, 4)]:
        # hidden_states[l] is block l's input: the embeddings' output for l = 0, block l - 1's output after
        def hook(module, args, output, t=t, layer=layer):
            x = _output_tensor(output).clone()
            x[0, t] = hidden[layer][0, t]
            return (x, *output[1:]) if isinstance(output, tuple) else x
        module = _embedding_module(lm) if layer == 0 else blocks[layer - 1]
        patched = _diff(lm, corrupted, module, hook)
        assert result.raw[layer, t] == pytest.approx(patched, abs=1e-4)
        expected = (patched - corrupted_diff) / (clean_diff - corrupted_diff)
        assert result.grid[layer, t] == pytest.approx(expected, abs=1e-4 / abs(clean_diff - corrupted_diff))
    # before the first token that differs the two runs are the same: patching there changes nothing
    assert np.allclose(result.raw[:, :2], corrupted_diff, atol=1e-4)
    # the prompts differ only at position 2: patching the embeddings there gives the clean run
    assert result.raw[0, 2] == pytest.approx(clean_diff, abs=1e-4)


def test_head_cells_equal_single_patched_runs(tiny_lm):
    lm = tiny_lm
    result = patch_heads(lm, CLEAN, CORRUPTED, ANSWER, WRONG)
    clean, corrupted = _ids(lm, CLEAN), _ids(lm, CORRUPTED)
    blocks = _blocks(lm)
    projections = [b.attn.c_proj if hasattr(b, "attn") else b.self_attn.o_proj for b in blocks]
    heads = lm.model.config.num_attention_heads
    width = lm.model.config.hidden_size // heads
    assert result.grid.shape == (len(blocks), heads)
    clean_diff, corrupted_diff = _diff(lm, clean), _diff(lm, corrupted)
    for layer, head in [(0, 0), (0, 3), (1, 2)]:
        store = {}
        _diff(lm, clean, projections[layer], lambda m, args, store=store: store.update(z=args[0].clone()), pre=True)

        def hook(module, args, layer=layer, head=head, store=store):
            z = args[0].clone()
            z[..., head * width:(head + 1) * width] = store["z"][..., head * width:(head + 1) * width]
            return (z,)
        patched = _diff(lm, corrupted, projections[layer], hook, pre=True)
        assert result.raw[layer, head] == pytest.approx(patched, abs=1e-4)
        expected = (patched - corrupted_diff) / (clean_diff - corrupted_diff)
        assert result.grid[layer, head] == pytest.approx(expected, abs=1e-4 / abs(clean_diff - corrupted_diff))


def test_mlp_cells_equal_single_patched_runs(tiny_lm):
    lm = tiny_lm
    result = patch_mlps(lm, CLEAN, CORRUPTED, ANSWER, WRONG)
    clean, corrupted = _ids(lm, CLEAN), _ids(lm, CORRUPTED)
    blocks = _blocks(lm)
    clean_diff, corrupted_diff = _diff(lm, clean), _diff(lm, corrupted)
    for layer, t in [(0, 2), (1, clean.shape[1] - 1)]:
        store = {}
        _diff(lm, clean, blocks[layer].mlp, lambda m, a, out, store=store: store.update(m=out.clone()))

        def hook(module, args, output, t=t, store=store):
            x = output.clone()
            x[0, t] = store["m"][0, t]
            return x
        patched = _diff(lm, corrupted, blocks[layer].mlp, hook)
        assert result.raw[layer, t] == pytest.approx(patched, abs=1e-4)
        expected = (patched - corrupted_diff) / (clean_diff - corrupted_diff)
        assert result.grid[layer, t] == pytest.approx(expected, abs=1e-4 / abs(clean_diff - corrupted_diff))


def test_batches_of_any_size_give_the_same_grid_and_hooks_are_removed(tiny_lm, monkeypatch):
    import core.causal.patching

    lm = tiny_lm
    before = _diff(lm, _ids(lm, CORRUPTED))
    whole = patch_residual(lm, CLEAN, CORRUPTED, ANSWER, WRONG)
    monkeypatch.setattr(core.causal.patching, "MAX_BATCH_TOKENS", 7)  # about one patched copy per forward pass
    progress = []
    single = patch_residual(lm, CLEAN, CORRUPTED, ANSWER, WRONG, progress=lambda d, t: progress.append((d, t)))
    np.testing.assert_allclose(whole.raw, single.raw, atol=1e-4)
    assert progress[-1] == (whole.grid.size, whole.grid.size) and len(progress) > whole.grid.shape[1]
    assert all(a[0] < b[0] for a, b in zip(progress, progress[1:]))
    assert _diff(lm, _ids(lm, CORRUPTED)) == before  # nothing left hooked


def test_unequal_lengths_show_both_tokenisations(tiny_lm):
    with pytest.raises(UnequalLengths) as err:
        patch_residual(tiny_lm, CLEAN, CLEAN + " river", ANSWER, WRONG)
    message = str(err.value)
    assert "“·a”" in message and "“·river”" in message and "same length" in message
    with pytest.raises(ValueError, match="not one"):
        patch_heads(tiny_lm, CLEAN, CORRUPTED, " hippopotamus", WRONG)


def _two_layer_result(clean_diff: float, corrupted_diff: float) -> Patching:
    grid = np.array([[0.0, 0.2, 1.0], [0.1, 0.9, 0.3]])
    raw = corrupted_diff + grid * (clean_diff - corrupted_diff)
    return Patching("residual", grid, raw, clean_diff, corrupted_diff, ["a", " b", " c"], ["a", " d", " c"], 5, 6)


def test_a_two_layer_grid_has_one_tick_per_layer_and_room_for_its_colour_bar():
    fig = patching_heatmap(_two_layer_result(3.0, -1.0))
    assert fig.layout.yaxis.dtick == 1 and fig.layout.yaxis.tick0 == 0  # no "0.5" layer
    assert fig.layout.height >= 300  # the colour bar's five labels do not overlap (tests/browser/test_slides.py)


def test_the_sentence_names_the_strongest_cell_and_warns_when_the_prompts_barely_differ():
    clear = patching_sentence(_two_layer_result(3.0, -1.0), " Mary", " John")
    assert "layer 0 at position 2 (“·c”): 100%" in clear and "noise" not in clear
    close = patching_sentence(_two_layer_result(0.05, 0.04), " Mary", " John")
    assert "by only 0.01" in close and "mostly noise" in close


def _grid_result(grid: np.ndarray, kind: str = "residual") -> Patching:
    tokens = ["a", " b", " c"][: grid.shape[1]] if kind != "heads" else ["a", " b"]
    return Patching(kind, grid, grid * 4 - 1, 3.0, -1.0, tokens, tokens, 5, 6)


def test_the_sentence_names_a_plateau_as_a_range_of_layers_not_its_noisy_argmax():
    """Issue 40, item 6: layers 0-3 at position 1 restore 99-102 %; the best of them (layer 2) is noise."""
    grid = np.array([[0.0, 1.000, 0.00], [0.0, 0.992, 0.01], [0.0, 1.017, 0.02], [0.0, 0.995, 0.10],
                     [0.0, 0.500, 0.40], [0.0, -0.004, 0.98]])
    said = patching_sentence(_grid_result(grid), " Mary", " John")
    assert "restores up to 102% of the way from corrupted (0) to clean (1); 5 cells are within 5 points of that: " \
           "position 1 (“·b”) at layers 0–3 (99%–102%); and position 2 (“·c”) at layer 5 (98%)." in said, said
    assert "layer 2 at position 1" not in said
    heads = np.array([[0.10, 0.42], [0.40, 0.05]])
    said = patching_sentence(_grid_result(heads, "heads"), " Mary", " John")
    assert "2 heads are within 5 points of that: head 1 of layer 0 (42%); and head 0 of layer 1 (40%)." in said, said
    said = patching_sentence(_grid_result(np.array([[0.0, 0.9, -0.004], [0.0, -0.004, 0.5]])), " Mary", " John")
    assert "most at layer 0 at position 1 (“·b”): 90% of the way from corrupted (0) to clean (1); no other cell " \
           "comes within 5 points of it." in said, said


@pytest.fixture(scope="module", params=["gemma3_text", "mistral"])
def sliding_lm(request, tmp_path_factory):
    """A tiny random causal LM whose sliding window (4 tokens) is shorter than the prompts: its key/value cache keeps
    only the window, which patching's prefix cache must still be able to cut back."""
    from core.model.models import load_model
    from core.outputs.predictions import load_language_model
    from tests.model_factory import build_tiny_decoder

    folder = build_tiny_decoder(tmp_path_factory.mktemp("models") / f"tiny-{request.param}", request.param)
    return load_language_model(load_model(str(folder)))


def test_residual_and_mlp_cells_past_a_sliding_window_equal_single_patched_runs(sliding_lm):
    lm = sliding_lm
    residual, mlps = patch_residual(lm, CLEAN, CORRUPTED, ANSWER, WRONG), patch_mlps(lm, CLEAN, CORRUPTED, ANSWER, WRONG)
    clean, corrupted = _ids(lm, CLEAN), _ids(lm, CORRUPTED)
    assert clean.shape[1] > 4  # past the window
    blocks = _blocks(lm)
    with torch.no_grad():
        hidden = lm.model(input_ids=clean, output_hidden_states=True).hidden_states
    clean_mlp = {}
    hooks = [block.mlp.register_forward_hook(lambda m, a, out, layer=layer: clean_mlp.__setitem__(layer, out.clone()))
             for layer, block in enumerate(blocks)]
    with torch.no_grad():
        lm.model(input_ids=clean)
    for hook in hooks:
        hook.remove()
    last = clean.shape[1] - 1
    for layer, t in [(1, 2), (1, last), (0, last - 1), (1, 5)]:
        def block_input(module, args, output, t=t, layer=layer):
            x = _output_tensor(output).clone()
            x[0, t] = hidden[layer][0, t]
            return (x, *output[1:]) if isinstance(output, tuple) else x
        module = _embedding_module(lm) if layer == 0 else blocks[layer - 1]
        assert residual.raw[layer, t] == pytest.approx(_diff(lm, corrupted, module, block_input), abs=1e-4)

        def mlp_output(module, args, output, t=t, layer=layer):
            x = output.clone()
            x[0, t] = clean_mlp[layer][0, t]
            return x
        assert mlps.raw[layer, t] == pytest.approx(_diff(lm, corrupted, blocks[layer].mlp, mlp_output), abs=1e-4)
