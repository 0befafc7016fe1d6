"""TopicDeletionManager: topics marked under /admin/delete_topics, deleted.

Every replica of the topic is told to stop and delete its log (StopReplica), every live broker
learns the partitions are being deleted (UpdateMetadata with the LEADER_DURING_DELETE leader),
then the topic's znodes go.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from samsa.controller.partition_state_machine import PartitionStateMachine
from samsa.metadata.model import PartitionState, TopicPartition
from samsa.metadata.zk_client import KafkaZkClient
from samsa.metadata.zk_data import DELETE_TOPICS, LEADER_DURING_DELETE, TopicZnode, topic_path

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(
        self,
        zk: KafkaZkClient,
        partitions: PartitionStateMachine,
        forget_topic: Callable[[str], None],
    ) -> None:
        self.zk = zk
        self.partitions = partitions
        self.ctx = partitions.ctx
        self.forget_topic = forget_topic

    async def process(self) -> None:
        ctx = self.ctx
        for name in await self.zk.topics_to_delete():
            topic = ctx.topics.get(name)
            if topic is None:
                topic = await self.zk.topic(name)
            if topic is None:
                await self.zk.delete(f"{DELETE_TOPICS}/{name}")
                continue
            ctx.topics_to_delete.add(name)
            self._stop_replicas(name, topic)
            await self.zk.delete(topic_path(name), recursive=True)
            await self.zk.delete(f"/config/topics/{name}")
            await self.zk.delete(f"{DELETE_TOPICS}/{name}")
            self.forget_topic(name)
            ctx.topics_to_delete.discard(name)
            log.info("deleted topic %s", name)

    def _stop_replicas(self, name: str, topic: TopicZnode) -> None:
        ctx = self.ctx
        batch = self.partitions.batch()
        replicas = {r for rs in topic.assignment.values() for r in rs}
        deleted_states = []
        for p in topic.assignment:
            tp = TopicPartition(name, p)
            s = ctx.states.get(tp)
            batch.add_stop_replica(
                [r for r in replicas if r in ctx.live_brokers],
                tp,
                s.leader_epoch if s else -1,
                True,
            )
            deleted_states.append(
                (
                    PartitionState(
                        name,
                        p,
                        LEADER_DURING_DELETE,
                        s.leader_epoch if s else 0,
                        tuple(topic.assignment[p]),
                        s.isr if s else (),
                    ),
                    topic.topic_id,
                )
            )
        batch.add_update_metadata(ctx.live_ids, deleted_states)
        self.partitions.send(batch)
