"""Principals of TLS clients: the subject in Java's RFC 2253 form, through Kafka's mapping rules (KIP-371)."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from twisted_kafka.network.ssl_principal import InvalidRule, NoMatchingRule, PrincipalMapper, rfc2253_name


def name(*pairs) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in pairs])


def test_most_specific_first_with_java_keywords():
    subject = name((NameOID.COUNTRY_NAME, "US"), (NameOID.STATE_OR_PROVINCE_NAME, "CA"),
                   (NameOID.ORGANIZATION_NAME, "Example"), (NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                   (NameOID.COMMON_NAME, "client"))
    assert rfc2253_name(subject) == "CN=client,OU=eng,O=Example,ST=CA,C=US"


def test_special_characters_are_escaped():
    subject = name((NameOID.ORGANIZATION_NAME, "Acme, Inc."), (NameOID.COMMON_NAME, "#a+b "))
    assert rfc2253_name(subject) == "CN=\\#a\\+b\\ ,O=Acme\\, Inc."


def test_other_attributes_are_oid_and_der_hex():
    # Java: EMAILADDRESS is not an RFC 2253 keyword, so the IA5String is printed as #16<len><bytes>.
    subject = name((NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "x"))
    assert rfc2253_name(subject) == "CN=x,1.2.840.113549.1.9.1=#1605614062" + b".c".hex()


@pytest.mark.parametrize("rules, dn, expected", [
    ("DEFAULT", "CN=client,OU=eng,O=Example", "CN=client,OU=eng,O=Example"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/L,DEFAULT", "CN=Alice,OU=ENG,O=Example", "alice@eng"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1/U", "CN=alice,OU=eng,O=x", "ALICE"),
    ("RULE:^CN=([^,]*),.*$/$1/, DEFAULT", "CN=bob,O=x", "bob"),
    ("RULE:^OU=(.*)$/$1/,DEFAULT", "CN=bob,O=x", "CN=bob,O=x"),
    # a pattern with an escaped slash, and a back reference beyond the groups kept literally
    ("RULE:^CN=(.*)\\/x,O=.*$/$1$2/", "CN=a/x,O=y", "a$2"),
])
def test_mapping_rules(rules, dn, expected):
    assert PrincipalMapper(rules).name(dn) == expected


def test_no_matching_rule_is_an_error():
    with pytest.raises(NoMatchingRule, match="no rules apply to CN=x"):
        PrincipalMapper("RULE:^OU=(.*)$/$1/").name("CN=x")


@pytest.mark.parametrize("rules", ["garbage", "RULE:^CN=(.*)$/$1/Z", "RULE:^CN=(.*$/$1/"])
def test_invalid_rules_are_refused(rules):
    with pytest.raises(InvalidRule):
        PrincipalMapper(rules)


def test_principal_of_a_certificate():
    key = ec.generate_private_key(ec.SECP256R1())
    subject = name((NameOID.ORGANIZATION_NAME, "Example"), (NameOID.COMMON_NAME, "alice"))
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    assert PrincipalMapper().principal(cert) == "User:CN=alice,O=Example"
    assert PrincipalMapper().principal(None) is None
