"""Witness policies: which log a checkpoint is of, which witnesses may cosign it, how many must.

A policy file is text, one directive a line; ``#`` starts a comment, blank lines are ignored:

    log <vkey>                     the ledger's note verifier key (checkpoint public-key --vkey)
    witness <name> <vkey> [<url>]  a witness's cosignature/v1 verifier key (type 0x04), and its
                                   tlog-witness submission prefix if it is to be asked
    quorum <k>                     at least k distinct listed witnesses must have cosigned

Exactly one ``log`` and one ``quorum`` line; witness names and keys are distinct; the quorum is at
most the number of witnesses. Every refusal is one line naming the line number. Pure: parsing and
counting cosignatures need no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from domain.checkpoint_note import ED25519, NoteSignature, VerifierKey, parse_vkey
from domain.cosignature import COSIGNATURE_V1, cosignature_problem
from domain.errors import InvalidInput

EXPECTED_POLICY: Final = (
    "expected 'log <vkey>', 'witness <name> <vkey> [<url>]' or 'quorum <k>', one a line"
)
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}")
_URL: Final = re.compile(r"https?://\S+")


@dataclass(frozen=True)
class PolicyWitness:
    """One listed witness: the policy's name for it, its verifier key, its URL if it is reached."""

    name: str
    vkey: VerifierKey
    url: str | None

    def cosigned(self, note_text: str, signatures: Iterable[NoteSignature]) -> bool:
        """Whether one of ``signatures`` is this witness's valid cosignature of ``note_text``."""
        return any(
            cosignature_problem(note_text, line, self.vkey) is None
            for line in signatures
            if line.by(self.vkey)
        )


@dataclass(frozen=True)
class WitnessPolicy:
    log: VerifierKey
    witnesses: tuple[PolicyWitness, ...]
    quorum: int

    def cosigners(self, note_text: str, signatures: Iterable[NoteSignature]) -> list[str]:
        """The names of the listed witnesses that validly cosigned ``note_text``, in policy order
        (each counted once however many lines it has)."""
        lines = tuple(signatures)
        return [w.name for w in self.witnesses if w.cosigned(note_text, lines)]


@dataclass
class _Lines:
    """What the lines read so far said."""

    log: VerifierKey | None = None
    quorum: int | None = None
    witnesses: list[PolicyWitness] = field(default_factory=list)

    def take(self, directive: str, arguments: list[str], where: str) -> bool:
        """Take one line's directive; False if it is none the format knows."""
        if directive == "log" and len(arguments) == 1:
            if self.log is not None:
                raise InvalidInput(f"{where}: a second 'log' line: a policy names one log")
            self.log = _vkey(arguments[0], ED25519, "the log's note key (Ed25519, 0x01)", where)
        elif directive == "witness" and len(arguments) in (2, 3):
            witness = _witness(arguments, where)
            for known in self.witnesses:
                if witness.name == known.name or witness.vkey.key_id == known.vkey.key_id:
                    msg = f"{where}: witness {witness.name} repeats witness {known.name}"
                    raise InvalidInput(f"{msg}: each witness is listed once")
            self.witnesses.append(witness)
        elif directive == "quorum" and len(arguments) == 1:
            if self.quorum is not None:
                raise InvalidInput(f"{where}: a second 'quorum' line: a policy has one quorum")
            if not re.fullmatch(r"0|[1-9][0-9]{0,3}", arguments[0]):
                raise InvalidInput(f"{where}: quorum {arguments[0]!r} is not a whole number")
            self.quorum = int(arguments[0])
        else:
            return False
        return True


def parse_witness_policy(text: str, source: str) -> WitnessPolicy:
    """The policy ``text`` (read from ``source``, named in errors) states."""
    read = _Lines()
    for number, raw in enumerate(text.splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        where = f"{source} line {number}"
        if words and not read.take(words[0], words[1:], where):
            raise InvalidInput(f"{where}: {raw.strip()[:60]!r}: {EXPECTED_POLICY}")
    if read.log is None:
        raise InvalidInput(f"{source} has no 'log <vkey>' line: {EXPECTED_POLICY}")
    if read.quorum is None:
        raise InvalidInput(f"{source} has no 'quorum <k>' line: {EXPECTED_POLICY}")
    if read.quorum > len(read.witnesses):
        count = len(read.witnesses)
        msg = f"{source}: quorum {read.quorum} is more than the {count} witnesses listed"
        raise InvalidInput(msg)
    return WitnessPolicy(read.log, tuple(read.witnesses), read.quorum)


def _witness(arguments: list[str], where: str) -> PolicyWitness:
    name, key = arguments[0], arguments[1]
    if not _NAME.fullmatch(name):
        raise InvalidInput(f"{where}: witness name {name[:60]!r} is not a plain name")
    vkey = _vkey(key, COSIGNATURE_V1, "a cosignature/v1 key (0x04)", where)
    url = arguments[2] if len(arguments) == 3 else None
    if url is not None and not _URL.fullmatch(url):
        raise InvalidInput(f"{where}: witness URL {url[:60]!r} is not an http(s) URL")
    return PolicyWitness(name, vkey, None if url is None else url.rstrip("/"))


def _vkey(text: str, signature_type: int, expected: str, where: str) -> VerifierKey:
    try:
        vkey = parse_vkey(text)
    except InvalidInput as problem:
        raise InvalidInput(f"{where}: {problem}") from None
    if vkey.signature_type != signature_type:
        msg = f"verifier key of type 0x{vkey.signature_type:02x}: expected {expected}"
        raise InvalidInput(f"{where}: {vkey.name}+{vkey.key_id.hex()} is a {msg}")
    return vkey
