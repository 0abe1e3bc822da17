"""Kueue's admission layer in the simulator, in front of any scheduler: its objects (:mod:`.objects`), read from
a workload file (:mod:`.reader`), its quota accounting (:mod:`.quota`), flavor assignment (:mod:`.flavors`),
admission cycle (:mod:`.admission`) and preemption for quota (:mod:`.preemption`), the shell that holds and
releases the simulated cluster's jobs (:mod:`.layer`), where its decisions land (:mod:`.sink`: the simulated
cluster's book, or ``cluster serve``'s API) and the figures of a run (:mod:`.figures`).
``docs/kueue.md`` says what is modelled and what is not."""

from kubeflux.sim.kueue.objects import QUEUE_NAME_LABEL, KueueObjects

__all__ = ["QUEUE_NAME_LABEL", "KueueObjects"]
