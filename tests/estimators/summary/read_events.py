#!/usr/bin/python3
"""Reads TensorBoard event files as TensorBoard would, independently of troupe's writer: the
TFRecord framing and its masked CRC-32C checked here, the Event protos decoded by Python's
protobuf (Debian's python3-protobuf) from descriptors made here with TF's field numbers
(event.proto, summary.proto, tensor.proto), images decoded by Pillow.

  read_events.py FILE...

Prints a JSON line per summary value: {"step", "tag", "kind": "scalar" | "histogram" | "image" |
"text"} with "value" (scalar), "num" (histogram), "width", "height", "mode", "colorspace" (image,
as Pillow reads its PNG), "plugin" and "strings" (text).
"""
import io
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from PIL import Image


def classes():
    f = descriptor_pb2.FileDescriptorProto(name="tf_event_test.proto", package="tensorflow",
                                           syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    rep, opt = T.LABEL_REPEATED, T.LABEL_OPTIONAL

    def message(name, fields, parent=None):
        m = (parent.nested_type if parent else f.message_type).add(name=name)
        for number, field_name, kind, label, type_name in fields:
            d = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                d.type_name = type_name
        return m

    message("HistogramProto", [(1, "min", T.TYPE_DOUBLE, opt, None),
                               (2, "max", T.TYPE_DOUBLE, opt, None),
                               (3, "num", T.TYPE_DOUBLE, opt, None),
                               (4, "sum", T.TYPE_DOUBLE, opt, None),
                               (5, "sum_squares", T.TYPE_DOUBLE, opt, None),
                               (6, "bucket_limit", T.TYPE_DOUBLE, rep, None),
                               (7, "bucket", T.TYPE_DOUBLE, rep, None)])
    shape = message("TensorShapeProto", [(2, "dim", T.TYPE_MESSAGE, rep,
                                          ".tensorflow.TensorShapeProto.Dim")])
    message("Dim", [(1, "size", T.TYPE_INT64, opt, None)], shape)
    message("TensorProto", [(1, "dtype", T.TYPE_INT32, opt, None),
                            (2, "tensor_shape", T.TYPE_MESSAGE, opt,
                             ".tensorflow.TensorShapeProto"),
                            (8, "string_val", T.TYPE_BYTES, rep, None)])
    metadata = message("SummaryMetadata", [(1, "plugin_data", T.TYPE_MESSAGE, opt,
                                            ".tensorflow.SummaryMetadata.PluginData")])
    message("PluginData", [(1, "plugin_name", T.TYPE_STRING, opt, None),
                           (2, "content", T.TYPE_BYTES, opt, None)], metadata)
    summary = message("Summary", [(1, "value", T.TYPE_MESSAGE, rep, ".tensorflow.Summary.Value")])
    message("Image", [(1, "height", T.TYPE_INT32, opt, None), (2, "width", T.TYPE_INT32, opt, None),
                      (3, "colorspace", T.TYPE_INT32, opt, None),
                      (4, "encoded_image_string", T.TYPE_BYTES, opt, None)], summary)
    message("Value", [(1, "tag", T.TYPE_STRING, opt, None),
                      (2, "simple_value", T.TYPE_FLOAT, opt, None),
                      (4, "image", T.TYPE_MESSAGE, opt, ".tensorflow.Summary.Image"),
                      (5, "histo", T.TYPE_MESSAGE, opt, ".tensorflow.HistogramProto"),
                      (8, "tensor", T.TYPE_MESSAGE, opt, ".tensorflow.TensorProto"),
                      (9, "metadata", T.TYPE_MESSAGE, opt, ".tensorflow.SummaryMetadata")],
            summary)
    message("Event", [(1, "wall_time", T.TYPE_DOUBLE, opt, None),
                      (2, "step", T.TYPE_INT64, opt, None),
                      (3, "file_version", T.TYPE_STRING, opt, None),
                      (4, "graph_def", T.TYPE_BYTES, opt, None),
                      (5, "summary", T.TYPE_MESSAGE, opt, ".tensorflow.Summary")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    descriptor = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        length_bytes = data[at:at + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert length_crc == masked(length_bytes), "length CRC at %d" % at
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert body_crc == masked(body), "record CRC at %d" % at
        yield body
        at += 16 + length


def main():
    Event = classes()
    for path in sys.argv[1:]:
        for body in records(path):
            e = Event()
            e.ParseFromString(body)
            for v in e.summary.value:
                out = {"step": e.step, "tag": v.tag}
                if v.HasField("image"):
                    picture = Image.open(io.BytesIO(v.image.encoded_image_string))
                    out.update(kind="image", width=picture.width, height=picture.height,
                               mode=picture.mode, colorspace=v.image.colorspace,
                               declared=[v.image.height, v.image.width])
                elif v.HasField("histo"):
                    out.update(kind="histogram", num=v.histo.num)
                elif v.HasField("tensor"):
                    out.update(kind="text", plugin=v.metadata.plugin_data.plugin_name,
                               strings=[s.decode() for s in v.tensor.string_val],
                               dtype=v.tensor.dtype)
                else:
                    out.update(kind="scalar", value=v.simple_value)
                print(json.dumps(out))


if __name__ == "__main__":
    main()
