"""Regenerate (or check) the Python code of proto/koord/v1/*.proto.

Runs ``grpc_tools.protoc`` from the repository root with ``-I .`` so the generated imports read
``from proto.koord.v1 import metrichub_pb2``, plus mypy-protobuf's ``protoc-gen-mypy`` and
``protoc-gen-mypy_grpc`` plugins (found next to the running Python) for the typed ``.pyi`` stubs.

    python hack/gen_proto.py           # write the generated files into proto/koord/v1/
    python hack/gen_proto.py --check   # generate into a temp dir; exit 1 and list the differences

Imports: the standard library and koord.generated (protoc runs as a subprocess of the same interpreter).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from koord import generated  # noqa: E402  -- needs the repository root on sys.path

PROTO_DIR = Path("proto/koord/v1")
PROTO_FILES: tuple[Path, ...] = (PROTO_DIR / "metrichub.proto", PROTO_DIR / "shardbinder.proto")


def generated_names(proto: Path) -> tuple[Path, ...]:
    """The four files generated for one .proto, relative to the repository root."""
    stem = proto.with_suffix("")
    return tuple(
        stem.with_name(stem.name + suffix)
        for suffix in ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi", "_pb2_grpc.pyi")
    )


def _plugin(name: str) -> Path:
    """A protoc plugin installed next to the running interpreter (the venv's bin/)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise FileNotFoundError(f"{name} not found next to {sys.executable}; install mypy-protobuf")
    return path


def generate_into(out_root: Path, root: Path = REPO_ROOT) -> list[Path]:
    """Run protoc on every proto file, writing below ``out_root``; return the generated paths."""
    out = str(out_root)
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        "-I",
        ".",
        f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *(str(p) for p in PROTO_FILES),
    ]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"protoc failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return [out_root / name for proto in PROTO_FILES for name in generated_names(proto)]


def generate(root: Path = REPO_ROOT) -> dict[Path, bytes]:
    """Freshly generated contents, keyed by path relative to the repository root."""
    with tempfile.TemporaryDirectory(prefix="koord-proto-") as tmp:
        out_root = Path(tmp)
        generate_into(out_root, root)
        return {
            name: (out_root / name).read_bytes() for proto in PROTO_FILES for name in generated_names(proto)
        }


def check(root: Path = REPO_ROOT) -> list[str]:
    """Differences between the committed files and a fresh generation ([] when equal)."""
    return generated.stale(root, generate(root))


def write(root: Path = REPO_ROOT) -> list[Path]:
    """Regenerate the committed files in place; return the paths written."""
    return generated.write(root, generate(root))


def main(argv: Sequence[str] | None = None) -> int:
    return generated.main(
        argv,
        doc=__doc__,
        what="generated proto code",
        script="hack/gen_proto.py",
        root=REPO_ROOT,
        generate=generate,
    )


if __name__ == "__main__":
    sys.exit(main())
