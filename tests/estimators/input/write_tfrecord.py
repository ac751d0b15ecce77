#!/usr/bin/python3
"""Writes a TFRecord file of tf.Example protos as another program would, independently of
troupe's code: the messages are built with Python's protobuf (Debian's python3-protobuf) from a
descriptor made here with TensorFlow's field numbers, the framing and its masked CRC-32C are
written here. tests/estimators/input/tfrecord_source_test.cc reads what this writes.

  write_tfrecord.py OUT N [gzip|zlib|none] [--varlen] [--damage] [--table CSV] [--sequence]
                    [--tokens]

Example i has "x" (2 floats: i, -i), "id" (int64 i), "word" (bytes "w<i mod 3>") and "label"
(int64 i mod 2); with --varlen also "tags" (i mod 3 int64s: 0, 1, ...). --damage overwrites
the length of the record in the middle with garbage. --table writes a learnable table instead,
"a" and "b" (floats, eighths, exact in float32 and in text) and "label" (1 when a + b > 0,
flipped for one example in ten), and the same rows to CSV with a header. --sequence writes
tf.train.SequenceExample protos instead: example i has the context feature "label" (int64) and
the feature list "frames" of 3 + i mod 3 steps, each 2 floats (eighths, exact): step t is
(s * (t + 1) / 8, (i mod 5) / 8) where s is +1 or -1, and the label is 1 when s is +1 (flipped
for one example in ten). --tokens writes Examples of "tokens" (2 to 9 int64s in [0, 6), from
a fixed pseudo-random sequence) and "label" (1 when the last token is larger than the first).
"""
import gzip
import struct
import sys
import zlib

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def example_class(name="Example"):
    f = descriptor_pb2.FileDescriptorProto(name="tf_example_test.proto", package="tensorflow",
                                           syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto

    def message(name, fields, oneof=None):
        m = f.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for number, field_name, kind, label, type_name in fields:
            d = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                d.type_name = type_name
            if oneof:
                d.oneof_index = 0
        return m

    rep, opt = T.LABEL_REPEATED, T.LABEL_OPTIONAL
    message("BytesList", [(1, "value", T.TYPE_BYTES, rep, None)])
    fl = message("FloatList", [(1, "value", T.TYPE_FLOAT, rep, None)])
    fl.field[0].options.packed = True
    il = message("Int64List", [(1, "value", T.TYPE_INT64, rep, None)])
    il.field[0].options.packed = True
    message("Feature", [(1, "bytes_list", T.TYPE_MESSAGE, opt, ".tensorflow.BytesList"),
                        (2, "float_list", T.TYPE_MESSAGE, opt, ".tensorflow.FloatList"),
                        (3, "int64_list", T.TYPE_MESSAGE, opt, ".tensorflow.Int64List")],
            oneof="kind")
    features = message("Features", [(1, "feature", T.TYPE_MESSAGE, rep,
                                      ".tensorflow.Features.FeatureEntry")])
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=T.TYPE_MESSAGE, label=opt,
                    type_name=".tensorflow.Feature")
    message("Example", [(1, "features", T.TYPE_MESSAGE, opt, ".tensorflow.Features")])
    message("FeatureList", [(1, "feature", T.TYPE_MESSAGE, rep, ".tensorflow.Feature")])
    lists = message("FeatureLists", [(1, "feature_list", T.TYPE_MESSAGE, rep,
                                      ".tensorflow.FeatureLists.FeatureListEntry")])
    list_entry = lists.nested_type.add(name="FeatureListEntry")
    list_entry.options.map_entry = True
    list_entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=opt)
    list_entry.field.add(name="value", number=2, type=T.TYPE_MESSAGE, label=opt,
                         type_name=".tensorflow.FeatureList")
    message("SequenceExample", [(1, "context", T.TYPE_MESSAGE, opt, ".tensorflow.Features"),
                                (2, "feature_lists", T.TYPE_MESSAGE, opt,
                                 ".tensorflow.FeatureLists")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    descriptor = pool.FindMessageTypeByName("tensorflow." + name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf 4.22 and later
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def crc32c(data):
    table = crc32c.table
    if table is None:
        table = crc32c.table = []
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


crc32c.table = None


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record):
    length = struct.pack("<Q", len(record))
    return (length + struct.pack("<I", masked(length)) + record +
            struct.pack("<I", masked(record)))


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    compression = sys.argv[3] if len(sys.argv) > 3 else "none"
    varlen, damage = "--varlen" in sys.argv, "--damage" in sys.argv
    table = sys.argv[sys.argv.index("--table") + 1] if "--table" in sys.argv else None
    Example = example_class()
    sequence = "--sequence" in sys.argv
    SequenceExample = example_class("SequenceExample") if sequence else None
    tokens = "--tokens" in sys.argv
    frames, rows = [], []
    state = 12345
    for i in range(n):
        if tokens:
            ex = Example()
            values = []
            for _ in range(9):
                state = (state * 1103515245 + 12345) % 2**31
                values.append(state >> 16)
            values = [v % 6 for v in values[: 2 + values[0] % 8]]
            ex.features.feature["tokens"].int64_list.value.extend(values)
            ex.features.feature["label"].int64_list.value.append(int(values[-1] > values[0]))
            frames.append(frame(ex.SerializeToString()))
            continue
        if sequence:
            ex = SequenceExample()
            sign = 1 if (i * 7) % 4 < 2 else -1
            ex.context.feature["label"].int64_list.value.append(int(sign > 0) ^ int(i % 10 == 3))
            steps = ex.feature_lists.feature_list["frames"].feature
            for t in range(3 + i % 3):
                steps.add().float_list.value.extend([sign * (t + 1) / 8, (i % 5) / 8])
            frames.append(frame(ex.SerializeToString()))
            continue
        ex = Example()
        feature = ex.features.feature
        if table:
            a, b = ((i * 37) % 64 - 32) / 8, ((i * 11 + 5) % 64 - 32) / 8
            label = int(a + b > 0) ^ int(i % 10 == 7)
            feature["a"].float_list.value.append(a)
            feature["b"].float_list.value.append(b)
            feature["label"].int64_list.value.append(label)
            rows.append("%r,%r,%d" % (a, b, label))
        else:
            feature["x"].float_list.value.extend([float(i), float(-i)])
            feature["id"].int64_list.value.append(i)
            feature["word"].bytes_list.value.append(b"w%d" % (i % 3))
            feature["label"].int64_list.value.append(i % 2)
        if varlen:
            feature["tags"].int64_list.value.extend(range(i % 3))
        frames.append(frame(ex.SerializeToString()))
    if table:
        with open(table, "w") as f:
            f.write("a,b,label\n" + "\n".join(rows) + "\n")
    if damage:
        middle = bytearray(frames[n // 2])
        middle[0:8] = b"\xff\x00\xee\x11\xdd\x22\xcc\x33"
        frames[n // 2] = bytes(middle)
    data = b"".join(frames)
    if compression == "gzip":
        data = gzip.compress(data)
    elif compression == "zlib":
        data = zlib.compress(data)
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
