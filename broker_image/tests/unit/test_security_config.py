"""Security settings as Kafka spells them: listener-prefixed overrides, JAAS configs, and the
principal a TLS client certificate gives."""

from __future__ import annotations

import pytest

from samsa.config import ConfigError, KafkaConfig
from samsa.security.principal import ANONYMOUS, KafkaPrincipal, subject_dn, tls_principal
from samsa.security.sasl_config import (
    enabled_mechanisms,
    inter_broker_credentials,
    parse_jaas,
    plain_users,
)


def test_a_listener_prefix_overrides_the_broker_wide_setting() -> None:
    config = KafkaConfig(
        {
            "ssl.client.auth": "none",
            "listener.name.MTLS.ssl.client.auth": "required",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        }
    )
    assert config.for_listener("MTLS", "ssl.client.auth") == "required"
    assert config.for_listener("SSL", "ssl.client.auth") == "none"
    assert enabled_mechanisms(config, "SASL_SSL") == ["SCRAM-SHA-512", "PLAIN"]


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"listener.name.x.log.dirs": "/tmp"}, "listener.name.x.log.dirs"),
        ({"listener.name.x.ssl.client.auth": "maybe"}, "ssl.client.auth"),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ],
)
def test_bad_security_settings_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        KafkaConfig(props)


def test_gssapi_is_refused_with_the_mechanisms_we_have() -> None:
    config = KafkaConfig({"sasl.enabled.mechanisms": "GSSAPI"})
    with pytest.raises(ConfigError, match="GSSAPI not supported"):
        enabled_mechanisms(config, "SASL_SSL")


def test_plain_jaas_config_as_kafka_writes_it() -> None:
    text = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="pw with \\"quotes\\"";'
    )
    module, _ = parse_jaas(text)
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    config = KafkaConfig(
        {
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": text,
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    )
    assert plain_users(config, "SASL_PLAINTEXT") == {
        "admin": "admin-secret",
        "alice": 'pw with "quotes"',
    }
    assert inter_broker_credentials(config, "SASL_PLAINTEXT") == (
        "PLAIN",
        "admin",
        "admin-secret",
    )


def test_a_jaas_config_without_its_flag_is_refused() -> None:
    with pytest.raises(ValueError, match="required"):
        parse_jaas('PlainLoginModule username="a";')


def test_the_certificate_subject_is_the_principal_in_rfc2253_order() -> None:
    subject = (
        (("countryName", "NO"),),
        (("organizationName", "Samsa, Inc."),),
        (("organizationalUnitName", "apps"),),
        (("commonName", "alice"),),
    )
    assert subject_dn(subject) == "CN=alice,OU=apps,O=Samsa\\, Inc.,C=NO"
    assert tls_principal({"subject": subject}) == KafkaPrincipal(
        "User", "CN=alice,OU=apps,O=Samsa\\, Inc.,C=NO"
    )
    assert tls_principal(None) is ANONYMOUS
    assert tls_principal({}) is ANONYMOUS


def test_principals_parse_and_print_as_kafka_writes_them() -> None:
    assert str(KafkaPrincipal.parse("User:CN=a,O=b")) == "User:CN=a,O=b"
    with pytest.raises(ValueError):
        KafkaPrincipal.parse("alice")
