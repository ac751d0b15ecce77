// Fuzz target: a graph from a file or a peer, decoded and rebuilt through the graph builder,
// so every node's attributes and shapes meet the checks a user's graph meets.
#include <cstdint>
#include <memory>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "runtime/graph_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe::runtime;
  Graph g;
  auto bytes = std::make_shared<const std::vector<char>>(data, data + size);
  if (decode_graph(bytes, &g).ok()) {
    std::vector<char> again;
    if (!encode_graph(g, &again).ok()) __builtin_trap();
  }
  return 0;
}
