"""The `cluster.observability:` section: the managed services' switches and their one-line errors."""

from __future__ import annotations

from typing import Any

import pytest

from spec import SpecError, parse_spec
from spec.observability import remote_write_parameter
from tests.cluster.conftest import with_cluster


def _with(observability: dict[str, Any]) -> dict[str, Any]:
    return with_cluster(lambda cluster: cluster.__setitem__("observability", observability))


@pytest.mark.parametrize(
    ("observability", "names"),
    [
        ({"managed_prometheus": False, "managed_grafana": True}, "managed_grafana needs managed_prometheus"),
        ({"enabled": False}, "managed_prometheus/managed_grafana need enabled: true"),
        ({"managed_grafana": True, "grafana_authentication": "SAML"}, "grafana_saml_metadata_url"),
        ({"grafana_authentication": "LDAP"}, "grafana_authentication"),
        ({"grafana_saml_metadata_url": "https://idp.example.com/metadata"}, "grafana_saml_metadata_url"),
        ({"alert_emails": ["oncall at example.com"]}, "alert_emails"),
    ],
)
def test_bad_observability_sections_fail_with_one_line_naming_the_field(
    observability: dict[str, Any], names: str
) -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec(_with(observability))
    message = str(raised.value)
    assert "\n" not in message.strip()
    assert "cluster.observability" in message and names in message


def test_grafana_with_saml_takes_the_idps_metadata_url() -> None:
    spec = parse_spec(
        _with(
            {
                "managed_grafana": True,
                "grafana_authentication": "SAML",
                "grafana_saml_metadata_url": "https://idp.example.com/metadata",
            }
        )
    )
    assert spec.cluster is not None
    assert spec.cluster.observability.grafana_authentication == "SAML"


def test_the_observability_stack_has_a_stable_name_and_the_parameter_a_stable_key() -> None:
    spec = parse_spec(_with({}))
    assert spec.stack_names["observability"] == "llm-demo-observability"
    assert remote_write_parameter(spec.name) == "/llm-demo/observability/remote-write-url"
