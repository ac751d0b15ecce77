// VariableStore: the values of a graph's variables and their optimizer slots, by name. Locally
// one store serves a session; a ParameterShardActor owns one per shard.
//
//   VariableStore vars;
//   vars.assign("dense/kernel", initial);
//   Result<Tensor> w = vars.read("dense/kernel");            // shares the buffer
//   Result<Tensor> m = vars.slot("dense/kernel", "Adam_m");  // zeros like the variable, once
//   Result<Tensor> u = vars.for_update("dense/kernel");      // a buffer no reader holds
//
// Thread-safe for lookups and assignment. Updates through for_update() must come from one
// writer at a time per variable (the shard actor, or the single executor thread).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

class VariableStore {
 public:
  Result<Tensor> read(const std::string& name) const;
  bool contains(const std::string& name) const;
  // Replaces the value; readers holding the old tensor keep it.
  void assign(const std::string& name, Tensor value);
  // The variable's tensor, first copied if a reader still holds its buffer, so that the caller
  // may write into it without changing a value someone else reads.
  Result<Tensor> for_update(const std::string& name);
  // The slot `slot` of variable `name` (stored as "name/slot"), created on first use filled with
  // `initial_value`, shaped like the variable or as `shape` when given; writable like
  // for_update().
  Result<Tensor> slot(const std::string& name, const std::string& slot, double initial_value = 0,
                      const Shape* shape = nullptr);
  std::vector<std::string> names() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::map<std::string, Tensor> values_;
};

}  // namespace troupe::runtime
