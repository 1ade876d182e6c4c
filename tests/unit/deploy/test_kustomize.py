"""koord.kustomize: every supported feature on small trees, the errors for what it does not support, and
(when kubectl is on PATH) the same output as `kubectl kustomize` for those trees and for deploy/."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord.kustomize import KustomizeError, build, dump, resource_id

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def kubectl_kustomize(path: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      initContainers:
      - {name: init, image: "example.com/tools:1"}
      containers:
      - name: web
        image: example.com/web
        args: [--a]
      - {name: side, image: "example.com/web:old"}
      - name: other
        image: "busybox@sha256:0123456789012345678901234567890123456789012345678901234567890123"
"""

FEATURES = {
    "app/kustomization.yaml": """\
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        namespace: team
        resources: [deployment.yaml, rbac.yaml]
        """,
    "app/deployment.yaml": DEPLOYMENT,
    "app/rbac.yaml": """\
        apiVersion: v1
        kind: ServiceAccount
        metadata: {name: web}
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRole
        metadata: {name: web}
        rules: []
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRoleBinding
        metadata: {name: web}
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: web}
        subjects:
        - {kind: ServiceAccount, name: web, namespace: elsewhere}
        - {kind: ServiceAccount, name: default, namespace: elsewhere}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: dropped}
        """,
    "kustomization.yaml": """\
        resources:
        - namespace.yaml
        - app
        labels:
        - pairs: {part-of: demo}
        images:
        - {name: example.com/web, newName: registry.local/web, newTag: "2.0"}
        - name: example.com/tools
          digest: "sha256:abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd"
        patches:
        - path: patch.yaml
          target: {group: apps, version: v1, kind: Deployment, name: web}
        - patch: |-
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: dropped}
            $patch: delete
        - patch: |-
            - {op: replace, path: /metadata/labels/app, value: website}
            - {op: remove, path: /spec/template/spec/containers/1}
          target: {kind: Deployment}
        """,
    "namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n",
    "patch.yaml": """\
        - {op: add, path: /spec/template/spec/containers/0/args/-, value: --b}
        - {op: add, path: /spec/template/spec/containers/0/args/0, value: --first}
        - {op: add, path: /metadata/annotations, value: {a~b/c: x}}
        - {op: add, path: /metadata/annotations/a~0b~1d, value: z}
        """,
}


def test_every_supported_feature(tmp_path: Path) -> None:
    objs = build(write(tmp_path, FEATURES))
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Namespace", "team"), ("ServiceAccount", "web"), ("ClusterRole", "web"),
        ("ClusterRoleBinding", "web"), ("Deployment", "web"),
    ]  # fmt: skip
    by_kind = {o["kind"]: o for o in objs}
    assert all(o["metadata"]["labels"]["part-of"] == "demo" for o in objs)
    assert "namespace" not in by_kind["Namespace"]["metadata"]
    assert "namespace" not in by_kind["ClusterRole"]["metadata"]
    assert by_kind["ServiceAccount"]["metadata"]["namespace"] == "team"
    # Only the ServiceAccount named "default" follows the namespace (kustomize's rule).
    assert [s["namespace"] for s in by_kind["ClusterRoleBinding"]["subjects"]] == ["elsewhere", "team"]
    dep = by_kind["Deployment"]
    assert dep["metadata"]["namespace"] == "team"
    assert dep["metadata"]["labels"] == {"app": "website", "part-of": "demo"}
    assert dep["metadata"]["annotations"] == {"a~b/c": "x", "a~b/d": "z"}
    assert dep["spec"]["template"]["metadata"]["labels"] == {"app": "web"}  # metadata labels only
    spec = dep["spec"]["template"]["spec"]
    assert [c["image"] for c in spec["containers"]] == [
        "registry.local/web:2.0",
        "busybox@sha256:0123456789012345678901234567890123456789012345678901234567890123",
    ]
    assert spec["containers"][0]["args"] == ["--first", "--a", "--b"]
    assert spec["initContainers"][0]["image"] == (
        "example.com/tools@sha256:abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd"
    )


@needs_kubectl
def test_every_supported_feature_as_kubectl(tmp_path: Path) -> None:
    root = write(tmp_path, FEATURES)
    assert build(root) == kubectl_kustomize(root)


def test_image_tag_kept_without_new_tag(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "kustomization.yaml": "resources: [d.yaml]\nimages:\n- {name: example.com/web, newName: r.io/web}\n",
        "d.yaml": DEPLOYMENT,
    })  # fmt: skip
    [dep] = build(root)
    assert [c["image"] for c in dep["spec"]["template"]["spec"]["containers"]][:2] == [
        "r.io/web", "r.io/web:old",
    ]  # fmt: skip


def test_dump_round_trips(tmp_path: Path) -> None:
    objs = build(write(tmp_path, FEATURES))
    assert [d for d in yaml.safe_load_all(dump(objs)) if d] == objs
    assert resource_id(objs[1]) == ("v1", "ServiceAccount", "team", "web")


CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"


def patched(patch: str, target: str) -> dict[str, str]:
    """A tree of one ConfigMap with one inline patch (``target`` as a flow mapping, or empty)."""
    k = f"resources: [a.yaml]\npatches:\n- patch: '{patch}'\n" + (f"  target: {target}\n" if target else "")
    return {"kustomization.yaml": k, "a.yaml": CM}


REFUSED: list[tuple[dict[str, str], str]] = [
    ({"kustomization.yaml": "resources: [a.yaml]\ncommonLabels: {a: b}\n", "a.yaml": CM},
     "unsupported kustomization field(s) commonLabels"),
    ({"kustomization.yaml": "components: [c]\nconfigMapGenerator: []\n"},
     "unsupported kustomization field(s) components, configMapGenerator"),
    ({"kustomization.yaml": "kind: Component\n"}, "kind 'Component' is not supported"),
    ({"kustomization.yaml": "resources: [missing.yaml]\n"}, "'missing.yaml' does not exist"),
    ({"kustomization.yaml": "resources: [https://example.com/x.yaml]\n"}, "only local files"),
    ({"kustomization.yaml": "resources: [a.yaml]\n", "a.yaml": "kind: X\n"}, "without apiVersion and kind"),
    ({"kustomization.yaml": "resources: [a.yaml, a.yaml]\n", "a.yaml": CM}, "appears twice"),
    ({"kustomization.yaml": "resources: [sub]\n", "sub/x.yaml": "a: 1\n"}, "no kustomization file"),
    ({"kustomization.yaml": "resources: [..]\n"}, "cycle"),
    ({"kustomization.yaml": "resources: [sub]\n", "sub/kustomization.yaml": "resources: [../a.yaml]\n",
      "a.yaml": CM}, "outside the kustomization root"),
    ({"kustomization.yaml": "labels:\n- pairs: {a: b}\n  includeSelectors: true\n"},
     "includeSelectors: true is not supported"),
    ({"kustomization.yaml": "labels:\n- pairs: {a: b}\n  fields: []\n"},
     "labels: unsupported field(s) fields"),
    ({"kustomization.yaml": "images:\n- {name: a, newTag: b, digest: c}\n"}, "newTag and digest together"),
    ({"kustomization.yaml": "images:\n- {name: a, tagSuffix: b}\n"},
     "images: unsupported field(s) tagSuffix"),
    (patched("{kind: X, metadata: {name: c}}", ""), "unsupported patch"),
    (patched("[{op: add, path: /a, value: 1}]", ""), "needs a target"),
    (patched("[{op: move, from: /a, path: /b}]", "{kind: ConfigMap}"),
     "unsupported JSON 6902 operation 'move'"),
    (patched("[{op: add, path: /a, value: 1}]", "{kind: ConfigMap, labelSelector: x=y}"),
     "unsupported target field(s) labelSelector"),
    (patched("[{op: replace, path: /data/x, value: 1}]", "{kind: ConfigMap}"), "no field 'data'"),
    (patched("[{op: add, path: /a, value: 1}]", "{kind: Secret}"), "matches no resource"),
    (patched("{apiVersion: v1, kind: Secret, metadata: {name: c}, $patch: delete}", ""), "no such resource"),
]  # fmt: skip


@pytest.mark.parametrize(("files", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_unsupported_or_broken_trees_are_refused(tmp_path: Path, files: dict[str, str], message: str) -> None:
    root = write(tmp_path / "root", files)
    with pytest.raises(KustomizeError) as err:
        build(root)
    assert message in str(err.value)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(KustomizeError, match="not a directory"):
        build(tmp_path / "nope")


@needs_kubectl
@pytest.mark.parametrize(
    "tree", ["", "overlays/standalone-scheduler", "overlays/cert-manager", "prometheus-operator"]
)
def test_deploy_renders_as_kubectl_kustomize(tree: str) -> None:
    """Same objects, same content, same order as kustomize v5 (kubectl's)."""
    assert build(DEPLOY / tree) == kubectl_kustomize(DEPLOY / tree)
