"""Micro-benchmarks of the sans-IO codec: microseconds per operation.

Run with ``make bench-codec`` (or ``.venv/bin/python bench/codec.py``). The aim
is under 20 us per operation, apart from copies proportional to the
payload; the "copied" column says how many payload bytes each operation copies.

Each operation is timed in loops of N calls (``timeit.autorange``: at least
0.2 s), best of 3; "CPU us/op" is this process's CPU time in that best
loop (below the wall time when other work took the cores), and the N-scaling
check times loops of N/2 calls too: the ratio should be about 2, and an
operation whose loop time does not scale with N is flagged
(``bench/common.py``).
"""

from __future__ import annotations

import os
import timeit
import uuid
from dataclasses import replace

from bench.common import ClientCpu, Scaling, ratio_cell, report_scaling, scaling_check
from twisted_kafka.protocol import codec, metadata_response
from twisted_kafka.protocol.error_counts import error_counts
from twisted_kafka.protocol.fetch_response import (
    FetchableTopicResponse,
    FetchResponseData,
    PartitionData,
)
from twisted_kafka.protocol.header import RequestHeader, parse_request_header
from twisted_kafka.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from twisted_kafka.protocol.registry import REGISTRY

KIB = 1024
MIB = 1024 * KIB


def _request_frame(request, version: int, client_id: str = "bench-client") -> bytes:
    return b"".join(codec.encode_request(request, version, correlation_id=42, client_id=client_id))[4:]


def produce_frame(version: int, record_bytes: int) -> bytes:
    topic = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        version=version, transactional_id=None, acks=-1, timeout_ms=30000,
        topic_data=[topic(name="bench-topic", partition_data=[
            topic.PartitionProduceData(index=0, records=os.urandom(record_bytes))])])
    return _request_frame(request, version)


def metadata_topics(version: int, count: int, partitions: int = 3):
    topic = metadata_response.TopicMetadata
    part = topic.MetadataResponsePartition
    return [
        topic(version=version, error_code=0, name=f"topic-{i:04d}", topic_id=uuid.uuid4(), is_internal=False,
              partitions=[part(version=version, error_code=0, partition_index=j, leader_id=1, leader_epoch=0,
                               replica_nodes=[1], isr_nodes=[1], offline_replicas=[])
                          for j in range(partitions)],
              authorized_operations=None)
        for i in range(count)
    ]


def fetch_data(partitions: int, record_bytes: int, as_memoryview: bool) -> FetchResponseData:
    payload = os.urandom(record_bytes)
    records = memoryview(payload) if as_memoryview else payload
    return FetchResponseData(responses=[FetchableTopicResponse(topic="bench-topic", partitions=[
        PartitionData(partition_index=i, high_watermark=1000, last_stable_offset=1000, log_start_offset=0,
                      records=records)
        for i in range(partitions)])])


class Measured(float):
    """Best-of-3 wall microseconds per call, with the CPU microseconds per call and the N-scaling check."""

    cpu_us: float
    scaling: Scaling


def measure(fn) -> Measured:
    """Best-of-3 microseconds per call; each round runs at least 0.2 s (``timeit.autorange``)."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    rounds = []                              # (wall seconds, CPU seconds) of each round
    for _ in range(3):
        cpu = ClientCpu().start()
        wall = timer.timeit(number)
        rounds.append((wall, cpu.stop()))
    full, cpu_seconds = min(rounds)
    half = min(timer.repeat(repeat=3, number=max(1, number // 2)))
    result = Measured(full / number * 1e6)
    result.cpu_us = cpu_seconds / number * 1e6
    result.scaling = scaling_check(f"{number // 2} vs {number} calls", half, full, min_seconds=0.05)
    return result


def main() -> None:
    rows = []

    frame = produce_frame(9, 16 * KIB)
    rows.append(("header + ProduceRequest v9 decode (1 partition, 16 KiB)",
                 measure(lambda: codec.decode_request_body(parse_request_header(frame), frame)), "16 KiB"))
    frame3 = produce_frame(3, 16 * KIB)
    rows.append(("header + ProduceRequest v3 decode (1 partition, 16 KiB)",
                 measure(lambda: codec.decode_request_body(parse_request_header(frame3), frame3)), "16 KiB"))
    rows.append(("request header parse only (v2)", measure(lambda: parse_request_header(frame)), "-"))

    md_req = _request_frame(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=True,
                                            include_topic_authorized_operations=False), 12)
    rows.append(("header + MetadataRequest v12 decode",
                 measure(lambda: codec.decode_request_body(parse_request_header(md_req), md_req)), "-"))

    av_req = _request_frame(ApiVersionsRequest(version=3, client_software_name="bench",
                                               client_software_version="1.0"), 3)
    rows.append(("header + ApiVersionsRequest v3 decode",
                 measure(lambda: codec.decode_request_body(parse_request_header(av_req), av_req)), "-"))

    header = RequestHeader(api_key=0, api_version=9, correlation_id=1, client_id="c", header_size=0)
    produce_resp = ProduceResponse(version=9, throttle_time_ms=0, responses=[
        ProduceResponse.TopicProduceResponse(name="bench-topic", partition_responses=[
            ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                index=0, error_code=0, base_offset=1234, log_append_time_ms=-1, log_start_offset=0,
                record_errors=[], error_message=None)])])
    rows.append(("ProduceResponse v9 encode (1 partition)",
                 measure(lambda: codec.encode_response(header, produce_resp)), "-"))

    rows.append(("ProduceResponse v9 error counts, ErrorsPerSec (1 partition)",
                 measure(lambda: error_counts(produce_resp, 9)), "-"))
    wide_produce = ProduceResponse(version=9, throttle_time_ms=0, responses=[
        ProduceResponse.TopicProduceResponse(name="bench-topic", partition_responses=[
            ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                index=i, error_code=0, base_offset=1234, log_append_time_ms=-1, log_start_offset=0,
                record_errors=[], error_message=None) for i in range(100)])])
    rows.append(("ProduceResponse v9 encode (100 partitions)",
                 measure(lambda: codec.encode_response(header, wide_produce)), "-"))
    rows.append(("ProduceResponse v9 error counts, ErrorsPerSec (100 partitions)",
                 measure(lambda: error_counts(wide_produce, 9)), "-"))
    wide_fetch = fetch_data(100, 0, False)
    rows.append(("FetchResponse error counts, ErrorsPerSec (100 partitions)",
                 measure(lambda: error_counts(wide_fetch, 12)), "-"))

    served = REGISTRY.keys()
    av_header = RequestHeader(api_key=18, api_version=3, correlation_id=1, client_id="c")
    av_body = codec.api_versions_response(served, 3)
    rows.append(("ApiVersionsResponse v3 encode (full table, kafka-python encoder)",
                 measure(lambda: codec.encode_response(av_header, av_body)), "-"))
    rows.append(("ApiVersionsResponse v3 encode (full table, cached body)",
                 measure(lambda: codec.encode_api_versions_response(av_header, served)), "-"))

    for version in (4, 12):
        md_header = RequestHeader(api_key=3, api_version=version, correlation_id=1, client_id="c")
        topics = metadata_topics(version, 100)
        brokers = [(1, "127.0.0.1", 9092, None)]

        def cold(version=version, topics=topics, md_header=md_header, brokers=brokers):
            fragments = [metadata_response.encode_topic_fragment(version, t) for t in topics]
            return metadata_response.assemble(md_header, version, 0, brokers, "cluster", 1, fragments)

        fragments = [metadata_response.encode_topic_fragment(version, t) for t in topics]

        def warm(version=version, fragments=fragments, md_header=md_header, brokers=brokers):
            return metadata_response.assemble(md_header, version, 0, brokers, "cluster", 1, fragments)

        full = MetadataResponse(version=version, throttle_time_ms=0, brokers=brokers, cluster_id="cluster",
                                controller_id=1, topics=topics)
        rows.append((f"MetadataResponse v{version} encode, 100 topics, cold (fragments encoded)", measure(cold), "-"))
        rows.append((f"MetadataResponse v{version} encode, 100 topics, warm (cached fragments)", measure(warm), "-"))
        rows.append((f"MetadataResponse v{version} encode, 100 topics, kafka-python full encoder",
                     measure(lambda full=full, md_header=md_header: codec.encode_response(md_header, full)), "-"))

    for version in (11, 12):
        fetch_header = RequestHeader(api_key=1, api_version=version, correlation_id=1, client_id="c")
        for as_view in (False, True):
            data = fetch_data(4, MIB, as_view)
            kind = "memoryview" if as_view else "bytes"
            rows.append((f"FetchResponse v{version} encode, 4 x 1 MiB records ({kind}, not copied)",
                         measure(lambda data=data, fh=fetch_header: codec.encode_response(fh, data)), "0"))

    width = max(len(name) for name, _, _ in rows)
    print(f"{'operation':<{width}}  {'us/op':>8}  {'CPU us/op':>9}  {'N-scaling':>9}  copied")
    print(f"{'-' * width}  {'-' * 8}  {'-' * 9}  {'-' * 9}  ------")
    for name, micros, copied in rows:
        print(f"{name:<{width}}  {micros:8.2f}  {micros.cpu_us:9.2f}  {ratio_cell(micros.scaling):>9}  {copied}")
    print()
    print("CPU us/op: this process's CPU time per call (all of it is the codec: there is no other client).")
    report_scaling([replace(micros.scaling, what=f"{name}, {micros.scaling.what}") for name, micros, _ in rows])


if __name__ == "__main__":
    main()
