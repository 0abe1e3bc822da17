"""Build the real Kubernetes control plane kubeflux is tested against, from its published Go modules.

    python tools/kube/build.py [--strict] [--force] [--out build/kube]

Four Go modules pin the versions (the only Go in the repository):

* ``tools/kube/control-plane``: ``k8s.io/kubernetes`` with its staging repositories replaced by their published
  versions (as kubernetes-sigs/scheduler-plugins does), giving ``kube-apiserver``, ``kube-controller-manager``,
  ``kube-scheduler`` and ``kubectl``, and etcd's server (``go.etcd.io/etcd/server/v3``, whose ``main`` calls
  ``etcdmain``) at the version Kubernetes requires;
* ``tools/kube/kwok``: KWOK's controller (``sigs.k8s.io/kwok/cmd/kwok``), with its own dependencies;
* ``tools/kube/helm``: Helm (``helm.sh/helm/v4/cmd/helm``), with its own dependencies, which renders, lints and
  installs kubeflux's chart (``deploy/helm/kubeflux``) in the tests (``kubectl kustomize`` does the same for the
  kustomize manifests, ``deploy/``);
* ``tools/kube/kueue``: Kueue's controller manager (``sigs.k8s.io/kueue/cmd/kueue``), with its own dependencies, which
  admits Jobs to ClusterQueues' quotas in front of ``kubeflux serve`` in the tests (``tests/realkube/_kueue.py``); its
  CustomResourceDefinitions (``config/components/crd/bases`` of the same module) go to ``OUT/kueue-crds``.

The binaries go to ``OUT/bin`` with the CustomResourceDefinition of coscheduling's PodGroup
(``scheduling.x-k8s.io``, from the ``sigs.k8s.io/scheduler-plugins`` module at :data:`SCHEDULER_PLUGINS`) in
``OUT/crds``, KWOK's stage files (node and pod lifecycles, copied from the KWOK module as
kwokctl uses them) in ``OUT/stages`` and a stamp, ``OUT/stamp.json``: the versions and a digest of the module files,
the Go version and this script. Nothing is built when the stamp matches (a fraction of a second); otherwise Go's
build cache makes a rebuild take seconds, and a cold one (every module downloaded through the module proxy and
compiled) takes the figure stated in the README on a 2-core machine.

No Go on the machine is not an error unless ``--strict`` (CI): one line says so and the tests that need the control
plane skip with that reason (``kubeflux.controlplane``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from gotool import go  # beside this script (tools/kube)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONTROL_PLANE = HERE / "control-plane"
KWOK = HERE / "kwok"
HELM = HERE / "helm"
KUEUE = HERE / "kueue"

KUBERNETES_BINARIES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "etcd": "go.etcd.io/etcd/server/v3",
}
KWOK_BINARY = ("kwok", "sigs.k8s.io/kwok/cmd/kwok")
HELM_BINARY = ("helm", "helm.sh/helm/v4/cmd/helm")
KUEUE_BINARY = ("kueue", "sigs.k8s.io/kueue/cmd/kueue")
KUEUE_CRDS = "config/components/crd/bases"
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/general/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
"""KWOK's stages much as ``kwokctl create cluster`` configures them: nodes initialised at once and kept Ready by a
Lease heartbeat; pods Ready at once and deleted when their deletion is asked; a Job's pod completes after the delay
its ``pod-complete.stage.kwok.x-k8s.io/delay`` annotation asks (1 s by default; the "general" stage, not the "fast"
one, which ignores the annotation). kubeflux adds one stage of its own (``kubeflux.controlplane``): a pod of no Job
that carries the annotation completes after it too, as in ``kubeflux cluster serve``."""


SCHEDULER_PLUGINS = "v0.34.7"
"""scheduler-plugins, whose coscheduling PodGroup CRD kubeflux reads (the version KWOK v0.8.0 pairs with 1.36)."""
SCHEDULER_PLUGINS_CRDS = ("config/crd/bases/scheduling.x-k8s.io_podgroups.yaml",)


def _required(module: Path, path: str) -> str:
    """The version ``module``'s go.mod requires of ``path``."""
    text = (module / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(path)}\s+(v\S+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{module / 'go.mod'}: no requirement of {path}")
    return found.group(1)


def _stamp(go_version: str) -> dict[str, object]:
    digest = hashlib.sha256()
    for module in (CONTROL_PLANE, KWOK, HELM, KUEUE):
        digest.update((module / "go.mod").read_bytes())
        digest.update((module / "go.sum").read_bytes())
    digest.update(Path(__file__).read_bytes())
    return {
        "kubernetes": _required(CONTROL_PLANE, "k8s.io/kubernetes"),
        "etcd": _required(CONTROL_PLANE, "go.etcd.io/etcd/server/v3"),
        "kwok": _required(KWOK, "sigs.k8s.io/kwok"),
        "helm": _required(HELM, "helm.sh/helm/v4"),
        "kueue": _required(KUEUE, "sigs.k8s.io/kueue"),
        "scheduler-plugins": SCHEDULER_PLUGINS,
        "go": go_version,
        "sources": digest.hexdigest(),
    }


def _kubernetes_ldflags(version: str) -> str:
    """The version the binaries report (``kubectl version``, ``/version``), as Kubernetes' own build sets it."""
    major, minor = version.lstrip("v").split(".")[:2]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags.extend(f"-X {package}.{name}={value}" for name, value in values.items())
    return " ".join(flags)


def _helm_ldflags(version: str) -> str:
    """The version ``helm version`` reports, as Helm's Makefile sets it for a tagged release."""
    package = "helm.sh/helm/v4/internal/version"
    return f"-s -w -X {package}.version={version} -X {package}.metadata= -X {package}.gitTreeState=clean"


def _kueue_ldflags(version: str) -> str:
    """The version Kueue logs at start, as its Makefile sets it for a release."""
    return f"-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={version}"


def build(out: Path, *, force: bool = False) -> str:
    """Build into ``out`` unless its stamp matches; returns what was done, in one line."""
    go_version = go("env", "GOVERSION", cwd=CONTROL_PLANE).strip()
    stamp = _stamp(go_version)
    stamp_file = out / "stamp.json"
    if not force and stamp_file.is_file() and json.loads(stamp_file.read_text()) == stamp:
        versions = (
            f"control plane {stamp['kubernetes']}, KWOK {stamp['kwok']}, Helm {stamp['helm']}, Kueue {stamp['kueue']}"
        )
        return f"kube: {versions} already built in {out}"
    began = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    stamp_file.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        staged = Path(scratch)
        kubernetes = str(stamp["kubernetes"])
        for name, package in KUBERNETES_BINARIES.items():
            flags = _kubernetes_ldflags(kubernetes) if package.startswith("k8s.io/") else "-s -w"
            go("build", "-trimpath", "-ldflags", flags, "-o", str(staged / name), package, cwd=CONTROL_PLANE)
        name, package = KWOK_BINARY
        kwok_flags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={str(stamp['kwok']).lstrip('v')}"
        go("build", "-trimpath", "-ldflags", kwok_flags, "-o", str(staged / name), package, cwd=KWOK)
        name, package = HELM_BINARY
        helm_flags = _helm_ldflags(str(stamp["helm"]))
        go("build", "-trimpath", "-ldflags", helm_flags, "-o", str(staged / name), package, cwd=HELM)
        name, package = KUEUE_BINARY
        kueue_flags = _kueue_ldflags(str(stamp["kueue"]))
        go("build", "-trimpath", "-ldflags", kueue_flags, "-o", str(staged / name), package, cwd=KUEUE)
        kueue_dir = Path(go("list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue", cwd=KUEUE).strip())
        kueue_crds = staged / "kueue-crds"
        kueue_crds.mkdir()
        for definition in sorted((kueue_dir / KUEUE_CRDS).glob("*.yaml")):
            shutil.copyfile(definition, kueue_crds / definition.name)
        kwok_dir = Path(go("list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok", cwd=KWOK).strip())
        stages = staged / "stages"
        stages.mkdir()
        for stage in KWOK_STAGES:
            shutil.copyfile(kwok_dir / stage, stages / Path(stage).name)
        crds = staged / "crds"
        crds.mkdir()
        module = json.loads(
            go("mod", "download", "-json", f"sigs.k8s.io/scheduler-plugins@{SCHEDULER_PLUGINS}", cwd=KWOK)
        )
        for crd in SCHEDULER_PLUGINS_CRDS:
            shutil.copyfile(Path(module["Dir"]) / crd, crds / Path(crd).name)
        bin_dir = out / "bin"
        for folder in (bin_dir, out / "stages", out / "crds", out / "kueue-crds"):
            shutil.rmtree(folder, ignore_errors=True)
        bin_dir.mkdir()
        for name in (*KUBERNETES_BINARIES, KWOK_BINARY[0], HELM_BINARY[0], KUEUE_BINARY[0]):
            (staged / name).rename(bin_dir / name)
        stages.rename(out / "stages")
        crds.rename(out / "crds")
        kueue_crds.rename(out / "kueue-crds")
    stamp_file.write_text(json.dumps(stamp, indent=1) + "\n")
    return (
        f"kube: built control plane {stamp['kubernetes']} (etcd {stamp['etcd']}), KWOK {stamp['kwok']}, "
        f"Helm {stamp['helm']}, Kueue {stamp['kueue']} into {out} in {time.monotonic() - began:.0f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "kube")
    parser.add_argument("--force", action="store_true", help="build even when the stamp matches")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the build cannot be done (CI)")
    options = parser.parse_args()
    if shutil.which("go") is None:
        print("kube: no Go toolchain on PATH: the tests against the real control plane will be skipped")
        return 1 if options.strict else 0
    try:
        print(build(options.out.resolve(), force=options.force), flush=True)
    except RuntimeError as exc:
        print(f"kube: {exc}", file=sys.stderr)
        return 1 if options.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
