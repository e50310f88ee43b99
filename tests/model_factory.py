"""Tiny random BERT and GPT-2 models built from configs and saved to a folder.

Nothing is downloaded: the BERT vocabulary is written here, the GPT-2 BPE is
trained here on a few sentences. The saved folders load through the app's own
``core.model.models.load_model`` (the real ``from_pretrained`` path).
"""

from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import BertConfig, BertModel, BertTokenizerFast, GPT2Config, GPT2Model, GPT2TokenizerFast

WORDS = (
    "i will hike along the bank of a river open new account at my and deposit some money . , ! ? "
    "the cat sat on mat it was happy to be home bass fish plays guitar bat flies ball crane bird "
    "lifts spring water season plant grows factory mouse click seal swims envelope"
).split()

CORPUS = [
    "I will hike along the bank of a river.",
    "I will open a new account at my bank and deposit some money.",
    "The cat sat on the mat. It was happy to be home.",
    "A bass fish swims; the bass player plays guitar.",
    "<script>alert(1)</script> & \"quotes\" and 'apostrophes'",
]


def bert_vocab() -> list[str]:
    """Special tokens, whole words, and every printable character alone and as a ``##`` piece."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [c for c in string.ascii_lowercase + string.digits + string.punctuation]
    pieces = ["##" + c for c in string.ascii_lowercase + string.digits]
    seen: list[str] = []
    for token in specials + WORDS + chars + pieces:
        if token not in seen:
            seen.append(token)
    return seen


def _bert_tokenizer(model_max_length: int) -> BertTokenizerFast:
    vocab = {token: i for i, token in enumerate(bert_vocab())}
    return BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=model_max_length)


def build_tiny_bert(folder: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0) -> Path:
    """A random BERT (with pooler) and a WordPiece tokenizer, saved to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _bert_tokenizer(model_max_length=64)
    config = BertConfig(
        vocab_size=len(bert_vocab()),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 2,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_gpt2(folder: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0) -> Path:
    """A random GPT-2 and a byte-level BPE tokenizer trained on ``CORPUS``, saved to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 4, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"])
    tokenizer = GPT2TokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        model_max_length=64,
    )
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=hidden,
        n_layer=layers,
        n_head=heads,
        n_positions=64,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    GPT2Model(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_bert_base_size(folder: Path, *, seed: int = 0) -> Path:
    """A random 12-layer, 12-head, 768-wide BERT (bert-base's shape) for benchmarks, 512 positions."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _bert_tokenizer(model_max_length=512)
    config = BertConfig(vocab_size=len(bert_vocab()), max_position_embeddings=512)
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_bert_mlm(folder: Path, *, seed: int = 0) -> Path:
    """``build_tiny_bert`` saved again as a ``BertForMaskedLM``: its random masked-LM head is in the checkpoint."""
    from transformers import BertForMaskedLM

    build_tiny_bert(folder, seed=seed)
    torch.manual_seed(seed + 1)
    BertForMaskedLM.from_pretrained(folder).save_pretrained(folder)
    return folder


def build_tiny_gpt2_lm(folder: Path, *, seed: int = 0) -> Path:
    """``build_tiny_gpt2`` saved again as a ``GPT2LMHeadModel`` with its own (untied) random head in the checkpoint."""
    from transformers import GPT2LMHeadModel

    build_tiny_gpt2(folder, seed=seed)
    torch.manual_seed(seed + 1)
    GPT2LMHeadModel.from_pretrained(folder, tie_word_embeddings=False).save_pretrained(folder)
    return folder


def build_tiny_gpt2_untied_without_head(folder: Path, *, seed: int = 0) -> Path:
    """``build_tiny_gpt2`` whose config says the head is not tied to the embeddings, with no head
    weights saved: loading it as a causal LM would leave ``lm_head`` randomly initialised."""
    build_tiny_gpt2(folder, seed=seed)
    config = GPT2Config.from_pretrained(folder)
    config.tie_word_embeddings = False
    config.save_pretrained(folder)
    return folder


def build_tiny_gpt_neo(folder: Path, *, seed: int = 0) -> Path:
    """A random GPT-Neo (an architecture the step-by-step head view does not take apart) with
    ``build_tiny_gpt2``'s tokenizer, saved to ``folder``."""
    from transformers import GPTNeoConfig, GPTNeoModel

    build_tiny_gpt2(folder, seed=seed)
    tokenizer = GPT2TokenizerFast.from_pretrained(folder)
    config = GPTNeoConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        attention_types=[[["global", "local"], 1]],
        max_position_embeddings=64,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    for stale in folder.glob("*.safetensors"):
        stale.unlink()
    GPTNeoModel(config).save_pretrained(folder)
    return folder


# --- Encoder-decoder models (T5, BART): the tokenizers are made here from a small vocabulary, offline ---

T5_SPECIALS = ["<pad>", "</s>", "<unk>"]  # T5's own order: pad 0 (also the decoder start), eos 1, unk 2


def t5_unigram_vocab() -> list[tuple[str, float]]:
    """A SentencePiece-style unigram vocabulary: T5's special tokens, ``▁word`` pieces for ``WORDS``,
    and every printable character alone and with ``▁``, so any ASCII text segments without <unk>."""
    pieces: list[tuple[str, float]] = [(token, 0.0) for token in T5_SPECIALS] + [("▁", -2.0)]
    seen = {piece for piece, _ in pieces}
    candidates = [("▁" + word, -4.0) for word in WORDS]
    candidates += [(c, -8.0) for c in string.ascii_letters + string.digits + string.punctuation]
    candidates += [("▁" + c, -9.0) for c in string.ascii_letters + string.digits + string.punctuation]
    for piece, score in candidates:
        if piece not in seen:
            seen.add(piece)
            pieces.append((piece, score))
    return pieces


def _t5_tokenizer():
    from transformers import T5Tokenizer

    return T5Tokenizer(vocab=t5_unigram_vocab(), extra_ids=0, model_max_length=64)


def build_tiny_t5(folder: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0) -> Path:
    """A random T5 with its language-model head (so it can generate) and a unigram tokenizer, saved to ``folder``."""
    from transformers import T5Config, T5ForConditionalGeneration

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _t5_tokenizer()
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=hidden,
        d_kv=hidden // heads,
        d_ff=hidden * 2,
        num_layers=layers,
        num_decoder_layers=layers,
        num_heads=heads,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(config)
    # A random head often prefers a special token, which decodes to no text: give the special tokens a
    # logit of 0 so that greedy generation writes words (the untied head is saved in the checkpoint).
    with torch.no_grad():
        model.lm_head.weight[[tokenizer.convert_tokens_to_ids(t) for t in T5_SPECIALS]] = 0.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _bart_tokenizer():
    import json

    from transformers import BartTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        CORPUS * 4, vocab_size=400, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    model = json.loads(bpe._tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return BartTokenizerFast(vocab=model["vocab"], merges=merges, model_max_length=64)


def build_tiny_bart(folder: Path, *, layers: int = 2, heads: int = 4, hidden: int = 32, seed: int = 0) -> Path:
    """A random BART with its language-model head and a byte-level BPE trained on ``CORPUS``, saved to ``folder``."""
    from transformers import BartConfig, BartForConditionalGeneration

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _bart_tokenizer()
    config = BartConfig(
        vocab_size=len(tokenizer),
        d_model=hidden,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=hidden * 2,
        decoder_ffn_dim=hidden * 2,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
        forced_bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = BartForConditionalGeneration(config)
    # A random head mostly writes special tokens, which decode to no text; favour a few words so that
    # greedy generation writes something (the bias is part of the checkpoint, as in a trained BART).
    words = tokenizer(" the bank of a river", add_special_tokens=False)["input_ids"]
    model.final_logits_bias[0, words] = 4.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def set_padding_side(folder: Path, side: str) -> Path:
    """Write ``padding_side`` (and ``truncation_side``) into the saved tokenizer's config, as decoder LLMs often ship."""
    import json

    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["padding_side"] = side
    config["truncation_side"] = side
    config_file.write_text(json.dumps(config))
    return folder


def build_tiny_bert_trained_pooler(folder: Path, *, seed: int = 0) -> Path:
    """``build_tiny_bert`` whose pooler weight and bias are random and non-zero, as after training."""
    from transformers import BertModel as _Bert

    build_tiny_bert(folder, seed=seed)
    model = _Bert.from_pretrained(folder)
    generator = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        model.pooler.dense.bias.copy_(torch.randn(model.pooler.dense.bias.shape, generator=generator) * 0.1)
        model.pooler.dense.weight.copy_(torch.randn(model.pooler.dense.weight.shape, generator=generator) * 0.1)
    model.save_pretrained(folder)
    return folder


def _bert_like(folder: Path, config, model_class, *, seed: int = 0) -> Path:
    """Save a random ``model_class(config)`` with ``build_tiny_bert``'s WordPiece tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model_class(config).save_pretrained(folder)
    _bert_tokenizer(model_max_length=64).save_pretrained(folder)
    return folder


def _bert_like_sizes() -> dict:
    return dict(vocab_size=len(bert_vocab()), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=64, max_position_embeddings=64)


def build_tiny_megatron_bert(folder: Path, *, seed: int = 0) -> Path:
    """A random MegatronBERT (pre-LN, module names like BERT's) with a BERT tokenizer."""
    from transformers import MegatronBertConfig, MegatronBertModel

    return _bert_like(folder, MegatronBertConfig(**_bert_like_sizes()), MegatronBertModel, seed=seed)


def build_tiny_roformer(folder: Path, *, seed: int = 0) -> Path:
    """A random RoFormer (rotary positions, module names like BERT's) with a BERT tokenizer."""
    from transformers import RoFormerConfig, RoFormerModel

    return _bert_like(folder, RoFormerConfig(**_bert_like_sizes(), embedding_size=32), RoFormerModel, seed=seed)


def build_tiny_roberta(folder: Path, *, seed: int = 0) -> Path:
    """A random RoBERTa (positions counted from its padding id) with a BERT tokenizer."""
    from transformers import RobertaConfig, RobertaModel

    return _bert_like(folder, RobertaConfig(**_bert_like_sizes(), pad_token_id=0, type_vocab_size=1), RobertaModel, seed=seed)


def build_tiny_distilbert(folder: Path, *, seed: int = 0) -> Path:
    """A random DistilBERT (its attention modules carry no ``layer_idx``) with a BERT tokenizer."""
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=len(bert_vocab()), dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                              max_position_embeddings=64)
    return _bert_like(folder, config, DistilBertModel, seed=seed)


def build_tiny_electra(folder: Path, *, seed: int = 0) -> Path:
    """A random ELECTRA whose embedding size (16) differs from its hidden size (32): it has ``embeddings_project``."""
    from transformers import ElectraConfig, ElectraModel

    return _bert_like(folder, ElectraConfig(**_bert_like_sizes(), embedding_size=16), ElectraModel, seed=seed)


# --- Decoders that use transformers' attention interface (recorded by core.model.recording) ---

SMALL_CONFIG = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=64, initializer_range=0.3, tie_word_embeddings=False)
# Per family: the config class name and what is awkward about it (every one has grouped-query heads: 4 share 2).
DECODER_FAMILIES: dict[str, tuple[str, dict]] = {
    "llama": ("LlamaConfig", {}),
    "mistral": ("MistralConfig", {"sliding_window": 4}),  # shorter than the test texts
    "qwen2": ("Qwen2Config", {}),  # biases on q, k, v
    "qwen3": ("Qwen3Config", {"head_dim": 8}),  # q/k RMSNorm
    "gemma": ("GemmaConfig", {"head_dim": 8}),  # (1 + w) RMSNorm, embeddings scaled by sqrt(hidden)
    "gemma2": ("Gemma2Config", {"head_dim": 8, "sliding_window": 4, "attn_logit_softcapping": 2.0,
                                "final_logit_softcapping": 5.0, "query_pre_attn_scalar": 16}),
    "gemma3_text": ("Gemma3TextConfig", {"head_dim": 8, "sliding_window": 4, "query_pre_attn_scalar": 16,
                                         "layer_types": ["sliding_attention", "full_attention"]}),
    "phi3": ("Phi3Config", {"partial_rotary_factor": 0.5, "pad_token_id": 0}),  # fused qkv, half the dims rotated
}


def build_tiny_decoder(folder: Path, family: str, *, seed: int = 0) -> Path:
    """A random causal LM of ``family`` (a key of ``DECODER_FAMILIES``) with ``build_tiny_gpt2``'s tokenizer."""
    import transformers
    from transformers import AutoModelForCausalLM

    build_tiny_gpt2(folder, seed=seed)
    tokenizer = GPT2TokenizerFast.from_pretrained(folder)
    class_name, extra = DECODER_FAMILIES[family]
    config = getattr(transformers, class_name)(**{**SMALL_CONFIG, **extra}, vocab_size=len(tokenizer),
                                                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    for stale in folder.glob("*.safetensors"):
        stale.unlink()
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return folder


def build_tiny_causal_lm(folder: Path, family: str, *, seed: int = 0) -> Path:
    """A random causal LM with its head: ``build_tiny_gpt2_lm`` for "gpt2", else ``build_tiny_decoder`` of ``family``."""
    return build_tiny_gpt2_lm(folder, seed=seed) if family == "gpt2" else build_tiny_decoder(folder, family, seed=seed)


def build_tiny_gguf(path: Path, *, layers: int = 2, hidden: int = 32, heads: int = 4, kv_heads: int = 2,
                    ffn: int = 64, seed: int = 0) -> Path:
    """A random Llama-architecture GGUF file (float32 tensors, tied head) with a byte-level BPE vocabulary (every
    byte, six merges, ``<|endoftext|>`` as BOS and EOS), written with the ``gguf`` package as llama.cpp lays it out."""
    import gguf
    import numpy as np
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(seed)
    merges = ["Ġ t", "h e", "Ġt he", "a t", "Ġ c", "Ġc at"]
    tokens = ["<|endoftext|>", *bytes_to_unicode().values(), *(m.replace(" ", "") for m in merges)]
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(64)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3] + [1] * (len(tokens) - 1))  # 3: control (a special token), 1: normal
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)

    def weight(*shape: int):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    kv = kv_heads * (hidden // heads)
    writer.add_tensor("token_embd.weight", weight(len(tokens), hidden))  # no output.weight: the head is tied
    for i in range(layers):
        for name, shape in [("attn_norm", (hidden,)), ("attn_q", (hidden, hidden)), ("attn_k", (kv, hidden)),
                            ("attn_v", (kv, hidden)), ("attn_output", (hidden, hidden)), ("ffn_norm", (hidden,)),
                            ("ffn_gate", (ffn, hidden)), ("ffn_up", (ffn, hidden)), ("ffn_down", (hidden, ffn))]:
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(*shape) + (1 if name.endswith("norm") else 0))
    writer.add_tensor("output_norm.weight", 1 + weight(hidden))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
