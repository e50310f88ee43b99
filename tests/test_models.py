"""load_model: the real from_pretrained path on tiny saved models, and every way it can fail."""

from __future__ import annotations

import json

import pytest
import torch

from core.model.models import DEFAULT_MODEL, ModelLoadError, load_model


def test_tiny_models_load_with_the_recording_attention_float32_eval(tiny_bert, tiny_gpt2):
    from core.model.recording import IMPLEMENTATION

    for model in (tiny_bert, tiny_gpt2):
        assert model.model.config._attn_implementation == IMPLEMENTATION
        assert not model.model.training
        assert all(p.dtype == torch.float32 for p in model.model.parameters())
        assert (model.num_layers, model.num_heads, model.hidden_size) == (2, 4, 32)
        assert model.max_tokens == 64


def test_decoder_is_probed_from_attention(tiny_bert, tiny_gpt2):
    assert tiny_bert.is_decoder is False
    assert tiny_gpt2.is_decoder is True
    assert tiny_bert.has_pooler and not tiny_gpt2.has_pooler


def test_gpt2_gets_a_pad_token_for_batching(tiny_gpt2):
    assert tiny_gpt2.tokenizer.pad_token is not None


def test_missing_local_folder_is_a_user_message(tmp_path):
    with pytest.raises(ModelLoadError, match="no model folder"):
        load_model(str(tmp_path / "nothing-here"))


def test_folder_without_config_is_a_user_message(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ModelLoadError, match="no `config.json`"):
        load_model(str(tmp_path))


def test_folder_with_a_non_transformer_config_is_a_user_message(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "not-a-real-architecture"}))
    with pytest.raises(ModelLoadError, match="not a transformer model"):
        load_model(str(tmp_path))


def test_hub_id_without_network_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError) as info:
        load_model("someone/some-model-that-is-not-cached")
    message = str(info.value)
    assert "cannot reach" in message and "bundled model" in message


def test_trust_remote_code_is_never_enabled(tiny_bert_dir, monkeypatch):
    import transformers

    seen = []
    original = transformers.AutoModel.from_pretrained

    def spy(*args, **kwargs):
        seen.append(kwargs.get("trust_remote_code"))
        return original(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", spy)
    monkeypatch.setattr("core.model.models.AutoModel.from_pretrained", spy)
    load_model(tiny_bert_dir)
    assert seen == [False]


@pytest.mark.integration
def test_bundled_model_is_minilm(bundled):
    assert bundled.name == DEFAULT_MODEL
    assert (bundled.num_layers, bundled.num_heads, bundled.hidden_size) == (6, 12, 384)
    assert bundled.is_decoder is False
    assert bundled.max_tokens == 512


# --- The pooler: present only when its weights were in the checkpoint, trained only when they look it ---

def test_a_checkpoint_with_trained_pooler_weights(tmp_path):
    from tests.model_factory import build_tiny_bert_trained_pooler

    model = load_model(str(build_tiny_bert_trained_pooler(tmp_path / "trained")))
    assert model.has_pooler and model.pooler_trained
    from core.model.models import pooler_sentence

    assert "has a trained pooler" in pooler_sentence(model)


def test_a_checkpoint_without_pooler_weights_has_no_pooler(tmp_path):
    from tests.model_factory import build_tiny_bert_mlm

    folder = str(build_tiny_bert_mlm(tmp_path / "mlm"))  # a masked-LM save: no pooler.dense.* in the file
    first, second = load_model(folder), load_model(folder)
    # transformers made up a random pooler, different on each load; the app must not call it a pooler
    assert not torch.equal(first.model.pooler.dense.weight, second.model.pooler.dense.weight)
    assert not first.has_pooler and not first.pooler_trained
    from core.model.models import pooler_sentence

    assert "no trained pooler" in pooler_sentence(first)


def test_pooler_weights_at_their_initial_zero_bias_are_not_trained(tiny_bert, tiny_gpt2):
    # BertModel initialises the pooler bias to 0; the tiny BERT was saved untrained
    assert tiny_bert.has_pooler and not tiny_bert.pooler_trained
    assert not tiny_gpt2.has_pooler and not tiny_gpt2.pooler_trained
    from core.model.models import pooler_sentence

    assert "look untrained" in pooler_sentence(tiny_bert)


@pytest.mark.integration
def test_the_bundled_models_pooler_was_never_trained(bundled):
    assert bool((bundled.model.pooler.dense.bias == 0).all())  # all 384 entries
    assert bundled.has_pooler and not bundled.pooler_trained


def test_padding_is_forced_to_the_right(tmp_path):
    from tests.model_factory import build_tiny_gpt2, set_padding_side

    model = load_model(str(set_padding_side(build_tiny_gpt2(tmp_path / "left"), "left")))
    assert model.tokenizer.padding_side == "right" and model.tokenizer.truncation_side == "right"


def _threads_in_forward(model, monkeypatch) -> list[int]:
    """Record torch's thread count inside every forward pass of ``model``."""
    seen = []
    forward = model.model.forward

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return forward(*args, **kwargs)

    monkeypatch.setattr(model.model, "forward", recording)
    return seen


def test_a_small_forward_pass_runs_on_one_thread_and_a_large_one_on_torchs_own(tiny_bert, monkeypatch):
    """Two threads on a few tokens wait for each other when the other core is busy (a browser, another session):
    a 12-token text took ten times longer. A large input keeps torch's setting; either way it is restored."""
    from core.model.inference import analyze, analyze_many
    from core.model.models import ONE_THREAD_BELOW_TOKENS

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = _threads_in_forward(tiny_bert, monkeypatch)
        analyze(tiny_bert, "a short sentence")
        analyze_many(tiny_bert, ["one text", "another text"], attentions=False)
        per_text = ONE_THREAD_BELOW_TOKENS // 8 + 2
        words = " ".join(["word"] * (per_text - 2))  # + [CLS] and [SEP]
        analyze_many(tiny_bert, [words] * 8, batch_size=8, attentions=False)  # one pass over 8 × per_text tokens
        assert seen == [1, 1, 2]
        assert torch.get_num_threads() == 2, "torch's thread setting was not restored"
    finally:
        torch.set_num_threads(before)


def test_the_thread_setting_is_restored_when_a_forward_pass_fails():
    from core.model.models import threads_for_input

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError), threads_for_input(4):
            assert torch.get_num_threads() == 1
            raise RuntimeError("out of memory")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
