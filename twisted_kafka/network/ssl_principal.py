"""The principal of a TLS client: its certificate subject, as Kafka names it, through ``ssl.principal.mapping.rules``.

Kafka's ``DefaultKafkaPrincipalBuilder`` takes the peer certificate's subject
as Java's ``X500Principal.getName()`` prints it -- RFC 2253: the relative
distinguished names most specific first (``CN=client,OU=eng,O=Example,C=US``),
the keywords CN, C, L, ST, O, OU, STREET, DC and UID, any other attribute as
its dotted OID with the DER encoding of its value in hex
(``1.2.840.113549.1.9.1=#16...`` for an e-mail address) -- and passes it
through ``SslPrincipalMapper`` (KIP-371).  ACLs and ``super.users`` name
principals in that form (``User:CN=client,OU=eng,O=Example,C=US``), so it is
reproduced here exactly.

Mapping rules (KIP-371): a comma-separated list of ``DEFAULT`` (the DN
unchanged) and ``RULE:pattern/replacement/`` with an optional ``L`` or ``U``
(lower- or upper-case the result).  The first rule whose pattern matches the
whole DN gives the name; ``$1`` in the replacement is a group of the pattern.
No matching rule makes the connection fail, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["rfc2253_name", "PrincipalMapper", "NoMatchingRule", "InvalidRule", "DEFAULT_RULES", "USER"]

DEFAULT_RULES = "DEFAULT"
USER = "User"

# The attribute keywords Java's X500Principal prints in RFC 2253 form; others are OID=#hex.
_KEYWORDS = {
    NameOID.COMMON_NAME: "CN",
    NameOID.COUNTRY_NAME: "C",
    NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST",
    NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC",
    NameOID.USER_ID: "UID",
}
# ASN.1 string tags and how their contents are encoded.
_UTF8, _BMP, _UNIVERSAL = 12, 30, 28
_SPECIAL = set(',+"\\<>;')


def _escape(value: str) -> str:
    """RFC 2253 section 2.4 escaping, as Java applies it."""
    out = []
    for i, ch in enumerate(value):
        if ch in _SPECIAL or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _hex_value(attribute: x509.NameAttribute) -> str:
    value = attribute.value
    if isinstance(value, bytes):         # an X500UniqueIdentifier: a BIT STRING
        return "#" + (b"\x03" + _der_length(len(value) + 1) + b"\x00" + value).hex()
    asn1_type = getattr(attribute, "_type", None)
    tag = getattr(asn1_type, "value", _UTF8)
    if tag == _BMP:
        content = value.encode("utf-16-be")
    elif tag == _UNIVERSAL:
        content = value.encode("utf-32-be")
    else:
        content = value.encode("utf-8")
    return "#" + (bytes([tag]) + _der_length(len(content)) + content).hex()


def _attribute(attribute: x509.NameAttribute) -> str:
    keyword = _KEYWORDS.get(attribute.oid)
    if keyword is None:
        return f"{attribute.oid.dotted_string}={_hex_value(attribute)}"
    value = attribute.value
    return f"{keyword}={_escape(value if isinstance(value, str) else value.decode('latin-1'))}"


def rfc2253_name(name: x509.Name) -> str:
    """``name`` as Java's ``X500Principal.getName()`` prints it (most specific RDN first)."""
    return ",".join("+".join(_attribute(a) for a in rdn) for rdn in reversed(name.rdns))


class InvalidRule(ValueError):
    """``ssl.principal.mapping.rules`` does not parse."""


class NoMatchingRule(LookupError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a certificate's subject."""


# Kafka's rule grammar (SslPrincipalMapper.RULE_PATTERN), transcribed to Python's re syntax.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)|\\(.)", re.DOTALL)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None       # None: DEFAULT
    replacement: str = ""
    case: str = ""                   # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        result = self.pattern.sub(self._replace, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _replace(self, match: re.Match) -> str:
        """Java's ``replaceAll`` replacement: ``$n`` a group (a number beyond the groups is cut
        down digit by digit, then taken literally, as Kafka escapes it), ``\\x`` a literal x."""
        groups = self.pattern.groups if self.pattern is not None else 0

        def one(ref: re.Match) -> str:
            if ref.group(2) is not None:
                return ref.group(2)
            digits = ref.group(1)
            index = int(digits)
            while index > groups and index >= 10:
                index //= 10
            if index > groups:
                return "$" + digits
            rest = digits[len(str(index)):]
            return (match.group(index) or "") + rest
        return _BACK_REFERENCE.sub(one, self.replacement)

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}/{self.case}"


class PrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed once; ``name(dn)`` applies them."""

    def __init__(self, rules: str | None = DEFAULT_RULES):
        self.rules = tuple(self._parse(rules if rules is not None else DEFAULT_RULES))

    @staticmethod
    def _parse(text: str) -> list[_Rule]:
        parsed: list[_Rule] = []
        for match in _SPLITTER.finditer(text.strip()):
            rule = match.group(1)
            if match.start() == match.end():
                break
            found = _PARSER.match(rule)
            if found is None or found.end() != len(rule):
                unmatched = rule[found.end():] if found is not None else rule
                raise InvalidRule(f"invalid rule {rule!r}, unmatched substring {unmatched!r}")
            if found.group(1) is not None:
                parsed.append(_Rule(None))
            elif found.group(2) is not None:
                try:
                    pattern = re.compile(found.group(2))
                except re.error as exc:
                    raise InvalidRule(f"invalid pattern in rule {rule!r}: {exc}") from None
                parsed.append(_Rule(pattern, found.group(3), found.group(4)))
            elif found.group(5):
                raise InvalidRule(f"invalid rule {rule!r}")
        return parsed

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"no rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def principal(self, certificate: x509.Certificate | None) -> str | None:
        """``User:<name>`` of a peer certificate, or None without one (the connection is then ANONYMOUS)."""
        if certificate is None:
            return None
        return f"{USER}:{self.name(rfc2253_name(certificate.subject))}"
