"""Where the real control plane's binaries are: ``tools/kube/build.py`` (run by ``make``) builds them into
``build/kube`` beside ``src``; ``KUBEFLUX_KUBE_DIR`` names another folder of the same shape (``bin/``,
``stages/``, ``stamp.json``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["COMPONENTS", "Binaries", "find_binaries"]

COMPONENTS: Final = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")
_DEFAULT_DIR: Final = Path(__file__).resolve().parents[3] / "build" / "kube"
_OWN_STAGES: Final = Path(__file__).resolve().parent.parent / "data" / "kwok"


@dataclass(frozen=True, slots=True)
class Binaries:
    """A built control plane: its binaries, KWOK's stage files and the versions it was built at."""

    folder: Path
    versions: dict[str, str]

    def path(self, component: str) -> Path:
        """The executable of ``component`` (one of :data:`COMPONENTS`)."""
        return self.folder / "bin" / component

    @property
    def stages(self) -> list[Path]:
        """KWOK's stage files (node and pod lifecycles, ``tools/kube/build.py``) and kubeflux's own
        (``kubeflux/data/kwok``: a pod of no Job completes after the delay its annotation asks)."""
        return [*sorted((self.folder / "stages").glob("*.yaml")), *sorted(_OWN_STAGES.glob("*.yaml"))]

    @property
    def crds(self) -> list[Path]:
        """CustomResourceDefinitions kubeflux reads that a cluster may not have: coscheduling's PodGroup."""
        return sorted((self.folder / "crds").glob("*.yaml"))


def find_binaries(folder: Path | None = None) -> Binaries | str:
    """The built control plane in ``folder`` (default: ``KUBEFLUX_KUBE_DIR`` or ``build/kube``), or why there is
    none, in one line (a test's skip reason)."""
    if folder is None:
        folder = Path(os.environ.get("KUBEFLUX_KUBE_DIR") or _DEFAULT_DIR)
    stamp = folder / "stamp.json"
    if not stamp.is_file():
        return f"no real control plane built in {folder} (run `make`, which needs Go: tools/kube/build.py)"
    missing = [name for name in COMPONENTS if not os.access(folder / "bin" / name, os.X_OK)]
    if not (folder / "crds").is_dir():
        missing.append("crds")
    if missing:
        return f"{folder}: missing {', '.join(missing)} (run `python tools/kube/build.py --force`)"
    versions = json.loads(stamp.read_text())
    return Binaries(folder, {key: str(value) for key, value in versions.items()})
