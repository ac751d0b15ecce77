// DeviceActor: one compute device (cpu:0 now; gpu:N has the same interface). It owns the device's
// allocator, with the memory cap the user set (SessionOptions::memory_limit_bytes; on a GPU,
// RunConfig's gpu_memory_fraction is to become this cap once gpu:N exists), and answers memory
// statistics. Node actors placed on the device allocate from it
// directly: an allocation is a call, not a message.
//
//   auto dev = spawn_device(system, {.memory_limit_bytes = 1 << 30});   // cpu:0
//   self->request(dev.actor, infinite, stats_atom::value).then([](runtime::AllocatorStats s) {});
//
// The allocator is thread-safe and outlives every node that holds it.
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "runtime/allocator.h"

namespace troupe::actors {

struct DeviceOptions {
  int64_t memory_limit_bytes = 0;  // 0: no cap
};

struct Device {
  caf::actor actor;
  std::shared_ptr<runtime::Allocator> allocator;
};

Device spawn_device(caf::actor_system& system, const DeviceOptions& options);

}  // namespace troupe::actors
