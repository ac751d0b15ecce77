// Fuzz target: a gRPC call's bytes as TF Serving's clients send them (a PredictRequest, a
// ClassificationRequest), through what troupe serve makes of them (tools/serve/tensor_proto.h):
// each input as a tensor, under a request's limit, back to its proto and again the same; each
// example list as the serialized tf.Example vector a signature takes.
#include <cstdint>
#include <cstdlib>

#include "fuzz/fuzz_input.h"
#include "tools/serve/tensor_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  constexpr int64_t kRequestLimit = 16 << 20;  // troupe serve's default message limit
  tensorflow::serving::PredictRequest predict;
  if (predict.ParseFromArray(data, static_cast<int>(size))) {
    for (const auto& [name, proto] : predict.inputs()) {
      auto t = troupe::serve::tensor_from_proto(proto, name, kRequestLimit);
      if (!t.ok()) continue;
      tensorflow::TensorProto back;
      troupe::serve::tensor_to_proto(*t, &back);
      auto again = troupe::serve::tensor_from_proto(back, name, kRequestLimit);
      if (!again.ok() || again->shape() != t->shape() || again->dtype() != t->dtype()) {
        std::abort();  // what the server answers must read back as what it computed
      }
    }
  }
  tensorflow::serving::ClassificationRequest classify;
  if (classify.ParseFromArray(data, static_cast<int>(size))) {
    const troupe::runtime::Tensor examples = troupe::serve::examples_from_input(classify.input());
    if (examples.rank() != 1) std::abort();
  }
  return 0;
}
