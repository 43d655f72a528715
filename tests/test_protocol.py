"""logbroker.protocol: public API, golden frames, headers, tagged fields,
errors and zero-copy records.

Golden frames are written out byte by byte from the Kafka protocol rules (see the
comments), not produced by the codec under test.
"""

from __future__ import annotations

import tracemalloc
import uuid

import pytest

from logbroker.protocol import (
    API_NAMES,
    REQUESTS,
    RESPONSES,
    ZERO_UUID,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    encode_response_header,
)

ProduceRequest = REQUESTS[0]
FetchResponse = RESPONSES[1]
MetadataRequest = REQUESTS[3]
ApiVersionsRequest = REQUESTS[18]
ApiVersionsResponse = RESPONSES[18]


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", "").replace("|", ""))


def frame(chunks) -> bytes:
    return b"".join(chunks)


# --------------------------------------------------------------------------- API surface


def test_registry():
    assert set(REQUESTS) == set(RESPONSES) == set(API_NAMES)
    assert len(REQUESTS) == 82  # + CreateDelegationToken .. DescribeDelegationToken (38-41), and from Kafka 4.4's
    # definitions UnregisterBroker (64), StreamsGroupHeartbeat (88), StreamsGroupDescribe (89), the topology
    # description update (93) and UnregisterController (94)
    assert API_NAMES[34] == "AlterReplicaLogDirs"  # JBOD moves
    assert API_NAMES[0] == "Produce" and API_NAMES[18] == "ApiVersions" and API_NAMES[42] == "DeleteGroups"
    assert API_NAMES[55] == "DescribeQuorum" and API_NAMES[63] == "BrokerHeartbeat"  # the cluster's own
    assert API_NAMES[57] == "UpdateFeatures" and API_NAMES[80] == "AddRaftVoter"  # features, dynamic quorum
    assert API_NAMES[29] == "DescribeAcls" and API_NAMES[51] == "AlterUserScramCredentials"  # security
    for key, cls in REQUESTS.items():
        assert cls.api_key == key and cls.name.endswith("Request")
        assert RESPONSES[key].valid_versions == cls.valid_versions
        assert RESPONSES[key].flexible_versions_min == cls.flexible_versions_min


def test_class_attributes():
    assert ProduceRequest.__name__ == "ProduceRequest"
    assert ProduceRequest.api_key == 0
    assert ProduceRequest.name == "ProduceRequest"
    assert ProduceRequest.valid_versions == (3, 13)
    assert ProduceRequest.flexible_versions_min == 9
    assert REQUESTS[17].flexible_versions_min is None  # SaslHandshake: never flexible
    assert ProduceRequest.TopicProduceData.__qualname__ == "ProduceRequest.TopicProduceData"
    assert ProduceRequest.PartitionProduceData.__slots__ == ("index", "records", "unknown_tagged_fields")
    assert "error_code" in FetchResponse.__slots__ and "responses" in FetchResponse.__slots__
    assert "partition_index" in FetchResponse.PartitionData.__slots__


def test_defaults():
    p = FetchResponse.PartitionData()
    assert p.last_stable_offset == -1 and p.log_start_offset == -1 and p.preferred_read_replica == -1
    assert p.records is None and p.aborted_transactions == [] and p.unknown_tagged_fields == {}
    assert p.current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert ProduceRequest().transactional_id is None
    assert ProduceRequest.TopicProduceData().topic_id == ZERO_UUID == uuid.UUID(int=0)
    assert REQUESTS[1]().replica_state.replica_id == -1
    assert REQUESTS[1].FetchPartition().high_watermark == 2**63 - 1
    # fresh mutable defaults per instance
    a, b = ProduceRequest(), ProduceRequest()
    a.topic_data.append(1)
    assert b.topic_data == []
    with pytest.raises(TypeError):
        ProduceRequest(no_such_field=1)


def test_repr_and_eq():
    a = ProduceRequest(acks=1)
    assert a == ProduceRequest(acks=1) and a != ProduceRequest(acks=-1)
    assert "acks=1" in repr(a) and repr(a).startswith("ProduceRequest(")


def test_error_codes():
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1 and ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3 and ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and ErrorCode.INVALID_REQUEST == 42
    assert ErrorCode.TRANSACTION_ABORTABLE == 120 and ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
    assert sorted(int(e) for e in ErrorCode) == list(range(-1, 137))


# --------------------------------------------------------------------------- golden frames

# ApiVersions v0 request: header v1 (api key 18, version 0, correlation 1, client "abc"), empty body.
API_VERSIONS_V0 = h("0000000d | 0012 0000 00000001 0003 616263")
# ApiVersions v3 request: header v2 (client id keeps its int16 length, then an empty tag
# section); body: compact strings "lb" and "1.0", empty tag section.
API_VERSIONS_V3 = h("00000016 | 0012 0003 00000002 0003 616263 00 | 03 6c62 04 312e30 00")
# Metadata v1 request: header v1 with null client id; body: one topic "t1".
METADATA_V1 = h("00000012 | 0003 0001 00000003 ffff | 00000001 0002 7431")
# Produce v3: header v1 (client "c"); body: null transactional id, acks -1, timeout 30000,
# one topic "t", one partition 0 with 5 record bytes (int32 length).
PRODUCE_V3 = h(
    "0000002b | 0000 0003 00000004 0001 63| ffff ffff 00007530 00000001 0001 74 00000001 00000000 00000005 68656c6c6f"
)
# Produce v9: header v2; body compact: null txn id (00), arrays of N+1, records N+1, and an
# empty tag section closing each struct (partition, topic, request).
PRODUCE_V9 = h("00000024 | 0000 0009 00000005 0001 63 00| 00 ffff 00007530 02 0274 02 00000000 06 68656c6c6f 00 00 00")


def test_golden_api_versions_v0():
    header, body = decode_request(API_VERSIONS_V0[4:])
    assert header == RequestHeader(request_api_key=18, request_api_version=0, correlation_id=1, client_id="abc")
    assert body == ApiVersionsRequest()
    assert frame(encode_request(18, 0, 1, "abc", ApiVersionsRequest())) == API_VERSIONS_V0


def test_golden_api_versions_v3():
    header, body = decode_request(API_VERSIONS_V3[4:])
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == (
        18,
        3,
        2,
        "abc",
    )
    assert body == ApiVersionsRequest(client_software_name="lb", client_software_version="1.0")
    assert frame(encode_request(18, 3, 2, "abc", body)) == API_VERSIONS_V3


def test_golden_metadata_v1():
    header, body = decode_request(METADATA_V1[4:])
    assert header.client_id is None and header.correlation_id == 3
    assert body == MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t1")])
    assert frame(encode_request(3, 1, 3, None, body)) == METADATA_V1
    # null topic array (-1) means "all topics" from v1 on
    all_topics = MetadataRequest(topics=None)
    raw = frame(encode_request(3, 1, 3, None, all_topics))
    assert raw == h("0000000e | 0003 0001 00000003 ffff | ffffffff")
    assert decode_request(raw[4:])[1].topics is None


def _produce(records):
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)]
            )
        ],
    )


@pytest.mark.parametrize(("version", "golden", "corr"), [(3, PRODUCE_V3, 4), (9, PRODUCE_V9, 5)])
def test_golden_produce(version, golden, corr):
    header, body = decode_request(golden[4:])
    assert header.request_api_version == version and header.correlation_id == corr and header.client_id == "c"
    assert body == _produce(b"hello")
    records = body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and bytes(records) == b"hello"
    assert frame(encode_request(0, version, corr, "c", _produce(b"hello"))) == golden
    # records may also be given as a memoryview or a list of pieces
    assert frame(encode_request(0, version, corr, "c", _produce(memoryview(b"hello")))) == golden
    assert frame(encode_request(0, version, corr, "c", _produce([b"he", bytearray(b"llo")]))) == golden


def _fetch_response(records, log_start=-1):
    part = FetchResponse.PartitionData(
        partition_index=0,
        error_code=0,
        high_watermark=10,
        last_stable_offset=10,
        log_start_offset=log_start,
        aborted_transactions=None,
        records=records,
    )
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])])


def test_golden_fetch_v4_response():
    chunks = encode_response(1, 4, 7, _fetch_response(b"R" * 12))
    # size | header v0 (correlation id) | throttle 0 | 1 topic "t" | 1 partition: index 0,
    # error 0, hw 10, lso 10, null aborted list, records length 12 | records
    head = h(
        "0000003d | 00000007 | 00000000 00000001 0001 74 00000001 00000000 0000"
        "000000000000000a 000000000000000a ffffffff 0000000c"
    )
    assert chunks == [head + b"R" * 12]
    assert len(chunks[0]) - 4 == 0x3D


def test_golden_fetch_v12_response():
    chunks = encode_response(1, 12, 7, _fetch_response(b"R" * 12, log_start=0))
    # header v1 (correlation id + empty tags); flexible body: throttle, error, session id,
    # compact arrays, log start offset, null aborted list (00), preferred replica -1,
    # records length 12+1; then empty tag sections of partition, topic and response.
    head = h(
        "00000046 | 00000007 00 | 00000000 0000 00000000 02 0274 02 00000000 0000"
        "000000000000000a 000000000000000a 0000000000000000 00 ffffffff 0d"
    )
    assert chunks == [head + b"R" * 12 + b"\x00\x00\x00"]
    corr, back = decode_response(1, 12, chunks[0][4:])
    assert corr == 7 and bytes(back.responses[0].partitions[0].records) == b"R" * 12


def test_records_list_of_pieces():
    raw = FetchResponse.PartitionData(records=[b"xy", bytearray(b"AAAAA"), b"z", memoryview(b"BBB")]).to_bytes(4)
    back, end = FetchResponse.PartitionData.decode(raw, 0, 4)
    assert end == len(raw) and bytes(back.records) == b"xyAAAAAzBBB"
    assert b"\x00\x00\x00\x0bxy" in raw  # the length prefix counts all pieces


@pytest.mark.parametrize("bad", [object(), "text", [b"ok", 5]])
def test_records_of_another_type_is_a_protocol_error(bad):
    with pytest.raises(ProtocolError, match="PartitionData.Records"):
        FetchResponse.PartitionData(records=bad).to_bytes(4)


# --------------------------------------------------------------------------- headers


def test_decode_request_header_versions():
    # flexible ApiVersions v3 -> header v2 with tag section
    hdr, off = decode_request_header(API_VERSIONS_V3[4:])
    assert off == 14
    # unknown API key: only the v1 part is read
    raw = h("03e8 0005 00000009 0002 6869") + b"\xde\xad"
    hdr, off = decode_request_header(raw)
    assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id, hdr.client_id) == (1000, 5, 9, "hi")
    assert off == 12
    # ApiVersions at a version beyond the spec (KIP-511): v1 header, so the broker can reply v0
    hdr, off = decode_request_header(h("0012 007f 00000001 ffff 00 0000"))
    assert hdr.request_api_version == 127 and hdr.client_id is None and off == 10
    # Produce v2 (removed in 4.0, below the spec range) -> v1 header
    hdr, off = decode_request_header(h("0000 0002 00000001 0000"))
    assert off == 10 and hdr.client_id == ""
    # memoryview input works too
    hdr, off = decode_request_header(memoryview(API_VERSIONS_V0)[4:])
    assert hdr.client_id == "abc" and off == 13


def test_decode_request_unsupported_version():
    with pytest.raises(ProtocolError) as info:
        decode_request(h("0000 0002 00000001 0000"))
    assert info.value.error_code == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(ProtocolError) as info:
        decode_request(h("03e8 0000 00000001 0000"))
    assert info.value.error_code == ErrorCode.INVALID_REQUEST


def test_encode_response_header():
    assert encode_response_header(18, 3, 7) == b"\x00\x00\x00\x07"  # ApiVersions always v0
    assert encode_response_header(3, 9, 7) == b"\x00\x00\x00\x07\x00"
    assert encode_response_header(3, 8, 7) == b"\x00\x00\x00\x07"
    assert encode_response_header(999, 0, 7) == b"\x00\x00\x00\x07"
    assert encode_response_header(60, 0, -1) == b"\xff\xff\xff\xff\x00"  # DescribeCluster: flexible from v0


def test_api_versions_response_uses_header_v0_even_when_flexible():
    body = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    raw = frame(encode_response(18, 3, 9, body))
    assert raw[4:8] == b"\x00\x00\x00\x09" and raw[8:10] == b"\x00\x00"  # error code follows directly
    corr, back = decode_response(18, 3, raw[4:])
    assert corr == 9 and back == body


def test_encode_response_rejects_wrong_body():
    with pytest.raises(ProtocolError):
        encode_response(18, 0, 1, FetchResponse())


# --------------------------------------------------------------------------- tagged fields (KIP-482)


def test_unknown_tagged_fields_are_skipped_and_kept():
    # ApiVersions v3 request body followed by 2 unknown tags: 5 -> "abc", 200 -> empty
    body = h("03 6c62 04 312e30 | 02 05 03 616263 c801 00")
    obj, end = ApiVersionsRequest.decode(body, 0, 3)
    assert end == len(body)
    assert obj.client_software_name == "lb" and obj.unknown_tagged_fields == {5: b"abc", 200: b""}
    assert obj.to_bytes(3) == body


def test_unknown_tagged_fields_in_header_and_nested_struct():
    raw = h("0012 0003 00000002 0003 616263 | 01 07 02 aabb") + h("03 6c62 04 312e30 00")
    hdr, off = decode_request_header(raw)
    assert hdr.unknown_tagged_fields == {7: b"\xaa\xbb"} and off == 18
    # nested: Produce v9 partition with tag 9
    body = h("00 ffff 00007530 02 0274 02 00000000 06 68656c6c6f 01 09 01 ff 00 00")
    obj, end = ProduceRequest.decode(body, 0, 9)
    assert end == len(body)
    assert obj.topic_data[0].partition_data[0].unknown_tagged_fields == {9: b"\xff"}
    assert obj.to_bytes(9) == body


def test_known_tagged_fields_decode_and_merge_with_unknown():
    # ApiVersionsResponse v3: error 0, no api keys, throttle 0, then tags:
    # 1 FinalizedFeaturesEpoch int64 = 5, 3 ZkMigrationReady = true, 7 unknown
    body = h("0000 01 00000000 | 03 01 08 0000000000000005 03 01 01 07 02 cafe")
    obj, end = ApiVersionsResponse.decode(body, 0, 3)
    assert end == len(body)
    assert obj.finalized_features_epoch == 5 and obj.zk_migration_ready is True
    assert obj.unknown_tagged_fields == {7: b"\xca\xfe"}
    assert obj.to_bytes(3) == body
    # defaults are not written
    assert ApiVersionsResponse().to_bytes(3) == h("0000 01 00000000 00")


def test_known_tagged_field_with_wrong_size():
    body = h("0000 01 00000000 | 01 01 09 0000000000000005 00")
    with pytest.raises(ProtocolError) as info:
        ApiVersionsResponse.decode(body, 0, 3)
    assert info.value.field == "ApiVersionsResponse.FinalizedFeaturesEpoch"


def test_tagged_struct_fields_roundtrip():
    part = FetchResponse.PartitionData(
        partition_index=1, records=b"x", current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=3)
    )
    raw = part.to_bytes(12)
    back, _ = FetchResponse.PartitionData.decode(raw, 0, 12)
    assert back == part and back.diverging_epoch == FetchResponse.EpochEndOffset()
    # tag 1 (CurrentLeader) present, tags 0 and 2 (defaults) absent
    assert raw.endswith(h("01 01 09 00000002 00000003 00"))


# --------------------------------------------------------------------------- version checks on encode


def test_non_default_value_in_missing_field_is_rejected():
    with pytest.raises(ProtocolError) as info:
        FetchResponse(session_id=5).to_bytes(4)  # SessionId: 7+, not ignorable
    e = info.value
    assert e.error_code == ErrorCode.UNSUPPORTED_VERSION and e.field == "FetchResponse.SessionId" and e.version == 4
    # ignorable fields are dropped silently, as Kafka does
    assert FetchResponse(error_code=3).to_bytes(4) == FetchResponse().to_bytes(4)
    # a non-ignorable tagged struct that v4 cannot carry
    with pytest.raises(ProtocolError):
        FetchResponse.PartitionData(current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=1)).to_bytes(4)


def test_null_in_non_nullable_field_is_rejected_on_encode():
    with pytest.raises(ProtocolError) as info:
        ProduceRequest(topic_data=None).to_bytes(3)
    assert info.value.field == "ProduceRequest.TopicData"
    with pytest.raises(ProtocolError):
        ProduceRequest.TopicProduceData(name=None).to_bytes(3)


def test_bad_values_are_protocol_errors_on_encode():
    with pytest.raises(ProtocolError) as info:
        ProduceRequest(acks=70000).to_bytes(3)
    assert info.value.field == "ProduceRequest.Acks"
    with pytest.raises(ProtocolError):
        ProduceRequest.TopicProduceData(name="x" * 40000).to_bytes(3)
    with pytest.raises(ProtocolError):
        ProduceRequest.TopicProduceData(topic_id=b"\x00" * 16).to_bytes(13)


def test_version_out_of_range():
    for call in (lambda: ProduceRequest().to_bytes(2), lambda: ProduceRequest.decode(b"", 0, 14)):
        with pytest.raises(ProtocolError) as info:
            call()
        assert info.value.error_code == ErrorCode.UNSUPPORTED_VERSION


# --------------------------------------------------------------------------- decode errors


def _err(body: bytes, cls=ProduceRequest, version=3) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        cls.decode(body, 0, version)
    return info.value


def test_error_names_api_version_field_position():
    e = _err(PRODUCE_V3[15:-3])  # body cut inside the records
    assert e.api == "ProduceRequest" and e.version == 3
    assert e.field == "PartitionProduceData.Records" and e.position == 27
    assert str(e).startswith("ProduceRequest v3, field PartitionProduceData.Records, at byte 27:")
    assert e.error_code == ErrorCode.INVALID_REQUEST


def test_negative_lengths():
    assert "invalid length -2" in str(_err(h("fffe")))  # txn id length -2
    assert _err(h("ffff ffff 00007530 00000001 ffff")).reason.endswith("this version does not allow null")
    assert _err(h("ffff ffff 00007530 fffffffe")).field == "ProduceRequest.TopicData"
    assert _err(h("ffff ffff 00007530 00000001 0001 74 00000001 00000000 fffffffe")).field == (
        "PartitionProduceData.Records"
    )


def test_lengths_beyond_buffer():
    assert "needs 5 byte(s) at position 2, but the frame ends at 4" in str(_err(h("0005 6162")))
    assert "but only 1 byte(s) follow" in str(_err(h("ffff ffff 00007530 7fffffff 00")))
    assert "but the frame ends at" in str(_err(h("00 ffff 00007530 02 0274 02 00000000 ff7f"), version=9))


def test_bad_varints():
    e = _err(h("ff ff ff ff ff 01"), version=9)  # 6-byte varint
    assert "varint" in e.reason and e.field == "ProduceRequest.TransactionalId"
    assert "varint" in _err(h("ff ff ff ff 7f"), version=9).reason  # > 32 bits
    assert _err(h("80"), version=9).reason.startswith("needs 1 byte(s)")


def test_invalid_utf8():
    e = _err(h("0002 c328"))
    assert "is not UTF-8" in e.reason and e.field == "ProduceRequest.TransactionalId"


def test_truncated_header():
    for cut in range(len(API_VERSIONS_V3) - 4 - 8):
        with pytest.raises(ProtocolError):
            decode_request_header(API_VERSIONS_V3[4 : 4 + cut])


# --------------------------------------------------------------------------- zero copy


def test_produce_records_are_zero_copy():
    big = bytes(range(256)) * 4096  # 1 MiB
    raw = bytearray(frame(encode_request(0, 9, 1, "c", _produce(big)))[4:])
    tracemalloc.start()
    try:
        _, body = decode_request(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rec = body.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is raw and rec.nbytes == len(big)
    assert peak < 64 * 1024, f"decode allocated {peak} bytes: records were copied"
    assert rec == big
