#include "runtime/status.h"

namespace troupe::runtime {

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kNotFound:
      return "not found";
    case Code::kAlreadyExists:
      return "already exists";
    case Code::kFailedPrecondition:
      return "failed precondition";
    case Code::kOutOfRange:
      return "out of range";
    case Code::kUnimplemented:
      return "unimplemented";
    case Code::kInternal:
      return "internal";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kDataLoss:
      return "data loss";
    case Code::kCancelled:
      return "cancelled";
    case Code::kAborted:
      return "aborted";
    case Code::kResourceExhausted:
      return "resource exhausted";
    case Code::kDeadlineExceeded:
      return "deadline exceeded";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace troupe::runtime
