// Status and Result<T>: errors as values, for everything a user, a file or a peer can get wrong.
//
//   Result<Tensor> r = decode_tensor(bytes);
//   if (!r.ok()) return r.status();              // "invalid argument: tensor blob: ..."
//   Tensor t = std::move(r).value();
//
//   Status s = invalid_argument("MatMul 'dense/MatMul': inner dimensions differ: ", a, " vs ", b);
//
// Messages name the offending input. Internal invariants use assert, not Status.
#pragma once

#include <cassert>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace troupe::runtime {

enum class Code {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  kCancelled,
  kAborted,
  kResourceExhausted,
  kDeadlineExceeded,
};

const char* code_name(Code c);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;
  // Prefixes the message with context, e.g. the node that ran the failing kernel.
  Status with_context(const std::string& context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <class... Args>
Status make_error(Code code, const Args&... args) {
  return Status(code, str_cat(args...));
}
template <class... Args>
Status invalid_argument(const Args&... args) {
  return make_error(Code::kInvalidArgument, args...);
}
template <class... Args>
Status not_found(const Args&... args) {
  return make_error(Code::kNotFound, args...);
}
template <class... Args>
Status failed_precondition(const Args&... args) {
  return make_error(Code::kFailedPrecondition, args...);
}
template <class... Args>
Status out_of_range(const Args&... args) {
  return make_error(Code::kOutOfRange, args...);
}
template <class... Args>
Status unimplemented(const Args&... args) {
  return make_error(Code::kUnimplemented, args...);
}
template <class... Args>
Status internal_error(const Args&... args) {
  return make_error(Code::kInternal, args...);
}
template <class... Args>
Status data_loss(const Args&... args) {
  return make_error(Code::kDataLoss, args...);
}
template <class... Args>
Status unavailable(const Args&... args) {
  return make_error(Code::kUnavailable, args...);
}
template <class... Args>
Status cancelled(const Args&... args) {
  return make_error(Code::kCancelled, args...);
}
template <class... Args>
Status resource_exhausted(const Args&... args) {
  return make_error(Code::kResourceExhausted, args...);
}

template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit, as absl::StatusOr
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace troupe::runtime

#define TROUPE_CONCAT_INNER(a, b) a##b
#define TROUPE_CONCAT(a, b) TROUPE_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is an error.
#define TROUPE_RETURN_IF_ERROR(expr)                   \
  do {                                                 \
    ::troupe::runtime::Status _troupe_status = (expr); \
    if (!_troupe_status.ok()) return _troupe_status;   \
  } while (0)

// `lhs = value of expr`, or returns its Status from the enclosing function.
#define TROUPE_ASSIGN_OR_RETURN(lhs, expr)                    \
  auto TROUPE_CONCAT(_troupe_result_, __LINE__) = (expr);     \
  if (!TROUPE_CONCAT(_troupe_result_, __LINE__).ok())         \
    return TROUPE_CONCAT(_troupe_result_, __LINE__).status(); \
  lhs = std::move(TROUPE_CONCAT(_troupe_result_, __LINE__)).value()
