"""The intervention spec (core.model.intervention) against plain PyTorch hooks on plainly loaded models.

Each family is built twice from one saved folder: through the app's ``load_model`` (the spec acts on it) and with
transformers' ``AutoModel.from_pretrained`` and eager attention, where the reference is a hand-written forward hook
on a module named here by its attribute path (not found by ``core.model.parts``).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from core.model.intervention import Intervention, Replace, batch_copies, intervened, replace_heads, run_with_interventions
from core.model.models import load_model
from core.model.recording import Recorder
from tests.model_factory import build_tiny_bert, build_tiny_decoder, build_tiny_gpt2

TEXT, OTHER = "The cat sat on the mat and was happy", "A bass fish swims in the river and is happy"
FAMILIES = ["bert", "gpt2", "llama", "qwen2", "gemma3_text"]


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request, tmp_path_factory):
    """(the app's model, the plain model, input ids [1, T], another text's ids [1, T], family)."""
    folder = tmp_path_factory.mktemp("intervention") / request.param
    build = {"bert": build_tiny_bert, "gpt2": build_tiny_gpt2}.get(request.param)
    build(folder) if build else build_tiny_decoder(folder, request.param)
    loaded = load_model(str(folder))
    plain = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    ids = loaded.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    other = loaded.tokenizer(OTHER, return_tensors="pt", truncation=True, max_length=ids.shape[1])["input_ids"]
    assert other.shape == ids.shape, "the two texts must tokenise to the same length"
    return loaded.model, plain, ids, other, request.param


def _layers(plain, family):
    return {"bert": lambda: plain.encoder.layer, "gpt2": lambda: plain.h}.get(family, lambda: plain.layers)()


def _output_projection(plain, family, layer):
    block = _layers(plain, family)[layer]
    return {"bert": lambda: block.attention.output.dense, "gpt2": lambda: block.attn.c_proj}.get(
        family, lambda: block.self_attn.o_proj)()


def _mlp(plain, family, layer):
    block = _layers(plain, family)[layer]
    return block.output if family == "bert" else block.mlp  # BERT's holds its MLP's last map (parts' ``mlp``)


def _head_dim(plain) -> int:
    config = plain.config
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _last(model, ids, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, output_hidden_states=True, **kwargs).hidden_states[-1]


def _plain_with(plain, ids, module, hook, pre: bool) -> torch.Tensor:
    handle = module.register_forward_pre_hook(hook) if pre else module.register_forward_hook(hook)
    try:
        return _last(plain, ids)
    finally:
        handle.remove()


def _first(output):
    return output if isinstance(output, torch.Tensor) else output[0]


def _with_first(output, new):
    return new if isinstance(output, torch.Tensor) else (new, *output[1:])


def test_the_app_model_and_the_plain_model_agree_without_an_intervention(pair):
    model, plain, ids, _, _ = pair
    torch.testing.assert_close(run_with_interventions(model, Intervention(), input_ids=ids,
                                                      output_hidden_states=True).hidden_states[-1],
                               _last(plain, ids), atol=1e-5, rtol=1e-5)


def test_a_zeroed_head_equals_zeroing_its_slice_of_the_output_projection_input(pair):
    model, plain, ids, _, family = pair
    d = _head_dim(plain)

    def zero(_module, args):
        x = args[0].clone()
        x[..., 2 * d:3 * d] = 0.0
        return (x,)

    expected = _plain_with(plain, ids, _output_projection(plain, family, 1), zero, pre=True)
    with intervened(model, replace_heads([(1, 2)])):
        found = _last(model, ids)
    torch.testing.assert_close(found, expected, atol=1e-5, rtol=1e-5)
    assert (found - _last(model, ids)).abs().max() > 1e-4  # the head mattered, and nothing is left on the model


def test_a_mean_over_tokens_at_some_positions_of_one_row(pair):
    model, plain, ids, _, family = pair
    d, batch = _head_dim(plain), ids.expand(2, -1)
    positions = [1, 3]

    def mean(_module, args):
        x = args[0].clone()
        head = x[1, :, d:2 * d]  # head 1 of row 1, [T, d]
        x[1, positions, d:2 * d] = head.mean(dim=0)
        return (x,)

    handle = _output_projection(plain, family, 0).register_forward_pre_hook(mean)
    try:
        expected = _last(plain, batch)
    finally:
        handle.remove()
    with intervened(model, [Replace("head", 0, 1, value="mean", positions=positions, rows=(1,))]):
        found = _last(model, batch)
    torch.testing.assert_close(found, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(found[0], _last(plain, ids)[0], atol=1e-5, rtol=1e-5)  # row 0 untouched


def test_the_residual_stream_entering_a_block_from_another_run(pair):
    model, plain, ids, other, family = pair
    with torch.no_grad():
        clean = plain(input_ids=other, output_hidden_states=True).hidden_states[1][0]  # entering block 1, [T, hidden]

    def patch(_module, args, kwargs):
        x = (args[0] if args else kwargs["hidden_states"]).clone()
        x[0, 2] = clean[2]
        return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})

    block = _layers(plain, family)[1]
    handle = block.register_forward_pre_hook(patch, with_kwargs=True)
    try:
        expected = _last(plain, ids)
    finally:
        handle.remove()
    with intervened(model, [Replace("resid_pre", 1, value=clean, positions=(2,))]):
        found = _last(model, ids)
    torch.testing.assert_close(found, expected, atol=1e-5, rtol=1e-5)


def test_a_blocks_output_through_a_function_and_an_mlp_output_zeroed(pair):
    model, plain, ids, _, family = pair

    def double(_module, _args, output):
        return _with_first(output, 2.0 * _first(output))

    def zero(_module, _args, output):
        return _with_first(output, torch.zeros_like(_first(output)))

    torch.testing.assert_close(run_with_interventions(model, [Replace("resid_post", 0, value=lambda x: 2.0 * x)],
                                                      input_ids=ids, output_hidden_states=True).hidden_states[-1],
                               _plain_with(plain, ids, _layers(plain, family)[0], double, pre=False),
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(run_with_interventions(model, [Replace("mlp_out", 1)], input_ids=ids,
                                                      output_hidden_states=True).hidden_states[-1],
                               _plain_with(plain, ids, _mlp(plain, family, 1), zero, pre=False), atol=1e-5, rtol=1e-5)


def test_replaced_embeddings_equal_the_plain_models_inputs_embeds(pair):
    model, plain, ids, other, _ = pair
    with torch.no_grad():
        embeds = plain.get_input_embeddings()(torch.cat([ids, other]))  # [2, T, hidden], Gemma's scale included
        mixed = 0.3 * embeds[:1] + 0.7 * embeds[1:]
        expected = plain(inputs_embeds=mixed, output_hidden_states=True).hidden_states[-1]
    with intervened(model, [Replace("embeddings", value=mixed)]):
        found = _last(model, ids)
    torch.testing.assert_close(found, expected, atol=1e-5, rtol=1e-5)


def test_batch_copies_then_a_head_knocked_out_in_one_copy(pair):
    model, plain, ids, _, family = pair
    spec = batch_copies(1, 3) + replace_heads([(1, 0)], rows=(2,))
    with intervened(model, spec):
        found = _last(model, ids)
    assert found.shape[0] == 3
    torch.testing.assert_close(found[0], found[1], atol=0, rtol=0)
    torch.testing.assert_close(found[0], _last(plain, ids)[0], atol=1e-5, rtol=1e-5)
    d = _head_dim(plain)

    def zero(_module, args):
        x = args[0].clone()
        x[..., 0:d] = 0.0
        return (x,)

    expected = _plain_with(plain, ids, _output_projection(plain, family, 1), zero, pre=True)[0]
    torch.testing.assert_close(found[2], expected, atol=1e-5, rtol=1e-5)


def test_a_recorder_inside_records_the_intervened_pass(pair):
    """What a pass keeps is separate from what it replaces: a Recorder opened inside sees layer 1's inputs changed by
    the knock-out in layer 0."""
    model, _, ids, _, _ = pair
    with torch.no_grad(), Recorder(model, layers={1}) as plain_rec:
        model(input_ids=ids)
    with torch.no_grad(), intervened(model, replace_heads([(0, 0), (0, 1)])), Recorder(model, layers={1}) as rec:
        model(input_ids=ids)
    assert (rec.records[1].inputs - plain_rec.records[1].inputs).abs().max() > 1e-4


def test_a_spec_that_names_nothing_real_is_refused_and_leaves_no_hook(tiny_gpt2):
    model = tiny_gpt2.model
    hooks = [(tuple(m._forward_pre_hooks), tuple(m._forward_hooks)) for m in model.modules()]  # transformers' own
    ids = torch.tensor([[1, 2, 3]])
    before = _last(model, ids)
    with pytest.raises(ValueError, match="takes a head"):
        Replace("head", 0)
    with pytest.raises(ValueError, match="a value is"):
        Replace("resid_pre", 0, value="ones")
    with pytest.raises(ValueError, match="no layer 7"):
        with intervened(model, [Replace("resid_pre", 7)]):
            pass
    with pytest.raises(RuntimeError, match="boom"):
        spec = Intervention((Replace("resid_post", 1), Replace("embeddings"))) + replace_heads([(0, 1)])
        with intervened(model, spec):
            raise RuntimeError("boom")
    assert [(tuple(m._forward_pre_hooks), tuple(m._forward_hooks)) for m in model.modules()] == hooks
    torch.testing.assert_close(_last(model, ids), before, atol=0, rtol=0)  # no replacement left in attention either


def test_the_spec_expresses_the_knock_outs_written_by_hand_today(pair):
    """induction.repeat_loss and retrieval's knock-out fill ``Recorder.replace`` themselves (to be moved onto the
    spec): ``replace_heads`` gives the same pass bit for bit, and a ``Recorder`` inside keeps what retrieval reads."""
    model, _, ids, _, _ = pair
    heads = [(0, 1), (1, 3)]
    with torch.no_grad(), Recorder(model, keep_tensors=False, replace=dict.fromkeys(heads)):
        by_hand = model(input_ids=ids, output_hidden_states=True).hidden_states[-1]
    with torch.no_grad(), intervened(model, replace_heads(heads)), Recorder(model, keep_weights=False) as rec:
        found = model(input_ids=ids, output_hidden_states=True).hidden_states[-1]
    torch.testing.assert_close(found, by_hand, atol=0, rtol=0)
    assert sorted(rec.records) == [0, 1] and rec.records[1].queries.shape[2] == ids.shape[1]
