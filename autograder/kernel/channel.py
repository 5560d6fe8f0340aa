"""The narrow channel between the grader process and the learner's kernel.

Messages are JSON objects, one per frame, over an authenticated Unix socket
(:mod:`multiprocessing.connection` with an ``authkey``). Only ``send_bytes`` / ``recv_bytes``
are used, so the grader never unpickles anything the kernel sends: what crosses is plain
data (numbers, strings, lists), and a frame larger than :data:`MAX_FRAME` is refused.

The grader listens (:class:`Endpoint`); the kernel connects with the address and key the
grader put in its environment (:func:`connect`).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import tempfile
import threading
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Callable

ENDPOINT_ENV = "AUTOGRADER_ENDPOINT"
KEY_ENV = "AUTOGRADER_KEY"
MAX_FRAME = 8 * 2**20  # bytes; the largest honest message (an array of results) is far smaller


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message, or went away."""


def send(conn: Connection, message: dict) -> None:
    """Send one JSON message."""
    try:
        conn.send_bytes(json.dumps(message).encode())
    except (OSError, ValueError, TypeError) as exc:
        raise ProtocolError(f"could not send: {exc}") from None


def recv(conn: Connection, timeout_s: float | None = None) -> dict:
    """Receive one JSON message within ``timeout_s`` (``TimeoutError`` otherwise)."""
    try:
        ready = timeout_s is None or conn.poll(max(0.0, timeout_s))
        data = conn.recv_bytes(MAX_FRAME) if ready else None
    except (EOFError, OSError) as exc:
        raise ProtocolError(f"the other side went away ({type(exc).__name__})") from None
    if data is None:
        raise TimeoutError
    try:
        message = json.loads(data)
    except ValueError:
        raise ProtocolError("a message that is not JSON") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a message without an 'op'")
    return message


def peer_pid(conn: Connection) -> int | None:
    """The process id of the other end of a Unix socket, from the kernel (not from it)."""
    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        finally:
            sock.close()
        return struct.unpack("3i", creds)[0]
    except (OSError, AttributeError):
        return None


def innermost_pid(pid: int) -> int:
    """``pid`` as the innermost PID namespace it lives in numbers it (``NSpid`` in
    ``/proc/PID/status``): a sandboxed kernel's pid as its Ray records it. ``pid`` itself when
    it is in this namespace only, or cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return pid


def hang_up(conn: Connection) -> None:
    """Shut a connection down so that a thread blocked reading it wakes up."""
    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
    except OSError:
        pass


class Endpoint:
    """The grader's listening socket, served on a background thread.

    ``handler(conn)`` is called for each connection, one at a time, until it returns. The
    socket lives in a private temporary directory (under ``under``, where given: a folder a
    sandbox that must reach it can see); :attr:`env` is what the kernel needs to connect.
    """

    def __init__(self, handler: Callable[[Connection], None], *, gid: int | None = None, under: Path | None = None):
        self._dir = tempfile.TemporaryDirectory(prefix="autograder-endpoint-", dir=under)
        # under a folder a sandbox sees as it is, the sandbox user passes through to the socket
        os.chmod(self._dir.name, 0o711 if under is not None else 0o700)
        self.address = str(Path(self._dir.name) / "grader.sock")
        self._key = secrets.token_bytes(32)
        self._listener = Listener(self.address, family="AF_UNIX", authkey=self._key)
        if gid is not None:  # a sandboxed peer of that group may connect (the socket is bound into
            os.chown(self.address, -1, gid)  # its sandbox; the folder around it stays the grader's)
            os.chmod(self.address, 0o660)
        self._handler = handler
        self._closing = False
        self.failures: list[str] = []  # handler errors (grader bugs), kept for the grading log
        self._conn: Connection | None = None
        self._thread = threading.Thread(target=self._serve, name="autograder-endpoint", daemon=True)
        self._thread.start()

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that let a kernel connect."""
        return {ENDPOINT_ENV: self.address, KEY_ENV: self._key.hex()}

    def _serve(self) -> None:
        while not self._closing:
            try:
                conn = self._listener.accept()
            except Exception:  # a failed handshake (wrong key, garbage) or the listener closed
                if self._closing:
                    break
                continue
            if self._closing:
                conn.close()
                break
            self._conn = conn
            try:
                self._handler(conn)
            except Exception:  # a handler bug must not stop the endpoint; kept for the log
                import traceback

                self.failures.append(traceback.format_exc())
            finally:
                conn.close()

    def close(self, wait_s: float = 30.0) -> None:
        """Stop accepting, wait for the connection being served (at most ``wait_s``), clean up."""
        self._closing = True
        if self._conn is not None:  # a process that outlived the kernel may hold it open
            hang_up(self._conn)
        try:  # wake accept(), which blocks until someone connects (no handshake: never blocks)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(self.address)
        except OSError:
            pass
        self._thread.join(wait_s)
        self._listener.close()
        self._dir.cleanup()


def connect() -> Connection | None:
    """The kernel's connection to its grader, or None when this kernel is not being graded."""
    address, key = os.environ.get(ENDPOINT_ENV), os.environ.get(KEY_ENV)
    if not address or not key:
        return None
    return Client(address, family="AF_UNIX", authkey=bytes.fromhex(key))
