"""The registry's .proto parser and printer (schema_registry/proto_text.py) against protobuf's
own descriptors: what it parses builds in a DescriptorPool, printing and parsing again gives
the same FileDescriptorProto, and what it refuses names the line."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool

from logbroker.schema_registry import proto_text
from logbroker.schema_registry.errors import InvalidSchema

PROTO2 = """
syntax = "proto2";
package shop.v1;
option java_package = "com.shop";
option optimize_for = SPEED;

/* an order */
message Order {
  required int64 id = 1;
  optional string note = 2 [default = "none"];
  repeated Line lines = 3;
  optional Status status = 4 [default = OPEN];
  optional .shop.v1.Order.Line first = 5;
  extensions 100 to max;
  reserved 9, 11 to 13;
  reserved "legacy";
  message Line {
    optional string sku = 1;
    optional sint32 qty = 2 [packed = false];
  }
  enum Status {
    option allow_alias = true;
    OPEN = 0;
    STARTED = 0;
    DONE = 1;
    reserved 5 to 7;
  }
}

service Orders {
  rpc Place(Order) returns (Order) { option deprecated = true; }
  rpc Watch(stream Order) returns (stream Order);
}
"""


def built(fd: descriptor_pb2.FileDescriptorProto):
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return pool


def test_proto2_parses_builds_and_round_trips():
    fd = proto_text.parse(PROTO2)
    proto_text.resolve(fd, [])
    pool = built(fd)
    order = pool.FindMessageTypeByName("shop.v1.Order")
    assert order.fields_by_name["id"].is_required
    assert order.fields_by_name["note"].default_value == "none"
    assert order.fields_by_name["status"].enum_type.full_name == "shop.v1.Order.Status"
    assert order.fields_by_name["first"].message_type.full_name == "shop.v1.Order.Line"
    assert [(r.start, r.end) for r in fd.message_type[0].reserved_range] == [(9, 10), (11, 14)]
    assert fd.options.java_package == "com.shop"
    assert pool.FindServiceByName("shop.v1.Orders").methods_by_name["Watch"].server_streaming
    again = proto_text.parse(proto_text.to_text(fd))
    proto_text.resolve(again, [])
    assert again == fd


def test_proto3_optional_maps_and_scopes():
    text = """syntax = "proto3";
    package a.b;
    message Outer {
      message Inner { int32 x = 1; }
      optional Inner maybe = 1;
      map<int32, Inner> by_id = 2;
      Other other = 3;
    }
    message Other { Outer.Inner inner = 1; }
    """
    fd = proto_text.parse(text)
    proto_text.resolve(fd, [])
    outer = built(fd).FindMessageTypeByName("a.b.Outer")
    maybe = outer.fields_by_name["maybe"]
    assert maybe.containing_oneof is not None and maybe.containing_oneof.name == "_maybe"
    assert outer.fields_by_name["by_id"].message_type.GetOptions().map_entry
    assert fd.message_type[1].field[0].type_name == ".a.b.Outer.Inner"
    again = proto_text.parse(proto_text.to_text(fd))
    proto_text.resolve(again, [])
    assert again == fd


@pytest.mark.parametrize(
    "text, words",
    [
        ('syntax = "proto3";\nmessage M {\n  required int32 x = 1;\n}', "line 3"),
        ('syntax = "proto3";\nmessage M { Nope n = 1; }', "Nope"),
        ('edition = "2023";', "editions"),
        ('syntax = "proto2";\nmessage M {\n  optional group G = 1 { }\n}', "group"),
        ('syntax = "proto3";\nmessage M { int32 x = one; }', "not a number"),
        ('syntax = "proto3";\nmessage M { int32 x = 1', "ends"),
    ],
)
def test_refused_with_the_reason(text, words):
    with pytest.raises(InvalidSchema, match=words):
        fd = proto_text.parse(text)
        proto_text.resolve(fd, [])
