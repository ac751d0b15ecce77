// Fuzz target: a tensor blob from a peer or a file, decoded in place and copied.
#include <cstdint>
#include <memory>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "runtime/tensor_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe::runtime;
  auto bytes = std::make_shared<const std::vector<char>>(data, data + size);
  Result<Tensor> t = decode_tensor(bytes);
  if (t.ok()) {
    // A decoded tensor is whole: its bytes can be read and encoded again.
    std::vector<char> again;
    if (!encode_tensor(*t, &again).ok()) __builtin_trap();
    (void)t->debug_string();
  }
  (void)decode_tensor_copy(data, size);
  return 0;
}
