// A read-only memory map of a whole file, for the sources that parse files in place.
//
//   auto f = MappedFile::open("/data/train.csv");   // Result<shared_ptr<const MappedFile>>
//   std::string_view bytes = (*f)->bytes();
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace troupe::estimators::input {

class MappedFile {
 public:
  // NotFound naming the path when it cannot be opened.
  static runtime::Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::string_view bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// The paths matching a glob, or several separated by commas, sorted; NotFound naming a pattern
// that matches nothing.
runtime::Result<std::vector<std::string>> expand_glob(const std::string& patterns);

}  // namespace troupe::estimators::input
