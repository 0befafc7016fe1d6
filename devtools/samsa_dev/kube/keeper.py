"""``python -m samsa_dev.kube.keeper FOLDER [--pods] [--no-nodes]``: the control plane's
companion process: Nodes kept Ready, the local provisioner, and with ``--pods`` the node agent
for every namespace (``samsa-dev k8s up``; the tests run their own agent per namespace
instead). With ``--no-nodes``, the provisioner alone: real nodes (kube/realnodes.py) register
themselves, and the keeper's Nodes would clash with their names."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from samsa_dev.kube.api import Api
from samsa_dev.kube.nodes import NodeKeeper
from samsa_dev.kube.provisioner import Provisioner

log = logging.getLogger("samsa_dev.kube.keeper")


async def _forever(name: str, step: object) -> None:
    """Run a loop; an API error is logged and the loop started again."""
    assert callable(step)
    while True:
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s failed; starting it again", name)
            await asyncio.sleep(1)


async def main(folder: Path, pods: bool, nodes: bool = True) -> None:
    api = Api(folder / "kubeconfig", agent="samsa-node-keeper")
    loops = [_forever("provisioner", Provisioner(api, folder / "volumes").run)]
    if nodes:
        loops.append(_forever("nodes", NodeKeeper(api).run))
    agent = None
    if pods:
        from samsa_dev.kube.agent import NodeAgent

        agent = NodeAgent(api, folder / "pods", namespaces=None)
        loops.append(_forever("agent", agent.run))
    running = asyncio.gather(*loops)
    # `samsa-dev k8s down` sends SIGTERM: the pods' processes, each in a session of its own,
    # go with the keeper instead of outliving the cluster.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, running.cancel)
    try:
        await running
    except asyncio.CancelledError:
        pass
    finally:
        if agent is not None:
            await agent.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--pods", action="store_true")
    parser.add_argument("--no-nodes", dest="nodes", action="store_false")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(main(args.folder, args.pods, args.nodes))
