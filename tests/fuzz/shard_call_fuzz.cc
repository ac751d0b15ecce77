// Fuzz target: a shard call from a peer, decoded and run against a parameter shard's store,
// kernels and synchronous rounds included, as the ps task runs it. Every input gets a reply; none
// ends the process.
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/parameter_shard.h"
#include "actors/shard_codec.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  using namespace troupe;
  using runtime::Shape;
  using runtime::Tensor;
  auto store = std::make_shared<runtime::VariableStore>();
  store->assign("w", Tensor::from_vector<float>(Shape{2, 2}, {1, 2, 3, 4}));
  store->assign("b", Tensor::from_vector<double>(Shape{2}, {1, 2}));
  store->assign("global_step", Tensor::scalar<int64_t>(7));
  actors::ShardCalls calls(store);
  auto bytes = std::make_shared<const std::vector<char>>(data, data + size);
  // As a peer's call comes: a replica's through its synchronous rounds. A reply that waits
  // (a barrier) comes when its time is up.
  std::vector<char> reply;
  auto now = calls.call(actors::decode_shard_call(bytes),
                        [&](const actors::ShardReply& r) { reply = r.flat(); });
  if (now) {
    reply = now->flat();
  } else {
    calls.expire(actors::ShardCalls::Clock::time_point::max());
  }
  if (reply.empty()) __builtin_trap();
  return 0;
}
