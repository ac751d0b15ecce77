// What the fuzz targets share: the memory cap a server would run with, and the bytes of one
// input as a file, for the readers that take a path (they map or stream it as they would a
// user's file).
//
//   fuzz::cap_memory();                                      // first thing in each target
//   std::string path = fuzz::as_file(data, size, ".csv");   // rewritten on every call
//   fuzz::read_all_units(**CsvSource::open(path));
//
// One file per process and suffix, in TMPDIR; not thread-safe (libFuzzer runs one input at a
// time per process).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "actors/queue_runner.h"
#include "runtime/allocator.h"

namespace troupe::fuzz {

// A peer may ask for any tensor up to the cap (by default the machine's memory); a server
// that serves untrusted peers sets a cap, and so do the targets, below libFuzzer's RSS limit.
inline void cap_memory() { runtime::set_max_tensor_bytes(int64_t(256) << 20); }

inline std::string as_file(const uint8_t* data, size_t size, const std::string& suffix) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/troupe_fuzz_" +
                           std::to_string(::getpid()) + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  // Removed when the process ends, however many inputs it ran.
  struct Remover {
    std::string path;
    ~Remover() { std::remove(path.c_str()); }
  };
  static thread_local std::vector<Remover> made;
  if (std::none_of(made.begin(), made.end(), [&](const Remover& r) { return r.path == path; })) {
    made.push_back({path});
  }
  return path;
}

// Reads every unit of a source, as a runner's readers would; errors are the expected answer.
inline void read_all_units(const actors::Source& source) {
  for (int64_t u = 0; u < source.num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    (void)source.read(u, &chunks, &skipped);
  }
}

}  // namespace troupe::fuzz
