"""The simulated cluster over the Kubernetes REST API: one generic store, a strategy per resource, an HTTP shell."""
