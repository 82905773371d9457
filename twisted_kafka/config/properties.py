"""Reading Java ``.properties`` files and ``--override key=value`` pairs.

Operators copy ``server.properties`` files between Apache Kafka and this
broker, so the syntax must be Java's, not a look-alike: comments start with
``#`` or ``!``; a key ends at an unescaped ``=``, ``:`` or whitespace;
backslash escapes (``\\t``, ``\\u`` and four hex digits, an escaped separator inside a key)
and backslash-newline continuations apply; the last duplicate wins. The
parser is the ``jproperties`` library. As in Kafka (``Utils.loadProps`` hands
an ``InputStream`` to ``Properties.load``), the file is decoded as
ISO-8859-1; characters beyond it are written as ``\\u`` escapes.
"""

from __future__ import annotations

import os

from jproperties import ParseError, Properties

from .errors import ConfigError

__all__ = ["load_properties", "parse_properties", "parse_override"]

#: Kafka reads server.properties through an InputStream: Latin-1.
ENCODING = "iso-8859-1"


class _JavaProperties(Properties):
    """``jproperties`` with Java's comment rule.

    jproperties reads a comment that begins ``#:`` as "metadata" and parses
    it as a key-value pair (failing on ``#:`` alone). Java treats every line
    whose first non-blank character is ``#`` or ``!`` as a plain comment, so
    such lines are skipped here whole.
    """

    def _parse_comment(self) -> None:
        self._getc()  # the comment character
        self._skip_natural_line()


def parse_properties(text: str | bytes, source: str = "<string>") -> dict[str, str]:
    """Parse ``.properties`` text into a plain dict (last duplicate wins).

    ``bytes`` are decoded as ISO-8859-1, like Java's ``Properties.load``.
    """
    props = _JavaProperties()
    try:
        props.load(text, encoding=ENCODING)
    except ParseError as exc:
        raise ConfigError(source, f"cannot parse properties: {exc}") from exc
    return {key: props[key].data for key in props}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a ``.properties`` file; an unreadable file names its path."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as stream:
            raw = stream.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            name,
            f"cannot read configuration file: {reason}",
            message=f"Cannot read configuration file {name}: {reason}",
        ) from exc
    return parse_properties(raw, source=name)


def parse_override(override: str) -> tuple[str, str]:
    """Split one ``--override key=value`` at its first ``=``.

    The value is kept as written (it may itself contain ``=``, as a JAAS
    line does); a missing ``=`` or an empty key is an error naming the
    override.
    """
    key, sep, value = override.partition("=")
    if not sep:
        raise ConfigError(
            override,
            "an override must have the form key=value",
            message=f"Invalid override {override!r}: expected key=value",
        )
    key = key.strip()
    if not key:
        raise ConfigError(
            "<override>",
            "an override must name a key before '='",
            # the value may be a secret: do not echo it
            message="Invalid override: the key before '=' is empty",
        )
    return key, value
