// Fuzz target: a libsvm file, dense (width inferred from the largest index) or sparse.
#include <cstdint>

#include "estimators/input/libsvm_source.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe::estimators::input;
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string path = troupe::fuzz::as_file(data + 1, size - 1, ".svm");
  LibsvmOptions options;
  options.dense = flags & 1;
  options.zero_based = flags & 2;
  options.skip_bad_records = flags & 4;
  options.rows_per_unit = 1 + (flags >> 4);
  auto src = LibsvmSource::open(path, options);
  if (!src.ok()) return 0;
  troupe::fuzz::read_all_units(**src);
  return 0;
}
