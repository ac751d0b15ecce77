#!/usr/bin/env python3
"""A TF Serving user's gRPC client of troupe serve, from stubs generated here from schema/*.proto
with Debian's grpc_tools (python3-grpc-tools) and called with Debian's grpcio: each method of
PredictionService and ModelService, and the errors a client meets. Prints one JSON object of what
came back, which the C++ test checks.

usage: grpc_client.py SCHEMA_DIR OUT_DIR PORT [--token TOKEN] [--tls CERT_PEM] [--reload BASE]
With --token or --tls, one call with and one without them. With --reload, a series of
HandleReloadConfigRequest calls over the exports under BASE, each followed by the calls that show
what is served.
"""
import argparse
import json
import os
import subprocess
import sys


def generate(schema, out):
    os.makedirs(out, exist_ok=True)
    protos = ["example.proto", "tf_tensor.proto", "model_server_config.proto",
              "serving_apis.proto", "serving_service.proto"]
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + schema, "-I/usr/include",
                    "--python_out=" + out, "--grpc_python_out=" + out] +
                   [schema + "/" + p for p in protos], check=True)
    sys.path.insert(0, out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("schema")
    parser.add_argument("out")
    parser.add_argument("port")
    parser.add_argument("--token")
    parser.add_argument("--tls")
    parser.add_argument("--reload")
    args = parser.parse_args()
    token = args.token
    generate(args.schema, args.out)
    import grpc
    import serving_apis_pb2 as apis
    import serving_service_pb2_grpc as services
    import tf_tensor_pb2

    address = "127.0.0.1:" + args.port
    if args.tls:
        with open(args.tls, "rb") as f:
            trusted = grpc.ssl_channel_credentials(root_certificates=f.read())
        channel = grpc.secure_channel(address, trusted)
    else:
        channel = grpc.insecure_channel(address)
    predictions = services.PredictionServiceStub(channel)
    models = services.ModelServiceStub(channel)
    metadata = [("authorization", "Bearer " + token)] if token else None
    result = {}

    def code_of(call):
        try:
            call()
            return "OK"
        except grpc.RpcError as e:
            return e.code().name + ": " + e.details()

    def floats(values):
        t = tf_tensor_pb2.TensorProto(dtype=tf_tensor_pb2.DT_FLOAT)
        t.tensor_shape.dim.add(size=len(values))
        t.float_val.extend(values)
        return t

    def predict_request(name, values, version=None, label=None, signature=""):
        r = apis.PredictRequest()
        r.model_spec.name = name
        r.model_spec.signature_name = signature
        if version is not None:
            r.model_spec.version.value = version
        if label is not None:
            r.model_spec.version_label = label
        r.inputs["x"].CopyFrom(floats(values))
        return r

    if args.tls:
        plain = services.PredictionServiceStub(grpc.insecure_channel(address))
        result["plain"] = code_of(
            lambda: plain.Predict(predict_request("hp2", [1.0]), timeout=5))
        answer = predictions.Predict(predict_request("hp2", [2.0]), timeout=10)
        result["over_tls"] = list(answer.outputs["y"].float_val)
        print(json.dumps(result))
        return

    if args.reload:
        def reload(entries):
            request = apis.ReloadConfigRequest()
            if entries is not None:
                listed = request.config.model_config_list
                listed.SetInParent()
                for name, path in entries:
                    config = listed.config.add(name=name, base_path=args.reload + "/" + path,
                                               model_platform="tensorflow")
                    config.model_version_policy.all.SetInParent()
            try:
                answer = models.HandleReloadConfigRequest(request, timeout=30)
                return "OK " + str(answer.status.error_code)
            except grpc.RpcError as e:
                return e.code().name + ": " + e.details()

        def served(name):
            try:
                return list(predictions.Predict(predict_request(name, [1.0]), timeout=10)
                            .outputs["y"].float_val)
            except grpc.RpcError as e:
                return e.code().name

        steps = []
        for entries in ([("hp2", "hp2"), ("hp3", "hp3")], [("hp3", "hp3")],
                        [("hp3", "hp3"), ("idle", "empty")], [("a/b", "hp2")], None):
            steps.append({"reload": reload(entries), "hp2": served("hp2"), "hp3": served("hp3")})
        result["steps"] = steps
        print(json.dumps(result))
        return

    if token:
        result["without_token"] = code_of(
            lambda: predictions.Predict(predict_request("hp2", [1.0]), timeout=10))
        answer = predictions.Predict(predict_request("hp2", [2.0]), timeout=10,
                                     metadata=metadata)
        result["with_token"] = list(answer.outputs["y"].float_val)
        print(json.dumps(result))
        return

    answer = predictions.Predict(predict_request("hp2", [1.0, 2.0, 4.0]), timeout=10)
    y = answer.outputs["y"]
    result["predict"] = {
        "y": list(y.float_val), "dtype": y.dtype, "shape": [d.size for d in y.tensor_shape.dim],
        "version": answer.model_spec.version.value,
        "signature": answer.model_spec.signature_name}
    result["predict_v1"] = list(
        predictions.Predict(predict_request("hp2", [2.0], version=1), timeout=10)
        .outputs["y"].float_val)
    result["predict_stable"] = list(
        predictions.Predict(predict_request("hp2", [2.0], label="stable"), timeout=10)
        .outputs["y"].float_val)
    filtered = predict_request("hp2", [2.0], signature="two_outputs")
    filtered.output_filter.append("x_again")
    result["predict_filtered"] = sorted(predictions.Predict(filtered, timeout=10).outputs.keys())

    def with_examples(request, xs, context_x=None):
        if context_x is None:
            for x in xs:
                request.input.example_list.examples.add().features.feature["x"].float_list.value \
                    .append(x)
        else:
            lists = request.input.example_list_with_context
            for _ in xs:
                lists.examples.add()
            lists.context.features.feature["x"].float_list.value.append(context_x)
        return request

    classify = with_examples(apis.ClassificationRequest(), [2.0, 6.0])
    classify.model_spec.name = "hp2"
    classify.model_spec.signature_name = "classify_x_to_y"
    answer = predictions.Classify(classify, timeout=10)
    result["classify"] = [[[c.label, c.score] for c in cs.classes]
                          for cs in answer.result.classifications]
    regress = with_examples(apis.RegressionRequest(), [2.0, 4.0])
    regress.model_spec.name = "hp2"
    answer = predictions.Regress(regress, timeout=10)
    result["regress"] = [r.value for r in answer.result.regressions]
    result["regress_signature"] = answer.model_spec.signature_name
    context = with_examples(apis.RegressionRequest(), [0, 0, 0], context_x=8.0)
    context.model_spec.name = "hp2"
    result["regress_context"] = [r.value for r in predictions.Regress(context, timeout=10)
                                 .result.regressions]

    def multi_inference(tasks, xs=(2.0, 6.0), version=None):
        r = apis.MultiInferenceRequest()
        for name, signature, method in tasks:
            task = r.tasks.add(method_name="tensorflow/serving/" + method)
            task.model_spec.name = name
            task.model_spec.signature_name = signature
        if version is not None:
            r.tasks[0].model_spec.version.value = version
        for x in xs:
            r.input.example_list.examples.add().features.feature["x"].float_list.value.append(x)
        return r

    both = [("hp2", "classify_x_to_y", "classify"), ("hp2", "regression", "regress")]
    for key, version in (("multi", None), ("multi_v1", 1)):
        answer = predictions.MultiInference(multi_inference(both, version=version), timeout=10)
        result[key] = [
            {"signature": r.model_spec.signature_name, "version": r.model_spec.version.value,
             "kind": r.WhichOneof("result"),
             "classes": [[[c.label, c.score] for c in cs.classes]
                         for cs in r.classification_result.classifications],
             "values": [v.value for v in r.regression_result.regressions]}
            for r in answer.results]

    request = apis.GetModelMetadataRequest()
    request.model_spec.name = "hp2"
    request.metadata_field.append("signature_def")
    answer = predictions.GetModelMetadata(request, timeout=10)
    defs = apis.SignatureDefMap()
    answer.metadata["signature_def"].Unpack(defs)
    default = defs.signature_def["serving_default"]
    result["metadata"] = {
        "signatures": sorted(defs.signature_def.keys()),
        "method": default.method_name,
        "x_dtype": default.inputs["x"].dtype,
        "x_shape": [d.size for d in default.inputs["x"].tensor_shape.dim],
        "version": answer.model_spec.version.value}

    request = apis.GetModelStatusRequest()
    request.model_spec.name = "hp2"
    result["status"] = [
        {"version": s.version, "state": apis.ModelVersionStatus.State.Name(s.state),
         "error_code": s.status.error_code}
        for s in models.GetModelStatus(request, timeout=10).model_version_status]

    def bad_predict():
        r = predict_request("hp2", [1.0])
        r.inputs["x"].dtype = tf_tensor_pb2.DT_STRING
        r.inputs["x"].ClearField("float_val")
        r.inputs["x"].string_val.append(b"one")
        return r

    def shape_lies():
        r = predict_request("hp2", [1.0, 2.0])
        r.inputs["x"].tensor_shape.dim[0].size = 5
        return r

    def huge_fill():
        r = predict_request("hp2", [1.0])
        r.inputs["x"].tensor_shape.dim[0].size = 1 << 30  # 4 GiB from one value
        return r

    def no_metadata_field():
        r = apis.GetModelMetadataRequest()
        r.model_spec.name = "hp2"
        return r

    def classify_named_inputs():
        r = with_examples(apis.ClassificationRequest(), [1.0])
        r.model_spec.name = "hp2"
        r.model_spec.signature_name = "classify_named"
        return r

    result["errors"] = {
        "unknown_model": code_of(
            lambda: predictions.Predict(predict_request("nope", [1.0]), timeout=10)),
        "unknown_version": code_of(
            lambda: predictions.Predict(predict_request("hp2", [1.0], version=7), timeout=10)),
        "unknown_label": code_of(
            lambda: predictions.Predict(predict_request("hp2", [1.0], label="gone"), timeout=10)),
        "wrong_dtype": code_of(lambda: predictions.Predict(bad_predict(), timeout=10)),
        "shape_lies": code_of(lambda: predictions.Predict(shape_lies(), timeout=10)),
        "huge_fill": code_of(lambda: predictions.Predict(huge_fill(), timeout=10)),
        "unknown_signature": code_of(lambda: predictions.Predict(
            predict_request("hp2", [1.0], signature="nope"), timeout=10)),
        "no_metadata_field": code_of(
            lambda: predictions.GetModelMetadata(no_metadata_field(), timeout=10)),
        "classify_named_inputs": code_of(
            lambda: predictions.Classify(classify_named_inputs(), timeout=10)),
        "no_examples": code_of(lambda: predictions.Regress(
            apis.RegressionRequest(model_spec=apis.ModelSpec(name="hp2")), timeout=10)),
        "multi_no_tasks": code_of(
            lambda: predictions.MultiInference(multi_inference([]), timeout=10)),
        "multi_two_models": code_of(lambda: predictions.MultiInference(multi_inference(
            [both[0], ("other", "regression", "regress")]), timeout=10)),
        "multi_twice": code_of(lambda: predictions.MultiInference(
            multi_inference([both[1], both[1]]), timeout=10)),
        "multi_method": code_of(lambda: predictions.MultiInference(
            multi_inference([("hp2", "regression", "predict")]), timeout=10)),
        "multi_wrong_method": code_of(lambda: predictions.MultiInference(
            multi_inference([("hp2", "classify_x_to_y", "regress")]), timeout=10)),
        "multi_named_inputs": code_of(lambda: predictions.MultiInference(
            multi_inference([("hp2", "classify_named", "classify")]), timeout=10)),
        "multi_no_examples": code_of(lambda: predictions.MultiInference(
            multi_inference(both, xs=()), timeout=10)),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
