"""The producer id control manager (Kafka's ProducerIdControlManager): blocks of producer
ids for brokers, as ProducerIdBlock records. Any node proposes one for itself (through
Raft, no need to reach the active controller); the log order decides where each block
starts (`next_producer_id` when it is applied), so no two brokers ever get the same ids.

Pure (see control.py).
"""

from __future__ import annotations

from logbroker.coord.metadata.control import ControllerResult
from logbroker.coord.metadata.metadata_records import encode_record

PRODUCER_ID_BLOCK = 1000  # ids per block (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE)


class ProducerIdControlManager:
    def allocate_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK) -> ControllerResult[None]:
        return ControllerResult([encode_record("ProducerIdBlock", broker_id=broker_id, size=size)], None)
