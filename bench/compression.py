"""compression.type's cost: one standalone broker, librdkafka produce (acks=1) of 1 KB records
that compress as log lines do, sent uncompressed, into a 6-partition topic.

The topic stores them as sent (compression.type=producer, the default: the broker never reads
a record) beside each codec the broker then re-encodes every batch with (uncompressed is the
producer's own codec here, so it is stored as sent too).  The broker's CPU per MB produced is
the cost of recompression; the rows come from the same run, a broker each.
"""

from __future__ import annotations

from bench.procs import cpu_seconds
from bench.standalone import create_topic, produce_backlog, samsa_broker
from bench.table import Row

PARTITIONS = 6
SIZE = 1024
BROKER = {"log.segment.bytes": str(256 << 20)}
CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def run(quick: bool = False) -> list[Row]:
    count = 30_000 if quick else 500_000
    rows = []
    for codec in CODECS:
        with samsa_broker(BROKER) as (bootstrap, pid):
            topic = f"bench-{codec}"
            create_topic(bootstrap, topic, PARTITIONS, {"compression.type": codec})
            cpu0 = cpu_seconds(pid)
            res = produce_backlog(bootstrap, topic, count, SIZE, "1", compressible=True)
            cpu1 = cpu_seconds(pid)
        mb = count * SIZE / 1e6
        rows.append(
            Row(
                "produce acks=1",
                f"compression.type={codec}",
                SIZE,
                count / res["seconds"],
                mb / res["seconds"],
                cpu_ms_per_mb=(cpu1 - cpu0) * 1000 / mb,
                note=f"{res['errors']} errors" if res["errors"] else "",
            )
        )
    return rows
