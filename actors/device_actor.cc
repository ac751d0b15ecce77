#include "actors/device_actor.h"

#include "actors/messages.h"

namespace troupe::actors {

namespace {
caf::behavior device_actor(caf::event_based_actor*, std::shared_ptr<runtime::Allocator> allocator) {
  return {[allocator](stats_atom) { return allocator->stats(); }};
}
}  // namespace

Device spawn_device(caf::actor_system& system, const DeviceOptions& options) {
  // Freed blocks stay cached up to the cap (or 1 GiB): the next step reuses them.
  int64_t cache = options.memory_limit_bytes > 0 ? options.memory_limit_bytes : int64_t(1) << 30;
  auto allocator = std::make_shared<runtime::PoolAllocator>(options.memory_limit_bytes, cache);
  return Device{system.spawn(device_actor, allocator), allocator};
}

}  // namespace troupe::actors
