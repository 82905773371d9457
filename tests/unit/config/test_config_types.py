"""String-to-value coercion follows Kafka's ConfigDef.parseType."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twisted_kafka.config import (
    NO_DEFAULT,
    ConfigDef,
    ConfigError,
    ConfigKey,
    Importance,
    Password,
    Type,
    at_least,
    between,
    custom,
    format_value,
    one_of,
    valid_list,
)

INT_MAX, INT_MIN = 2**31 - 1, -(2**31)
LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)


def key(type_, default=None, validator=None, name="test.key"):
    return ConfigKey(name, type_, default, validator, Importance.LOW, "doc", "Test")


@pytest.mark.parametrize(
    "raw, expected",
    [("true", True), ("TRUE", True), (" True ", True), ("false", False), ("FaLsE", False)],
)
def test_boolean_is_case_insensitive_and_trimmed(raw, expected):
    assert key(Type.BOOLEAN).parse(raw) is expected


@pytest.mark.parametrize("raw", ["yes", "1", "", "t", "truee"])
def test_boolean_rejects_anything_else(raw):
    with pytest.raises(ConfigError) as info:
        key(Type.BOOLEAN).parse(raw)
    assert info.value.key == "test.key"
    assert "true or false" in info.value.reason


@pytest.mark.parametrize(
    "type_, low, high",
    [(Type.SHORT, -(2**15), 2**15 - 1), (Type.INT, INT_MIN, INT_MAX), (Type.LONG, LONG_MIN, LONG_MAX)],
)
def test_integer_bounds_are_java_widths(type_, low, high):
    k = key(type_)
    assert k.parse(str(low)) == low
    assert k.parse(str(high)) == high
    for outside in (low - 1, high + 1):
        with pytest.raises(ConfigError) as info:
            k.parse(str(outside))
        assert "range" in info.value.reason


@pytest.mark.parametrize("raw", ["abc", "1.5", "1_000", "0x10", "", "1e3", "--1", "1 2"])
def test_int_rejects_what_java_rejects(raw):
    with pytest.raises(ConfigError) as info:
        key(Type.INT).parse(raw)
    assert info.value.reason == "not a number of type INT"


def test_int_accepts_sign_and_surrounding_whitespace():
    assert key(Type.INT).parse(" +42\t") == 42
    assert key(Type.INT).parse("-7") == -7


def test_error_message_names_key_value_and_reason():
    with pytest.raises(ConfigError) as info:
        key(Type.INT, name="num.io.threads").parse("abc")
    assert str(info.value) == (
        "Invalid value 'abc' for configuration num.io.threads: not a number of type INT"
    )
    assert isinstance(info.value, ValueError)
    assert info.value.value == "abc"


@given(st.integers(min_value=LONG_MIN, max_value=LONG_MAX))
def test_long_round_trips_every_64_bit_value(number):
    assert key(Type.LONG).parse(str(number)) == number


@pytest.mark.parametrize(
    "raw, expected",
    [("0.5", 0.5), ("1", 1.0), ("1e3", 1000.0), (".5", 0.5), ("5.", 5.0), ("2.5f", 2.5),
     ("-Infinity", -math.inf), ("0x1p3", 8.0), (" 0.9 ", 0.9)],
)
def test_double_accepts_java_literals(raw, expected):
    assert key(Type.DOUBLE).parse(raw) == expected


def test_double_nan():
    assert math.isnan(key(Type.DOUBLE).parse("NaN"))


@pytest.mark.parametrize("raw", ["nan", "inf", "infinity", "1_0", "", "abc", "1,5"])
def test_double_rejects_python_only_spellings(raw):
    with pytest.raises(ConfigError):
        key(Type.DOUBLE).parse(raw)


@pytest.mark.parametrize(
    "raw, expected",
    [("a,b,c", ["a", "b", "c"]), (" a , b ,c ", ["a", "b", "c"]), ("", []), ("   ", []),
     ("a,,b", ["a", "", "b"]), ("a,", ["a", ""]), ("single", ["single"])],
)
def test_list_splits_like_configdef(raw, expected):
    assert key(Type.LIST).parse(raw) == expected


def test_string_is_trimmed_like_java():
    assert key(Type.STRING).parse("  value \t") == "value"
    # Java's trim does not remove non-ASCII spaces
    assert key(Type.STRING).parse("\u00a0x") == "\u00a0x"


def test_class_names_are_checked_for_syntax():
    assert key(Type.CLASS).parse(" org.example.My$Inner ") == "org.example.My$Inner"
    with pytest.raises(ConfigError):
        key(Type.CLASS).parse("not a class")


def test_password_is_hidden_everywhere():
    k = key(Type.PASSWORD, name="ssl.key.password")
    secret = k.parse(" s3cret ")
    assert isinstance(secret, Password)
    assert secret.value == "s3cret"
    assert "s3cret" not in repr(secret) and "s3cret" not in str(secret)
    assert str(secret) == "[hidden]"
    assert format_value(secret) == "[hidden]"
    assert secret == Password("s3cret") and secret != Password("other")


def test_password_validation_error_hides_the_value():
    def reject(value):
        raise ValueError("too weak")

    k = key(Type.PASSWORD, validator=reject, name="ssl.key.password")
    with pytest.raises(ConfigError) as info:
        k.parse("hunter2")
    assert "hunter2" not in str(info.value)
    assert info.value.value is None
    assert "[hidden]" in str(info.value)


def test_typed_values_are_accepted_and_checked():
    assert key(Type.INT).parse(5) == 5
    assert key(Type.LIST).parse(("a", "b")) == ["a", "b"]
    assert key(Type.DOUBLE).parse(1) == 1.0
    with pytest.raises(ConfigError):
        key(Type.INT).parse(2**31)
    with pytest.raises(ConfigError):
        key(Type.INT).parse(True)
    with pytest.raises(ConfigError):
        key(Type.BOOLEAN).parse(1)


def test_validators_report_reason_and_key():
    k = key(Type.INT, validator=at_least(1), name="num.io.threads")
    assert k.parse("1") == 1
    with pytest.raises(ConfigError) as info:
        k.parse("0")
    assert info.value.key == "num.io.threads"
    assert info.value.reason == "value must be at least 1"
    ratio = key(Type.DOUBLE, validator=between(0, 1))
    with pytest.raises(ConfigError, match="no more than 1"):
        ratio.parse("1.5")


def test_one_of_is_case_sensitive_unless_asked():
    strict = key(Type.STRING, validator=one_of("none", "required"))
    assert strict.parse("none") == "none"
    with pytest.raises(ConfigError, match="must be one of: none, required"):
        strict.parse("NONE")
    loose = key(Type.STRING, validator=one_of("PLAIN", "GSSAPI", case_insensitive=True))
    assert loose.parse("plain") == "plain"
    assert str(loose.validator) == "(case insensitive) [PLAIN, GSSAPI]"


def test_valid_list_checks_each_item():
    k = key(Type.LIST, validator=valid_list("compact", "delete"))
    assert k.parse("compact, delete") == ["compact", "delete"]
    assert k.parse("") == []
    with pytest.raises(ConfigError, match="'remove'"):
        k.parse("delete,remove")


def test_custom_validator_callable():
    def even(value):
        if value % 2:
            raise ValueError("must be even")

    k = key(Type.INT, validator=custom(even, "even numbers"))
    assert k.parse("4") == 4
    with pytest.raises(ConfigError, match="must be even"):
        k.parse("3")
    assert str(k.validator) == "even numbers"
    plain = key(Type.INT, validator=even)
    with pytest.raises(ConfigError, match="must be even"):
        plain.parse("5")


def test_defaults_are_parsed_and_validated_at_definition():
    assert key(Type.LIST, default="TLSv1.2,TLSv1.3").default == ["TLSv1.2", "TLSv1.3"]
    with pytest.raises(ConfigError):
        key(Type.INT, default="0", validator=at_least(1))


def test_configdef_applies_defaults_and_requires_required_keys():
    definition = ConfigDef(
        [
            key(Type.INT, default=3, name="has.default"),
            key(Type.STRING, default=NO_DEFAULT, name="must.have"),
            key(Type.STRING, default=None, name="nullable"),
        ]
    )
    assert definition.parse({"must.have": "x"}) == {
        "has.default": 3,
        "must.have": "x",
        "nullable": None,
    }
    with pytest.raises(ConfigError) as info:
        definition.parse({})
    assert info.value.key == "must.have"
    assert "Missing required configuration must.have" in str(info.value)


def test_configdef_rejects_duplicate_names():
    with pytest.raises(ValueError):
        ConfigDef([key(Type.INT), key(Type.INT)])


@pytest.mark.parametrize(
    "value, type_, text",
    [(True, Type.BOOLEAN, "true"), (["a", "b"], Type.LIST, "a,b"), ([], Type.LIST, ""),
     (0.5, Type.DOUBLE, "0.5"), (1.7976931348623157e308, Type.DOUBLE, "1.7976931348623157E308"),
     (1e7, Type.DOUBLE, "1.0E7"), (0.0001, Type.DOUBLE, "1.0E-4"), (100.0, Type.DOUBLE, "100.0"),
     (12, Type.INT, "12"), (None, Type.STRING, None)],
)
def test_format_value_matches_kafka_strings(value, type_, text):
    assert format_value(value, type_) == text
