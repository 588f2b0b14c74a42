"""Building Caravan's messages from plain Python values.

A job (or any message) may be given as the generated message or as a dict in
the message's own shape: field names as in the protos (`task_groups`) or in
their JSON form (`taskGroups`), nested dicts and lists for nested messages,
any JSON value for `google.protobuf.Struct` fields (a task's `config`). Enum
fields accept their full name (`JOB_TYPE_BATCH`), their number, or the short
name in any case (`"batch"`).
"""

import base64

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from caravan.v1 import job_pb2

__all__ = ["to_message", "job", "enum_value"]

_STRUCT_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}


def enum_value(enum_descriptor, value):
    """The number of `value` (name, short name or number) in an enum."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise TypeError(f"{enum_descriptor.name}: expected a name or number, got {value!r}")
    by_name = enum_descriptor.values_by_name
    if value in by_name:
        return by_name[value].number
    wanted = value.strip().upper().replace("-", "_")
    for name, descriptor in by_name.items():
        if name == wanted or name.endswith("_" + wanted):
            if not name.endswith("_UNSPECIFIED") or wanted == "UNSPECIFIED":
                return descriptor.number
    names = ", ".join(by_name)
    raise ValueError(f"{enum_descriptor.name}: {value!r} is none of {names}")


def _field(descriptor, key):
    return descriptor.fields_by_name.get(key) or next(
        (f for f in descriptor.fields if f.json_name == key), None
    )


def _normalize(descriptor, data):
    """`data` with enum names completed, for json_format.ParseDict."""
    out = {}
    for key, value in data.items():
        field = _field(descriptor, key)
        if field is None or value is None:
            out[key] = value
            continue
        out[key] = _normalize_value(field, value)
    return out


def _is_repeated(field):
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 6.31
    if repeated is None:
        return field.label == FieldDescriptor.LABEL_REPEATED
    return repeated


def _is_map(field):
    return (
        field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type.GetOptions().map_entry
    )


def _normalize_value(field, value):
    if _is_map(field):
        value_field = field.message_type.fields_by_name["value"]
        return {k: _normalize_value(value_field, v) for k, v in value.items()}
    if _is_repeated(field) and isinstance(value, (list, tuple)):
        return [_normalize_scalar(field, v) for v in value]
    return _normalize_scalar(field, value)


def _normalize_scalar(field, value):
    if field.type == FieldDescriptor.TYPE_ENUM:
        return enum_value(field.enum_type, value)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if isinstance(value, Message) or field.message_type.full_name in _STRUCT_TYPES:
            if isinstance(value, Message):
                return json_format.MessageToDict(value, preserving_proto_field_name=True)
            return value
        if isinstance(value, dict):
            return _normalize(field.message_type, value)
    if field.type == FieldDescriptor.TYPE_BYTES and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    return value


def to_message(cls, value):
    """`value` (a `cls` message or a dict of its fields) as a `cls` message."""
    if isinstance(value, cls):
        return value
    if isinstance(value, Message):
        raise TypeError(f"expected {cls.DESCRIPTOR.full_name}, got {value.DESCRIPTOR.full_name}")
    if not isinstance(value, dict):
        raise TypeError(f"expected {cls.DESCRIPTOR.full_name} or a dict, got {type(value).__name__}")
    message = cls()
    json_format.ParseDict(_normalize(cls.DESCRIPTOR, value), message)
    return message


def job(value, namespace=None):
    """A Job message from a Job or a dict; `namespace` fills an unset one."""
    message = to_message(job_pb2.Job, value)
    if namespace and not message.namespace:
        copy = job_pb2.Job()
        copy.CopyFrom(message)
        message = copy
        message.namespace = namespace
    return message
