// VariableStore: the values of a graph's variables and their optimizer slots, by name. Locally
// one store serves a session; a ParameterShardActor owns one per shard.
//
//   VariableStore vars;
//   vars.assign("dense/kernel", initial);
//   Result<Tensor> w = vars.read("dense/kernel");            // shares the buffer
//   Result<Tensor> m = vars.slot("dense/kernel", "Adam_m");  // zeros like the variable, once
//   Result<Tensor> u = vars.for_update("dense/kernel", DType::kFloat32, Shape{784, 256});
//
// Thread-safe for lookups and assignment. Updates through for_update() must come from one
// writer at a time per variable (the shard actor, or the single executor thread).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

// The value of an int64 scalar (the global step as read), or nothing for an error or another
// dtype or shape.
std::optional<int64_t> int64_scalar(const Result<Tensor>& t);

class VariableStore {
 public:
  Result<Tensor> read(const std::string& name) const;
  bool contains(const std::string& name) const;
  // The value of an int64 scalar (the global step), or nothing when the stored value is absent
  // or of another dtype or shape.
  std::optional<int64_t> read_int64_scalar(const std::string& name) const;
  // Replaces the value; readers holding the old tensor keep it.
  void assign(const std::string& name, Tensor value);
  // A local variable's value (a streaming metric's count, as tf.local_variable's): read and
  // updated as any other, but left out of names(), so that checkpoints, exports, the best
  // model's copy and a cluster's transfers never hold it.
  void assign_local(const std::string& name, Tensor value);
  // The variable's tensor, first copied if a reader still holds its buffer, so that the caller
  // may write into it without changing a value someone else reads. The caller says what it will
  // write through (`dtype`, `shape`); a stored value of another (restored from a checkpoint,
  // assigned by a peer) is an error naming the variable, never a write out of bounds.
  Result<Tensor> for_update(const std::string& name, DType dtype, const Shape& shape);
  // The slot `slot` of variable `name` (stored as "name/slot"), created on first use filled with
  // `initial_value`, shaped like the variable or as `shape` when given; writable like
  // for_update(), and refused the same way when its stored dtype or shape is not the one
  // expected.
  Result<Tensor> slot(const std::string& name, const std::string& slot, double initial_value = 0,
                      const Shape* shape = nullptr);
  // The model's variables and slots: every name but the local ones.
  std::vector<std::string> names() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::map<std::string, Tensor> values_;
  std::set<std::string> local_;
};

}  // namespace troupe::runtime
