"""kube.rest: the lean REST client against the real API server — kubeconfig with a token, with inline
``*-data`` and with a token file; errors carrying the HTTP status; list/watch through the informer;
JSON patch on a status subresource; clear errors for missing configuration."""

from __future__ import annotations

import base64
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube.errors import KubeConfigError
from kube.informer import Informer
from kube.rest import KubeRest, RestError, load_config
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver


def _kubeconfig(control_plane: Any) -> dict[str, Any]:
    doc = yaml.safe_load(Path(control_plane.kubeconfig_path).read_text())
    assert isinstance(doc, dict)
    return doc


def test_get_and_errors(control_plane: Any) -> None:
    rest = KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path))
    try:
        ns = rest.request("GET", "/api/v1/namespaces/default")
        assert ns["metadata"]["name"] == "default"
        with pytest.raises(RestError) as e:
            rest.request("GET", "/api/v1/namespaces/does-not-exist-here")
        assert e.value.status == 404 and "does-not-exist-here" in str(e.value)
    finally:
        rest.close()


def test_inline_data_and_token_file(control_plane: Any, tmp_path: Path) -> None:
    doc = _kubeconfig(control_plane)
    cluster = doc["clusters"][0]["cluster"]
    ca_path = Path(control_plane.kubeconfig_path).parent / cluster.pop("certificate-authority", "")
    if ca_path.is_file():
        cluster["certificate-authority-data"] = base64.b64encode(ca_path.read_bytes()).decode()
    user = doc["users"][0]["user"]
    token = user.pop("token")
    (tmp_path / "token").write_text(token + "\n")
    user["tokenFile"] = "token"  # relative to the kubeconfig's folder
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    config = load_config(str(path))
    assert config.token is None and config.token_file == str(tmp_path / "token")
    rest = KubeRest(config)
    try:
        assert rest.request("GET", "/api/v1/namespaces/default")["kind"] == "Namespace"
    finally:
        rest.close()


def test_informer_and_json_patch(control_plane: Any, kube: Any) -> None:
    rest = KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path))
    name = f"rest-{uuid.uuid4().hex[:8]}"
    seen: list[str] = []
    inf = Informer(
        rest.list_func("/api/v1/namespaces"),
        kwargs={"field_selector": f"metadata.name={name}"},
        on_add=lambda o: seen.append(o["metadata"]["name"]),
    )
    stop = threading.Event()
    inf.start(stop)
    try:
        assert inf.has_synced.wait(10)
        assert seen == []  # the field selector narrows the list to the one name
        rest.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        assert wait_for(lambda: seen == [name], 10)
        patched = rest.request(
            "PATCH",
            f"/api/v1/namespaces/{name}",
            [{"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}],
            content_type="application/json-patch+json",
        )
        assert patched["metadata"]["labels"] == {"k": "v"}
    finally:
        stop.set()
        rest.request("DELETE", f"/api/v1/namespaces/{name}")
        rest.close()


def test_inline_client_certificate_leaves_no_file(
    control_plane: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kubeconfig with every credential inline (CA, client certificate and key) authenticates as the
    certificate's user, and nothing of it is left on disk: not while the client lives, not after."""
    component = control_plane.component_kubeconfig(f"inline-{uuid.uuid4().hex[:6]}", "koord:inline-test")
    doc = yaml.safe_load(component.read_text())
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    inline = ((cluster, "certificate-authority"), (user, "client-certificate"), (user, "client-key"))
    for section, key in inline:
        section[f"{key}-data"] = base64.b64encode(Path(section.pop(key)).read_bytes()).decode()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    config = load_config(str(path))
    assert config.ca_file is None and config.cert_file is None and config.cert_data is not None
    rest = KubeRest(config)
    try:
        with pytest.raises(RestError) as e:  # authenticated (403 names the user), not anonymous (401)
            rest.request("GET", "/api/v1/namespaces/kube-system/secrets")
        assert e.value.status == 403 and "koord:inline-test" in str(e.value)
        assert list(scratch.iterdir()) == []
    finally:
        rest.close()


def test_inline_data_that_is_not_base64_is_refused(tmp_path: Path) -> None:
    doc = {
        "current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [
            {"name": "k", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority-data": "@@"}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(KubeConfigError, match="certificate-authority-data is not base64"):
        load_config(str(path))


def test_missing_configuration(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match=r"nope\.yaml"):
        load_config(str(tmp_path / "nope.yaml"))
    with pytest.raises(KubeConfigError, match="KUBECONFIG not set"):
        load_config(None, env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"current-context": "x", "contexts": [], "clusters": [], "users": []}))
    with pytest.raises(KubeConfigError, match="context 'x' not found"):
        load_config(str(bad))
