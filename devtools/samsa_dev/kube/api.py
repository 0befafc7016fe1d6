"""Just enough of a Kubernetes API client for the node agent, the Node keeper and the
provisioner: JSON over HTTPS with the kubeconfig's client certificate, merge and strategic
merge patches, and a 404 that reads as None."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

Obj = dict[str, Any]
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}")
        self.status = status


def load_kubeconfig(path: Path) -> tuple[str, str, ssl.SSLContext, str | None]:
    """(server, CA file, TLS context, bearer token) of the kubeconfig's current context."""
    config = json.loads(path.read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    user = next(u for u in config["users"] if u["name"] == context["context"]["user"])
    ca = cluster["cluster"]["certificate-authority"]
    tls = ssl.create_default_context(cafile=ca)
    creds = user["user"]
    if "client-certificate" in creds:
        tls.load_cert_chain(creds["client-certificate"], creds["client-key"])
    return cluster["cluster"]["server"], ca, tls, creds.get("token")


class Api:
    def __init__(self, kubeconfig: Path, agent: str = "samsa-dev-k8s") -> None:
        self.server, self.ca, self.tls, token = load_kubeconfig(kubeconfig)
        headers = {"User-Agent": agent}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=30),
            headers=headers,
            connector=aiohttp.TCPConnector(ssl=self.tls),
        )

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Obj | None:
        url = self.server + path + (f"?{urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self.session.request(method, url, data=data, headers=headers) as response:
            if response.status == 404:
                return None
            text = await response.text()
            if response.status >= 400:
                raise ApiError(response.status, f"{method} {path}: {text[:500]}")
            return dict(json.loads(text)) if text else {}

    async def get(self, path: str) -> Obj | None:
        return await self.request("GET", path)

    async def list(self, path: str, **params: str) -> list[Obj]:
        found = await self.request("GET", path, params=params or None)
        return list((found or {}).get("items") or [])

    async def create(self, path: str, obj: Obj) -> Obj | None:
        return await self.request("POST", path, obj)

    async def ensure(self, path: str, obj: Obj) -> None:
        """Create, unless it exists already."""
        try:
            await self.create(path, obj)
        except ApiError as exc:
            if exc.status != 409:
                raise

    async def patch(self, path: str, patch: Obj, kind: str = MERGE) -> Obj | None:
        return await self.request("PATCH", path, patch, content_type=kind)

    async def delete(self, path: str, options: Obj | None = None) -> Obj | None:
        return await self.request("DELETE", path, options)

    async def close(self) -> None:
        await self.session.close()


def kubeconfig(
    server: str,
    ca: str,
    *,
    cert: str = "",
    key: str = "",
    token: str = "",
    namespace: str = "default",
) -> Obj:
    """A kubeconfig of one cluster and one user: a client certificate, or a bearer token."""
    user = {"token": token} if token else {"client-certificate": cert, "client-key": key}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "samsa", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "samsa", "user": user}],
        "contexts": [
            {
                "name": "samsa",
                "context": {"cluster": "samsa", "user": "samsa", "namespace": namespace},
            }
        ],
        "current-context": "samsa",
    }


def kubeconfig_path_for_token(api: Api, token: str, path: Path, namespace: str) -> Path:
    """A kubeconfig for this API server with a ServiceAccount's token (what a pod's in-cluster
    configuration amounts to)."""
    path.write_text(json.dumps(kubeconfig(api.server, api.ca, token=token, namespace=namespace)))
    path.chmod(0o600)
    return path
