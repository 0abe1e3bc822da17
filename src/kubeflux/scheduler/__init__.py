"""The scheduler's core. Compiled with mypyc, with the engine, when ``make`` built it (see ``kubeflux._native``)."""

from kubeflux._native import use_compiled

COMPILED: bool = use_compiled(__name__, __path__)
"""Whether this process runs the compiled scheduler core (mypyc) rather than the pure-Python sources."""
