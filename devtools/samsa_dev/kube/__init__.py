"""A real Kubernetes control plane on 127.0.0.1 for the operator's tests and for developers:
its binaries built from the Go module proxy (`build`), certificates (`certs`), the processes
(`control_plane`), a small API client (`api`), Nodes kept Ready (`nodes`), a local volume
provisioner (`provisioner`), and a node agent that runs pods as local processes (`agent`,
with `images` mapping container images to local programs)."""
