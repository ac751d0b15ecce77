// Fuzz target: an IDX file, plain or gzipped (zlib tells them apart by their first bytes).
#include <cstdint>

#include "estimators/input/idx_file.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  const std::string path = troupe::fuzz::as_file(data, size, ".idx");
  (void)troupe::estimators::input::read_idx(path);
  return 0;
}
