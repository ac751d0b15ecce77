// Mapped files: a file cut by someone else while it is mapped is an error naming it, not SIGBUS.
#include "estimators/input/mapped_file.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "estimators/input/csv_source.h"
#include "harness/temp_dir.h"

using namespace troupe::estimators::input;

namespace {
std::string write_file(const std::string& name, const std::string& text) {
  const std::string dir = troupe::testing::temp_dir("mapped-" + name);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}
}  // namespace

TEST_CASE("a mapped file truncated underneath reads as zeros and reports data loss") {
  const std::string path = write_file("cut.bin", std::string(3 * 4096 + 100, 'x'));
  auto f = MappedFile::open(path);
  REQUIRE(f.ok());
  CHECK((*f)->status().ok());
  std::filesystem::resize_file(path, 10);
  const std::string_view bytes = (*f)->bytes();
  long sum = 0;
  for (char c : bytes) sum += c;  // without the handler: SIGBUS at the second page
  CHECK(sum == 10L * 'x');        // what the file still holds, then zeros
  const auto st = (*f)->status();
  CHECK(st.code() == troupe::runtime::Code::kDataLoss);
  CHECK(st.message().find(path) != std::string::npos);
  CHECK(st.message().find("truncated") != std::string::npos);
}

TEST_CASE("a CSV file cut while a pipeline reads it gives an error naming the file") {
  std::string text = "x,y\n";
  for (int i = 0; i < 5000; ++i) text += std::to_string(i) + "," + std::to_string(2 * i) + "\n";
  const std::string path = write_file("cut.csv", text);
  auto src = CsvSource::open(path, {.rows_per_unit = 1000});
  REQUIRE(src.ok());
  std::filesystem::resize_file(path, 100);
  std::vector<troupe::actors::Chunk> chunks;
  int64_t skipped = 0;
  auto st = (*src)->read((*src)->num_units() - 1, &chunks, &skipped);
  CHECK(st.code() == troupe::runtime::Code::kDataLoss);
  CHECK(st.message().find(path) != std::string::npos);
}

TEST_CASE("the fault handler leaves faults outside mapped files to the process") {
  // A SIGBUS elsewhere still ends the process as before: checked in a child.
  const std::string path = write_file("other.bin", std::string(8192, 'y'));
  const pid_t child = ::fork();
  if (child == 0) {
    auto keep = MappedFile::open(path);  // installs the handler
    const int fd = ::open(path.c_str(), O_RDONLY);
    void* raw = ::mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd, 0);
    ::ftruncate(::open(path.c_str(), O_WRONLY), 0);
    volatile char c = static_cast<const char*>(raw)[4096];  // not a MappedFile: SIGBUS
    (void)c;
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // SIGBUS as before (or, under AddressSanitizer, its report of the fault and an abort).
  const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  CHECK_FALSE(clean_exit);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    CHECK((sig == SIGBUS || sig == SIGABRT));
  }
}
