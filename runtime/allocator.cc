#include "runtime/allocator.h"

#include <unistd.h>

#include <atomic>
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

// 0 when no power of two holds `bytes`.
size_t PoolAllocator::size_class(size_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  if (bytes > (SIZE_MAX >> 1) + 1) return 0;
  return size_t(1) << (64 - __builtin_clzll(bytes - 1));
}

void* PoolAllocator::allocate(size_t bytes) {
  if (bytes > static_cast<size_t>(max_tensor_bytes())) return nullptr;
  size_t c = size_class(bytes == 0 ? 1 : bytes);
  if (c == 0) return nullptr;
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

namespace {
int64_t initial_max_tensor_bytes() {
  if (const char* env = std::getenv("TROUPE_MAX_TENSOR_BYTES")) {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return v;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : int64_t(1) << 40;
}
std::atomic<int64_t>& max_bytes() {
  static std::atomic<int64_t> v{initial_max_tensor_bytes()};
  return v;
}
}  // namespace

int64_t max_tensor_bytes() { return max_bytes().load(std::memory_order_relaxed); }
void set_max_tensor_bytes(int64_t bytes) { max_bytes().store(bytes, std::memory_order_relaxed); }

Allocator* cpu_allocator() {
  static PoolAllocator* a = new PoolAllocator();  // never destroyed: buffers may outlive main
  return a;
}

}  // namespace troupe::runtime
