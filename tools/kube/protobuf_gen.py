"""Generate what ``kubeflux cluster serve`` needs to speak Kubernetes protobuf, from the published Go modules.

    python tools/kube/protobuf_gen.py [--strict] [--force] OUTDIR        (make: build/kube/proto)

It writes three files into OUTDIR:

* ``kubernetes.binpb``: a ``FileDescriptorSet`` of every ``generated.proto`` of ``k8s.io/api`` and
  ``k8s.io/apimachinery`` at the versions ``tools/kube/protobuf/go.mod`` pins, compiled by grpcio-tools' protoc
  (``--include_imports``). The server builds its message classes from it at run time with the ``protobuf``
  runtime's descriptor pool: no Python is generated (protoc's Python output would live in a package named
  ``k8s.io``, which Python cannot import), and one binary file is all the build leaves behind;
* ``types.json``: what the Go types say and the ``.proto`` files do not, written by ``tools/kube/protobuf`` (a Go
  program walking client-go's scheme with reflect): the registered kinds and their messages, and per field its
  JSON name, whether the Go field is a pointer or nil-able, ``omitempty``/``omitzero``/``inline``, and which types
  have their own JSON form (Time, Quantity, IntOrString ...);
* ``stamp.json``: the module versions and a digest of the inputs; nothing is rebuilt while it matches.

The ``.proto`` files import each other as ``k8s.io/apimachinery/pkg/...``, so the proto root ``OUTDIR/src`` holds
two links, ``k8s.io/api`` and ``k8s.io/apimachinery``, to the module directories in Go's module cache (``go mod
download`` fetches them through the module proxy on a fresh machine). No Go or no grpcio-tools is not an error
unless ``--strict`` (CI): one line says so, and the server keeps answering protobuf bodies with 415 saying how to
build this.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gotool import go  # beside this script (tools/kube)

HERE = Path(__file__).resolve().parent
GO_MODULE = HERE / "protobuf"
MODULES = ("k8s.io/api", "k8s.io/apimachinery")
SKIPPED = ("/testapigroup/",)
"""``.proto`` files of the modules that describe no served type."""
FILES = ("kubernetes.binpb", "types.json", "stamp.json")


def _digest() -> str:
    """The inputs: the Go module's files, this script and the versions of Go and grpcio-tools."""
    import grpc_tools

    h = hashlib.sha256()
    for path in sorted(GO_MODULE.iterdir()):
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    h.update(Path(__file__).read_bytes())
    h.update(go("version", cwd=GO_MODULE).encode())
    h.update(str(getattr(grpc_tools, "__version__", "")).encode())
    return h.hexdigest()


def _stage(out: Path) -> tuple[Path, dict[str, str]]:
    """The proto root ``out/src`` (links to the module directories) and the module versions."""
    go("mod", "download", *MODULES, cwd=GO_MODULE)
    root = out / "src" / "k8s.io"
    root.mkdir(parents=True, exist_ok=True)
    versions: dict[str, str] = {}
    for line in go("list", "-m", "-f", "{{.Path}} {{.Version}} {{.Dir}}", *MODULES, cwd=GO_MODULE).splitlines():
        path, version, directory = line.split(" ", 2)
        versions[path] = version
        link = root / path.removeprefix("k8s.io/")
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(directory, target_is_directory=True)
    return out / "src", versions


def _compile(src: Path, target: Path) -> int:
    protos = sorted(
        str(path.relative_to(src))
        for module in MODULES
        for path in (src / module).rglob("generated.proto")
        if not any(skip in str(path) for skip in SKIPPED)
    )
    # in a child process: protoc writes a warning per unused import of the generated files to stderr
    command = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={src}", "--include_imports"]
    result = subprocess.run(
        [*command, f"--descriptor_set_out={target}", *protos], capture_output=True, text=True, cwd=src
    )
    if result.returncode != 0:
        raise RuntimeError(f"protoc failed on {len(protos)} files under {src}:\n{result.stderr[-4000:]}")
    return len(protos)


def generate(out: Path, force: bool = False) -> str:
    """Write the files into ``out``; returns a one-line report."""
    out = out.resolve()
    digest = _digest()
    stamp_path = out / "stamp.json"
    if not force and all((out / name).exists() for name in FILES):
        try:
            if json.loads(stamp_path.read_text()).get("digest") == digest:
                return f"{out}: up to date"
        except (OSError, ValueError):
            pass
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    src, versions = _stage(out)
    count = _compile(src, out / "kubernetes.binpb.tmp")
    go("run", ".", "table", str(out / "types.json.tmp"), cwd=GO_MODULE)
    for name in ("kubernetes.binpb", "types.json"):
        (out / f"{name}.tmp").replace(out / name)
    stamp = {"digest": digest, "modules": versions, "protos": count}
    stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    return f"{out}: {count} .proto files of {', '.join(f'{m}@{v}' for m, v in versions.items())} in " + (
        f"{time.monotonic() - started:.1f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the output folder (make: build/kube/proto)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the stamp matches")
    parser.add_argument("--strict", action="store_true", help="fail when Go or grpcio-tools is missing (CI)")
    args = parser.parse_args()
    missing = [what for what, ok in (("go", shutil.which("go")), ("grpcio-tools", _has_protoc())) if not ok]
    if missing:
        print(f"protobuf_gen: {' and '.join(missing)} not found: protobuf is not built (cluster serve answers 415)")
        return 1 if args.strict else 0
    try:
        print(f"protobuf_gen: {generate(args.out, args.force)}")
    except RuntimeError as exc:
        print(f"protobuf_gen: {exc}", file=sys.stderr)
        return 1
    return 0


def _has_protoc() -> bool:
    try:
        import grpc_tools.protoc  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
