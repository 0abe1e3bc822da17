"""kubeflux: an HPC-grade, Fluxion-compatible graph scheduler for Kubernetes, with a virtual-time simulator."""

__version__ = "0.1.0"
