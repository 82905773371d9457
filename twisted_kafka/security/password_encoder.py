"""Kafka's encryption of dynamically configured passwords (``password.encoder.*``).

A password set at runtime (AlterConfigs of ``listener.name.<l>.ssl.key.password``,
``...sasl.jaas.config``, ...) is stored where every change of the cluster
metadata is stored -- the metadata file, its backup, ZooKeeper's
``/config/brokers/<id>`` -- so it is stored encrypted, as Kafka's ZooKeeper
mode stores it (``PasswordEncoder``, KIP-226): a key is derived from
``password.encoder.secret`` with PBKDF2 over a fresh 256-byte salt, the
password is encrypted with it, and what is stored is Kafka's text form, a
comma-separated map::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,
    keyLength:128,iterations:4096,salt:<base64>,initializationVector:<base64>,
    encryptedPassword:<base64>,passwordLength:<UTF-16 code units>

(GCM adds ``authenticationTagLength``).  The algorithms, key length and
iterations used are stored with the value and read back from it, so a value
stays readable after ``password.encoder.*`` change; only the secret must be
the same -- or given as ``password.encoder.old.secret`` for one start, which
re-encodes the stored values with the new one.  Values written by Kafka
decode here and values written here decode in Kafka (same names, Java's
base64, the password's UTF-8 bytes, the key derived from the secret's UTF-8
bytes as Java's PBKDF2 does).

The cryptography is the ``cryptography`` package's; what is ours is Kafka's
text form and the mapping of Java's algorithm names.
"""

from __future__ import annotations

import base64
import binascii
import os
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

__all__ = ["PasswordEncoder", "PasswordDecodeError", "CIPHER_ALGORITHMS", "KEY_FACTORY_ALGORITHMS",
           "DEFAULT_CIPHER_ALGORITHM", "DEFAULT_KEY_FACTORY_ALGORITHM", "DEFAULT_KEY_LENGTH",
           "DEFAULT_ITERATIONS", "AES_KEY_LENGTHS", "looks_encoded"]

#: Java's ``SecretKeyFactory`` names of PBKDF2 -> the HMAC's hash.
KEY_FACTORY_ALGORITHMS: dict[str, type[hashes.HashAlgorithm]] = {
    "PBKDF2WithHmacSHA512": hashes.SHA512,
    "PBKDF2WithHmacSHA384": hashes.SHA384,
    "PBKDF2WithHmacSHA256": hashes.SHA256,
    "PBKDF2WithHmacSHA224": hashes.SHA224,
    "PBKDF2WithHmacSHA1": hashes.SHA1,
}
CBC, GCM = "AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"
#: Java's ``Cipher`` transformations this broker encrypts with (Kafka's default, and GCM).
CIPHER_ALGORITHMS = (CBC, GCM)
#: AES key sizes in bits (``password.encoder.key.length``).
AES_KEY_LENGTHS = (128, 192, 256)

DEFAULT_CIPHER_ALGORITHM = CBC
DEFAULT_KEY_FACTORY_ALGORITHM = "PBKDF2WithHmacSHA512"
DEFAULT_KEY_LENGTH = 128
DEFAULT_ITERATIONS = 4096

_SALT_BYTES = 256          # Kafka's salt size
_CBC_IV_BYTES = 16         # what Java's AES/CBC generates
_GCM_IV_BYTES = 12         # ... and AES/GCM, with a 128-bit tag
_GCM_TAG_BITS = 128
_SEPARATOR = re.compile(r"\s*,\s*")
_REQUIRED = ("cipherAlgorithm", "keyLength", "salt", "iterations", "encryptedPassword", "passwordLength",
             "initializationVector")


class PasswordDecodeError(ValueError):
    """A stored value that does not decode with this secret: another secret, or not Kafka's form.

    Its message never contains the value or anything derived from it."""


def _b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _java_length(text: str) -> int:
    """``String.length()`` of ``text`` in Java: UTF-16 code units (Kafka stores it as passwordLength)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _parse(encoded: str) -> dict[str, str]:
    """Kafka's ``Csv.parseCsvMap``: ``k:v`` pairs split at commas, each at its last colon."""
    fields = {}
    for item in _SEPARATOR.split(encoded.strip()):
        key, colon, value = item.rpartition(":")
        if not colon:
            raise PasswordDecodeError("not an encoded password (Kafka's key:value,... form)")
        fields[key.strip()] = value.strip()
    return fields


def looks_encoded(value: str) -> bool:
    """Whether ``value`` has the shape of Kafka's encoded form (every field it needs is there)."""
    try:
        fields = _parse(value)
    except PasswordDecodeError:
        return False
    return all(name in fields for name in _REQUIRED)


class PasswordEncoder:
    """Encrypts with ``secret`` and the given algorithms; decrypts what any of the algorithms wrote.

    Raises ``ValueError`` naming the offending ``password.encoder.*`` key for
    an algorithm or key length it cannot use, so a broker refuses to start
    with them rather than at the first AlterConfigs.
    """

    def __init__(self, secret: str, *, cipher_algorithm: str = DEFAULT_CIPHER_ALGORITHM,
                 key_length: int = DEFAULT_KEY_LENGTH, iterations: int = DEFAULT_ITERATIONS,
                 key_factory_algorithm: str | None = None):
        if not secret:
            raise ValueError("password.encoder.secret must not be empty")
        if cipher_algorithm not in CIPHER_ALGORITHMS:
            raise ValueError(f"password.encoder.cipher.algorithm {cipher_algorithm!r} is not supported: "
                             f"use one of {', '.join(CIPHER_ALGORITHMS)}")
        key_factory_algorithm = key_factory_algorithm or DEFAULT_KEY_FACTORY_ALGORITHM
        if key_factory_algorithm not in KEY_FACTORY_ALGORITHMS:
            raise ValueError(f"password.encoder.keyfactory.algorithm {key_factory_algorithm!r} is not supported: "
                             f"use one of {', '.join(KEY_FACTORY_ALGORITHMS)}")
        if key_length not in AES_KEY_LENGTHS:
            raise ValueError(f"password.encoder.key.length {key_length} is not an AES key length: "
                             f"use one of {', '.join(map(str, AES_KEY_LENGTHS))}")
        if iterations < 1:
            raise ValueError("password.encoder.iterations must be at least 1")
        self._secret = secret.encode("utf-8", "surrogatepass")
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations
        self.key_factory_algorithm = key_factory_algorithm

    def __repr__(self) -> str:   # never the secret
        return (f"PasswordEncoder({self.cipher_algorithm}, {self.key_factory_algorithm}, "
                f"key length {self.key_length}, {self.iterations} iterations)")

    def _key(self, factory: str, key_length: int, salt: bytes, iterations: int) -> bytes:
        kdf = PBKDF2HMAC(algorithm=KEY_FACTORY_ALGORITHMS[factory](), length=key_length // 8, salt=salt,
                         iterations=iterations)
        return kdf.derive(self._secret)

    def encode(self, password: str) -> str:
        """Kafka's encoded form of ``password``, with a fresh salt and IV."""
        salt = os.urandom(_SALT_BYTES)
        key = self._key(self.key_factory_algorithm, self.key_length, salt, self.iterations)
        plain = password.encode("utf-8", "surrogatepass")
        fields = {"keyFactoryAlgorithm": self.key_factory_algorithm, "cipherAlgorithm": self.cipher_algorithm,
                  "keyLength": str(self.key_length), "salt": _b64encode(salt),
                  "iterations": str(self.iterations)}
        if self.cipher_algorithm == GCM:
            iv = os.urandom(_GCM_IV_BYTES)
            encrypted = AESGCM(key).encrypt(iv, plain, None)     # ciphertext then tag, as Java's doFinal
            fields["authenticationTagLength"] = str(_GCM_TAG_BITS)
        else:
            iv = os.urandom(_CBC_IV_BYTES)
            padder = padding.PKCS7(128).padder()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padder.update(plain) + padder.finalize()) + encryptor.finalize()
        fields["encryptedPassword"] = _b64encode(encrypted)
        fields["passwordLength"] = str(_java_length(password))
        fields["initializationVector"] = _b64encode(iv)
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password ``encoded`` holds; ``PasswordDecodeError`` if it does not decode with this secret."""
        fields = _parse(encoded)
        missing = [name for name in _REQUIRED if name not in fields]
        if missing:
            raise PasswordDecodeError(f"not an encoded password: no {', '.join(missing)}")
        cipher = fields["cipherAlgorithm"]
        factory = fields.get("keyFactoryAlgorithm") or DEFAULT_KEY_FACTORY_ALGORITHM
        if cipher not in CIPHER_ALGORITHMS or factory not in KEY_FACTORY_ALGORITHMS:
            raise PasswordDecodeError(f"encoded with {cipher} / {factory}, which this broker cannot decode")
        try:
            key_length, iterations = int(fields["keyLength"]), int(fields["iterations"])
            length = int(fields["passwordLength"])
            salt, iv = _b64decode(fields["salt"]), _b64decode(fields["initializationVector"])
            encrypted = _b64decode(fields["encryptedPassword"])
        except (ValueError, binascii.Error):
            raise PasswordDecodeError("not an encoded password: a malformed field") from None
        if key_length not in AES_KEY_LENGTHS or iterations < 1:
            raise PasswordDecodeError(f"encoded with key length {key_length}, {iterations} iterations: not usable")
        if cipher == GCM and fields.get("authenticationTagLength", str(_GCM_TAG_BITS)) != str(_GCM_TAG_BITS):
            raise PasswordDecodeError("only 128-bit GCM authentication tags are supported")
        key = self._key(factory, key_length, salt, iterations)
        try:
            if cipher == GCM:
                plain = AESGCM(key).decrypt(iv, encrypted, None)
            else:
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                padded = decryptor.update(encrypted) + decryptor.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(padded) + unpadder.finalize()
            password = plain.decode("utf-8")
        except (InvalidTag, ValueError):
            raise PasswordDecodeError("the password could not be decoded (another password.encoder.secret?)") \
                from None
        if _java_length(password) != length:     # Kafka's sanity check
            raise PasswordDecodeError("the password could not be decoded: its length does not match")
        return password
