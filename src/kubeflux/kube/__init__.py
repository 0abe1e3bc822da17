"""The Kubernetes driver (``kubeflux serve``): the scheduler core fed by watches, its decisions written through
the API. ``config`` (the validated settings), ``reflector`` (list and watch on raw JSON), ``binder`` (Bindings,
conditions, events), ``binderprocess`` (the binder in a process of its own), ``serve`` (the loop), ``command``
(the CLI). See docs/serve.md."""
