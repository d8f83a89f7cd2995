"""The embedded broker (`filesystem://`, what `make run` uses) under a writer and a reader racing: every
message arrives whole, once, and the reader never fails on a message file being written (kombu's own
transport hands the reader the empty file, kombu issue #1551: the worker of `make run` died of it)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

from kombu import Connection

from common import filesystem_broker

MESSAGES = 1500
PAD = "x" * 20_000  # a write long enough for a reader to list the folder in the middle of it


def _folders(root: Path) -> dict[str, Any]:
    options: dict[str, Any] = {"store_processed": False}
    for key, name in (("data_folder_in", "queue"), ("data_folder_out", "queue"),
                      ("processed_folder", "processed"), ("control_folder", "control")):  # fmt: skip
        (root / name).mkdir(exist_ok=True)
        options[key] = str(root / name)
    return options


def _write(options: dict[str, Any], count: int, name: str) -> None:
    with Connection("filesystem://", transport_options=options) as connection:
        queue = connection.SimpleQueue(name)
        for number in range(count):
            queue.put({"n": number, "pad": PAD})


def _race(options: dict[str, Any], count: int, timeout: float) -> tuple[list[int], list[str]]:
    """Messages received (their numbers) and the reader's errors, a writer process publishing meanwhile."""
    writer = multiprocessing.get_context("fork").Process(target=_write, args=(options, count, "race"))
    writer.start()
    received: list[int] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        with Connection("filesystem://", transport_options=options) as connection:
            queue = connection.SimpleQueue("race")
            while len(received) + len(errors) < count and time.monotonic() < deadline:
                try:
                    message = queue.get(block=False)
                except queue.Empty:
                    continue
                except ValueError as exc:  # JSONDecodeError: an empty or half-written file
                    errors.append(repr(exc))
                    continue
                assert message.payload["pad"] == PAD
                received.append(message.payload["n"])
                message.ack()
    finally:
        writer.join(timeout=60)
    return received, errors


def test_it_delivers_every_message_whole_to_a_reader_racing_the_writer(tmp_path: Path) -> None:
    received, errors = _race(_folders(tmp_path), MESSAGES, timeout=120)
    assert errors == []
    assert sorted(received) == list(range(MESSAGES))
    leftovers = [p.name for p in tmp_path.rglob("*") if p.is_file() and "exchange" not in p.name]
    assert leftovers == []


def test_it_sets_aside_a_file_that_never_parses_and_goes_on_to_the_next(
    tmp_path: Path, caplog: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(filesystem_broker, "UNPARSED_PATIENCE_SECONDS", 0.1)
    options = _folders(tmp_path)
    # What kombu's own writer leaves for a moment (another process on an older checkout may still write so).
    # (A queue name of its own: kombu keeps the bindings it has declared in the process, whatever folder.)
    (tmp_path / "queue" / "0_broken.aside.msg").write_text("")
    _write(options, 1, "aside")
    with Connection("filesystem://", transport_options=options) as connection:
        message = connection.SimpleQueue("aside").get(block=False)
    assert message.payload["n"] == 0
    assert [p.name for p in (tmp_path / "processed").iterdir()] == ["0_broken.aside.msg.unreadable"]
    assert "does not parse" in caplog.text


def test_a_message_kombus_own_writer_is_still_filling_is_read_once_complete(tmp_path: Path) -> None:
    # A process on an older checkout writes as kombu does: the file exists, empty, before its bytes come.
    (tmp_path / "elsewhere").mkdir()
    _write(_folders(tmp_path / "elsewhere"), 1, "late")
    [written] = (tmp_path / "elsewhere" / "queue").iterdir()
    options = _folders(tmp_path)
    with open(tmp_path / "queue" / written.name, "wb", buffering=0) as filling:
        later = threading.Timer(0.3, filling.write, args=(written.read_bytes(),))
        later.start()
        with Connection("filesystem://", transport_options=options) as connection:
            message = connection.SimpleQueue("late").get(block=False)
        later.join()
    assert message.payload["n"] == 0
    assert list((tmp_path / "processed").iterdir()) == []


def test_every_filesystem_connection_of_the_project_uses_it() -> None:
    with Connection("filesystem://") as connection:
        assert isinstance(connection.transport, filesystem_broker.Transport)
