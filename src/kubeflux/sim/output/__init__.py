"""What a run writes: its CSV files a column at a time (:mod:`.csvcolumns`), the report's plots (:mod:`.plots`),
its HTML page (:mod:`.page`) and the human numbers the page shows (:mod:`.numbers`).

A subpackage of ``kubeflux.sim``, so it stays pure Python (``tools/build_native.py`` compiles only the package's own
modules): it formats and draws, the engine does not call it during a run. ``kubeflux.sim.metrics`` and
``kubeflux.sim.report`` are the public entry points.
"""
