"""Puts the cluster-wide objects koord needs into a (local) API server: the CRDs of deploy/crds, the
namespace, PriorityClasses and default ConfigMap of deploy/base, and (``install_webhooks``) the admission
webhook configurations of deploy/manager/webhooks.yaml, pointed at a URL. Create-or-replace, idempotent.
The dynamic client's discovery cache lives in a private folder removed after each call (its default,
``$TMPDIR/osrcp-<hash of the server URL>.json``, was left behind by every run on a fresh port).

Imports: standard library, PyYAML, the kubernetes client.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

REPO_ROOT = Path(__file__).resolve().parents[2]


def deploy_dir() -> Path:
    """deploy/ of the source tree this package runs from."""
    d = REPO_ROOT / "deploy"
    if not d.is_dir():
        raise FileNotFoundError(f"deploy/ not found at {d}: run koord from its source checkout")
    return d


def load_manifests(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """The objects of the YAML files (kustomize's kustomization.yaml files are skipped)."""
    for path in paths:
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                    raise ValueError(f"{path}: a document without apiVersion/kind")
                yield doc


@contextlib.contextmanager
def dynamic_client(api: Any) -> Iterator[Any]:
    """A kubernetes DynamicClient whose discovery cache file is removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix="koord-discovery-") as tmp:
        yield dynamic.DynamicClient(api, cache_file=str(Path(tmp) / "discovery.json"))  # type: ignore[no-untyped-call]


def apply(api: Any, obj: dict[str, Any], dyn: Any = None) -> None:
    """Creates obj, or replaces it (keeping its resourceVersion) when it exists; ``dyn``: a client of
    ``dynamic_client`` to reuse (default: one for this call)."""
    if dyn is None:
        with dynamic_client(api) as own:
            apply(api, obj, own)
        return
    res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    meta = obj["metadata"]
    ns = meta.get("namespace") if res.namespaced else None
    try:
        res.create(body=obj, namespace=ns)
    except ApiException as e:
        if e.status != 409:
            raise
        current = res.get(name=meta["name"], namespace=ns)
        body = dict(obj, metadata=dict(meta, resourceVersion=current.metadata.resourceVersion))
        res.replace(body=body, namespace=ns)


def wait_crds_established(api: Any, names: Iterable[str], timeout: float = 30.0) -> None:
    ext = client.ApiextensionsV1Api(api)
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            crd = ext.read_custom_resource_definition(name)
            conds = (crd.status.conditions or []) if crd.status else []
            if any(c.type == "Established" and c.status == "True" for c in conds):
                pending.discard(name)
        if pending:
            time.sleep(0.1)
    if pending:
        raise TimeoutError(f"CRDs not established after {timeout:.0f}s: {sorted(pending)}")


def install_crds(api: Any, root: Path | None = None) -> list[str]:
    crds = list(load_manifests(sorted((root or deploy_dir()).glob("crds/*.yaml"))))
    with dynamic_client(api) as dyn:
        for crd in crds:
            apply(api, crd, dyn)
    names = [c["metadata"]["name"] for c in crds]
    wait_crds_established(api, names)
    return names


def bootstrap(api: Any, root: Path | None = None) -> None:
    """CRDs first (and established), then deploy/base in namespace-first order."""
    base = root or deploy_dir()
    install_crds(api, base)
    objs = list(load_manifests(sorted((base / "base").glob("*.yaml"))))
    objs.sort(key=lambda o: 0 if o["kind"] == "Namespace" else 1)
    with dynamic_client(api) as dyn:
        for obj in objs:
            apply(api, obj, dyn)


WEBHOOK_OPT_OUT = {"koordinator.sh/webhook": "disabled"}  # as deploy/base/namespace.yaml


def install_webhooks(api: Any, url: Callable[[str], str], root: Path | None = None) -> list[dict[str, Any]]:
    """Applies deploy/manager/webhooks.yaml with each webhook's Service reference replaced by
    ``url(path)`` (an API server without Service routing calls koord-manager directly), and labels
    kube-system out of the webhooks (Kubernetes 1.20 has no kubernetes.io/metadata.name label). The
    caBundle stays empty until koord-manager fills it. Returns the applied objects."""
    objs = list(load_manifests([(root or deploy_dir()) / "manager" / "webhooks.yaml"]))
    with dynamic_client(api) as dyn:
        for obj in objs:
            for hook in obj.get("webhooks") or []:
                path = (hook.get("clientConfig") or {}).get("service", {}).get("path", "/")
                hook["clientConfig"] = {"url": url(path)}
            apply(api, obj, dyn)
    client.CoreV1Api(api).patch_namespace("kube-system", {"metadata": {"labels": WEBHOOK_OPT_OUT}})
    return objs
