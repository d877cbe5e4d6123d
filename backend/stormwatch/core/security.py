"""Passwords, tokens and encrypted secrets."""

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.fernet import Fernet, InvalidToken

from stormwatch.core.config import get_settings

_hasher = PasswordHasher()

TOKEN_KINDS = {
    "api_key": "swk",
    "agent": "swa",
    "enrollment": "swe",
    "session": "sws",
    "invite": "swi",
    "reset": "swr",
}
_PREFIX_LEN = 8
_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@dataclass(frozen=True)
class NewToken:
    token: str  # shown once, never stored
    prefix: str  # stored and shown so users can tell tokens apart
    token_hash: str  # stored


def hash_token(token: str) -> str:
    # Tokens carry 190+ bits of randomness, so a fast hash is enough (no dictionary to attack).
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(kind: str) -> NewToken:
    tag = TOKEN_KINDS[kind]
    body = "".join(secrets.choice(_ALPHABET) for _ in range(_PREFIX_LEN + 32))
    token = f"{tag}_{body}"
    return NewToken(token=token, prefix=f"{tag}_{body[:_PREFIX_LEN]}", token_hash=hash_token(token))


def token_kind(token: str) -> str | None:
    for kind, tag in TOKEN_KINDS.items():
        if token.startswith(tag + "_"):
            return kind
    return None


def constant_time_equals(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _fernet() -> Fernet:
    key = hashlib.sha256(b"stormwatch-secrets:" + get_settings().secret_key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def encrypt_secret(plaintext: str) -> str:
    """Encrypts a credential for storage; only `decrypt_secret` with the same key reads it."""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt_secret(ciphertext: str) -> str:
    try:
        return _fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("stored secret cannot be decrypted with the current SECRET_KEY") from exc
