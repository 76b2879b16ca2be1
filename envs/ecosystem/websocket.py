"""A minimal WebSocket client (RFC 6455) on the standard library, for envs served over a WebSocket session.

Text messages only, as OpenEnv's env servers speak them: the opening handshake (section 4), frames with the
client's masking (section 5.2-5.3), fragmented messages (5.4), ping answered by pong and close (5.5). No
extensions or subprotocols are offered, so the server uses none. The frame functions serve both ends, so a
test server can speak the same protocol.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import ssl
import struct
import time
import urllib.parse
from collections.abc import Callable

# RFC 6455 section 1.3: the GUID appended to Sec-WebSocket-Key before hashing.
_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_MAX_HEADER_BYTES = 65_536
_CLOSE_WAIT_S = 1.0


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

    Every failure raises :class:`WebSocketError`; after one the connection is unusable: close it.
    """

    def __init__(self, url: str, *, timeout_s: float, max_message_bytes: int = 16 * 2**20):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise ValueError(f"not a ws:// or wss:// URL: {url!r}")
        self.url = url
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes
        self._buffer = bytearray()
        self._broken = True  # until the handshake succeeds; set again by any failure: the stream is unusable
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
            self._handshake(parts)
        except BaseException:
            self.close()
            raise
        self._broken = False

    def _handshake(self, parts: urllib.parse.SplitResult) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
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
        if status.split(" ")[1:2] != ["101"]:
            raise WebSocketError(f"the server refused the WebSocket upgrade: {status!r}")
        fields = (line.partition(":") for line in lines)
        headers = {name.strip().lower(): value.strip() for name, _, value in fields}
        if headers.get("sec-websocket-accept") != accept_key(key):
            raise WebSocketError("the server's Sec-WebSocket-Accept does not match the key sent")

    def send_text(self, text: str) -> None:
        self._send_all(encode_frame(OP_TEXT, text.encode("utf-8", "surrogatepass"), mask=True))

    def receive_text(self) -> str:
        """The next text message, waiting at most ``timeout_s``; pings are answered on the way."""
        try:
            return self._receive_text()
        except WebSocketError:
            self._broken = True
            raise

    def _receive_text(self) -> str:
        self._deadline = time.monotonic() + self.timeout_s
        parts: list[bytes] = []
        size = 0
        while True:
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

    def close(self) -> None:
        """The closing handshake (RFC 6455 section 7.1.2), then close the socket; safe to call twice.

        On a healthy connection: send a close frame and wait up to ``_CLOSE_WAIT_S`` for the server's (a
        server whose socket vanishes first logs an error); after a failure, close at once.
        """
        if self._sock is None:
            return
        if not self._broken:
            with contextlib.suppress(WebSocketError):
                self._send_all(encode_frame(OP_CLOSE, struct.pack("!H", 1000), mask=True))
                self._deadline = time.monotonic() + min(self.timeout_s, _CLOSE_WAIT_S)
                while read_frame(self._read_exact, self.max_message_bytes)[1] != OP_CLOSE:
                    pass
        sock, self._sock = self._sock, None
        sock.close()

    def __del__(self) -> None:
        # An env dropped without close() (the contract's checks, a crashed rollout) must still free its
        # server session, which holds one of the server's max_concurrent_envs slots while the socket is open.
        sock = getattr(self, "_sock", None)
        if sock is not None:
            sock.close()

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
