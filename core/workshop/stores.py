"""The room store the settings name: ``sqlite:///path`` (the default, one server) or ``redis://host:port/db``."""

from __future__ import annotations

from core.workshop.rooms import RoomStore
from core.workshop.settings import RoomSettings


def open_store(settings: RoomSettings) -> RoomStore:
    if settings.store.startswith("sqlite:///"):
        from core.workshop.sqlite_store import SQLiteRoomStore  # noqa: PLC0415 - only the back end in use is imported

        return SQLiteRoomStore(settings.store.removeprefix("sqlite:///"), settings.idle_seconds)
    from core.workshop.redis_store import RedisRoomStore  # noqa: PLC0415 - only the back end in use is imported

    return RedisRoomStore(settings.store, settings.idle_seconds)
