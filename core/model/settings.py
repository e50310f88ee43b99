"""Deployment settings: laptop mode (default) or workshop-server mode.

Read from environment variables, or from ``.streamlit/secrets.toml`` through the
``secrets`` mapping the app passes in (environment variables win):

| variable | meaning | default |
| --- | --- | --- |
| ``EXPLORER_MODE`` | ``laptop`` or ``server`` | ``laptop`` |
| ``EXPLORER_ALLOWED_MODELS`` | model ids or folders to offer, comma-separated; ``*`` = any; bundled always | laptop: ``*``; server: bundled only |
| ``EXPLORER_MAX_TOKENS`` | tokens per text (never above the model's window; ``ui.page_limits`` per page) | laptop: the window; server: 256 |
| ``EXPLORER_MAX_CORPUS_DOCS`` | documents in an uploaded or pasted corpus | laptop: 500; server: 200 |
| ``EXPLORER_MAX_UPLOAD_MB`` | size of one uploaded file | laptop: 10; server: 2 |
| ``EXPLORER_MAX_DECK_SLIDES`` | figures pinned to one slide deck (``/deck``) | laptop: 30; server: 12 |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from core.errors import UserFacingError
from core.model.models import BUNDLED_MODELS, bundled_name

ANY_MODEL = "*"


class SettingsError(UserFacingError, ValueError):
    """A setting has a value the app cannot use. The message names the setting."""


@dataclass(frozen=True)
class Settings:
    mode: str
    allowed_models: tuple[str, ...]
    max_tokens: int | None  # None: the model's own window
    max_corpus_docs: int
    max_upload_mb: int
    max_deck_slides: int = 30

    @property
    def server_mode(self) -> bool:
        return self.mode == "server"

    def model_allowed(self, name: str | None) -> bool:
        """True when users may load ``name`` (the bundled models, by any of their names, are always allowed)."""
        if bundled_name(name) is not None or ANY_MODEL in self.allowed_models:
            return True
        return (name or "").strip() in self.allowed_models

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 1024 * 1024


def _positive_int(raw: str, name: str) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError as err:
        raise SettingsError(f"{name} must be a whole number, got {raw!r}.") from err
    if value < 1:
        raise SettingsError(f"{name} must be at least 1, got {value}.")
    return value


def load_settings(secrets: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``environ`` (default ``os.environ``), falling back to ``secrets``, then defaults."""
    environ = os.environ if environ is None else environ
    secrets = secrets or {}

    def raw(name: str) -> str | None:
        if name in environ:
            return environ[name]
        value = secrets.get(name)
        return None if value is None else str(value)

    mode = (raw("EXPLORER_MODE") or "laptop").strip().lower()
    if mode not in ("laptop", "server"):
        raise SettingsError(f"EXPLORER_MODE must be 'laptop' or 'server', got {mode!r}.")
    server = mode == "server"
    models_raw = raw("EXPLORER_ALLOWED_MODELS")
    if models_raw is None:
        allowed = BUNDLED_MODELS if server else (ANY_MODEL,)
    else:
        allowed = tuple(m.strip() for m in models_raw.split(",") if m.strip()) or BUNDLED_MODELS
    return Settings(
        mode=mode,
        allowed_models=allowed,
        max_tokens=(_positive_int(raw("EXPLORER_MAX_TOKENS") or 256, "EXPLORER_MAX_TOKENS")
                    if server or raw("EXPLORER_MAX_TOKENS") else None),
        max_corpus_docs=_positive_int(raw("EXPLORER_MAX_CORPUS_DOCS") or (200 if server else 500), "EXPLORER_MAX_CORPUS_DOCS"),
        max_upload_mb=_positive_int(raw("EXPLORER_MAX_UPLOAD_MB") or (2 if server else 10), "EXPLORER_MAX_UPLOAD_MB"),
        max_deck_slides=_positive_int(raw("EXPLORER_MAX_DECK_SLIDES") or (12 if server else 30), "EXPLORER_MAX_DECK_SLIDES"),
    )
