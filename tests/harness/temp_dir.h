// Fresh scratch directories for tests, all under one directory per test process that goes away
// when the process ends, so test runs leave nothing behind in /tmp.
//
//   const std::string dir = testing::temp_dir("resume");   // empty, not created yet
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace troupe::testing {

inline std::string temp_dir(const std::string& name) {
  // Removed at exit by the process that made it (not by a forked child that exits).
  struct Root {
    pid_t owner = ::getpid();
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("troupe_test_" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ec;
      if (::getpid() == owner) std::filesystem::remove_all(path, ec);
    }
  };
  static Root root;
  const std::filesystem::path d = root.path / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(root.path);
  return d.string();
}

}  // namespace troupe::testing
