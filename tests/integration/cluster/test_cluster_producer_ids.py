"""Producer ids in a ZooKeeper cluster: each broker claims its blocks in ``/latest_producer_id_block``,
so no two brokers -- and no restart -- ever hand out the same id."""

from __future__ import annotations

import json

from support.cluster import Cluster
from support.raw_client import RawClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode


def producer_id(broker) -> int:
    with RawClient(broker.data_port) as client:
        body = client.request(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                                      producer_id=-1, producer_epoch=-1), 4)
    assert (body.error_code, body.producer_epoch) == (ErrorCode.NONE, 0)
    return body.producer_id


def test_brokers_claim_disjoint_blocks_in_zookeeper(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, size=2).start()
    try:
        first = {b: producer_id(cluster.broker(b)) for b in (1, 2)}
        assert first[1] // 1000 != first[2] // 1000, f"both brokers hand out ids of one block: {first}"
        with cluster.zk() as zk:
            latest = json.loads(zk.get("/latest_producer_id_block")[0])
        assert latest["version"] == 1 and int(latest["block_end"]) - int(latest["block_start"]) == 999
        assert int(latest["block_end"]) == max(first.values()) // 1000 * 1000 + 999
        assert producer_id(cluster.broker(1)) == first[1] + 1
        cluster.broker(1).restart()
        again = producer_id(cluster.broker(1))
        assert again > int(latest["block_end"]), "a restarted broker claims a new block"
    finally:
        cluster.stop()
