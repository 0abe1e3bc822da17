"""Kubernetes API objects as kubeflux reads and writes them: the layer between the scheduler's core and its shells.

Named for what it holds — the API's objects (manifests), not a client or a driver: ``kubeflux.kube`` is the shell
that talks to a live API server, ``kubeflux.scheduler.objects`` the core's own model of pods, nodes and pod groups.
Here are the readers that turn a manifest into that model (and back), quantities, the objects a scheduler's
decisions become (the Binding, the ``PodScheduled=False`` condition, Events) and client-go's event budget. The
core imports nothing from here; the shells (``sim``, ``kube``) do. Compiled with the core when ``make`` built it
(see ``kubeflux._native``).
"""

from kubeflux._native import use_compiled

COMPILED: bool = use_compiled(__name__, __path__)
"""Whether this process runs the compiled readers (mypyc) rather than the pure-Python sources."""
