"""A minimal witness that follows ``c2sp.org/tlog-witness`` (add-checkpoint), over real HTTP.

It knows logs by origin and note verifier key, keeps the latest cosigned size and root of each,
and answers as the spec has it: 404 for an unknown origin, 403 without a valid signature by the
log's key, 400 for a malformed body or an old size above the checkpoint's, 409 (content type
``text/x.tlog.size``, body the size and a newline) when the old size is not the one it holds, 422
for a proof that does not verify (or a non-empty one from size 0, or another root at the same
size), else 200 with its cosignature/v1 line, the new size kept first. Check and update are one
step under a lock (the race the spec warns of).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock, Thread

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from domain.checkpoint_note import NoteSignature, VerifierKey, parse_checkpoint_text, parse_note
from domain.cosignature import cosigned_message, cosigner_vkey
from domain.errors import InvalidInput
from domain.merkle import EMPTY_ROOT, verify_consistency


@dataclass
class SpecWitness:
    """The witness's state: its name and key, the logs it knows, what it cosigned of each."""

    name: str
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    logs: dict[str, VerifierKey] = field(default_factory=dict)
    latest: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    requests: list[tuple[int, int]] = field(default_factory=list)  # (old size, status) answered
    lock: Lock = field(default_factory=Lock)

    @property
    def vkey(self) -> VerifierKey:
        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return cosigner_vkey(self.name, raw)

    def trust(self, log: VerifierKey) -> None:
        self.logs[log.name] = log

    def add_checkpoint(self, body: bytes) -> tuple[int, str, bytes]:
        """(status, content type, body) of the spec's answer to ``body``."""
        try:
            old, proof, note_bytes = _request(body)
            note = parse_note(note_bytes)
            checkpoint = parse_checkpoint_text(note.text)
        except (InvalidInput, ValueError) as problem:
            return 400, "text/plain", f"{problem}\n".encode()
        log = self.logs.get(checkpoint.origin)
        if log is None:
            return 404, "text/plain", b"unknown log origin\n"
        public = Ed25519PublicKey.from_public_bytes(log.public_key)
        mine = [line for line in note.signatures if line.by(log)]
        if not mine or not all(_verifies(public, note.text, line) for line in mine):
            return 403, "text/plain", b"no valid signature by a known key of the log\n"
        if old > checkpoint.tree_size:
            return 400, "text/plain", b"old size is above the checkpoint size\n"
        if checkpoint.tree_size == 0 and checkpoint.root != EMPTY_ROOT:
            return 422, "text/plain", b"an empty tree has the empty root\n"
        with self.lock:
            size, root = self.latest.get(checkpoint.origin, (0, EMPTY_ROOT))
            if old != size:
                self.requests.append((old, 409))
                return 409, "text/x.tlog.size", f"{size}\n".encode()
            if old == 0 and proof:
                return 422, "text/plain", b"a proof from size 0 must be empty\n"
            consistent = old == 0 or verify_consistency(
                old, checkpoint.tree_size, root, checkpoint.root, proof
            )
            if not consistent:
                self.requests.append((old, 422))
                return 422, "text/plain", b"the consistency proof does not verify\n"
            self.latest[checkpoint.origin] = (checkpoint.tree_size, checkpoint.root)
            self.requests.append((old, 200))
        return 200, "text/plain; charset=utf-8", self.cosign(note.text).line().encode()

    def cosign(self, note_text: str, timestamp: int | None = None) -> NoteSignature:
        """Its cosignature/v1 line for ``note_text``, made now (or at ``timestamp``)."""
        when = int(time.time()) if timestamp is None else timestamp
        signature = self.key.sign(cosigned_message(note_text, when))
        vkey = self.vkey
        return NoteSignature(vkey.name, vkey.key_id, when.to_bytes(8, "big") + signature)


def _verifies(public: Ed25519PublicKey, text: str, line: NoteSignature) -> bool:
    try:
        public.verify(line.signature, text.encode())
    except Exception:
        return False
    return True


def _request(body: bytes) -> tuple[int, list[bytes], bytes]:
    """The old size, the proof hashes and the note of an add-checkpoint body."""
    head, separator, note = body.partition(b"\n\n")
    if not separator:
        raise ValueError("no empty line before the checkpoint")
    lines = head.decode("ascii").split("\n")
    if not lines[0].startswith("old "):
        raise ValueError("the body does not start with an old size line")
    size = lines[0].removeprefix("old ")
    if size != str(int(size)) or len(lines) - 1 > 63:
        raise ValueError("bad old size or too many proof lines")
    try:
        proof = [base64.b64decode(line, validate=True) for line in lines[1:]]
    except binascii.Error:
        raise ValueError("a proof line is not base64") from None
    return int(size), proof, note


class _Handler(BaseHTTPRequestHandler):
    witness: SpecWitness

    def do_POST(self) -> None:
        if self.path != "/add-checkpoint":
            self._answer(404, "text/plain", b"not found\n")
            return
        length = int(self.headers.get("Content-Length", "0"))
        self._answer(*self.witness.add_checkpoint(self.rfile.read(length)))

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests read the witness's state, not its log."""


@contextmanager
def serving(witness: SpecWitness) -> Iterator[str]:
    """``witness`` answering on a free local port while the block runs; its URL."""
    handler = type("Handler", (_Handler,), {"witness": witness})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = Thread(target=server.serve_forever, name=f"witness-{witness.name}", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
