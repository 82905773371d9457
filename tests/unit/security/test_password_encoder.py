"""PasswordEncoder: Kafka's encoded form of dynamic passwords, checked against Java's own cryptography.

The interoperability test runs a small Java program that encrypts and
decrypts with Java's JCE the way Kafka's PasswordEncoder uses it (PBKDF2 key
factory, AES cipher, the key:value text form), so a value written by a Kafka
broker is shown to decode here, and one written here to decode in Kafka.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from twisted_kafka.security.password_encoder import PasswordDecodeError, PasswordEncoder, looks_encoded

UNUSUAL = "pässwörd 🔑 with, commas: and colons"


def fields(encoded: str) -> dict[str, str]:
    return dict(item.rsplit(":", 1) for item in encoded.split(","))


def test_kafkas_defaults_and_form():
    encoded = PasswordEncoder("secret").encode("hunter2")
    got = fields(encoded)
    assert {k: got[k] for k in ("keyFactoryAlgorithm", "cipherAlgorithm", "keyLength", "iterations",
                                "passwordLength")} == {
        "keyFactoryAlgorithm": "PBKDF2WithHmacSHA512", "cipherAlgorithm": "AES/CBC/PKCS5Padding",
        "keyLength": "128", "iterations": "4096", "passwordLength": "7"}
    import base64
    assert len(base64.b64decode(got["salt"])) == 256 and len(base64.b64decode(got["initializationVector"])) == 16
    assert "hunter2" not in encoded and looks_encoded(encoded) and not looks_encoded("hunter2")


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"])
@pytest.mark.parametrize("key_length", [128, 256])
def test_round_trip(cipher, key_length):
    encoder = PasswordEncoder("s3cret", cipher_algorithm=cipher, key_length=key_length, iterations=1024,
                              key_factory_algorithm="PBKDF2WithHmacSHA256")
    encoded = encoder.encode(UNUSUAL)
    assert encoded != encoder.encode(UNUSUAL)                    # a fresh salt and IV every time
    assert fields(encoded)["passwordLength"] == "36"             # Java's length: UTF-16 code units
    # Read with the algorithms stored in the value, whatever this encoder would write.
    assert PasswordEncoder("s3cret").decode(encoded) == UNUSUAL


def test_another_secret_or_garbage_does_not_decode():
    encoded = PasswordEncoder("one").encode("password")
    with pytest.raises(PasswordDecodeError) as failure:
        PasswordEncoder("two").decode(encoded)
    assert "password" not in str(failure.value).replace("password.encoder", "").replace("password could", "")
    for bad in ("plain text", encoded.replace("encryptedPassword:", "encryptedPassword:%%"), ""):
        with pytest.raises(PasswordDecodeError):
            PasswordEncoder("one").decode(bad)


@pytest.mark.parametrize("settings, key", [
    ({"cipher_algorithm": "DES/CBC/PKCS5Padding"}, "password.encoder.cipher.algorithm"),
    ({"key_length": 100}, "password.encoder.key.length"),
    ({"key_factory_algorithm": "PBKDF2WithHmacMD5"}, "password.encoder.keyfactory.algorithm"),
])
def test_unusable_settings_name_their_key(settings, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        PasswordEncoder("secret", **settings)


JAVA = r"""
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.*;
import javax.crypto.*;
import javax.crypto.spec.*;

public class KafkaPasswords {
    static SecretKeySpec key(String secret, String factory, int length, byte[] salt, int iterations) throws Exception {
        PBEKeySpec spec = new PBEKeySpec(secret.toCharArray(), salt, iterations, length);
        return new SecretKeySpec(SecretKeyFactory.getInstance(factory).generateSecret(spec).getEncoded(), "AES");
    }

    public static void main(String[] args) throws Exception {
        String secret = args[1];
        Base64.Encoder b64 = Base64.getEncoder();
        Base64.Decoder unb64 = Base64.getDecoder();
        if (args[0].equals("encode")) {
            String cipherName = args[3];
            byte[] salt = new byte[256];
            new SecureRandom().nextBytes(salt);
            Cipher cipher = Cipher.getInstance(cipherName);
            cipher.init(Cipher.ENCRYPT_MODE, key(secret, "PBKDF2WithHmacSHA512", 128, salt, 4096));
            byte[] encrypted = cipher.doFinal(args[2].getBytes(StandardCharsets.UTF_8));
            Map<String, String> out = new HashMap<>();
            out.put("keyFactoryAlgorithm", "PBKDF2WithHmacSHA512");
            out.put("cipherAlgorithm", cipherName);
            out.put("keyLength", "128");
            out.put("salt", b64.encodeToString(salt));
            out.put("iterations", "4096");
            out.put("encryptedPassword", b64.encodeToString(encrypted));
            out.put("passwordLength", String.valueOf(args[2].length()));
            if (cipherName.startsWith("AES/GCM/")) {
                GCMParameterSpec gcm = cipher.getParameters().getParameterSpec(GCMParameterSpec.class);
                out.put("initializationVector", b64.encodeToString(gcm.getIV()));
                out.put("authenticationTagLength", String.valueOf(gcm.getTLen()));
            } else {
                out.put("initializationVector", b64.encodeToString(cipher.getIV()));
            }
            StringJoiner text = new StringJoiner(",");
            out.forEach((k, v) -> text.add(k + ":" + v));
            System.out.print(text);
        } else {
            Map<String, String> in = new HashMap<>();
            for (String item : args[2].split("\\s*,\\s*")) {
                int colon = item.lastIndexOf(':');
                in.put(item.substring(0, colon), item.substring(colon + 1));
            }
            String cipherName = in.get("cipherAlgorithm");
            byte[] salt = unb64.decode(in.get("salt"));
            SecretKeySpec k = key(secret, in.get("keyFactoryAlgorithm"), Integer.parseInt(in.get("keyLength")),
                                  salt, Integer.parseInt(in.get("iterations")));
            byte[] iv = unb64.decode(in.get("initializationVector"));
            Cipher cipher = Cipher.getInstance(cipherName);
            if (cipherName.startsWith("AES/GCM/"))
                cipher.init(Cipher.DECRYPT_MODE, k,
                            new GCMParameterSpec(Integer.parseInt(in.get("authenticationTagLength")), iv));
            else
                cipher.init(Cipher.DECRYPT_MODE, k, new IvParameterSpec(iv));
            byte[] decrypted = cipher.doFinal(unb64.decode(in.get("encryptedPassword")));
            String password = new String(decrypted, StandardCharsets.UTF_8);
            if (password.length() != Integer.parseInt(in.get("passwordLength")))
                throw new IllegalStateException("length");
            System.out.print(password);
        }
    }
}
"""


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK (javac) on PATH")
    directory = tmp_path_factory.mktemp("jce")
    source = directory / "KafkaPasswords.java"
    source.write_text(JAVA)
    subprocess.run(["javac", "-d", str(directory), str(source)], check=True, timeout=120)

    def run(*args: str) -> str:
        done = subprocess.run(["java", "-Dfile.encoding=UTF-8", "-Dsun.jnu.encoding=UTF-8", "-cp", str(directory),
                               "KafkaPasswords", *args], check=True, capture_output=True, timeout=60,
                              env={**os.environ, "LC_ALL": "C.UTF-8"})
        return done.stdout.decode("utf-8")

    return run


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"])
def test_values_pass_between_java_and_this_broker(java, cipher):
    password = "pässwörd 🔑 of a listener"
    from_java = java("encode", "the secret", password, cipher)
    assert PasswordEncoder("the secret").decode(from_java) == password
    ours = PasswordEncoder("the secret", cipher_algorithm=cipher).encode(password)
    assert java("decode", "the secret", ours) == password
