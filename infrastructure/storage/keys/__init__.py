"""The keys: the HMAC keyring that signs every record, the key checks that pin it to the store,
the Ed25519 key that signs checkpoints, the receipt signer, and the development key files."""
