"""Generate ``docs/configuration.md`` from the key definitions.

The reference is generated, never hand-edited, so it cannot disagree with
what the broker accepts; a unit test runs ``--check`` logic and fails when
the committed file is stale.

Usage::

    python -m twisted_kafka.config.docs > docs/configuration.md
    python -m twisted_kafka.config.docs --check   # exit 1 if the file differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .broker import BROKER_CONFIG, MECHANISM_PREFIX_REQUIRED
from .definition import ConfigDef, ConfigKey
from .effect import deprecation, not_effective_reason
from .topic import TOPIC_CONFIG, TOPIC_SYNONYMS
from .types import format_value
from .validators import describe

__all__ = ["render", "DOCS_PATH", "REGENERATE_COMMAND", "main"]

DOCS_PATH = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
REGENERATE_COMMAND = "python -m twisted_kafka.config.docs > docs/configuration.md"

_INTRO = f"""\
# Broker configuration reference

<!-- Generated from twisted_kafka/config/ by `{REGENERATE_COMMAND}`.
     Do not edit by hand: change the definitions and regenerate. -->

The broker reads a Java `.properties` file (`twistd -n kafka --config
etc/server.properties`) and `--override key=value` pairs, which win over the
file. Key names, types, defaults, valid values, importance and dynamic update
modes are those of Apache Kafka 3.9, so a `server.properties` written for
Kafka means the same here. At startup:

* a value that does not fit its key stops the broker with
  `Invalid value '...' for configuration <key>: <reason>`;
* a key this broker does not define is reported with a warning and ignored;
* a key marked **accepted, no effect yet** below (a feature not built yet, or
  a concept this design does not have) loads as in Kafka but is warned about
  when set, so a Kafka configuration never silently means less here;
* a key marked **deprecated** (deprecated by Kafka 3.x, which still accepts
  it) is accepted and warned about when set, saying what it still does; so
  are the deprecated topic keys, when a topic is created or altered with them;
* values of *password* keys are never shown: not in logs, errors or here.

**twisted_kafka's own keys.** The keys of the group
[Extensions](#extensions) are this broker's own: Apache Kafka has no such
keys (a Kafka broker warns about them as unknown), so leave them out of a
configuration meant for Kafka.

**Per-listener keys.** Keys marked *per listener* may also be written as
`listener.name.<listener>.<key>` (listener name in lower case) to apply to one
listener only, for example `listener.name.internal.max.connections=100`.
Keys marked *per mechanism* are written
`listener.name.<listener>.<mechanism>.<key>`, mechanism in lower case, for
example `listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=...`.

**Update mode** is Kafka's: *read-only* keys need a restart, *per-broker* and
*cluster-wide* keys may be changed at runtime with AlterConfigs (for one
broker, or, for *cluster-wide* keys, as a cluster default); AlterConfigs
refuses read-only keys with INVALID_REQUEST, naming them.  This broker
applies at runtime the log defaults topics inherit (`log.segment.bytes`,
`log.roll.ms`, `log.retention.*`, `log.flush.*`, `log.cleanup.policy`,
`log.message.timestamp.*`, `message.max.bytes`, `min.insync.replicas`, ...),
the log cleaner's keys, the connection limits (`max.connections`,
`max.connections.per.ip`, `max.connections.per.ip.overrides`,
`max.connection.creation.rate`), `producer.id.expiration.ms` and the TLS
key and trust stores of a listener (`listener.name.<listener>.ssl.keystore.*`,
...).  Every other dynamic key (`num.io.threads`, the Kerberos keys, ...) is
accepted and stored, as Kafka would, and the broker logs `Dynamic broker
config <key> of <broker> is stored but has no effect yet: <why>`.  Values of
*password* keys set at runtime are stored only encrypted, with
`password.encoder.secret` (docs/security.md, "Passwords set at runtime").
"""


def _anchor(title: str) -> str:
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c == "-")


def _text(doc: str) -> str:
    """Doc prose for Markdown: angle brackets would read as HTML tags."""
    return doc.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    return f"`{text}`" if text else '`""`'


def _default(key: ConfigKey) -> str:
    if key.default_doc is not None:
        return key.default_doc
    if key.required:
        return "(required)"
    if key.default is None:
        return "null"
    return _code(format_value(key.default, key.type) or "")


def _overrides(key: ConfigKey) -> str | None:
    forms = []
    if key.listener_override and key.name not in MECHANISM_PREFIX_REQUIRED:
        forms.append(f"per listener (`listener.name.<listener>.{key.name}`)")
    if key.per_mechanism:
        forms.append(f"per mechanism (`listener.name.<listener>.<mechanism>.{key.name}`)")
    return ", ".join(forms) or None


def _key_section(key: ConfigKey) -> list[str]:
    facts = [f"*{key.type.value}*", f"default {_default(key)}"]
    valid = describe(key.validator)
    if valid:
        facts.append(f"valid values {_code(valid)}")
    facts.append(f"importance {key.importance.value}")
    facts.append(f"update mode {key.update_mode.value}")
    overrides = _overrides(key)
    if overrides:
        facts.append(overrides)
    lines = [f"### `{key.name}`", "", _text(key.doc), "", " · ".join(facts), ""]
    if key.extension:
        lines += ["**twisted_kafka key:** not an Apache Kafka key.", ""]
    deprecated = deprecation(key.name)
    reason = not_effective_reason(key.name)
    if deprecated is not None:
        lines += [f"**Deprecated:** this key is {_text(deprecated)}.", ""]
    elif reason is not None:
        lines += [f"**Accepted, no effect yet:** {reason}.", ""]
    return lines


def _broker_sections(definition: ConfigDef) -> list[str]:
    lines = ["## Broker keys", ""]
    groups = definition.groups()
    lines += [f"* [{group}](#{_anchor(group)})" for group in groups]
    lines.append("* [Topic-level keys](#topic-level-keys)")
    lines.append("")
    for group in groups:
        lines += [f"## {group}", ""]
        for key in definition.values():
            if key.group == group:
                lines += _key_section(key)
    return lines


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|")


def _topic_section() -> list[str]:
    lines = [
        "## Topic-level keys",
        "",
        "Set per topic (CreateTopics, AlterConfigs). A topic without its own "
        "value uses its broker synonym: the first one listed that is set, else "
        "the broker default; hours and minutes are converted to milliseconds.",
        "",
        "| Topic key | Type | Default | Valid values | Broker synonyms | Description |",
        "|---|---|---|---|---|---|",
    ]
    for key in TOPIC_CONFIG.values():
        synonyms = ", ".join(f"`{s.name}`" for s in TOPIC_SYNONYMS[key.name])
        valid = describe(key.validator)
        lines.append(
            f"| `{key.name}` | {key.type.value} | {_default(key)} | "
            f"{_code(valid) if valid else ''} | {synonyms} | {_cell(key.doc)} |"
        )
    lines.append("")
    return lines


def render() -> str:
    """The full text of docs/configuration.md."""
    lines: list[Any] = [_INTRO]
    lines += _broker_sections(BROKER_CONFIG)
    lines += _topic_section()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m twisted_kafka.config.docs",
        description="Print docs/configuration.md, generated from the key definitions.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 if {DOCS_PATH.name} differs from the generated text",
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        try:
            current = DOCS_PATH.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != text:
            print(
                f"{DOCS_PATH} is stale; regenerate it with: {REGENERATE_COMMAND}",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
