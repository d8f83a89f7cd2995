"""The embedded broker (`filesystem://`, `make run`'s default): kombu's filesystem transport without its
empty-message race.

kombu's writer creates the message file in the queue folder and then writes it; a reader that lists the
folder in between takes the empty file and fails on it with JSONDecodeError (kombu issue #1551, open), which
stops a Celery worker or the push gateway. Here a message is written under a name no reader looks at and
renamed into the queue folder when complete (`os.replace`: atomic on one filesystem), and a reader claims a
file by renaming it into the processed folder (only one reader's rename can win) before reading it. A file
that still does not parse (written by a process running kombu's own writer) is read again for a moment and
then set aside, logged, instead of failing the consumer.

config/celery.py registers this transport under kombu's `filesystem` alias, so every `filesystem://`
connection of the project (Celery, the engine's publisher, the gateway, the status page) uses it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
import uuid
from queue import Empty
from typing import Any

from kombu import transport as kombu_transports
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

__all__ = ["Channel", "Transport", "register"]

logger = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".part"  # a message being written: "<stamp>_<uuid>.<queue>.msg.part", no reader's pattern
UNREADABLE_SUFFIX = ".unreadable"
# How long a claimed file that does not parse is read again: a foreign writer finishes within this.
UNPARSED_PATIENCE_SECONDS = 2.0


class Channel(filesystem.Channel):
    # kombu's stubs give _put and _get two signatures (AbstractChannel's, filesystem.Channel's): kombu's own.
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Write the message whole under a partial name, then rename it into the queue folder."""
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """The oldest message of `queue`, claimed by a rename (a reader that loses the rename to another
        reader goes on to the next file)."""
        wanted = f"{queue}.msg"
        claims = self._claims_folder()
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            claimed = os.path.join(claims, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another reader took it
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise ChannelError(
                        f"processed_folder {claims!r} must be on the queue folder's filesystem"
                    ) from exc
                continue
            payload = self._read_claimed(claimed)
            if payload is not None:
                return payload
        raise Empty()

    def _claims_folder(self) -> str:
        folder = str(self.processed_folder)
        os.makedirs(folder, exist_ok=True)
        return folder

    def _read_claimed(self, path: str) -> Any | None:
        """The claimed file's message; None (the file set aside, logged) when it never parses."""
        deadline = time.monotonic() + UNPARSED_PATIENCE_SECONDS
        while True:
            try:
                with open(path, "rb") as file:
                    text = bytes_to_str(file.read())
            except OSError as exc:
                raise ChannelError(f"Cannot read file {path!r} from queue.") from exc
            try:
                payload = loads(text)
            except ValueError:
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                os.replace(path, path + UNREADABLE_SUFFIX)
                logger.error("file broker: %s does not parse as a message; set aside", path)
                return None
            if self.store_processed:
                return payload
            os.remove(path)
            return payload


class Transport(filesystem.Transport):
    Channel = Channel


def register() -> None:
    """Make `filesystem://` mean this transport in this process (kombu resolves a URL's scheme through
    its alias table, once per process)."""
    kombu_transports.TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"
    kombu_transports._transport_cache.pop("filesystem", None)  # type: ignore[attr-defined]
