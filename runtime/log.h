// Logging: one line per event on stderr, "LEVEL: [task] message", for every process of a
// cluster alike, so that a launcher's interleaved streams stay readable and greppable.
//
//   log_info("restored ", path, " (global step ", step, ")");
//   set_log_task("worker 1");            // every later line says [worker 1]
//   // TROUPE_LOG_LEVEL=debug|info|warning|error in the environment: the lines shown (info)
//
// Thread-safe: a line is written with one call, so lines of several threads never mix.
#pragma once

#include <string>

#include "runtime/status.h"

namespace troupe::runtime {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

void set_log_task(const std::string& task);  // "" for none
bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& message);

template <class... Args>
void log_debug(const Args&... args) {
  if (log_enabled(LogLevel::kDebug)) log_line(LogLevel::kDebug, str_cat(args...));
}
template <class... Args>
void log_info(const Args&... args) {
  if (log_enabled(LogLevel::kInfo)) log_line(LogLevel::kInfo, str_cat(args...));
}
template <class... Args>
void log_warning(const Args&... args) {
  if (log_enabled(LogLevel::kWarning)) log_line(LogLevel::kWarning, str_cat(args...));
}
template <class... Args>
void log_error(const Args&... args) {
  log_line(LogLevel::kError, str_cat(args...));
}

}  // namespace troupe::runtime
