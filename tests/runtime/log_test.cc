// The log facility: one line per event, its level, the task's name when one is set, and a
// message built from the arguments.
#include "runtime/log.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "harness/temp_dir.h"

using namespace troupe;

namespace {

// What `write` put on stderr.
template <class F>
std::string captured(F write) {
  const std::string path = testing::temp_dir("log") + ".txt";
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  ::dup2(::fileno(f), STDERR_FILENO);
  write();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::fclose(f);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  return text;
}

}  // namespace

TEST_CASE("a log line says its level, the task and the message, once, whole") {
  CHECK(captured([] { runtime::log_info("restored ", "a.ckpt", " (global step ", 42, ")"); }) ==
        "INFO: restored a.ckpt (global step 42)\n");
  runtime::set_log_task("worker 1");
  CHECK(captured([] { runtime::log_warning("the ps is gone"); }) ==
        "WARNING: [worker 1] the ps is gone\n");
  runtime::set_log_task("");
  CHECK(captured([] { runtime::log_error("stop\n"); }) == "ERROR: stop\n");
  // Below the level (info unless TROUPE_LOG_LEVEL says otherwise): nothing.
  CHECK(captured([] { runtime::log_debug("details"); }).empty());
}
