#!/usr/bin/python3
"""Writes a TF Serving warm-up file (assets.extra/tf_serving_warmup_requests) as TF Serving's
users write one: PredictionLog protos, built with Python's protobuf from messages that protoc
(Debian's protobuf-compiler) generates here from schema/*.proto, framed as TFRecord by
write_tfrecord.py's framing (independent of troupe's C++ writer).

  write_warmup.py SCHEMA_DIR OUT [--bad]

Four records for the half_plus_two test model: a predict request of serving_default (x: 4
floats), a classify request of classify_x_to_y (two tf.Example protos with x), a regress request
of "regression" with a context, and a multi-inference request of both. --bad makes the third ask
for a signature the model lacks.
"""
import importlib
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "estimators",
                                "input"))
from write_tfrecord import frame  # noqa: E402


def main():
    schema, out = sys.argv[1], sys.argv[2]
    bad = "--bad" in sys.argv
    generated = tempfile.mkdtemp()
    subprocess.run(["protoc", "-I", schema, "--python_out", generated, "example.proto",
                    "tf_tensor.proto", "model_server_config.proto", "serving_apis.proto"],
                   check=True)
    sys.path.insert(0, generated)
    apis = importlib.import_module("serving_apis_pb2")
    tensors = importlib.import_module("tf_tensor_pb2")

    records = []
    log = apis.PredictionLog()
    request = log.predict_log.request
    request.model_spec.name = "half_plus_two"
    x = request.inputs["x"]
    x.dtype = tensors.DT_FLOAT
    x.tensor_shape.dim.add().size = 4
    x.float_val.extend([1.0, 2.0, 5.0, -1.0])
    records.append(log)

    log = apis.PredictionLog()
    request = log.classify_log.request
    request.model_spec.signature_name = "classify_x_to_y"
    for v in (1.0, 2.0):
        request.input.example_list.examples.add().features.feature["x"].float_list.value.append(v)
    records.append(log)

    log = apis.PredictionLog()
    request = log.regress_log.request
    request.model_spec.signature_name = "no_such_signature" if bad else "regression"
    with_context = request.input.example_list_with_context
    with_context.context.features.feature["x"].float_list.value.append(4.0)
    with_context.examples.add()
    records.append(log)

    log = apis.PredictionLog()
    request = log.multi_inference_log.request
    for signature, method in (("classify_x_to_y", "classify"), ("regression", "regress")):
        task = request.tasks.add()
        task.model_spec.name = "half_plus_two"
        task.model_spec.signature_name = signature
        task.method_name = "tensorflow/serving/" + method
    request.input.example_list.examples.add().features.feature["x"].float_list.value.append(3.0)
    records.append(log)

    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        for r in records:
            f.write(frame(r.SerializeToString()))


if __name__ == "__main__":
    main()
