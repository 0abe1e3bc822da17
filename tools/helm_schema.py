"""Writes the Helm chart's ``values.schema.json`` from its sources, so ``helm lint``, ``helm install`` and
``helm upgrade`` refuse a misspelt or out-of-range value with its path, before anything reaches the cluster.

The ``config`` value is the ServeConfig that ``kubeflux serve --config`` reads: its schema is derived from the
pydantic model (``kubeflux.kube.config.ServeConfig``), the one source of truth for its fields, types, bounds and
patterns (checks the schema cannot say, such as a known match policy, are still made by ``serve`` at start). The
chart's own values (image, replicas, leader election, …) are described here, beside the chart's ``values.yaml``.

    python tools/helm_schema.py            # writes deploy/helm/kubeflux/values.schema.json
    python tools/helm_schema.py --check    # exits 1 if the file is not what the sources give
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kubeflux.kube.config import ServeConfig

CHART = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "kubeflux"
SCHEMA = CHART / "values.schema.json"

_STRING: dict[str, Any] = {"type": "string"}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_OBJECT: dict[str, Any] = {"type": "object"}
_DNS_LABEL_OR_EMPTY: dict[str, Any] = {
    "type": "string",
    "maxLength": 63,
    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$",
}


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _plain(schema: Any) -> Any:
    """The schema without pydantic's titles and descriptions (docstrings in reST, and compiled classes have none)."""
    if isinstance(schema, dict):
        return {
            key: _plain(value) if key != "properties" else {name: _plain(sub) for name, sub in value.items()}
            for key, value in schema.items()
            if key not in ("title", "description")
        }
    if isinstance(schema, list):
        return [_plain(item) for item in schema]
    return schema


def chart_schema() -> dict[str, Any]:
    config = _plain(ServeConfig.model_json_schema(by_alias=True, mode="validation"))
    definitions = config.pop("$defs", {})
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$comment": "Written by tools/helm_schema.py from kubeflux.kube.config.ServeConfig; do not edit.",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "global": _OBJECT,
            "image": _closed(
                {
                    "repository": {"type": "string", "minLength": 1},
                    "tag": _STRING,
                    "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                }
            ),
            "imagePullSecrets": {"type": "array", "items": _OBJECT},
            "replicas": {"type": "integer", "minimum": 0},
            "leaderElection": _closed(
                {
                    "enabled": {"type": "boolean"},
                    "leaseDurationSeconds": {"type": "number", "exclusiveMinimum": 0},
                    "renewDeadlineSeconds": {"type": "number", "exclusiveMinimum": 0},
                    "retryPeriodSeconds": {"type": "number", "exclusiveMinimum": 0},
                }
            ),
            "config": config,
            "verbosity": {"type": "integer", "minimum": 0, "maximum": 2},
            "operationsPort": {"type": "integer", "minimum": 1, "maximum": 65535},
            "serviceAccount": _closed({"name": _DNS_LABEL_OR_EMPTY | {"maxLength": 253}, "annotations": _STRING_MAP}),
            "priorityClassName": _STRING,
            "podAnnotations": _STRING_MAP,
            "podLabels": _STRING_MAP,
            "resources": _OBJECT,
            "nodeSelector": _STRING_MAP,
            "tolerations": {"type": "array", "items": _OBJECT},
            "affinity": _OBJECT,
            "nameOverride": _DNS_LABEL_OR_EMPTY,
            "fullnameOverride": _DNS_LABEL_OR_EMPTY,
        },
        "$defs": definitions,
    }


def rendered() -> str:
    return json.dumps(chart_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the chart's file differs from the sources")
    args = parser.parse_args(argv)
    text = rendered()
    if args.check:
        if not SCHEMA.exists() or SCHEMA.read_text() != text:
            print(f"{SCHEMA}: not what tools/helm_schema.py writes; run it", file=sys.stderr)
            return 1
        return 0
    SCHEMA.write_text(text)
    print(f"wrote {SCHEMA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
