// Fuzz target: a checkpoint file's bytes, parsed and checked against a graph's variables.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_input.h"
#include "runtime/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe::runtime;
  auto ckpt = parse_checkpoint(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (ckpt.ok()) {
    const std::vector<VariableSpec> graph = {{"w", DType::kFloat32, Shape{2, 2}},
                                             {"global_step", DType::kInt64, Shape{}}};
    if (check_restore(*ckpt, graph, false).ok()) {
      VariableStore store;
      load_into(*ckpt, &store);
    }
  }
  return 0;
}
