"""Copy the OpenAPI v3 documents of the groups ``kubeflux cluster serve`` serves from the Kubernetes module.

    python tools/kube/openapi_gen.py [--strict] [--force] OUTDIR        (make: build/kube/openapi)

``k8s.io/kubernetes`` publishes the OpenAPI v3 documents its API server serves in ``api/openapi-spec/v3`` (one file
per path of ``/openapi/v3``: ``api__v1_openapi.json`` is ``/openapi/v3/api/v1``). This script finds the module at
the version ``tools/kube/control-plane/go.mod`` pins (``go mod download`` fetches it through the module proxy on a
fresh machine; it is already in Go's module cache once the control plane is built) and copies into OUTDIR the
documents of :data:`GROUPS` (every version of each, their group documents, ``/api``, ``/apis`` and ``/version``),
byte for byte, with ``stamp.json`` (the module version and a digest of the inputs: nothing is copied again while it
matches). ``cluster serve`` serves them, keeping in each the paths of the resources it serves
(:mod:`kubeflux.sim.apiserver.openapi`), so that ``kubectl explain`` and kubectl's schema-driven patches work.

No Go is not an error unless ``--strict`` (CI): one line says so, and the server keeps its minimal documents.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

from gotool import go  # beside this script (tools/kube)

HERE = Path(__file__).resolve().parent
GO_MODULE = HERE / "control-plane"
MODULE = "k8s.io/kubernetes"
SPECS = "api/openapi-spec/v3"
GROUPS = (
    "",
    "apps",
    "authorization.k8s.io",
    "batch",
    "coordination.k8s.io",
    "events.k8s.io",
    "policy",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
)
"""The groups of the built-in resources ``cluster serve`` serves (``""``: core)."""
EXTRA = ("api_openapi.json", "apis_openapi.json", "version_openapi.json")


def _digest() -> str:
    """The inputs: the pins of the control plane's module and this script."""
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        h.update(name.encode() + b"\0" + (GO_MODULE / name).read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def wanted(name: str) -> bool:
    """Whether ``name`` (a file of ``api/openapi-spec/v3``) documents one of :data:`GROUPS`."""
    if name in EXTRA or name.startswith("api__"):
        return True
    if not name.startswith("apis__") or not name.endswith("_openapi.json"):
        return False
    group = name.removeprefix("apis__").removesuffix("_openapi.json").split("__")[0]
    return group in GROUPS


def generate(out: Path, force: bool = False) -> str:
    """Copy the documents into ``out``; returns a one-line report."""
    out = out.resolve()
    digest = _digest()
    stamp_path = out / "stamp.json"
    if not force and stamp_path.exists():
        try:
            stamp = json.loads(stamp_path.read_text())
            if stamp.get("digest") == digest and all((out / name).exists() for name in stamp.get("files", [])):
                return f"{out}: up to date"
        except (OSError, ValueError):
            pass
    started = time.monotonic()
    go("mod", "download", MODULE, cwd=GO_MODULE)
    version, directory = go("list", "-m", "-f", "{{.Version}} {{.Dir}}", MODULE, cwd=GO_MODULE).strip().split(" ", 1)
    specs = Path(directory) / SPECS
    files = sorted(path.name for path in specs.glob("*_openapi.json") if wanted(path.name))
    if not any(name.startswith("api__v1") for name in files):
        raise RuntimeError(f"{specs} has no api__v1_openapi.json: is {MODULE}@{version} complete?")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*_openapi.json"):
        if stale.name not in files:
            stale.unlink()
    for name in files:
        shutil.copyfile(specs / name, out / f"{name}.tmp")
        (out / f"{name}.tmp").replace(out / name)
    stamp_path.write_text(json.dumps({"digest": digest, "module": f"{MODULE}@{version}", "files": files}, indent=1))
    return f"{out}: {len(files)} OpenAPI v3 documents of {MODULE}@{version} in {time.monotonic() - started:.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the output folder (make: build/kube/openapi)")
    parser.add_argument("--force", action="store_true", help="copy again even when the stamp matches")
    parser.add_argument("--strict", action="store_true", help="fail when Go is missing (CI)")
    args = parser.parse_args()
    if not shutil.which("go"):
        print("openapi_gen: go not found: the OpenAPI documents are not copied (cluster serve keeps minimal ones)")
        return 1 if args.strict else 0
    try:
        print(f"openapi_gen: {generate(args.out, args.force)}")
    except RuntimeError as exc:
        print(f"openapi_gen: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
