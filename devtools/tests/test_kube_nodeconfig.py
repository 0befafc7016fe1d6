"""The real nodes' configuration as data (samsa_dev.kube.nodeconfig): what the nodes are
told, checked without starting them (`make e2e` starts them)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from samsa_dev.kube import control_plane, nodeconfig, nodes


def test_each_node_has_its_own_address_pod_range_and_the_fake_nodes_zone(tmp_path: Path) -> None:
    made = nodeconfig.nodes(tmp_path, 3)
    assert [n.ip for n in made] == ["172.30.0.10", "172.30.0.11", "172.30.0.12"]
    assert [n.pod_cidr for n in made] == ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"]
    bridge = ipaddress.ip_network(f"{nodeconfig.HOST_IP}/{nodeconfig.PREFIX}", strict=False)
    cluster = ipaddress.ip_network(nodeconfig.CLUSTER_CIDR)
    for node in made:
        assert ipaddress.ip_address(node.ip) in bridge
        assert ipaddress.ip_network(node.pod_cidr).subnet_of(cluster)  # type: ignore[arg-type]
        # The same zones as the agent's Nodes, so the operator's rack spread sees the same.
        fake = nodes.node(node.index)["metadata"]["labels"]["topology.kubernetes.io/zone"]
        assert node.zone == fake
        assert f"--node-labels=topology.kubernetes.io/zone={fake}" in nodeconfig.kubelet_flags(
            node, tmp_path / "c", tmp_path / "k"
        )
    with pytest.raises(ValueError):
        nodeconfig.nodes(tmp_path, nodeconfig.MAX_NODES + 1)


def test_network_down_undoes_network_up(tmp_path: Path) -> None:
    made = nodeconfig.nodes(tmp_path, 2)
    up = nodeconfig.network_up(made)
    down = nodeconfig.network_down(made)
    made_objects = {
        ("link", c[3]) if c[1] == "link" else (c[1], c[3])
        for c in up
        if c[0] == "ip" and c[2] == "add" and c[1] in ("link", "netns", "route")
    }
    removed = {(c[1], c[3]) for c in down}
    assert made_objects == removed
    assert ("link", nodeconfig.BRIDGE) in removed
    # Every node's eth0 is made inside its namespace: the host has one of its own.
    veths = [c for c in up if "veth" in c]
    assert all(c[-2:] == ["netns", n.netns] for c, n in zip(veths, made, strict=True))


def test_kubelet_and_kube_proxy_fit_this_machine(tmp_path: Path) -> None:
    (node,) = nodeconfig.nodes(tmp_path, 1)
    kubelet = nodeconfig.kubelet_config(node, tmp_path / "ca.crt", tmp_path / "resolv.conf")
    assert kubelet["cgroupDriver"] == "cgroupfs" and kubelet["cgroupRoot"] == "/samsa-node-0"
    assert kubelet["oomScoreAdj"] == 0 and kubelet["failSwapOn"] is False
    assert kubelet["imageGCHighThresholdPercent"] == 100
    assert kubelet["clusterDNS"] == [nodeconfig.CLUSTER_DNS]
    assert kubelet["authorization"]["mode"] == "Webhook"
    assert kubelet["containerRuntimeEndpoint"] == f"unix://{node.socket}"
    flags = nodeconfig.kubelet_flags(node, tmp_path / "c", tmp_path / "k")
    # Nothing of a node's state in the kubelet's default folders, which nodes would share.
    assert any(f.startswith("--cert-dir=") and str(tmp_path) in f for f in flags)
    proxy = nodeconfig.kube_proxy_config(node, tmp_path / "k")
    assert proxy["mode"] == "iptables" and proxy["oomScoreAdj"] == 0
    assert proxy["conntrack"]["maxPerCore"] == 0
    containerd = nodeconfig.containerd_config(node)
    assert "restrict_oom_score_adj = true" in containerd
    assert f'sandbox_image = "{nodeconfig.PAUSE_IMAGE}"' in containerd
    conflist = nodeconfig.cni_conflist(node)
    assert conflist["plugins"][0]["ipam"]["ranges"] == [[{"subnet": node.pod_cidr}]]


def test_dns_service_is_the_kubelets_cluster_dns() -> None:
    objects = dict((o["kind"], o) for _, o in nodeconfig.coredns_objects())
    service = objects["Service"]
    assert service["spec"]["clusterIP"] == nodeconfig.CLUSTER_DNS
    service_range = ipaddress.ip_network(control_plane.SERVICE_CIDR)
    assert ipaddress.ip_address(nodeconfig.CLUSTER_DNS) in service_range
    assert f".:{nodeconfig.COREDNS_PORT}" in objects["ConfigMap"]["data"]["Corefile"]
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["securityContext"]["runAsNonRoot"] is True
    assert {p["containerPort"] for p in container["ports"]} >= {nodeconfig.COREDNS_PORT}
