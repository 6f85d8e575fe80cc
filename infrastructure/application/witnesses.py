"""Witnessing the ledger's checkpoints (``c2sp.org/tlog-witness``) and checking a witness policy.

`Witnesses.witness` sends the newest checkpoint's note to each witness's ``add-checkpoint``, with
the consistency proof from the size that witness was last kept as having cosigned. A witness that
holds another size answers 409 with it: the request is made once more from that size. A size
larger than the store's newest checkpoint is a tree of this log, signed by its key, that the
store no longer holds: the store was rolled back or its tail deleted (``INTEGRITY_FAILURE``
naming the witness and its size). Any other refusal (403: it does not trust the log's key; 404:
it does not know the origin; 422: the proof does not hold against the tree it cosigned), an
answer that is not cosignature lines, or no answer within the timeout is ``WITNESS_FAILED``, one
line naming the witness.

`Witnesses.check_policy` is what ``mace verify --all --policy`` adds: the newest checkpoint's note
must be signed by the policy's log key, and carry valid cosignatures (kept, or answered now by the
policy's witnesses that have a URL) of at least a quorum of the listed witnesses.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

from domain.checkpoint import CHECKPOINT_STREAM, SignedCheckpoint
from domain.checkpoint_note import NoteSignature, SignedNote, parse_note
from domain.cosignature import timestamped
from domain.errors import IntegrityFailure, InvalidInput
from domain.witness_policy import WitnessPolicy, parse_witness_policy
from infrastructure.application.checkpoints import CheckpointService, checked_note
from infrastructure.application.errors import WitnessFailed
from infrastructure.application.settings import Settings

MAX_POLICY_BYTES: Final = 1024 * 1024


def read_policy(path: Path) -> WitnessPolicy:
    """The witness policy in the file ``path``; one line naming the file (and line) otherwise."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        msg = f"cannot read witness policy {path}: {exc.strerror or type(exc).__name__}"
        raise InvalidInput(msg) from None
    if len(data) > MAX_POLICY_BYTES:
        raise InvalidInput(f"witness policy {path} is over {MAX_POLICY_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"witness policy {path} is not UTF-8 text") from None
    return parse_witness_policy(text, f"witness policy {path}")


def policy_witnessing(
    settings: Settings, checkpoints: CheckpointService
) -> Callable[[], object] | None:
    """What the notary calls to witness the newest checkpoint: `Witnesses.witness` with the
    URLs of ``MACE_WITNESS_POLICY``'s witnesses; None without a policy (or URLs in it). The
    policy is read now: a bad one stops the service from starting, in one line."""
    if settings.witness_policy is None:
        return None
    policy = read_policy(settings.witness_policy)
    urls = [witness.url for witness in policy.witnesses if witness.url is not None]
    if not urls:
        return None
    witnesses = Witnesses(checkpoints, settings.witness_timeout)
    return lambda: witnesses.witness(urls, checkpoints.log_origin(settings.log_origin))


def cosigned_quorum(
    policy: WitnessPolicy,
    note_text: str,
    lines: Sequence[NoteSignature],
    what: str,
    refused: Sequence[str] = (),
) -> list[str]:
    """The names of the policy's witnesses whose cosignatures among ``lines`` are valid for
    ``note_text``, once they are a quorum; `WitnessFailed` naming ``what`` and who cosigned (and
    why the ``refused`` witnesses did not) otherwise."""
    cosigners = policy.cosigners(note_text, lines)
    if len(cosigners) < policy.quorum:
        named = ", ".join(cosigners) or "none"
        why = "" if not refused else f" ({'; '.join(refused)})"
        msg = (
            f"{what} is cosigned by {len(cosigners)} of the policy's witnesses ({named}), below"
            f" its quorum of {policy.quorum}{why}"
        )
        raise WitnessFailed(msg)
    return cosigners


SIZE_CONTENT_TYPE: Final = "text/x.tlog.size"
MAX_ANSWER_BYTES: Final = 64 * 1024
"""More than the cosignature lines of any witness (the spec's answers are a few lines)."""


@dataclass(frozen=True)
class Cosigned:
    """What one witness answered: its cosignature lines of the note, and from which size."""

    witness: str
    old_size: int
    lines: tuple[NoteSignature, ...]


class Witnesses:
    def __init__(self, checkpoints: CheckpointService, timeout: float) -> None:
        """``timeout``: how long one request to a witness may take, in seconds."""
        self.checkpoints = checkpoints
        self.timeout = timeout

    def witness(self, urls: Sequence[str], origin: str) -> tuple[SignedCheckpoint, list[Cosigned]]:
        """Checkpoint every event, send the newest checkpoint to each witness at ``urls`` and
        keep the cosignatures they answer beside it. Every witness is asked before a failure is
        raised, so one that is down does not keep the others from cosigning."""
        signed = self.checkpoints.export().newest
        note = self.checkpoints.note(signed, origin)
        answers: list[Cosigned] = []
        failures: list[Exception] = []
        with httpx.Client(timeout=self.timeout) as client:
            for url in urls:
                try:
                    cosigned = self._submit(client, url, signed, note)
                except (WitnessFailed, IntegrityFailure) as failure:
                    failures.append(failure)
                    continue
                self.checkpoints.keep_cosignatures(signed, url, cosigned.lines)
                answers.append(cosigned)
        if failures:
            # An integrity failure (a witness holds more of the log) outranks a refusal.
            raise next((f for f in failures if isinstance(f, IntegrityFailure)), failures[0])
        return signed, answers

    def check_policy(
        self, policy: WitnessPolicy, origin: str
    ) -> tuple[SignedCheckpoint, list[str]]:
        """The newest checkpoint and the names of the listed witnesses that cosigned it, once
        they are a quorum; it is not kept (verifying writes nothing). A witness holding a larger
        tree of the log is `IntegrityFailure`; too few cosigners, `WitnessFailed`."""
        signed = self.checkpoints.newest()
        if signed is None:
            raise WitnessFailed("the store has no checkpoint for the policy's witnesses to cosign")
        note = self.checkpoints.note(signed, origin)
        checked_note(
            note, policy.log, "the store's newest checkpoint, against the policy's log key"
        )
        lines = list(note.signatures)
        refused: list[str] = []
        with httpx.Client(timeout=self.timeout) as client:
            for witness in policy.witnesses:
                # Asked even when a kept cosignature counts already: only the witness knows
                # whether it has cosigned a larger tree since (a store restored from a backup
                # holds the cosignatures of its older checkpoint).
                if witness.url is None:
                    continue
                try:
                    lines.extend(self._submit(client, witness.url, signed, note).lines)
                except WitnessFailed as failure:
                    refused.append(str(failure))
        body = signed.checkpoint
        what = f"checkpoint {body.number} (tree size {body.tree_size})"
        return signed, cosigned_quorum(policy, note.text, lines, what, refused)

    def _submit(
        self, client: httpx.Client, url: str, signed: SignedCheckpoint, note: SignedNote
    ) -> Cosigned:
        """add-checkpoint from the size ``url`` was last kept as having cosigned; after a 409,
        once more from the size it holds."""
        size = signed.checkpoint.tree_size
        old = min(self.checkpoints.witnessed_size(url), size)
        for _ in range(2):
            answer = _post(client, url, old, self.checkpoints.proof_from(old, signed), note)
            if answer.status_code != httpx.codes.CONFLICT:
                return Cosigned(url, old, _cosignatures(url, answer))
            held = _held_size(url, answer)
            if held > size:
                reason = (
                    f"witness {url} has cosigned tree size {held} of this log, but the store's"
                    f" newest checkpoint covers {size} events: the store was rolled back or its"
                    " tail deleted"
                )
                raise IntegrityFailure(CHECKPOINT_STREAM, signed.checkpoint.number, reason)
            old = held
        msg = f"witness {url} answered 409 twice: its cosigned size moved while it was asked"
        raise WitnessFailed(msg)


def _post(
    client: httpx.Client, url: str, old: int, proof: Sequence[bytes], note: SignedNote
) -> httpx.Response:
    lines = "".join(f"{base64.b64encode(node).decode()}\n" for node in proof)
    body = f"old {old}\n{lines}\n".encode() + note.encoded()
    try:
        return client.post(f"{url.rstrip('/')}/add-checkpoint", content=body)
    except httpx.TimeoutException:
        msg = f"witness {url} did not answer within {client.timeout.read} s"
        raise WitnessFailed(msg) from None
    except httpx.HTTPError as problem:
        msg = f"witness {url} cannot be reached: {problem or type(problem).__name__}"
        raise WitnessFailed(msg) from None


REFUSALS: Final = {
    400: "the request is malformed to it (400)",
    403: "it does not trust the log's key for this origin (403): add the log's vkey",
    404: "it does not know the log's origin (404): add the origin and vkey to it",
    422: "the consistency proof does not hold against the tree it cosigned (422)",
}


def _held_size(url: str, answer: httpx.Response) -> int:
    """The size a 409 says the witness holds (spec: ``text/x.tlog.size``, the size, a newline)."""
    content_type = answer.headers.get("content-type", "").split(";")[0].strip()
    text = answer.content[:32].decode("ascii", "replace")
    if content_type != SIZE_CONTENT_TYPE or not text.endswith("\n") or not text[:-1].isdigit():
        msg = (
            f"witness {url} answered 409 without its tree size (content type"
            f" {content_type or 'none'!r}): expected {SIZE_CONTENT_TYPE}, a decimal and a newline"
        )
        raise WitnessFailed(msg)
    return int(text[:-1])


def _cosignatures(url: str, answer: httpx.Response) -> tuple[NoteSignature, ...]:
    """The cosignature lines of a 200; any other status is the refusal it means."""
    if answer.status_code != httpx.codes.OK:
        reason = REFUSALS.get(answer.status_code, f"it answered HTTP {answer.status_code}")
        raise WitnessFailed(f"witness {url} refused the checkpoint: {reason}")
    content = answer.content[:MAX_ANSWER_BYTES]
    try:
        # The lines parse as the signature block of a note (the spec's own suggestion).
        lines = parse_note(b"x\n\n" + content).signatures
    except InvalidInput as problem:
        raise WitnessFailed(f"witness {url} answered no cosignature lines: {problem}") from None
    for line in lines:
        held = timestamped(line)
        if isinstance(held, str):
            msg = f"witness {url} answered a line by {line.name} that is no cosignature: it {held}"
            raise WitnessFailed(msg)
    return lines
