// A dataset held in memory as named columns: the source behind input::arrays (the
// numpy_input_fn analog) and the decoded IDX files of input::fashion_mnist. Readers hand out
// ranges of rows of the columns themselves: nothing is copied until a batch is dequeued.
//
//   auto src = ColumnsSource::create("arrays", {{"x", x}, {"y", y}});   // Result<shared_ptr>
//   spawn_queue_runner(rt.system(), *src, queue.actor(), {});
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/queue_runner.h"
#include "runtime/tensor.h"

namespace troupe::estimators::input {

class ColumnsSource : public actors::Source {
 public:
  // Every column has the examples along dimension 0, all the same number; the error names the
  // column that differs.
  static runtime::Result<std::shared_ptr<ColumnsSource>> create(
      std::string name, std::vector<std::pair<std::string, runtime::Tensor>> columns,
      int64_t rows_per_unit = 1024);

  std::string name() const override { return name_; }
  std::vector<std::string> components() const override { return names_; }
  int64_t num_units() const override;
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out,
                       int64_t* skipped) const override;
  bool in_memory() const override { return true; }
  int64_t rows() const { return rows_; }

 private:
  ColumnsSource() = default;
  std::string name_;
  std::vector<std::string> names_;
  std::vector<runtime::Tensor> columns_;
  int64_t rows_ = 0;
  int64_t rows_per_unit_ = 1024;
};

}  // namespace troupe::estimators::input
