"""The engine: traverser, policies, planner, writers. Compiled with mypyc when ``make`` built it (see ``_native``)."""

from kubeflux._native import use_compiled

COMPILED: bool = use_compiled(__name__, __path__)
"""Whether this process runs the compiled engine (mypyc) rather than the pure-Python sources."""
