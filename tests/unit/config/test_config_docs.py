"""docs/configuration.md is generated from the definitions and kept current."""

from __future__ import annotations

from twisted_kafka.config import BROKER_CONFIG, TOPIC_CONFIG, docs


def test_committed_reference_is_current():
    generated = docs.render()
    on_disk = docs.DOCS_PATH.read_text(encoding="utf-8") if docs.DOCS_PATH.exists() else None
    assert on_disk == generated, (
        f"{docs.DOCS_PATH} is stale; regenerate it with: {docs.REGENERATE_COMMAND}"
    )


def test_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text("old\n", encoding="utf-8")
    monkeypatch.setattr(docs, "DOCS_PATH", stale)
    assert docs.main(["--check"]) == 1
    assert docs.REGENERATE_COMMAND in capsys.readouterr().err
    stale.write_text(docs.render(), encoding="utf-8")
    assert docs.main(["--check"]) == 0


def test_print_mode_writes_the_reference(capsys):
    assert docs.main([]) == 0
    assert capsys.readouterr().out == docs.render()


def test_reference_covers_every_key_with_its_facts():
    text = docs.render()
    for name in BROKER_CONFIG:
        assert f"### `{name}`" in text
    for name in TOPIC_CONFIG:
        assert f"| `{name}` |" in text
    section = text.split("### `max.connections`", 1)[1].split("###", 1)[0]
    assert "default `2147483647`" in section
    assert "`listener.name.<listener>.max.connections`" in section
    assert "importance medium" in section
    assert "update mode cluster-wide" in section
    jaas = text.split("### `sasl.jaas.config`", 1)[1].split("###", 1)[0]
    assert "`listener.name.<listener>.<mechanism>.sasl.jaas.config`" in jaas
    assert "`listener.name.<listener>.sasl.jaas.config`" not in jaas
    assert "`log.retention.ms`, `log.retention.minutes`, `log.retention.hours`" in text


def test_prose_angle_brackets_are_escaped():
    text = docs.render()
    doc_line = text.split("### `max.connections`", 1)[1].split("\n")[2]
    assert "<l>" not in doc_line and "&lt;l&gt;" in doc_line


def test_twisted_kafka_keys_are_marked_as_not_kafkas():
    text = docs.render()
    ours = [key for key in BROKER_CONFIG.values() if key.extension]
    assert [key.name for key in ours] == ["connection.events.enable", "log.levels", "log.format",
                                          "quota.ip.connection.creation.rate",
                                          "admin.rest.listener", "admin.rest.auth.token",
                                          "admin.rest.auth.token.file", "admin.rest.ssl.keystore.type",
                                          "admin.rest.ssl.keystore.location", "admin.rest.ssl.keystore.password",
                                          "admin.rest.ssl.key.password", "admin.rest.ssl.truststore.type",
                                          "admin.rest.ssl.truststore.location",
                                          "admin.rest.ssl.truststore.password", "admin.rest.request.max.bytes",
                                          "admin.rest.request.timeout.ms", "admin.rest.allowed.hosts"]
    for key in ours:
        section = text.split(f"### `{key.name}`", 1)[1].split("###", 1)[0]
        assert "not an Apache Kafka key" in section
    kafkas = text.split("### `max.connections`", 1)[1].split("###", 1)[0]
    assert "not an Apache Kafka key" not in kafkas
