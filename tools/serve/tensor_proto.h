// TensorFlow's TensorProto (schema/tf_tensor.proto) to tensors and back, a TF Serving Input's
// examples to the serialized tf.Example vector a classify or regress signature takes, and an
// export's signatures as TF's SignatureDefs: what warm-up files, gRPC requests and both APIs'
// metadata carry.
//
//   TROUPE_ASSIGN_OR_RETURN(Tensor x, tensor_from_proto(request.inputs().at("x"), "x", limit));
//   tensor_to_proto(y, &(*response.mutable_outputs())["y"]);   // typed values (float_val, ...)
//   Tensor examples = examples_from_input(request.input());     // [n] strings
//   tensorflow::serving::SignatureDefMap defs = signature_defs(model);
//
// A proto that does not describe its tensor (a dtype troupe lacks, a negative dimension, values
// that do not fill the shape) is invalid_argument naming the input; plain functions.
#pragma once

#include <cstdint>
#include <string>

#include "estimators/export/saved_model.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "schema/serving_apis.pb.h"

namespace troupe::serve {

// A tensor over `max_bytes` is refused (resource_exhausted): one value may fill a whole shape, as
// TF's MakeNdarray fills it, and a request of a few bytes must not make the server allocate more
// than a request could carry (a server passes its message limit).
runtime::Result<runtime::Tensor> tensor_from_proto(const tensorflow::TensorProto& p,
                                                   const std::string& name, int64_t max_bytes);
void tensor_to_proto(const runtime::Tensor& t, tensorflow::TensorProto* p);
// TF's DataType of a dtype (DT_INVALID for one TF Serving's protos do not name).
tensorflow::DataType proto_dtype(runtime::DType dtype);
// Each example merged over the context, as TF Serving merges them.
runtime::Tensor examples_from_input(const tensorflow::serving::Input& input);
// Every signature of `model`: its inputs' and outputs' tensor names, dtypes and shapes, and its
// method's name, as GetModelMetadata's "signature_def" answers them.
tensorflow::serving::SignatureDefMap signature_defs(const serving::SavedModel& model);

}  // namespace troupe::serve
