// Checkpoints: a model's variables at a global step, written atomically (temporary file, fsync,
// rename), each tensor under its own CRC-32C, with a `checkpoint` index naming the latest, as
// TF's Saver keeps it. Restoring refuses a damaged file with an error naming it and falls back
// to the previous checkpoint.
//
//   CheckpointManager ckpt("model_dir", {.keep_max = 5});
//   auto path = ckpt.save(step, store);                 // Result<string>: model_dir/model.ckpt-500
//   auto restored = ckpt.restore_latest(&store);        // Result<Restored>: step, path, skipped
//   auto checked = ckpt.restore_latest(&store, [&](const CheckpointData& d) {
//     return check_restore(d, graph_variables, /*partial=*/false);   // refuse another model's
//   });
//
// Names read from an index are plain file names in the model directory; any other (a path, "..")
// is refused, so a tampered index can make it neither read nor delete a file elsewhere.
// A process killed at any moment leaves the index pointing at a whole checkpoint: the index is
// replaced only after the file it names is on disk. Not thread-safe per manager.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/variable_store.h"

namespace troupe::runtime {

// Where the training input stood at a checkpoint: `batches` consumed from the dataset that
// hashes to `fingerprint` (the Estimator's). A run resumed on the same dataset reads on from there.
struct InputPosition {
  uint64_t fingerprint = 0;
  int64_t batches = 0;
};

struct CheckpointData {
  int64_t global_step = 0;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> metrics;
  InputPosition input;
};

// A checkpoint file's bytes (parameter servers send their shard's state this way).
Result<std::string> encode_checkpoint(const CheckpointData& data);
// Writes one checkpoint file atomically.
Status write_checkpoint(const std::string& path, const CheckpointData& data);
// Reads and verifies one; DataLoss naming the file (and the tensor) when it is damaged.
Result<CheckpointData> read_checkpoint(const std::string& path);
// The same from a checkpoint file's bytes; `name` is what errors call it.
Result<CheckpointData> parse_checkpoint(std::string_view file, const std::string& name);

// A variable as the graph that restores it declares it.
struct VariableSpec {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;
};

// OK when `data` holds every variable of `expected` with its dtype and shape, and each slot of
// one of them ("name/slot") with the variable's dtype and either its shape or a scalar's (Adam's
// step); otherwise FailedPrecondition naming the first variable or slot that differs. With
// `partial`, variables the checkpoint lacks are allowed: they keep their initial values, as in a
// warm start. Tensors of names the graph does not know are loaded as they are (another head's
// variables may share the directory).
Status check_restore(const CheckpointData& data, const std::vector<VariableSpec>& expected,
                     bool partial);

// Fits the checkpoint's partitioned variables to the graph's partitions, so that a model saved
// with its big variables in k parts (ops::partitioned_variable: "<name>/part_<i>", blocks of
// rows in order) restores into a graph that splits them in any other number, or not at all,
// and the other way round; their slots ("<var>/<slot>") with them, a scalar slot taken as it is.
// The tensors taken apart that the graph does not name are dropped. A variable the graph
// already finds by its own name is left alone; one whose rows differ is FailedPrecondition
// naming it. Run before check_restore.
//
//   TROUPE_RETURN_IF_ERROR(fit_partitions(&data, graph_variables));
//   TROUPE_RETURN_IF_ERROR(check_restore(data, graph_variables, /*partial=*/false));
Status fit_partitions(CheckpointData* data, const std::vector<VariableSpec>& expected);

// A plain file name, as an index may name (no '/', not "." or "..", no NUL).
bool is_plain_file_name(const std::string& name);

struct CheckpointOptions {
  int keep_max = 5;  // 0: keep all
  std::string prefix = "model.ckpt";
  // Keep also the best `best_k` checkpoints by `metric` (in dir/best), never deleted for age.
  int best_k = 0;
  std::string metric;
  bool higher_is_better = true;
};

class CheckpointManager {
 public:
  CheckpointManager(std::string dir, CheckpointOptions options = {});

  // Saves every variable of `store` (and `metrics`); updates the index; deletes checkpoints
  // beyond keep_max. Returns the path written.
  Result<std::string> save(int64_t global_step, const VariableStore& store,
                           const std::map<std::string, double>& metrics = {});
  // Asked at each save where the training input stands at that global step.
  void set_input_position(std::function<InputPosition(int64_t global_step)> position) {
    input_position_ = std::move(position);
  }

  struct Restored {
    int64_t global_step = 0;
    std::string path;
    std::vector<std::string> refused;  // damaged checkpoints passed over, with the reasons
    InputPosition input;
  };
  // Loads the newest readable checkpoint into `store`; NotFound when there is none. A `check`
  // that refuses the newest readable one ends the restore with its error, naming the file, and
  // leaves `store` as it was (an older checkpoint of the same directory would not fit either);
  // it may fit what it accepts to the graph first (fit_partitions).
  using RestoreCheck = std::function<Status(CheckpointData&)>;
  Result<Restored> restore_latest(VariableStore* store, const RestoreCheck& check = nullptr) const;
  // Paths in the index, oldest first, and the latest (empty if none).
  std::vector<std::string> all() const;
  std::string latest() const;
  // Best checkpoints kept, best first (paths).
  std::vector<std::string> best() const;
  const std::string& dir() const { return dir_; }

 private:
  Status write_index(const std::vector<std::string>& names) const;
  std::string dir_;
  CheckpointOptions options_;
  std::function<InputPosition(int64_t)> input_position_;
};

// Loads a checkpoint's tensors into a store (replacing values of the same name).
void load_into(const CheckpointData& data, VariableStore* store);

}  // namespace troupe::runtime
