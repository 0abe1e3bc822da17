"""Multi-document YAML files of Kubernetes objects (workload and cluster files), read with a safe loader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kubeflux.sim.workloads.errors import WorkloadError
from kubeflux.sim.workloads.swf import read_text

YamlLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""The C safe loader when PyYAML was built with libyaml, else the pure-Python safe loader."""


def load_documents(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, object)`` for every object of a multi-document YAML file, ``v1`` Lists flattened.

    ``where`` is ``document N`` (1-based) or ``document N, items[i]``. Empty documents are skipped. Raises
    :class:`WorkloadError` for an unreadable file or broken YAML (with the line).
    """
    text = read_text(path)  # plain or gzip-compressed
    try:
        documents = list(yaml.load_all(text, Loader=YamlLoader))
    except RecursionError as exc:
        raise WorkloadError(f"{path.name}: invalid YAML: nested too deeply") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path.name}:{mark.line + 1}" if mark is not None else path.name
        problem = getattr(exc, "problem", None) or str(exc)
        raise WorkloadError(f"{where}: invalid YAML: {problem}") from exc
    for index, document in enumerate(documents, start=1):
        if document is None:
            continue
        if isinstance(document, dict) and document.get("kind") == "List" and isinstance(document.get("items"), list):
            for item_index, item in enumerate(document["items"]):
                yield f"document {index}, items[{item_index}]", item
        else:
            yield f"document {index}", document


__all__ = ["YamlLoader", "load_documents"]
