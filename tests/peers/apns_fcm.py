"""Loopback stand-ins for APNs and FCM, speaking their real protocols, for tests, the benchmark and staging.

- `ApnsPeer`: HTTP/2 over TLS (ALPN h2, a self-signed certificate made here), `POST /3/device/<token>`.
  It verifies the provider JWT (ES256, `kid`, `iss`) with the public key, the `apns-topic`, the push type
  and the collapse id, and answers as APNs does (200 with `apns-id`; 400/410/403/429/500 with a JSON
  `reason`).
- `FcmPeer`: over TLS, HTTP/2 (HTTP/1.1 for clients that do not offer h2): the OAuth 2 token endpoint
  (`POST /token`, the JWT-bearer grant a service account signs with RS256) and
  `POST /v1/projects/<id>/messages:send`, which accepts only a bearer token it issued and answers as
  FCM v1 does (200 with `name`; UNREGISTERED, INVALID_ARGUMENT, 429, 503...).

Peers started on one directory share one self-signed certificate: point PUSH_TLS_CA_FILE at `ca_file`.

Each runs its own asyncio loop in a daemon thread on 127.0.0.1, port 0. `script(token, [Answer...])` makes
the next requests for a device token answer those, in order; afterwards it answers success. Built with
`serve=False`, a peer starts no server: another transport calls its `_h2_answer` (the benchmark's peers on
a compiled HTTP/2 stack, bench/peer_server.py, which must not share the measured cores with h2's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import h2.config
import h2.connection
import h2.events
import h2.settings
import jwt

from common.wire.h2client import PlainEncoder
from tests.peers.credentials import apns_key as apns_key
from tests.peers.credentials import server_tls
from tests.peers.credentials import service_account as service_account
from tests.peers.credentials import tls_certificate as tls_certificate
from tests.peers.quota import WindowQuota


@dataclass(frozen=True)
class Answer:
    status: int = 200
    reason: str = ""  # APNs `reason` / FCM errorCode
    retry_after: float | None = None


@dataclass
class Received:
    token: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    status: int = 0


class _Peer:
    """An asyncio server in a daemon thread; `script`, `received` and `answers` are shared with the test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.received: list[Received] = []
        self.scripts: dict[str, deque[Answer]] = {}
        self.count = 0
        # Wall-clock instants of the device requests answered 200, kept even with `record=False`: the
        # benchmark's storm reads per-push lateness at the peer from them.
        self.accepted_at: list[float] = []
        self._lock = threading.Lock()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0
        # Runs on the peer's thread before each device request is answered; False: no answer, the
        # connection is dropped (a fault test kills the gateway there).
        self.on_request: Callable[[str], bool] = lambda token: True

    def script(self, token: str, answers: list[Answer]) -> None:
        with self._lock:
            self.scripts.setdefault(token, deque()).extend(answers)

    def next_answer(self, token: str) -> Answer:
        with self._lock:
            queue = self.scripts.get(token)
            return queue.popleft() if queue else Answer()

    def tokens(self) -> list[str]:
        return [r.token for r in self.received]

    def start(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._thread.start()

        async def serve() -> asyncio.Server:
            return await asyncio.start_server(self._connection, "127.0.0.1", 0, ssl=ssl_context, backlog=512)

        self._server = asyncio.run_coroutine_threadsafe(serve(), self.loop).result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._serve_h2(reader, writer)

    def _h2_answer(self, headers: dict[str, str], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        raise NotImplementedError

    async def _serve_h2(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One HTTP/2 connection: every stream answered by `_h2_answer` as soon as its request ends."""
        # Requests are validated as a real server would; the answers are this peer's own (lower-case
        # names, clean values), so h2's outbound normalizing and validation are off and HPACK literals are
        # sent without Huffman coding: the peer shares the benchmark's two cores with the gateway.
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(
                client_side=False,
                header_encoding="utf-8",
                normalize_outbound_headers=False,
                validate_outbound_headers=False,
            )
        )
        conn.encoder = PlainEncoder()
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000})
        writer.write(conn.data_to_send())
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        streams[event.stream_id or 0] = (
                            {str(k): str(v) for k, v in event.headers or []}, bytearray()
                        )  # fmt: skip
                    elif isinstance(event, h2.events.DataReceived):
                        streams[event.stream_id or 0][1].extend(event.data or b"")
                        conn.acknowledge_received_data(
                            event.flow_controlled_length or 0, event.stream_id or 0
                        )
                    elif isinstance(event, h2.events.StreamEnded):
                        headers, body = streams.pop(event.stream_id or 0)
                        status, extra, answer = self._h2_answer(headers, bytes(body))
                        response = [(":status", str(status)), *extra]
                        if answer:
                            response.append(("content-length", str(len(answer))))
                        conn.send_headers(event.stream_id or 0, response, end_stream=not answer)
                        if answer:
                            conn.send_data(event.stream_id or 0, answer, end_stream=True)
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        return
                writer.write(conn.data_to_send())
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, asyncio.CancelledError):
            pass  # the client went away, or the peer is stopping
        finally:
            writer.close()


class ApnsPeer(_Peer):
    """APNs over HTTP/2 + TLS. `record=False` keeps only counts (the benchmark)."""

    def __init__(
        self,
        directory: Path,
        *,
        public_key: Any,
        key_id: str,
        team_id: str,
        topic: str,
        record: bool = True,
        serve: bool = True,
    ) -> None:
        super().__init__()
        self.public_key = public_key
        self.key_id = key_id
        self.team_id = team_id
        self.topic = topic
        self.record = record
        self._verified: set[str] = set()
        self.url = ""
        if serve:
            context, self.ca_file = server_tls(directory, ["h2"])
            self.start(context)
            self.url = f"https://127.0.0.1:{self.port}"

    def _check(self, headers: dict[str, str]) -> Answer | None:
        """What APNs itself would refuse before looking at the device token."""
        auth = headers.get("authorization", "")
        token = auth.removeprefix("bearer ")
        if token not in self._verified:
            try:
                if jwt.get_unverified_header(token).get("kid") != self.key_id:
                    return Answer(403, "InvalidProviderToken")
                claims = jwt.decode(
                    token, self.public_key, algorithms=["ES256"], options={"require": ["iat"]}
                )
            except jwt.PyJWTError:
                return Answer(403, "InvalidProviderToken" if token else "MissingProviderToken")
            if claims.get("iss") != self.team_id:
                return Answer(403, "InvalidProviderToken")
            self._verified.add(token)
        if headers.get("apns-topic") != self.topic:
            return Answer(400, "TopicDisallowed" if headers.get("apns-topic") else "MissingTopic")
        if headers.get("apns-push-type") not in ("alert", "background"):
            return Answer(400, "InvalidPushType")
        if len(headers.get("apns-collapse-id", "").encode()) > 64:
            return Answer(400, "BadCollapseId")
        if headers.get(":method") != "POST":
            return Answer(405, "MethodNotAllowed")
        return None

    def _h2_answer(self, headers: dict[str, str], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        token = headers.get(":path", "").removeprefix("/3/device/")
        answer = self._check(headers) or self.next_answer(token)
        self.count += 1
        if self.record:
            try:
                payload = json.loads(body or b"{}")
            except ValueError:
                payload = {}
            self.received.append(Received(token, headers, payload, status=answer.status))
        extra = [("apns-id", headers.get("apns-id") or str(uuid.uuid4()))]
        if answer.retry_after is not None:
            extra.append(("retry-after", str(int(answer.retry_after))))
        if answer.status == 200:
            self.accepted_at.append(time.time())
            return 200, extra, b""
        reason = {"reason": answer.reason or "InternalServerError"}
        if answer.status == 410:
            reason["timestamp"] = str(int(time.time() * 1000))
        return answer.status, [*extra, ("content-type", "application/json")], json.dumps(reason).encode()


GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"
_FCM_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
               429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}  # fmt: skip


class FcmPeer(_Peer):
    """FCM HTTP v1 and its OAuth 2 token endpoint over TLS: HTTP/2 when the client offers it by ALPN (the
    gateway does), HTTP/1.1 otherwise (google-auth's token request).

    `public_key` is the service account's (set it with `trust()` once the account exists: the account
    needs this peer's token URL first). `refuse_grants=True` answers the token endpoint `invalid_grant`.
    """

    def __init__(
        self, directory: Path, *, project_id: str = "demo-project", record: bool = True, serve: bool = True
    ) -> None:
        super().__init__()
        self.project_id = project_id
        self.record = record
        self.public_key: Any = None
        self.client_email = ""
        self.issued: set[str] = set()
        self.grants = 0
        self.refuse_grants = False
        self.quota: WindowQuota | None = None  # the project's quota (tests/peers/quota.py), when enforced
        self.url = self.token_uri = ""
        if serve:
            context, self.ca_file = server_tls(directory, ["h2", "http/1.1"])
            self.start(context)
            self.url = f"https://127.0.0.1:{self.port}"
            self.token_uri = f"{self.url}/token"

    def trust(self, public_key: Any, client_email: str = "") -> None:
        self.public_key = public_key
        self.client_email = client_email

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if writer.get_extra_info("ssl_object").selected_alpn_protocol() == "h2":
            await self._serve_h2(reader, writer)
            return
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {}
                for line in lines:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                status, extra, document = self._route(method, path, headers, body)
                data = json.dumps(document).encode()
                lines_out = [f"HTTP/1.1 {status} X", "Content-Type: application/json",
                             f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in extra)]  # fmt: skip
                writer.write(("\r\n".join(lines_out) + "\r\n\r\n").encode() + data)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            ValueError,
            asyncio.CancelledError,
            ssl.SSLError,
        ):
            pass  # the client went away, or the peer is stopping
        finally:
            writer.close()

    def _h2_answer(self, headers: dict[str, str], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        status, extra, document = self._route(
            headers.get(":method", ""), headers.get(":path", ""), headers, body
        )
        return status, [*extra, ("content-type", "application/json")], json.dumps(document).encode()

    def _route(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], Any]:
        if method == "POST" and path == "/token":
            return self._grant(body)
        if method == "POST" and path == f"/v1/projects/{self.project_id}/messages:send":
            return self._send(headers, body)
        return 404, [], {"error": {"code": 404, "status": "NOT_FOUND", "message": "no such endpoint"}}

    def _grant(self, body: bytes) -> tuple[int, list[tuple[str, str]], Any]:
        """The JWT-bearer grant: the assertion must be signed by the service account's key for this URI."""
        self.grants += 1
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if self.refuse_grants or form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return (
                400,
                [],
                {"error": "invalid_grant", "error_description": "Invalid grant: account not found"},
            )
        try:
            # google-auth always names Google's endpoint as the audience, whatever the token_uri.
            claims = jwt.decode(form.get("assertion", ""), self.public_key, algorithms=["RS256"],
                                audience=[self.token_uri, GOOGLE_TOKEN_AUDIENCE])  # fmt: skip
        except jwt.PyJWTError as exc:
            return 400, [], {"error": "invalid_grant", "error_description": f"bad assertion: {exc}"}
        if self.client_email and claims.get("iss") != self.client_email:
            return 400, [], {"error": "invalid_grant", "error_description": "wrong issuer"}
        if "firebase.messaging" not in str(claims.get("scope", "")):
            return 400, [], {"error": "invalid_scope"}
        access = secrets.token_urlsafe(24)
        self.issued.add(access)
        return 200, [], {"access_token": access, "expires_in": 3600, "token_type": "Bearer"}

    def _send(self, headers: dict[str, str], body: bytes) -> tuple[int, list[tuple[str, str]], Any]:
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        self.count += 1
        try:
            message = json.loads(body)["message"]
            token = str(message["token"])
        except (ValueError, KeyError, TypeError):
            return 400, [], _fcm_error(400, "INVALID_ARGUMENT", "message.token is required")
        if not self.on_request(token):
            if self.record:
                self.received.append(Received(token, headers, message, status=0))
            raise ConnectionResetError("dropped by on_request")
        if bearer in self.issued and self.quota is not None and (over := self.quota.refuse(token)):
            return over
        answer = self.next_answer(token) if bearer in self.issued else Answer(401, "UNAUTHENTICATED")
        if self.record:
            self.received.append(Received(token, headers, message, status=answer.status))
        if answer.status == 200:
            self.accepted_at.append(time.time())
            return 200, [], {"name": f"projects/{self.project_id}/messages/{self.count}"}
        extra = [("retry-after", str(int(answer.retry_after)))] if answer.retry_after is not None else []
        code = answer.reason or _FCM_STATUS.get(answer.status, "")
        text = _FCM_TOKEN_INVALID if code == "INVALID_ARGUMENT" else f"scripted {answer.status}"
        return answer.status, extra, _fcm_error(answer.status, code, text)


_FCM_TOKEN_INVALID = "The registration token is not a valid FCM registration token"


def _fcm_error(code: int, error_code: str, message: str) -> dict[str, Any]:
    details: list[dict[str, Any]] = [
        {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": error_code}
    ]
    if error_code == "INVALID_ARGUMENT" and "token" in message:
        details.append({"@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"field": "message.token", "description": message}]})  # fmt: skip
    return {"error": {"code": code, "message": message, "status": _FCM_STATUS.get(code, "UNKNOWN"),
                      "details": details}}  # fmt: skip
