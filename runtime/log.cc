#include "runtime/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace troupe::runtime {

namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("TROUPE_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  const std::string v = env;
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& level() {
  static std::atomic<int> l{static_cast<int>(level_from_env())};
  return l;
}

std::mutex& task_mu() {
  static std::mutex mu;
  return mu;
}
std::string& task() {
  static std::string t;
  return t;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

void set_log_task(const std::string& t) {
  std::lock_guard<std::mutex> lock(task_mu());
  task() = t;
}

bool log_enabled(LogLevel l) { return static_cast<int>(l) >= level().load(); }

void log_line(LogLevel l, const std::string& message) {
  std::string line = level_name(l);
  line += ": ";
  {
    std::lock_guard<std::mutex> lock(task_mu());
    if (!task().empty()) line += "[" + task() + "] ";
  }
  line += message;
  if (line.empty() || line.back() != '\n') line += '\n';
  // One write: lines of several threads (and processes on one pipe) never interleave.
  ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  (void)written;  // nowhere to report a failed log line
}

}  // namespace troupe::runtime
