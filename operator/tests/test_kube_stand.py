"""The API stand-in's eight fixes, each checked against a real client (kubectl or raw HTTP as
kopf sends it), and against plain kmock 0.8 where it still shows the gap: when such a check
fails, kmock has fixed the gap and our fix can go."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import kmock
import pytest
from kmock import Server
from kube_stand import KubeStand
from op_support import CRDS, Kubectl, eventually

CM = "/api/v1/namespaces/ns/configmaps"


async def call(
    session: aiohttp.ClientSession, method: str, url: str, body: Any = None, ctype: str = ""
) -> tuple[int, Any]:
    headers = {"Content-Type": ctype or "application/json"}
    data = json.dumps(body) if body is not None else None
    async with session.request(method, url, data=data, headers=headers) as resp:
        return resp.status, await resp.json(content_type=None)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture(params=["stand", "vanilla"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, str]]:
    cls = KubeStand if request.param == "stand" else kmock.KubernetesEmulator
    async with cls() as api, Server(api):
        if request.param == "vanilla":
            api.resources.load_bundled()
        yield request.param, str(api.url).rstrip("/")


async def test_discovery_of_builtins(kubectl: Kubectl) -> None:  # 1
    out = await kubectl("api-resources", "--api-group=apps", "-o", "name")
    assert "statefulsets.apps" in out.split()


async def test_objects_are_stamped(
    server: tuple[str, str], http: aiohttp.ClientSession
) -> None:  # 2
    flavour, url = server
    _, created = await call(http, "POST", url + CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    meta = created["metadata"]
    stamped = all(k in meta for k in ("uid", "resourceVersion", "generation", "creationTimestamp"))
    assert stamped == (flavour == "stand")


async def test_generation_moves_with_the_spec_only(
    stand: KubeStand, http: aiohttp.ClientSession
) -> None:  # 2
    url = str(stand.url).rstrip("/") + CM
    await call(http, "POST", url, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    merge = "application/merge-patch+json"
    _, labelled = await call(http, "PATCH", url + "/a", {"metadata": {"labels": {"x": "y"}}}, merge)
    _, changed = await call(http, "PATCH", url + "/a", {"data": {"k": "w"}}, merge)
    _, same = await call(http, "PATCH", url + "/a", {"data": {"k": "w"}}, merge)
    assert labelled["metadata"]["generation"] == 1
    assert changed["metadata"]["generation"] == 2
    assert int(changed["metadata"]["resourceVersion"]) > int(
        labelled["metadata"]["resourceVersion"]
    )
    assert same["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]


async def test_failed_json_patch_test_is_422(
    server: tuple[str, str], http: aiohttp.ClientSession
) -> None:  # 3
    flavour, url = server
    await call(http, "POST", url + CM, {"metadata": {"name": "a"}})
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": "999"}]
    status, _ = await call(http, "PATCH", url + CM + "/a", ops, "application/json-patch+json")
    assert status == (422 if flavour == "stand" else 500)


async def test_watch_honours_resource_version(
    stand: KubeStand, http: aiohttp.ClientSession
) -> None:  # 4
    url = str(stand.url).rstrip("/") + CM
    await call(http, "POST", url, {"metadata": {"name": "old"}})
    _, listing = await call(http, "GET", url)
    await call(http, "POST", url, {"metadata": {"name": "new"}})
    since = listing["metadata"]["resourceVersion"]
    async with http.get(url, params={"watch": "true", "resourceVersion": since}) as resp:
        line = await asyncio.wait_for(resp.content.readline(), 5)
    event = json.loads(line)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "new")


async def test_lists_have_kind(server: tuple[str, str], http: aiohttp.ClientSession) -> None:  # 5
    flavour, url = server
    _, listing = await call(http, "GET", url + CM)
    assert (listing.get("kind"), listing.get("apiVersion")) == (
        ("ConfigMapList", "v1") if flavour == "stand" else (None, None)
    )


async def test_core_group_version(
    server: tuple[str, str], http: aiohttp.ClientSession
) -> None:  # 6
    flavour, url = server
    _, doc = await call(http, "GET", url + "/api/v1")
    assert doc["groupVersion"] == ("v1" if flavour == "stand" else "/v1")


async def test_subresources_have_no_short_names(
    server: tuple[str, str], http: aiohttp.ClientSession
) -> None:  # 7
    flavour, url = server
    _, doc = await call(http, "GET", url + "/api/v1")
    [status] = [r for r in doc["resources"] if r["name"] == "pods/status"]
    assert (status["shortNames"] == []) == (flavour == "stand")


async def test_kubectl_short_names_resolve(kubectl: Kubectl) -> None:  # 7
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1}\ndata: {k: v}\n"
    await kubectl("apply", "--validate=false", "-f", "-", stdin=cm)
    assert (await kubectl.get("cm", "c1"))["data"] == {"k": "v"}


async def test_created_crd_is_established_and_served(kubectl: Kubectl) -> None:  # 8
    await kubectl("apply", "--validate=false", "-f", str(CRDS))
    await kubectl(
        "wait", "--for=condition=Established", "--timeout=10s", "crd/topics.kafka.samsa.dev"
    )
    topic = """
apiVersion: kafka.samsa.dev/v1alpha1
kind: Topic
metadata: {name: t1}
spec: {clusterRef: demo, partitions: 1, replicationFactor: 1}
"""
    await kubectl("apply", "--validate=false", "-f", "-", stdin=topic)
    assert (await kubectl.get("kt", "t1"))["spec"]["partitions"] == 1


async def test_status_subresource_is_separate(
    stand: KubeStand, http: aiohttp.ClientSession, kubectl: Kubectl
) -> None:
    await kubectl("apply", "--validate=false", "-f", str(CRDS))
    url = str(stand.url).rstrip("/") + "/apis/kafka.samsa.dev/v1alpha1/namespaces/ns/topics"
    await call(http, "POST", url, {"metadata": {"name": "t"}, "spec": {"partitions": 1}})
    merge = "application/merge-patch+json"
    await call(http, "PATCH", url + "/t", {"spec": {"partitions": 2}, "status": {"a": 1}}, merge)
    _, obj = await call(
        http, "PATCH", url + "/t/status", {"spec": {"partitions": 9}, "status": {"b": 2}}, merge
    )
    assert obj["spec"] == {"partitions": 2}
    assert obj["status"] == {"b": 2}


async def test_finalizers_hold_deletion(stand: KubeStand, http: aiohttp.ClientSession) -> None:
    url = str(stand.url).rstrip("/") + CM
    await call(http, "POST", url, {"metadata": {"name": "f", "finalizers": ["x/y"]}})
    await call(http, "DELETE", url + "/f")
    status, held = await call(http, "GET", url + "/f")
    assert status == 200 and held["metadata"]["deletionTimestamp"]
    await call(
        http,
        "PATCH",
        url + "/f",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    status, _ = await call(http, "GET", url + "/f")
    assert status == 404


async def test_kubectl_waits_through_a_watch(stand: KubeStand, kubectl: Kubectl) -> None:
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: f, finalizers: [x.io/y]}\n"
    await kubectl("apply", "--validate=false", "-f", "-", stdin=cm)
    deleting = asyncio.create_task(kubectl("delete", "cm", "f", "--timeout=30s"))

    async def held() -> bool:
        found = await kubectl.maybe_get("cm", "f")
        return bool(found and found["metadata"].get("deletionTimestamp"))

    await eventually(held, what="deletionTimestamp")
    assert not deleting.done()
    await kubectl("patch", "cm", "f", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    await asyncio.wait_for(deleting, 30)
