#include "estimators/input/mapped_file.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace troupe::estimators::input {

runtime::Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return runtime::not_found("cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    return runtime::invalid_argument(path, " is not a readable file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return runtime::internal_error("cannot map ", path, ": ", std::strerror(errno));
    }
    ::madvise(m, f->size_, MADV_SEQUENTIAL);
    f->data_ = static_cast<const char*>(m);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(f));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

runtime::Result<std::vector<std::string>> expand_glob(const std::string& patterns) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= patterns.size()) {
    size_t comma = patterns.find(',', start);
    if (comma == std::string::npos) comma = patterns.size();
    const std::string p = patterns.substr(start, comma - start);
    start = comma + 1;
    if (p.empty()) continue;
    glob_t g{};
    const int rc = ::glob(p.c_str(), 0, nullptr, &g);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (rc != 0) return runtime::not_found("no file matches ", p);
  }
  if (out.empty()) return runtime::not_found("no file matches '", patterns, "'");
  return out;
}

}  // namespace troupe::estimators::input
