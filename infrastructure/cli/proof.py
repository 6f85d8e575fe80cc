"""``mace proof verify FILE --vkey KEY [--policy FILE]``: a record's tlog-proof, or a run
bundle's proofs, checked against the ledger's verifier key alone (no store, no keyring), and with
a witness policy its checkpoint's cosignatures. Exit 0 proven, 1 a proof or its checkpoint's
signature does not hold (``INTEGRITY_FAILURE``) or too few of the policy's witnesses cosigned it
(``WITNESS_FAILED``), 2 bad input."""

from __future__ import annotations

import argparse

from domain.checkpoint_note import VerifierKey, parse_vkey
from domain.errors import InvalidInput
from domain.witness_policy import WitnessPolicy
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.settings import Settings
from infrastructure.application.witnesses import read_policy
from infrastructure.bundles.proof_files import ProvenBundle, ProvenRecord, verified_proof_file
from infrastructure.cli.common import emit_json

NOT_CHECKED = (
    "its manifest and MACs not checked (they need the ledger's HMAC keys: mace replay --bundle"
    " checks them)"
)


def verify_proof(args: argparse.Namespace, settings: Settings) -> int:
    # Only the files and the key named: no store, keyring or checkpoint key is read.
    policy = None if args.policy is None else read_policy(args.policy)
    vkey = _log_key(args.vkey, policy)
    signer = f"{vkey.name}+{vkey.key_id.hex()}"
    proven = verified_proof_file(args.file, vkey, policy)
    if isinstance(proven, ProvenBundle):
        facts = proven.inclusion.facts()
        if args.json:
            emit_json(
                {
                    "ok": True,
                    "kind": "bundle",
                    **facts,
                    "cosigners": _listed(proven.cosigners),
                    "not_checked": NOT_CHECKED,
                }
            )
        else:
            said = _cosigned(proven.cosigners, policy)
            print(f"ok: bundle {args.file}: {proven.inclusion.summary()}{said}; {NOT_CHECKED}")
        return EXIT_OK
    _print_record(args, proven, signer, policy)
    return EXIT_OK


def _log_key(given: str | None, policy: WitnessPolicy | None) -> VerifierKey:
    """The key the note must be signed by: ``--vkey``, else the policy's log line; both given,
    they must be the same key."""
    if policy is None:
        if given is None:
            raise InvalidInput(
                "proof verify needs --vkey KEY, or --policy FILE whose log line is it"
            )
        return parse_vkey(given)
    if given is not None and parse_vkey(given) != policy.log:
        raise InvalidInput(
            f"--vkey {given.strip()} is not the policy's log key {policy.log.encoded()}: name one"
        )
    return policy.log


def _listed(cosigners: tuple[str, ...] | None) -> list[str] | None:
    return None if cosigners is None else list(cosigners)


def _cosigned(cosigners: tuple[str, ...] | None, policy: WitnessPolicy | None) -> str:
    if cosigners is None or policy is None:
        return ""
    return (
        f"; cosigned by {len(cosigners)} of the policy's witnesses ({', '.join(cosigners)}),"
        f" quorum {policy.quorum}"
    )


def _print_record(
    args: argparse.Namespace, proven: ProvenRecord, signer: str, policy: WitnessPolicy | None
) -> None:
    record, body = proven.record, proven.checkpoint
    if args.json:
        emit_json(
            {
                "ok": True,
                "kind": "record",
                "stream": str(record.originator_id),
                "version": record.version,
                "topic": record.topic,
                "index": proven.index,
                "origin": body.origin,
                "tree_size": body.tree_size,
                "root": body.root.hex(),
                "signed_by": signer,
                "cosigners": _listed(proven.cosigners),
                "other_signatures_not_checked": proven.other_signatures,
            }
        )
        return
    print(
        f"ok: stream {record.originator_id} version {record.version} ({record.topic}) is entry"
        f" {proven.index} of {body.origin}'s log, in its checkpoint of size {body.tree_size}"
        f" (root {body.root.hex()}) signed by {signer}{_cosigned(proven.cosigners, policy)};"
        f" {proven.other_signatures} other signature(s) (witness cosignatures) not checked"
    )
