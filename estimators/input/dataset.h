// Input functions: what Estimator::train, evaluate and predict read, and the pipeline that runs
// one. A Dataset names a source, how to read it (batching, epochs, shuffling, readers, maps)
// and which components are features and which the label. Starting it spawns a queue actor and
// a runner actor with its readers; a training loop dequeues from the queue inside the actor
// system, one batch per step.
//
//   auto train = input::fashion_mnist("train", {.batch_size = 128, .num_epochs = 5,
//                                               .shuffle = true, .seed = 42});
//   auto table = input::csv("data/*.csv", "label", {}, {.batch_size = 64});
//   auto mem = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 32});
//
//   auto p = Pipeline::start(rt, *train);          // Result<unique_ptr<Pipeline>>
//   auto batch = (*p)->next();                     // blocking, for predict and tests
//
// Errors opening a source (a missing file, a bad header, a truncated IDX) come back from these
// functions; errors while reading (a bad row) end the pipeline with that error, naming the file
// and line, or are skipped and counted with skip_bad_records (Pipeline::runner_stats).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/messages.h"
#include "actors/queue.h"
#include "actors/queue_runner.h"
#include "estimators/input/csv_source.h"
#include "estimators/input/libsvm_source.h"
#include "estimators/input/tfrecord_source.h"

namespace troupe::estimators::input {

struct DatasetOptions {
  int64_t batch_size = 128;
  int64_t num_epochs = 1;  // 0: repeat until the consumer stops
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t shuffle_buffer = 10000;  // examples
  bool drop_remainder = false;     // drop the last, smaller batch instead of yielding it
  int num_readers = 2;             // parallel decode
  int64_t prefetch_batches = 4;    // the queue's capacity: batches stacked ahead of the consumer
  // A user function over a batch of decoded examples (components along dimension 0), run in
  // the readers, in parallel; map_example runs once per example instead.
  std::function<runtime::Status(std::vector<runtime::Tensor>& batch)> map = nullptr;
  std::function<runtime::Status(std::vector<runtime::Tensor>& example)> map_example = nullptr;
  bool skip_bad_records = false;
};

struct Dataset {
  std::shared_ptr<const actors::Source> source;
  DatasetOptions options;
  std::vector<std::string> features;  // component names fed as features, in order
  std::string label;                  // empty: no label (prediction)
  // A multi-head model's further labels (with_labels), each a head's; not features.
  std::vector<std::string> more_labels;
  bool pad = false;  // examples differ in shape: batch through a padding queue
  // Components whose examples are lists of varying length, batched as sparse tensors: in a
  // batch each is three, <name>/indices, <name>/values and <name>/dense_shape
  // (ops/sparse_ops.h), which feature columns read as one sparse feature.
  std::vector<std::string> sparse;

  // Component index of a name in the source's examples, or -1.
  int component(const std::string& name) const;
  // `label`, then `more_labels`.
  std::vector<std::string> labels() const;
  bool is_sparse(const std::string& name) const;
  // The names of a batch's components, in order: the source's, a sparse one as its three.
  std::vector<std::string> batch_components() const;
};

// `data` with several labels, as a multi-head model reads them (heads.h): `labels[0]` is its
// label, the others its more_labels; none of them is a feature. A name that is no component is
// an error naming it.
runtime::Result<Dataset> with_labels(Dataset data, const std::vector<std::string>& labels);

// In-memory columns (the numpy_input_fn analog): examples along dimension 0 of each tensor.
// Every column but `label` is a feature. A column of another length is an error naming it.
runtime::Result<Dataset> arrays(std::vector<std::pair<std::string, runtime::Tensor>> columns,
                                const std::string& label, DatasetOptions options = {});
// CSV files with a header; `label` (may be empty) is the label column, the rest features;
// CsvOptions::sequences are batched as sparse tensors.
runtime::Result<Dataset> csv(const std::string& pattern, const std::string& label,
                             CsvOptions csv_options = {}, DatasetOptions options = {});
// Fashion-MNIST (or MNIST) from IDX files, gzipped or not: "image" float32 [784] in [0, 1] and
// "label" int64. `split`: "train" or "test" (also "t10k").
runtime::Result<Dataset> fashion_mnist(
    const std::string& split, DatasetOptions options = {},
    const std::string& dir = "/usr/share/datasets/fashion-mnist");
// libsvm / svmlight files; sparse ones batch "indices" and "values" as sparse tensors, which
// weighted_categorical_column(categorical_column_with_identity("indices", n), "values") reads.
runtime::Result<Dataset> libsvm(const std::string& pattern, LibsvmOptions libsvm_options = {},
                                DatasetOptions options = {});
// troupe record files (record_file.h).
runtime::Result<Dataset> records(const std::string& pattern, const std::string& label,
                                 DatasetOptions options = {});
// TFRecord files of tf.Example (tfrecord_source.h): each feature of the spec (given, or inferred
// from the first records) a component, `label` among them; VarLen features are batched as sparse
// tensors.
runtime::Result<Dataset> tfrecord(const std::string& pattern, const std::string& label,
                                  TfRecordOptions tfrecord_options = {},
                                  DatasetOptions options = {});

// Splits columns into a training and a test part by a seeded permutation of the rows.
runtime::Result<std::pair<std::vector<std::pair<std::string, runtime::Tensor>>,
                          std::vector<std::pair<std::string, runtime::Tensor>>>>
train_test_split(const std::vector<std::pair<std::string, runtime::Tensor>>& columns,
                 double test_fraction, uint64_t seed = 0);

// The part of `data` that worker `index` of `num_shards` reads, so that no two workers read the
// same example in an epoch and together they read all: whole units (files, record blocks,
// column chunks) dealt round-robin when there are at least as many as workers, otherwise the
// index-th slice of every unit's examples. An error when an index is outside [0, num_shards).
runtime::Result<Dataset> shard(const Dataset& data, int num_shards, int index);

// The rows `rows` of `t`, in that order (for splits and in-memory shuffles).
runtime::Tensor gather_rows(const runtime::Tensor& t, const std::vector<int64_t>& rows);

// A running dataset: a queue actor and a runner actor feeding it batches (each queue element
// one batch), or, for a small dataset in memory, batches the training loop cuts itself
// (reads_in_loop()). A session loop reads it through attach(). Destroying the pipeline stops
// its actors.
class Pipeline {
 public:
  // `skip_batches` batches are dropped from the start (a resumed training run reads on).
  static runtime::Result<std::unique_ptr<Pipeline>> start(actors::Runtime& runtime,
                                                          const Dataset& dataset,
                                                          int64_t skip_batches = 0);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Whether the loop that reads this pipeline cuts its batches itself, in the session actor:
  // for a dataset in memory, without a map, padding or sparse components, whose batches are at
  // most kLoopBatchBytes. Copying such a batch's rows costs less than handing a batch from the
  // runner's thread to the graph's (a message, a wake-up, memory allocated on one thread and
  // freed on the other: 3-4 us a batch, bench/estimator_bench). The examples and their order are
  // the runner's (actors/example_order.h).
  bool reads_in_loop() const { return reader_ != nullptr; }
  static constexpr int64_t kLoopBatchBytes = 32 << 10;
  // The queue a session loop dequeues from (LoopRequest::input, batch_size 0); null when the
  // loop reads the batches itself.
  const caf::actor& queue_actor() const { return queue_.actor(); }
  // When the loop reads the batches itself: feeds the next batch's components to `inputs`, in
  // order (LoopRequest::feed); OutOfRange after the last. Null otherwise.
  std::function<runtime::Status(runtime::FeedList*)> loop_feed(
      std::vector<runtime::Output> inputs) const;
  // Points `loop` at this pipeline's batches, fed to `inputs` in order; a feed the loop already
  // has runs after the batch's.
  void attach(actors::LoopRequest* loop, std::vector<runtime::Output> inputs) const;

  const Dataset& dataset() const { return dataset_; }
  // The next batch, all components; OutOfRange after the last.
  runtime::Result<std::vector<runtime::Tensor>> next();
  actors::RunnerStats runner_stats();
  // skip_bad_records counts what it skips; the user hears the count when the data ends: a
  // warning naming the source and `what` read it ("training"), when any were skipped.
  void log_skipped(const char* what);
  // The queue's counts; a pipeline read in the loop has none to give (zeros).
  actors::QueueStats queue_stats();

 private:
  struct LoopReader;
  Pipeline(actors::Runtime& runtime, Dataset dataset, actors::Queue queue, caf::actor runner,
           std::shared_ptr<LoopReader> reader);
  actors::Runtime& runtime_;
  Dataset dataset_;
  actors::Queue queue_;
  caf::actor runner_;
  std::shared_ptr<LoopReader> reader_;
};

}  // namespace troupe::estimators::input
