#include "runtime/allocator.h"

#include <cstdlib>

namespace troupe::runtime {

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kMinClass = 64;
}  // namespace

PoolAllocator::PoolAllocator(int64_t limit_bytes, int64_t max_cached_bytes)
    : max_cached_bytes_(max_cached_bytes) {
  stats_.limit_bytes = limit_bytes;
}

PoolAllocator::~PoolAllocator() {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) std::free(p);
  }
}

size_t PoolAllocator::size_class(size_t bytes) {
  size_t c = kMinClass;
  while (c < bytes) c <<= 1;
  return c;
}

void* PoolAllocator::allocate(size_t bytes) {
  size_t c = size_class(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (stats_.limit_bytes > 0 && stats_.bytes_in_use + int64_t(c) > stats_.limit_bytes) {
    return nullptr;
  }
  void* p = nullptr;
  auto it = free_.find(c);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= c;
  } else {
    p = std::aligned_alloc(kAlignment, c);
    if (!p) return nullptr;
  }
  stats_.bytes_in_use += c;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.num_allocs;
  return p;
}

void PoolAllocator::deallocate(void* p, size_t bytes) {
  if (!p) return;
  size_t c = size_class(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.bytes_in_use -= c;
  if (stats_.bytes_cached + int64_t(c) > max_cached_bytes_) {
    std::free(p);
    return;
  }
  free_[c].push_back(p);
  stats_.bytes_cached += c;
}

AllocatorStats PoolAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Allocator* cpu_allocator() {
  static PoolAllocator* a = new PoolAllocator();  // never destroyed: buffers may outlive main
  return a;
}

}  // namespace troupe::runtime
