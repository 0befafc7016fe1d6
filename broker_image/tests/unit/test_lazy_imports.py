"""A standalone broker starts without what only a cluster or the HTTP side port uses: the
ZooKeeper client, the controller and aiohttp are most of its start-up
(`python -m bench components --only cold_start`). They still load when asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

CLUSTER_ONLY = ("kazoo.client", "aiohttp", "samsa.controller.kafka_controller")


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\nmodules:', *sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return set(out.stdout.rsplit("modules:", 1)[1].split())


def test_standalone_broker_modules_leave_cluster_parts_unloaded() -> None:
    loaded = _loaded_after("import samsa.broker.server")
    assert not loaded & set(CLUSTER_ONLY), sorted(loaded & set(CLUSTER_ONLY))


@pytest.mark.parametrize(
    ("code", "module"),
    [
        ("from samsa.controller import KafkaController", "samsa.controller.kafka_controller"),
        ("from samsa.broker import KafkaServer", "samsa.broker.server"),
        ("import samsa.broker.cluster", "kazoo.client"),
    ],
)
def test_lazy_names_still_load_on_demand(code: str, module: str) -> None:
    assert module in _loaded_after(code)


def test_samsa_broker_command_loads_no_tools_for_people() -> None:
    loaded = _loaded_after(
        "import sys\nsys.argv = ['samsa', 'broker', '--help']\n"
        "from samsa.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert "samsa.cli.topics" not in loaded and "samsa_dev.cli" not in loaded
    assert "hypothesis.strategies" not in loaded  # kio did not load it
