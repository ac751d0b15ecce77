// Fuzz target: a TFRecord file of tf.Example, opened (its first byte picks plain or gzip, and an
// inferred or a given spec) and read unit by unit, with and without skip_bad_records.
#include <cstdint>

#include "estimators/input/tfrecord_source.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe::estimators::input;
  if (size == 0) return 0;
  const uint8_t how = data[0];
  const std::string path =
      troupe::fuzz::as_file(data + 1, size - 1, how & 1 ? ".tfrecord.gz" : ".tfrecord");
  FeatureSpecs given = {
      {"x", {.dtype = troupe::runtime::DType::kFloat32, .shape = troupe::runtime::Shape{2}}},
      {"y",
       {.dtype = troupe::runtime::DType::kInt64,
        .default_value = troupe::runtime::Tensor::scalar<int64_t>(0)}},
      {"s", {.kind = FeatureSpec::Kind::kVarLen, .dtype = troupe::runtime::DType::kString}}};
  for (bool skip : {false, true}) {
    TfRecordOptions o{.records_per_unit = 3, .skip_bad_records = skip};
    if (how & 2) o.features = given;
    auto src = TfRecordSource::open(path, o);
    if (src.ok()) troupe::fuzz::read_all_units(**src);
  }
  return 0;
}
