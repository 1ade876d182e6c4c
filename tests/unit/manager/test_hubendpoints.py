"""The hub Service's Endpoints the leading manager writes (manager.hubendpoints.endpoints_body)."""

from __future__ import annotations

import pytest

from manager.hubendpoints import ENDPOINTS_PORT_NAME, endpoints_body
from manager.options import build_parser


def test_body_points_the_service_at_this_pod() -> None:
    body = endpoints_body("koord-manager-hub", "koordinator-system", "10.0.0.7", "mgr-abc", 9317)
    assert body["metadata"] == {
        "name": "koord-manager-hub",
        "namespace": "koordinator-system",
        "labels": {"app.kubernetes.io/name": "koord-manager"},
    }
    (subset,) = body["subsets"]
    assert subset["addresses"] == [
        {"ip": "10.0.0.7", "targetRef": {"kind": "Pod", "name": "mgr-abc", "namespace": "koordinator-system"}}
    ]
    assert subset["ports"] == [{"name": ENDPOINTS_PORT_NAME, "port": 9317, "protocol": "TCP"}]


def test_body_without_pod_name_has_no_target_ref() -> None:
    (subset,) = endpoints_body("hub", "ns", "10.0.0.7", "", 1)["subsets"]
    assert subset["addresses"] == [{"ip": "10.0.0.7"}]


def test_body_needs_the_pod_ip() -> None:
    with pytest.raises(ValueError, match="POD_IP"):
        endpoints_body("hub", "ns", "", "p", 9317)


def test_flag_defaults_off() -> None:
    assert build_parser().parse_args([]).hub_endpoints == ""
    assert (
        build_parser().parse_args(["--hub-endpoints=koord-manager-hub"]).hub_endpoints == "koord-manager-hub"
    )
