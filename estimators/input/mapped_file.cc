#include "estimators/input/mapped_file.h"

#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace troupe::estimators::input {

namespace {

// The mappings the SIGBUS handler may repair. A fixed table of atomics, since a signal handler
// may take no lock and allocate nothing.
constexpr int kMaxMappings = 4096;
struct Mapping {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> truncated{false};
};
Mapping g_mappings[kMaxMappings];
struct sigaction g_previous {};
uintptr_t g_page = 4096;  // set before the handler is installed: sysconf is not signal-safe

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Mapping& m : g_mappings) {
    const uintptr_t begin = m.begin.load(std::memory_order_acquire);
    const uintptr_t end = m.end.load(std::memory_order_acquire);
    if (begin == 0 || at < begin || at >= end) continue;
    const uintptr_t from = at & ~(g_page - 1);
    // Zeros from the faulting page to the end of the mapping: the reader sees a file that ends
    // in zero bytes, and status() tells it the file was cut.
    void* p = ::mmap(reinterpret_cast<void*>(from), end - from, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED) {
      m.truncated.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not ours: as if this handler were not there.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  ::signal(SIGBUS, SIG_DFL);  // the fault repeats on return, and ends the process as before
}

void install_handler() {
  static const bool installed = [] {
    g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGBUS, &sa, &g_previous) == 0;
  }();
  (void)installed;
}

int register_mapping(const char* data, size_t size) {
  install_handler();
  for (int i = 0; i < kMaxMappings; ++i) {
    uintptr_t free = 0;
    if (g_mappings[i].begin.compare_exchange_strong(free, 1)) {  // claimed; 1 matches nothing
      g_mappings[i].truncated.store(false);
      g_mappings[i].end.store(reinterpret_cast<uintptr_t>(data) + size);
      g_mappings[i].begin.store(reinterpret_cast<uintptr_t>(data));
      return i;
    }
  }
  return -1;
}

}  // namespace

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
    f->slot_ = register_mapping(f->data_, f->size_);
    if (f->slot_ < 0) {
      ::close(fd);
      return runtime::resource_exhausted("cannot map ", path, ": more than ", kMaxMappings,
                                         " files mapped at once");
    }
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(f));
}

MappedFile::~MappedFile() {
  if (slot_ >= 0) {  // end first: `begin` 0 frees the slot for another file to claim
    g_mappings[slot_].end.store(0, std::memory_order_release);
    g_mappings[slot_].begin.store(0, std::memory_order_release);
  }
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

runtime::Status MappedFile::status() const {
  if (slot_ >= 0 && g_mappings[slot_].truncated.load(std::memory_order_acquire)) {
    return runtime::data_loss(path_, " was truncated while it was being read (it was ", size_,
                              " bytes when opened)");
  }
  return runtime::ok_status();
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
