"""Room settings: where rooms are stored and how much a room takes, from environment variables (or the secrets
mapping the app passes in; environment variables win), with laptop and workshop-server defaults.

| variable | meaning | laptop | server |
| --- | --- | --- | --- |
| ``EXPLORER_ROOM_STORE`` | ``sqlite:///path/to/rooms.sqlite3`` or ``redis://host:port/db`` | SQLite file in the data folder | the same |
| ``EXPLORER_DATA_DIR`` | the app's data folder | ``$XDG_DATA_HOME/transformer-attention-explorer`` | the same |
| ``EXPLORER_ROOM_MAX_CHARS`` | characters in one entry | 300 | 200 |
| ``EXPLORER_ROOM_PER_MINUTE`` | entries one learner may send per minute | 10 | 4 |
| ``EXPLORER_ROOM_MAX_ENTRIES`` | entries in one room | 500 | 300 |
| ``EXPLORER_ROOM_MAX_ROOMS`` | open rooms on the server | 20 | 50 |
| ``EXPLORER_ROOM_IDLE_HOURS`` | hours without activity after which a room and its entries are deleted | 24 | 12 |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserFacingError

APP_FOLDER = "transformer-attention-explorer"
ROOM_FILE = "rooms.sqlite3"
# name: (laptop default, server default)
LIMITS = {
    "EXPLORER_ROOM_MAX_CHARS": (300, 200),
    "EXPLORER_ROOM_PER_MINUTE": (10, 4),
    "EXPLORER_ROOM_MAX_ENTRIES": (500, 300),
    "EXPLORER_ROOM_MAX_ROOMS": (20, 50),
    "EXPLORER_ROOM_IDLE_HOURS": (24, 12),
}


class RoomSettingsError(UserFacingError, ValueError):
    """A room setting has a value the app cannot use; the message names it."""


@dataclass(frozen=True)
class RoomSettings:
    store: str  # sqlite:///… or redis://…
    max_chars: int
    per_minute: int
    max_entries: int
    max_rooms: int
    idle_hours: float

    @property
    def idle_seconds(self) -> float:
        return self.idle_hours * 3600


def data_folder(environ: Mapping[str, str] | None = None) -> Path:
    """``$EXPLORER_DATA_DIR``, else ``$XDG_DATA_HOME/transformer-attention-explorer``, else ``~/.local/share/…``."""
    environ = os.environ if environ is None else environ
    if environ.get("EXPLORER_DATA_DIR"):
        return Path(environ["EXPLORER_DATA_DIR"]).expanduser()
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / APP_FOLDER


def positive_number(name: str, text: str, parse=int, what: str = "a number") -> float:
    """Setting ``name``'s ``text`` read with ``parse`` (``int`` or ``float``); ``RoomSettingsError`` when it is not a
    number (``what`` says which) or not above 0."""
    try:
        number = parse(text)
    except ValueError as err:
        raise RoomSettingsError(f"{name} must be {what}, got {text!r}.") from err
    if number <= 0:
        raise RoomSettingsError(f"{name} must be above 0, got {text}.")
    return number


def load_room_settings(secrets: Mapping[str, object] | None = None,
                       environ: Mapping[str, str] | None = None) -> RoomSettings:
    """Room settings from ``environ`` (default ``os.environ``), then ``secrets``, then the mode's defaults."""
    environ = os.environ if environ is None else environ
    secrets = secrets or {}

    def raw(name: str) -> str | None:
        value = environ.get(name, secrets.get(name))
        return None if value is None or str(value).strip() == "" else str(value).strip()

    server = (raw("EXPLORER_MODE") or "laptop").lower() == "server"
    numbers = {}
    for name, defaults in LIMITS.items():
        text = raw(name)
        if text is None:
            numbers[name] = defaults[server]
            continue
        numbers[name] = positive_number(name, text, float if name.endswith("HOURS") else int)
    store = raw("EXPLORER_ROOM_STORE") or f"sqlite:///{data_folder(environ) / ROOM_FILE}"
    if not store.startswith(("sqlite:///", "redis://", "rediss://")):
        raise RoomSettingsError(f"EXPLORER_ROOM_STORE must start with sqlite:/// or redis://, got {store!r}.")
    return RoomSettings(store, numbers["EXPLORER_ROOM_MAX_CHARS"], numbers["EXPLORER_ROOM_PER_MINUTE"],
                        numbers["EXPLORER_ROOM_MAX_ENTRIES"], numbers["EXPLORER_ROOM_MAX_ROOMS"],
                        numbers["EXPLORER_ROOM_IDLE_HOURS"])
