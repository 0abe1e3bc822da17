"""The simulator. Its hot modules (event loop, cluster, jobs, pods, resource ids, driver) are compiled with mypyc,
with the engine and the scheduler's core, when ``make`` built them (see ``kubeflux._native`` and
``tools/build_native.py``); its subpackages and the modules that parse, write, plot or serve stay pure."""

from kubeflux._native import use_compiled

COMPILED: bool = use_compiled(__name__, __path__)
"""Whether this process runs the compiled simulator modules (mypyc) rather than the pure-Python sources."""
