"""The .properties reader must read a file exactly as Java's Properties.load."""

from __future__ import annotations

import os

import pytest

from twisted_kafka.config import ConfigError, load_properties, parse_override


@pytest.fixture
def write(tmp_path):
    def write(content: str | bytes, name: str = "server.properties") -> str:
        path = tmp_path / name
        if isinstance(content, str):
            content = content.encode("iso-8859-1")
        path.write_bytes(content)
        return str(path)

    return write


def test_hash_and_bang_comments_and_blank_lines(write):
    path = write("# a comment\n! another comment\n\n   # indented comment\na=1\n")
    assert load_properties(path) == {"a": "1"}


def test_comment_starting_with_colon_is_a_plain_comment(write):
    # jproperties alone would parse "#:" as metadata (and fail on "#:" alone)
    path = write("#: not.a.key=1\n#:\nreal=2\n")
    assert load_properties(path) == {"real": "2"}


def test_equals_colon_and_whitespace_separators(write):
    path = write("a=1\nb:2\nc 3\nd  =  4\ne\t:\t5\n")
    assert load_properties(path) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}


def test_value_keeps_later_separators_and_trailing_text(write):
    path = write("listeners=PLAINTEXT://host:9092,SSL://:9093\nurl = a=b:c\n")
    assert load_properties(path) == {
        "listeners": "PLAINTEXT://host:9092,SSL://:9093",
        "url": "a=b:c",
    }


def test_key_without_value_is_empty_string(write):
    assert load_properties(write("lonely\nother=\n")) == {"lonely": "", "other": ""}


def test_escapes_in_values(write):
    path = write("tab=a\\tb\nnl=a\\nb\nuni=caf\\u00e9\nsnow=\\u2603\nbs=back\\\\slash\n")
    assert load_properties(path) == {
        "tab": "a\tb",
        "nl": "a\nb",
        "uni": "café",
        "snow": "☃",
        "bs": "back\\slash",
    }


def test_escaped_separators_in_keys(write):
    path = write("a\\=b=1\nc\\:d:2\ne\\ f 3\n")
    assert load_properties(path) == {"a=b": "1", "c:d": "2", "e f": "3"}


def test_line_continuation_drops_leading_whitespace_of_next_line(write):
    path = write("listeners=PLAINTEXT://:9092,\\\n           SSL://:9093\nnext=1\n")
    assert load_properties(path) == {"listeners": "PLAINTEXT://:9092,SSL://:9093", "next": "1"}


def test_continuation_line_starting_with_hash_is_not_a_comment(write):
    path = write("a=1\\\n  #2\n")
    assert load_properties(path) == {"a": "1#2"}


def test_crlf_line_endings(write):
    assert load_properties(write(b"a=1\r\nb=2\r\n")) == {"a": "1", "b": "2"}


def test_last_duplicate_wins(write):
    assert load_properties(write("a=1\na=2\n")) == {"a": "2"}


def test_file_is_read_as_latin1_like_kafka(write):
    # Java's Properties.load(InputStream) decodes ISO-8859-1
    assert load_properties(write(b"name=caf\xe9\n")) == {"name": "café"}


def test_trailing_whitespace_of_values_is_kept(write):
    # Java keeps it; ConfigDef trims when it converts, not the file reader
    assert load_properties(write("a=1  \n")) == {"a": "1  "}


def test_missing_file_names_the_path(tmp_path):
    path = str(tmp_path / "nope.properties")
    with pytest.raises(ConfigError) as info:
        load_properties(path)
    assert info.value.key == path
    assert path in str(info.value)


def test_unreadable_directory_names_the_path(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_properties(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_pathlike_accepted(write):
    assert load_properties(os.fsencode(write("a=1\n")).decode()) == {"a": "1"}


def test_parse_override_splits_on_first_equals():
    assert parse_override("num.io.threads=4") == ("num.io.threads", "4")
    assert parse_override("sasl.jaas.config=a b=c;") == ("sasl.jaas.config", "a b=c;")
    assert parse_override("log.dirs=") == ("log.dirs", "")


@pytest.mark.parametrize("bad", ["num.io.threads", "", "novalue:3"])
def test_parse_override_without_equals_names_it(bad):
    with pytest.raises(ConfigError) as info:
        parse_override(bad)
    assert repr(bad) in str(info.value)


def test_parse_override_with_empty_key_does_not_echo_the_value():
    with pytest.raises(ConfigError) as info:
        parse_override("=s3cret")
    assert "s3cret" not in str(info.value)


def test_hash_inside_a_value_is_part_of_it(write):
    assert load_properties(write("a=b#c\nd=e !f\n")) == {"a": "b#c", "d": "e !f"}


def test_malformed_unicode_escape_names_the_file(write):
    path = write("a=\\uZZZZ\n")
    with pytest.raises(ConfigError) as info:
        load_properties(path)
    assert info.value.key == path
