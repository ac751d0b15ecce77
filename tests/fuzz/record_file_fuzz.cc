// Fuzz target: a troupe record file, opened and read unit by unit, with and without
// skip_bad_records.
#include <cstdint>

#include "estimators/input/record_file.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe::estimators::input;
  const std::string path = troupe::fuzz::as_file(data, size, ".trec");
  for (bool skip : {false, true}) {
    auto src = RecordSource::open(path, skip);
    if (src.ok()) troupe::fuzz::read_all_units(**src);
  }
  return 0;
}
