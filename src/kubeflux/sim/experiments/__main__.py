"""``python -m kubeflux.sim.experiments [NAME …]``: regenerate the experiment pages (``make experiments``)."""

from kubeflux.sim.experiments import main

main()
