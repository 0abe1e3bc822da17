"""serve reads a watch of the real kube-apiserver straight from the connection (its chunks, not urllib3's reads):
the events come whole and in order, the stream the server ends at its timeout ends cleanly, and the client's pool
serves the next request."""

from __future__ import annotations

import threading

from kubeflux.kube.reflector import _connection_reader, _lines

from .conftest import Api


def test_a_pod_watch_of_the_real_api_server_is_read_from_its_connection(api: Api) -> None:
    namespace = api.namespace("watch-stream")
    response = api.core.list_namespaced_pod(namespace, watch=True, timeout_seconds=3, _preload_content=False)
    read = _connection_reader(response)
    assert read is not None, "the watch fell back to urllib3's reads (its response's shape changed?)"
    names = [f"p{i}" for i in range(40)]

    def create() -> None:
        for name in names:
            manifest = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
            api.create_pod(namespace, manifest)

    creator = threading.Thread(target=create)
    creator.start()
    try:
        seen = [(e["type"], e["object"]["metadata"]["name"]) for e in _lines(response, read)]  # till its timeout
    finally:
        creator.join()
        response.close()
    assert seen == [("ADDED", name) for name in names]
    assert sorted(api.pods(namespace)) == sorted(names)  # the client goes on after the stream it did not read
