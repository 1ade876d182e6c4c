"""The hub's Raw* forwarding messages (proto/koord/v1/metrichub.proto) stay wire twins of the messages
clients decode: same field names, numbers and cardinality, same types except an embedded message held as
bytes."""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from proto.koord.v1 import metrichub_pb2 as pb


def _twin(raw: Descriptor, real: Descriptor) -> None:
    assert [(f.name, f.number, f.is_repeated) for f in raw.fields] == [
        (f.name, f.number, f.is_repeated) for f in real.fields
    ]
    for rf, f in zip(raw.fields, real.fields, strict=True):
        if f.type == FieldDescriptor.TYPE_MESSAGE and rf.type == FieldDescriptor.TYPE_BYTES:
            continue  # both length-delimited: the bytes hold the serialised message
        assert (rf.type, rf.message_type and rf.message_type.full_name, rf.enum_type) == (
            f.type,
            f.message_type and f.message_type.full_name,
            f.enum_type,
        )


def test_the_raw_messages_are_wire_twins_of_the_client_messages() -> None:
    for raw, real in (
        (pb.RawNodeMetricItem, pb.NodeMetricItem),
        (pb.RawNodeMetricEvent, pb.NodeMetricEvent),
        (pb.RawNodeMetricEventBatch, pb.NodeMetricEventBatch),
        (pb.RawListResponse, pb.ListResponse),
    ):
        _twin(raw.DESCRIPTOR, real.DESCRIPTOR)
    assert {n for n in pb.DESCRIPTOR.message_types_by_name if n.startswith("Raw")} == {
        "RawNodeMetricItem",
        "RawNodeMetricEvent",
        "RawNodeMetricEventBatch",
        "RawListResponse",
    }
