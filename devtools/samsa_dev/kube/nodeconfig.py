"""The real nodes' configuration, as data and nothing else (kube/realnodes.py runs it): per
node a network namespace on the host bridge, containerd's config, the CNI conflist, the
KubeletConfiguration and the kubelet's flags, the KubeProxyConfiguration; and the cluster's
DNS (CoreDNS's ServiceAccount, RBAC, Corefile, Deployment and the kube-dns Service).

Addresses: the host bridge ``samsa-nodes`` is 172.30.0.1/24 and the API server advertises
that address; node i is 172.30.0.1i in its namespace ``samsa-node-i``, its pods get
10.244.i.0/24, and the host routes each pod range to its node, so the host (and the tests)
reach pod IPs. Service IPs (10.96.0.0/16) are kube-proxy's rules inside each node's
namespace: nothing of them is in the host's iptables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa_dev.kube.nodes import node_name

BRIDGE = "samsa-nodes"
HOST_IP = "172.30.0.1"
PREFIX = 24
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_DNS = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
COREDNS_IMAGE = "registry.k8s.io/coredns/coredns:v1.12.1"
# CoreDNS listens above 1024 as its image's non-root user, with no capability added: the
# kube-dns Service maps 53 to it (kube-proxy's DNAT).
COREDNS_PORT = 1053
# The most nodes whose addresses fit the scheme (172.30.0.10 to .19, 10.244.0-9.0/24).
MAX_NODES = 10
KUBELET_PORT = 10250


@dataclass(frozen=True)
class Node:
    """One real node: its names, addresses and files (all under ``folder``)."""

    index: int
    folder: Path

    @property
    def name(self) -> str:
        return node_name(self.index)

    @property
    def netns(self) -> str:
        return self.name

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"

    @property
    def ip(self) -> str:
        return f"172.30.0.{10 + self.index}"

    @property
    def veth(self) -> str:
        """The host end of the node's veth pair (the other end is eth0 in the namespace)."""
        return f"samsa-n{self.index}h"

    @property
    def pod_cidr(self) -> str:
        return f"10.244.{self.index}.0/24"

    @property
    def zone(self) -> str:
        # As the fake Nodes of kube/nodes.py: one zone a node.
        return f"zone-{self.index}"

    @property
    def cgroup_root(self) -> str:
        return f"/{self.name}"

    @property
    def socket(self) -> Path:
        return self.folder / "containerd.sock"

    def path(self, name: str) -> Path:
        return self.folder / name


def nodes(folder: Path, count: int) -> list[Node]:
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"between 1 and {MAX_NODES} real nodes, not {count}")
    return [Node(i, folder / f"node-{i}") for i in range(count)]


# -- the network ----------------------------------------------------------------------------


def network_up(all_nodes: list[Node]) -> list[list[str]]:
    """The `ip` commands that make the bridge, each node's namespace and veth, and the host's
    routes to the pod ranges; run in order (each fails if its object exists)."""
    commands = [
        ["ip", "link", "add", BRIDGE, "type", "bridge"],
        ["ip", "addr", "add", f"{HOST_IP}/{PREFIX}", "dev", BRIDGE],
        ["ip", "link", "set", BRIDGE, "up"],
    ]
    for node in all_nodes:
        inside = ["ip", "-n", node.netns]
        commands += [
            ["ip", "netns", "add", node.netns],
            # The peer is made inside the namespace: the host has an eth0 of its own.
            [
                "ip",
                "link",
                "add",
                node.veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                node.netns,
            ],
            ["ip", "link", "set", node.veth, "master", BRIDGE, "up"],
            [*inside, "addr", "add", f"{node.ip}/{PREFIX}", "dev", "eth0"],
            [*inside, "link", "set", "eth0", "up"],
            [*inside, "link", "set", "lo", "up"],
            # The cluster's ranges through the host; nothing else is reachable from a node
            # (no NAT), so anything else fails at once rather than timing out: an image pull
            # fails as a registry's "not found" would, not after 10 s of unanswered DNS.
            [*inside, "route", "add", CLUSTER_CIDR, "via", HOST_IP],
            [*inside, "route", "add", SERVICE_CIDR, "via", HOST_IP],
            [*inside, "route", "add", "unreachable", "default"],
            ["ip", "route", "add", node.pod_cidr, "via", node.ip, "dev", BRIDGE],
        ]
    return commands


def network_down(all_nodes: list[Node]) -> list[list[str]]:
    """The commands that remove what `network_up` made (each may fail: it is gone already).
    Deleting a namespace deletes the veth pair and what CNI made inside it."""
    commands = [["ip", "route", "del", n.pod_cidr] for n in all_nodes]
    commands += [["ip", "netns", "delete", n.netns] for n in all_nodes]
    commands += [["ip", "link", "delete", n.veth] for n in all_nodes]
    commands.append(["ip", "link", "delete", BRIDGE])
    return commands


# Inside each node's namespace (per-namespace sysctls: the host's are not touched).
NODE_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    # Pods on one node's bridge reach each other's Service IPs through kube-proxy's rules.
    "net.bridge.bridge-nf-call-iptables": "1",
}
# Host folders the kubelets and containerd use whatever their configuration says (the
# device plugins' socket folder, CNI's result cache, the container log links, the shims'
# sockets): removed at teardown if the nodes made them, else only the nodes' entries.
HOST_FOLDERS = ("/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/run/containerd")
CNI_NETWORK = "samsa-pods"
# What the kubelet writes on the host at start (setupKernelTunables): saved before and
# written back after, as the machine is shared.
KUBELET_HOST_SYSCTLS = ("vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops")
# What the nodes need of the host, written by `up`, saved and written back in the same way:
# a packet from a pod on one node to a pod on another (a Service's DNAT, CoreDNS) is routed
# through the host's bridge, which a machine that does not forward drops.
NODES_HOST_SYSCTLS = {"net.ipv4.ip_forward": "1"}


# -- containerd and CNI ---------------------------------------------------------------------


def containerd_config(node: Node) -> str:
    """containerd 1.6 (Debian's), one per node, with its own root, state, socket and CNI
    configuration. ``restrict_oom_score_adj``: without CAP_SYS_RESOURCE the sandbox's
    -998 cannot be written and runc fails; cgroupfs, as there is no systemd."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'

    def q(value: object) -> str:
        return json.dumps(str(value))

    return "\n".join(
        [
            "version = 2",
            f"root = {q(node.path('containerd/root'))}",
            f"state = {q(node.path('containerd/state'))}",
            "oom_score = 0",
            "[grpc]",
            f"  address = {q(node.socket)}",
            "[ttrpc]",
            '  address = ""',
            "[metrics]",
            '  address = ""',
            '[plugins."io.containerd.internal.v1.opt"]',
            f"  path = {q(node.path('containerd/opt'))}",
            f"[{cri}]",
            f"  sandbox_image = {q(PAUSE_IMAGE)}",
            "  enable_cdi = false",
            "  restrict_oom_score_adj = true",
            "  netns_mounts_under_state_dir = true",
            f"  [{cri}.containerd]",
            '    snapshotter = "overlayfs"',
            '    default_runtime_name = "runc"',
            "    discard_unpacked_layers = false",
            f"    [{cri}.containerd.runtimes.runc]",
            '      runtime_type = "io.containerd.runc.v2"',
            f"      [{cri}.containerd.runtimes.runc.options]",
            '        BinaryName = "/usr/sbin/runc"',
            f"        Root = {q(node.path('runc'))}",
            "        SystemdCgroup = false",
            f"  [{cri}.cni]",
            '    bin_dir = "/usr/lib/cni"',
            f"    conf_dir = {q(node.path('cni/net.d'))}",
            f"  [{cri}.registry]",
            '    config_path = ""',
            "",
        ]
    )


def cni_conflist(node: Node) -> dict[str, Any]:
    """A bridge inside the node's namespace (so every node may call it cni0), host-local
    addresses from the node's pod range, no masquerade (a pod's address is routed to its node
    from the host and the other nodes), portmap for hostPorts."""
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node.path("cni/ipam")),
                    "ranges": [[{"subnet": node.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


# -- kubelet and kube-proxy -----------------------------------------------------------------


def kubelet_config(node: Node, ca_file: Path, resolv_conf: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # No systemd here, and cgroup v1 (1.34 still runs on it; 1.35 refuses by default).
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        "cgroupsPerQOS": True,
        "failCgroupV1": False,
        "failSwapOn": False,
        # The kubelet's default -999 needs CAP_SYS_RESOURCE, which this machine does not give.
        "oomScoreAdj": 0,
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "podCIDR": node.pod_cidr,
        "clusterDNS": [CLUSTER_DNS],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv_conf),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "podLogsDir": str(node.path("pod-logs")),
        # Never collect images: nothing can pull them back (no registry is reachable).
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # No disk-pressure eviction ("0%" turns a signal off): the nodes share the host's
        # disk, and under pressure the kubelet deleted every unused image, the pause image
        # included, which nothing can pull back; no pod could start after.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "0%",
            "imagefs.available": "0%",
        },
        "serializeImagePulls": False,
        # What it writes on the host is put back by realnodes; refusing would stop it.
        "protectKernelDefaults": False,
        "registerNode": True,
        "rotateCertificates": False,
        "maxPods": 110,
    }


def kubelet_flags(node: Node, config: Path, kubeconfig: Path) -> list[str]:
    return [
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={node.path('kubelet')}",
        # Not under the root dir by default: /var/lib/kubelet/pki, which the nodes would share.
        f"--cert-dir={node.path('kubelet/pki')}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.ip}",
        f"--node-labels=topology.kubernetes.io/zone={node.zone}",
        "--v=1",
    ]


def kube_proxy_config(node: Node, kubeconfig: Path) -> dict[str, Any]:
    """iptables mode, inside the node's namespace. No conntrack sizing or timeouts (they are
    the host's, shared by every namespace) and no localhost NodePorts (route_localnet)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "hostnameOverride": node.name,
        "clusterCIDR": CLUSTER_CIDR,
        "detectLocalMode": "ClusterCIDR",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "oomScoreAdj": 0,
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"localhostNodePorts": False, "minSyncPeriod": "1s", "syncPeriod": "30s"},
    }


# -- cluster DNS ----------------------------------------------------------------------------


def corefile() -> str:
    """Cluster names only: nothing outside the host reaches a pod range (no egress NAT), so
    there is no upstream to forward to; other names are refused."""
    return "\n".join(
        [
            f".:{COREDNS_PORT} {{",
            "    errors",
            "    health {",
            "        lameduck 5s",
            "    }",
            "    ready",
            f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{",
            "        pods insecure",
            "        fallthrough in-addr.arpa ip6.arpa",
            "        ttl 30",
            "    }",
            "    prometheus :9153",
            "    cache 30",
            "    loop",
            "    reload",
            "    loadbalance",
            "}",
            "",
        ]
    )


def coredns_objects(image: str = COREDNS_IMAGE) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) for CoreDNS in kube-system, as kubeadm deploys it, with the
    Service kube-dns on the kubelets' clusterDNS address."""
    ns = "kube-system"
    labels = {"k8s-app": "kube-dns"}
    meta = {"name": "coredns", "namespace": ns}
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:coredns"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["endpoints", "services", "pods", "namespaces"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "system:coredns"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:coredns",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": ns}],
    }
    probe = {"periodSeconds": 2, "timeoutSeconds": 1}
    container = {
        "name": "coredns",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [
            {"name": "dns", "containerPort": COREDNS_PORT, "protocol": "UDP"},
            {"name": "dns-tcp", "containerPort": COREDNS_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9153, "protocol": "TCP"},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "30Mi"}, "limits": {"memory": "170Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, **probe},
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": 8080},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 5,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {**meta, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "coredns",
                    "priorityClassName": "system-cluster-critical",
                    "dnsPolicy": "Default",
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": ns, "labels": labels},
        "spec": {
            "clusterIP": CLUSTER_DNS,
            "selector": labels,
            "ports": [
                {"name": "dns", "port": 53, "targetPort": "dns", "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "targetPort": "dns-tcp", "protocol": "TCP"},
                {"name": "metrics", "port": 9153, "targetPort": 9153, "protocol": "TCP"},
            ],
        },
    }
    api = f"/api/v1/namespaces/{ns}"
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    return [
        (
            f"{api}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        ),
        (f"{rbac}/clusterroles", role),
        (f"{rbac}/clusterrolebindings", binding),
        (f"{api}/configmaps", {**config_map, "data": {"Corefile": corefile()}}),
        (f"/apis/apps/v1/namespaces/{ns}/deployments", deployment),
        (f"{api}/services", service),
    ]
