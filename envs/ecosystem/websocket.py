"""A minimal WebSocket client (RFC 6455) on the standard library, for envs served over a WebSocket session.

Text messages only, as OpenEnv's env servers speak them: the opening handshake (section 4), frames with the
client's masking (section 5.2-5.3), fragmented messages (5.4), ping answered by pong and close (5.5). No
extensions or subprotocols are offered, so the server uses none. The frame functions serve both ends, so a
server (``envs/ecosystem/openenv_server.py``) speaks the same protocol.

Servers ping their clients and drop those that do not answer in time (uvicorn: a ping every 20 s, 20 s to
answer), while a policy may think for minutes between two steps. So a connection answers pings from a
background thread whenever no request is in flight, as OpenEnv's own client (the ``websockets`` library's)
does; one lock serialises all socket I/O, so the thread and the caller never read or write at once.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import hashlib
import os
import select
import socket
import ssl
import struct
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable

# RFC 6455 section 1.3: the GUID appended to Sec-WebSocket-Key before hashing.
_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_MAX_HEADER_BYTES = 65_536
_CLOSE_WAIT_S = 1.0
# How often the keepalive thread looks whether its connection was closed or dropped; a ping wakes it at once.
_KEEPALIVE_POLL_S = 0.5


class WebSocketError(OSError):
    """The connection failed, closed, timed out or broke the protocol."""


def accept_key(key: str) -> str:
    """The Sec-WebSocket-Accept a server answers to ``key`` (RFC 6455 section 4.2.2)."""
    return base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()


def encode_frame(opcode: int, payload: bytes, *, mask: bool) -> bytes:
    """One final frame; a client masks every frame it sends, a server none (RFC 6455 section 5.1)."""
    length = len(payload)
    mask_bit = 0x80 if mask else 0
    if length < 126:
        header = struct.pack("!BB", 0x80 | opcode, mask_bit | length)
    elif length < 2**16:
        header = struct.pack("!BBH", 0x80 | opcode, mask_bit | 126, length)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, mask_bit | 127, length)
    if not mask:
        return header + payload
    key = os.urandom(4)
    return header + key + _xor(payload, key)


def read_frame(read: Callable[[int], bytes], max_bytes: int) -> tuple[bool, int, bytes]:
    """``(final, opcode, payload)`` of the next frame; ``read(n)`` returns exactly ``n`` bytes or raises.

    A payload longer than ``max_bytes`` raises :class:`WebSocketError` before it is read.
    """
    first, second = read(2)
    length = second & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", read(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", read(8))
    if length > max_bytes:
        raise WebSocketError(f"a frame of {length} bytes exceeds the limit of {max_bytes}")
    key = read(4) if second & 0x80 else b""
    payload = read(length)
    return bool(first & 0x80), first & 0x0F, _xor(payload, key) if key else payload


def _xor(data: bytes, key: bytes) -> bytes:
    if not data:
        return data
    repeated = (key * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(repeated, "big")).to_bytes(len(data), "big")


class WebSocketConnection:
    """A client connection to ``url`` (``ws://`` or ``wss://``) that sends and receives text messages.

    Args:
        url: the endpoint, such as ``ws://127.0.0.1:8000/ws``.
        timeout_s: the most seconds the connection (handshake included) or one received message may take.
        max_message_bytes: a longer incoming message raises :class:`WebSocketError`.
        headers: extra handshake headers, such as ``{"Authorization": "Bearer <token>"}``.

    Every failure raises :class:`WebSocketError`; after one the connection is unusable: close it. The
    methods are thread-safe; a daemon thread answers the server's pings between requests (module docstring)
    and ends when the connection is closed or dropped.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        max_message_bytes: int = 16 * 2**20,
        headers: dict[str, str] | None = None,
    ):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise ValueError(f"not a ws:// or wss:// URL: {url!r}")
        self.url = url
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        self._buffer = bytearray()
        self._broken = True  # until the handshake succeeds; set again by any failure: the stream is unusable
        self._lock = threading.Lock()  # held for every read and write of the socket
        self._pending: collections.deque[str] = collections.deque()  # messages read between requests
        self._failure: WebSocketError | None = None  # what broke the connection between requests
        self._stop = threading.Event()
        self._deadline = time.monotonic() + timeout_s
        port = parts.port or (443 if parts.scheme == "wss" else 80)
        try:
            sock = socket.create_connection((parts.hostname, port), timeout=timeout_s)
            if parts.scheme == "wss":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
        except OSError as exc:
            raise WebSocketError(f"cannot connect to {parts.hostname}:{port}: {exc}") from exc
        self._sock: socket.socket | None = sock
        try:
            self._handshake(parts, headers or {})
        except BaseException:
            self._broken = True  # no WebSocket to close politely: a refused upgrade must not wait for one
            self.close()
            raise
        self._broken = False
        # The thread holds only a weak reference, so a connection dropped without close() is still collected
        # (and its __del__ frees the server's session).
        self._keepalive = threading.Thread(
            target=_keep_alive, args=(weakref.ref(self), self._stop), name="websocket-keepalive", daemon=True
        )
        self._keepalive.start()

    def _handshake(self, parts: urllib.parse.SplitResult, headers: dict[str, str]) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
        )
        self._send_all(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            if len(head) > _MAX_HEADER_BYTES:
                raise WebSocketError("the handshake reply's headers are too long")
            head += self._recv_some()
        head, rest = head.split(b"\r\n\r\n", 1)
        self._buffer = bytearray(rest)
        status, *lines = head.decode("latin-1").split("\r\n")
        if status.split(" ")[1:2] == ["401"]:
            raise WebSocketError(f"the server refused the WebSocket upgrade: {status!r}: it wants a token")
        if status.split(" ")[1:2] != ["101"]:
            raise WebSocketError(f"the server refused the WebSocket upgrade: {status!r}")
        fields = (line.partition(":") for line in lines)
        headers = {name.strip().lower(): value.strip() for name, _, value in fields}
        if headers.get("sec-websocket-accept") != accept_key(key):
            raise WebSocketError("the server's Sec-WebSocket-Accept does not match the key sent")

    def send_text(self, text: str) -> None:
        with self._lock:
            if self._failure is not None:
                if self._pending:  # the server spoke last, then closed (a full server): let that be read
                    return
                raise self._failure
            self._send_all(encode_frame(OP_TEXT, text.encode("utf-8", "surrogatepass"), mask=True))

    def receive_text(self) -> str:
        """The next text message, waiting at most ``timeout_s``; pings are answered on the way."""
        with self._lock:
            if self._pending:
                return self._pending.popleft()
            if self._failure is not None:
                raise self._failure
            try:
                return self._receive(idle=False)
            except WebSocketError:
                self._broken = True
                raise

    def _pump(self) -> bool:
        """Answer the pings (and keep the messages) that arrived between requests; False once unusable."""
        with self._lock:
            if self._sock is None or self._failure is not None:
                return False
            try:
                while (message := self._receive(idle=True)) is not None:
                    self._pending.append(message)
            except WebSocketError as exc:
                self._failure, self._broken = exc, True
                return False
            return True

    def _receive(self, *, idle: bool) -> str | None:
        """The next text message; with ``idle``, None as soon as no more bytes wait between two messages."""
        self._deadline = time.monotonic() + self.timeout_s
        parts: list[bytes] = []
        size = 0
        while True:
            if idle and not parts and not self._ready():
                return None
            final, opcode, payload = read_frame(self._read_exact, self.max_message_bytes - size)
            if opcode == OP_PING:
                self._send_all(encode_frame(OP_PONG, payload, mask=True))
            elif opcode == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                reason = payload[2:].decode("utf-8", "replace")
                raise WebSocketError(f"the server closed the connection (code {code}) {reason}".strip())
            elif opcode in (OP_TEXT, OP_BINARY, OP_CONTINUATION):
                if (opcode == OP_CONTINUATION) != bool(parts):
                    raise WebSocketError("a fragmented message broke the frame order")
                parts.append(payload)
                size += len(payload)
                if final:
                    try:
                        return b"".join(parts).decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise WebSocketError(f"a text message is not UTF-8: {exc}") from None
            # other opcodes (pong, reserved) are ignored

    def _ready(self) -> bool:
        """Bytes wait to be read (buffered, decrypted by TLS, or on the socket)."""
        sock = self._sock
        if self._buffer or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            return True
        try:
            return sock is not None and bool(select.select([sock], [], [], 0)[0])
        except (OSError, ValueError) as exc:  # closed under us
            raise WebSocketError(f"receiving failed: {exc}") from None

    def close(self) -> None:
        """The closing handshake (RFC 6455 section 7.1.2), then close the socket; safe to call twice.

        On a healthy connection: send a close frame and wait up to ``_CLOSE_WAIT_S`` for the server's (a
        server whose socket vanishes first logs an error); after a failure, close at once.
        """
        self._stop.set()
        with self._lock:
            if self._sock is None:
                return
            if not self._broken and self._failure is None:
                with contextlib.suppress(WebSocketError):
                    self._send_all(encode_frame(OP_CLOSE, struct.pack("!H", 1000), mask=True))
                    self._deadline = time.monotonic() + min(self.timeout_s, _CLOSE_WAIT_S)
                    while read_frame(self._read_exact, self.max_message_bytes)[1] != OP_CLOSE:
                        pass
            sock, self._sock = self._sock, None
            _shut(sock)

    def __del__(self) -> None:
        # An env dropped without close() (the contract's checks, a crashed rollout) must still free its
        # server session, which holds one of the server's max_concurrent_envs slots while the socket is open.
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        sock = getattr(self, "_sock", None)
        if sock is not None:
            _shut(sock)

    def _send_all(self, data: bytes) -> None:
        if self._sock is None:
            raise WebSocketError("the connection is closed")
        try:
            self._sock.settimeout(self.timeout_s)
            self._sock.sendall(data)
        except OSError as exc:
            self._broken = True
            raise WebSocketError(f"sending failed: {exc}") from exc

    def _recv_some(self) -> bytes:
        if self._sock is None:
            raise WebSocketError("the connection is closed")
        self._broken = True  # until the bytes arrive: a timeout leaves a reply half read
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise WebSocketError(f"no reply within {self.timeout_s:g} s")
        try:
            self._sock.settimeout(left)
            data = self._sock.recv(65_536)
        except TimeoutError:
            raise WebSocketError(f"no reply within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise WebSocketError(f"receiving failed: {exc}") from exc
        if not data:
            raise WebSocketError("the server closed the connection")
        self._broken = False
        return data

    def _read_exact(self, count: int) -> bytes:
        while len(self._buffer) < count:
            self._buffer += self._recv_some()
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data


def _shut(sock: socket.socket) -> None:
    # shutdown() sends the FIN at once, even while the keepalive thread's select() still holds the socket.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _keep_alive(ref: weakref.ref[WebSocketConnection], stop: threading.Event) -> None:
    """Wait for bytes on the connection's socket and let the connection read them (answering pings) whenever
    its lock is free; end when it is closed, broken or collected."""
    while not stop.is_set():
        connection = ref()
        sock = None if connection is None else connection._sock
        del connection  # hold no strong reference while waiting
        if sock is None:
            return
        try:
            readable = select.select([sock], [], [], _KEEPALIVE_POLL_S)[0]
        except (OSError, ValueError):  # closed under us
            return
        if readable and not stop.is_set():
            connection = ref()
            if connection is None or not connection._pump():
                return
            del connection
