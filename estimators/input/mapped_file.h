// A read-only memory map of a whole file, for the sources that parse files in place.
//
//   auto f = MappedFile::open("/data/train.csv");   // Result<shared_ptr<const MappedFile>>
//   std::string_view bytes = (*f)->bytes();
//   ... parse bytes ...
//   TROUPE_RETURN_IF_ERROR((*f)->status());         // DataLoss if the file shrank meanwhile
//
// A file truncated by someone else while it is mapped would raise SIGBUS on the next read past
// its new end and end the process. A SIGBUS handler (installed once, chaining to any earlier
// one for faults elsewhere) maps zero pages over the rest of the mapping and marks the file, so
// the read goes on over zeros and status() turns the parse into an error naming the file.
// Readers call status() after parsing what they read. Thread-safe.
#pragma once

#include <atomic>

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
  // DataLoss naming the file once a read found it shorter than when it was mapped.
  runtime::Status status() const;

 private:
  MappedFile() = default;
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
  int slot_ = -1;  // in the fault handler's table; -1: not registered (empty file)
};

// The paths matching a glob, or several separated by commas, sorted; NotFound naming a pattern
// that matches nothing.
runtime::Result<std::vector<std::string>> expand_glob(const std::string& patterns);

}  // namespace troupe::estimators::input
