"""The web console in a real headless Chromium (Selenium), against a live 3-broker cluster:
what a user sees on each page, producing, browsing by offset and by time, a group's lag rising
and falling, an offset reset, and a read-only console that shows no forms and refuses writes.

Screenshots of each page go to $SAMSA_CONSOLE_SCREENSHOTS (default: the test's tmp dir); the
docs' images (docs/images/console-*.png) are made by running this test with it set there."""

from __future__ import annotations

import datetime
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from console_support import Console, StartConsole, http
from kafka_support import wait_until
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from samsa.local_cluster.cluster import LocalCluster

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (make setup installs them)",
)


@pytest.fixture
def console(samsa_cluster: LocalCluster, start_console: StartConsole) -> Console:
    """``console(*options)``: `samsa console` of the 3-broker cluster; its base URL."""
    return lambda *options: start_console(samsa_cluster.bootstrap_servers, *options)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument("--window-size=1280,1000")
    # Debian's driver, given by path: Selenium Manager would try to download one.
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[WebDriver, str], None]:
    folder = Path(os.environ.get("SAMSA_CONSOLE_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)

    def shoot(driver: WebDriver, name: str) -> None:
        path = folder / f"console-{name}.png"
        driver.save_screenshot(str(path))
        print(f"screenshot: {path}")

    return shoot


def _text(driver: WebDriver, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _rows(driver: WebDriver, table_id: str) -> list[list[str]]:
    table = driver.find_element(By.ID, table_id)
    return [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in table.find_elements(By.TAG_NAME, "tr")[1:]
    ]


def _has(driver: WebDriver, element_id: str) -> bool:
    return bool(driver.find_elements(By.ID, element_id))


def _produce_in_form(driver: WebDriver, base: str, topic: str, **fields: str) -> str:
    driver.get(f"{base}/topics/{topic}")
    form = driver.find_element(By.ID, "produce")
    for name, value in fields.items():
        form.find_element(By.NAME, name).send_keys(value)
    form.find_element(By.TAG_NAME, "button").click()
    wait_until(lambda: _has(driver, "produced"), 30, 0.1, "the produce answer")
    return _text(driver, "#produced")


def _total_lag(driver: WebDriver, base: str, group: str) -> int:
    driver.get(f"{base}/groups/{group}")
    return int(_text(driver, "#total-lag"))


def _consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: list[int] = []

    def read() -> bool:
        for msg in consumer.consume(count, timeout=0.5):
            if msg.error() is None:
                seen.append(msg.offset() or 0)
        return len(seen) >= count

    try:
        wait_until(read, 60, 0, f"{count} records consumed by {group}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_console_pages_produce_browse_lag_and_reset(
    samsa_cluster: LocalCluster, console: Console, browser: WebDriver, shots: Callable[..., None]
) -> None:
    driver = browser
    bootstrap = samsa_cluster.bootstrap_servers
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    group = f"billing-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(30)
    base = console("--read-write")

    # Brokers: all three, the controller marked.
    driver.get(base + "/")
    brokers = _rows(driver, "brokers")
    assert len(brokers) == 3
    assert [row[3] for row in brokers].count("controller") == 1
    shots(driver, "brokers")

    # Produce through the form: JSON with headers, and text.
    produced = _produce_in_form(
        driver,
        base,
        topic,
        partition="0",
        key="order-1",
        value='{"id": 1, "items": ["tea", "milk"]}',
        headers="source=web\ntrace=abc",
    )
    assert produced == f"Produced to {topic}-0 at offset 0."
    _produce_in_form(driver, base, topic, partition="0", key="order-2", value="just text")
    # A binary value, an hour ahead, to be found by time alone.
    later = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000) + 3_600_000
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, b"\x00\xffbin", key=b"order-3", partition=0, timestamp=later)
    assert producer.flush(30) == 0

    # The topic: partitions with leader, replicas, ISR and offsets; configs.
    driver.get(f"{base}/topics/{topic}")
    partitions = _rows(driver, "partitions")
    assert [p[0] for p in partitions] == ["0", "1"]
    assert all(len(p[2].split(", ")) == 3 and len(p[3].split(", ")) == 3 for p in partitions)
    assert partitions[0][4:] == ["0", "3"]
    assert any(c[0] == "cleanup.policy" and c[1] == "delete" for c in _rows(driver, "configs"))
    shots(driver, "topic")

    # Browse by offset: keys, headers, JSON pretty-printed, text as is, binary escaped.
    driver.get(f"{base}/topics/{topic}/partitions/0/messages?offset=0")
    records = _rows(driver, "records")
    assert [r[0] for r in records] == ["0", "1", "2"]
    assert [r[2] for r in records] == ["order-1", "order-2", "order-3"]
    assert records[0][3] == "source: web\ntrace: abc"
    assert records[0][4] == '{\n  "id": 1,\n  "items": [\n    "tea",\n    "milk"\n  ]\n}'
    assert records[1][4] == "just text"
    assert records[2][4] == "\\x00\\xffbin"
    shots(driver, "messages")

    # Paged: a page of 2 from offset 0, then the next page.
    driver.get(f"{base}/topics/{topic}/partitions/0/messages?offset=0&limit=2")
    assert [r[0] for r in _rows(driver, "records")] == ["0", "1"]
    driver.find_element(By.ID, "next").click()
    wait_until(lambda: [r[0] for r in _rows(driver, "records")] == ["2"], 30, 0.1, "page 2")

    # Browse by timestamp: the form finds the first record at or after the time.
    at = datetime.datetime.fromtimestamp(later / 1000, datetime.UTC).isoformat(
        timespec="milliseconds"
    )
    form = driver.find_element(By.ID, "by-time")
    form.find_element(By.NAME, "timestamp").send_keys(at)
    form.find_element(By.TAG_NAME, "button").click()
    wait_until(lambda: "timestamp=" in driver.current_url, 30, 0.1, "the by-time page")
    assert [r[0] for r in _rows(driver, "records")] == ["2"]
    shots(driver, "messages-by-time")

    def sampled(index: int) -> int | None:
        history = json.loads(http(f"{base}/groups/{group}/lag.json")[1])
        return history[index]["total"] if history else None

    # A group reads everything: no lag. More records and no reading: the lag rises ...
    _consume_and_commit(bootstrap, topic, group, 3)
    assert _total_lag(driver, base, group) == 0
    wait_until(lambda: sampled(-1) == 0, 30, 0.2, "the lag chart to sample no lag")
    for i in range(5):
        producer.produce(topic, f'{{"n": {i}}}'.encode(), partition=0)
    assert producer.flush(30) == 0
    wait_until(lambda: _total_lag(driver, base, group) == 5, 30, 0.2, "the lag to rise to 5")
    lag_rows = {(r[0], r[1]): r[4] for r in _rows(driver, "lag")}
    assert lag_rows == {(topic, "0"): "5"}
    wait_until(lambda: sampled(-1) == 5, 30, 0.2, "the lag chart to sample the rise")
    # ... and falls once the group reads and commits: the open page's chart redraws itself.
    driver.get(f"{base}/groups/{group}")
    chart = driver.find_element(By.ID, "lag-chart")
    assert chart.get_attribute("data-latest") == "5"
    _consume_and_commit(bootstrap, topic, group, 5)
    wait_until(lambda: chart.get_attribute("data-latest") == "0", 30, 0.2, "the chart to redraw")
    wait_until(lambda: _total_lag(driver, base, group) == 0, 30, 0.2, "the lag to fall to 0")
    wait_until(lambda: sampled(-1) == 0, 30, 0.2, "the lag chart to sample the fall")
    assert 5 in [s["total"] for s in json.loads(http(f"{base}/groups/{group}/lag.json")[1])]
    driver.get(f"{base}/groups/{group}")
    assert _has(driver, "lag-chart")
    assert _text(driver, "#state") == "Empty"
    shots(driver, "group")

    # Reset the (empty) group to the earliest offsets: all 8 records are lag again.
    form = driver.find_element(By.ID, "reset")
    form.find_element(By.NAME, "topic").send_keys(topic)
    form.find_element(By.NAME, "to").send_keys("earliest")
    form.find_element(By.TAG_NAME, "button").click()
    wait_until(lambda: _has(driver, "reset-done"), 30, 0.1, "the reset answer")
    assert _text(driver, "#reset-done") == "Reset 2 partition(s)."
    assert _total_lag(driver, base, group) == 8

    # An active member: its assignment on the group page, and a reset refused (409).
    member = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "billing-app"}
    )
    member.subscribe([topic])
    try:
        wait_until(lambda: member.poll(0.2) is not None or member.assignment(), 60, 0)

        def members() -> list[list[str]]:
            driver.get(f"{base}/groups/{group}")
            return _rows(driver, "members") if _has(driver, "members") else []

        rows = wait_until(lambda: members(), 30, 0.2, "the member on the group page")
        assert [(r[1], r[3]) for r in rows] == [("billing-app", f"{topic}-0, {topic}-1")]
        assert _text(driver, "#state") == "Stable"
        status, body = http(f"{base}/groups/{group}/reset", f"topic={topic}&to=latest".encode())
        assert status == 409 and "stop its consumers before resetting its offsets" in body
    finally:
        member.close()

    # Bad input gets a readable page and the right status, never a traceback.
    status, body = http(f"{base}/topics/no-such-topic")
    assert status == 404 and "topic &#x27;no-such-topic&#x27; does not exist" in body
    status, body = http(f"{base}/topics/{topic}/partitions/0/messages?offset=ten")
    assert status == 400 and "offset must be a whole number" in body
    driver.get(f"{base}/topics/{topic}/partitions/7/messages")
    assert _text(driver, "#error") == f"topic '{topic}' has no partition 7 (it has 2)"
    shots(driver, "error")


def test_read_only_console_shows_no_forms_and_refuses_writes(
    samsa_cluster: LocalCluster, console: Console, browser: WebDriver, shots: Callable[..., None]
) -> None:
    topic = f"audit-{uuid.uuid4().hex[:6]}"
    group = f"auditors-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": samsa_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": samsa_cluster.bootstrap_servers})
    producer.produce(topic, b"x")
    assert producer.flush(30) == 0
    _consume_and_commit(samsa_cluster.bootstrap_servers, topic, group, 1)
    base = console()  # read-only is the default

    driver = browser
    driver.get(f"{base}/topics/{topic}")
    assert _text(driver, "#mode") == "read-only"
    assert _rows(driver, "partitions")
    assert not _has(driver, "produce")
    shots(driver, "read-only")
    driver.get(f"{base}/groups/{group}")
    assert _rows(driver, "lag")
    assert not _has(driver, "reset")

    status, body = http(f"{base}/topics/{topic}/produce", b"value=sneaky")
    assert status == 403 and "The console is read-only" in body
    status, body = http(
        f"{base}/groups/{group}/reset", b"topic=" + topic.encode() + b"&to=earliest"
    )
    assert status == 403 and "Start it with --read-write" in body
    driver.get(f"{base}/topics/{topic}/partitions/0/messages")
    assert [r[4] for r in _rows(driver, "records")] == ["x"]
