// Fuzz target: a CSV file, opened (header, type inference) and read unit by unit. The first
// byte picks the options, so quoting, delimiters and bad rows meet every setting.
#include <cstdint>

#include "estimators/input/csv_source.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe::estimators::input;
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string path = troupe::fuzz::as_file(data + 1, size - 1, ".csv");
  CsvOptions options;
  options.skip_bad_records = flags & 1;
  options.header = !(flags & 2);
  if (!options.header) options.column_names = {"a", "b", "c"};
  options.delimiter = flags & 4 ? ';' : ',';
  options.rows_per_unit = 1 + (flags >> 4);
  auto src = CsvSource::open(path, options);
  if (!src.ok()) return 0;
  troupe::fuzz::read_all_units(**src);
  return 0;
}
