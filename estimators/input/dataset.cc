#include "estimators/input/dataset.h"

#include "runtime/log.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include "actors/example_order.h"
#include "actors/messages.h"
#include "estimators/input/columns_source.h"
#include "estimators/input/idx_file.h"
#include "estimators/input/record_file.h"
#include "ops/sparse_ops.h"

namespace troupe::estimators::input {

using runtime::DType;
using runtime::Result;
using runtime::Shape;
using runtime::Status;
using runtime::Tensor;

std::vector<std::string> Dataset::labels() const {
  std::vector<std::string> all;
  if (!label.empty()) all.push_back(label);
  all.insert(all.end(), more_labels.begin(), more_labels.end());
  return all;
}

runtime::Result<Dataset> with_labels(Dataset data, const std::vector<std::string>& labels) {
  if (labels.empty()) return runtime::invalid_argument("with_labels: no label");
  for (const std::string& l : labels) {
    if (data.component(l) < 0) {
      return runtime::invalid_argument(data.source->name(), " has no column '", l, "' to label");
    }
    if (data.is_sparse(l)) {
      return runtime::invalid_argument(data.source->name(), ": the label '", l,
                                       "' cannot be sparse");
    }
  }
  data.label = labels[0];
  data.more_labels.assign(labels.begin() + 1, labels.end());
  data.features.clear();
  for (const std::string& c : data.source->components()) {
    if (std::find(labels.begin(), labels.end(), c) == labels.end()) data.features.push_back(c);
  }
  return data;
}

int Dataset::component(const std::string& name) const {
  const std::vector<std::string> names = source->components();
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

bool Dataset::is_sparse(const std::string& name) const {
  return std::find(sparse.begin(), sparse.end(), name) != sparse.end();
}

std::vector<std::string> Dataset::batch_components() const {
  std::vector<std::string> names;
  for (const std::string& c : source->components()) {
    if (!is_sparse(c)) {
      names.push_back(c);
      continue;
    }
    for (const char* part : ops::kSparseParts) names.push_back(c + part);
  }
  return names;
}

namespace {

Result<Dataset> make(std::shared_ptr<const actors::Source> source, const std::string& label,
                     DatasetOptions options) {
  if (options.batch_size < 1) {
    return runtime::invalid_argument(source->name(), ": batch_size must be at least 1, not ",
                                     options.batch_size);
  }
  if (options.num_epochs < 0) {
    return runtime::invalid_argument(source->name(), ": num_epochs must be 0 (forever) or more");
  }
  Dataset d;
  d.source = std::move(source);
  d.options = std::move(options);
  d.label = label;
  bool found = label.empty();
  for (const std::string& c : d.source->components()) {
    if (c == label) {
      found = true;
    } else {
      d.features.push_back(c);
    }
  }
  if (!found) {
    return runtime::invalid_argument(d.source->name(), ": no column '", label, "' for the label");
  }
  return d;
}

// Runs map_example over every row of a chunk and stacks the results back into one chunk.
Status map_each_example(const std::function<Status(std::vector<Tensor>&)>& fn, actors::Chunk& c) {
  auto shared = std::make_shared<const actors::Chunk>(std::move(c));
  std::vector<actors::RowRef> mapped;
  for (const actors::RowRef& row : actors::rows_of(shared)) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<Tensor> one, actors::stack_rows({row}, false));
    for (Tensor& t : one) {
      t = t.reshaped(
          Shape(std::vector<int64_t>(t.shape().dims().begin() + 1, t.shape().dims().end())));
    }
    TROUPE_RETURN_IF_ERROR(fn(one));
    auto out = std::make_shared<actors::Chunk>();
    for (Tensor& t : one) {
      std::vector<int64_t> dims{1};
      dims.insert(dims.end(), t.shape().dims().begin(), t.shape().dims().end());
      out->components.push_back(t.reshaped(Shape(dims)));
    }
    mapped.push_back(actors::RowRef{out, 0});
  }
  c = actors::Chunk{};
  if (mapped.empty()) return runtime::ok_status();
  TROUPE_ASSIGN_OR_RETURN(c.components, actors::stack_rows(mapped, false));
  return runtime::ok_status();
}

// One worker's part of a source (shard()).
class ShardSource : public actors::Source {
 public:
  ShardSource(std::shared_ptr<const actors::Source> base, int num_shards, int index)
      : base_(std::move(base)),
        n_(num_shards),
        index_(index),
        by_units_(base_->num_units() >= num_shards) {}
  std::string name() const override {
    return base_->name() + " (part " + std::to_string(index_ + 1) + " of " + std::to_string(n_) +
           ")";
  }
  std::vector<std::string> components() const override { return base_->components(); }
  bool in_memory() const override { return base_->in_memory(); }
  int64_t num_units() const override {
    const int64_t all = base_->num_units();
    return by_units_ ? (all - index_ + n_ - 1) / n_ : all;
  }
  Status read(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const override {
    if (by_units_) return base_->read(unit * n_ + index_, out, skipped);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto kept = slices_.find(unit); kept != slices_.end()) {
        out->insert(out->end(), kept->second.chunks.begin(), kept->second.chunks.end());
        *skipped += kept->second.skipped;
        return runtime::ok_status();
      }
    }
    std::vector<actors::Chunk> chunks;
    Slice slice;
    TROUPE_RETURN_IF_ERROR(base_->read(unit, &chunks, &slice.skipped));
    for (const actors::Chunk& c : chunks) {
      const int64_t first = c.first(), rows = c.last() - c.first();
      const int64_t begin = first + rows * index_ / n_, end = first + rows * (index_ + 1) / n_;
      if (end <= begin) continue;
      actors::Chunk mine;
      for (const Tensor& t : c.components) {
        mine.components.push_back(runtime::slice_rows(t, begin, end - begin));
      }
      slice.chunks.push_back(std::move(mine));
    }
    out->insert(out->end(), slice.chunks.begin(), slice.chunks.end());
    *skipped += slice.skipped;
    std::lock_guard<std::mutex> lock(mu_);
    slices_.emplace(unit, std::move(slice));
    return runtime::ok_status();
  }

 private:
  std::shared_ptr<const actors::Source> base_;
  int64_t n_, index_;
  bool by_units_;
  // With fewer units than workers, every worker reads each unit whole for its slice of it: its
  // slice is kept (its own rows, copied), so that later epochs read memory, not the unit again.
  // At most its share of fewer than n units. With 64 workers on a small CSV, parsing the whole
  // file for each worker's every epoch took half of the machine.
  struct Slice {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
  };
  mutable std::mutex mu_;
  mutable std::map<int64_t, Slice> slices_;
};

}  // namespace

Result<Dataset> shard(const Dataset& data, int num_shards, int index) {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    return runtime::invalid_argument("input shard ", index, " of ", num_shards,
                                     ": the index must be in [0, ", num_shards, ")");
  }
  if (!data.source) return runtime::invalid_argument("a dataset without a source");
  if (num_shards == 1) return data;
  Dataset part = data;
  part.source = std::make_shared<ShardSource>(data.source, num_shards, index);
  return part;
}

Result<Dataset> arrays(std::vector<std::pair<std::string, Tensor>> columns,
                       const std::string& label, DatasetOptions options) {
  TROUPE_ASSIGN_OR_RETURN(auto source, ColumnsSource::create("arrays", std::move(columns)));
  return make(std::move(source), label, std::move(options));
}

Result<Dataset> csv(const std::string& pattern, const std::string& label, CsvOptions csv_options,
                    DatasetOptions options) {
  csv_options.skip_bad_records = csv_options.skip_bad_records || options.skip_bad_records;
  TROUPE_ASSIGN_OR_RETURN(auto source, CsvSource::open(pattern, std::move(csv_options)));
  std::vector<std::string> sequences = source->var_len();
  TROUPE_ASSIGN_OR_RETURN(Dataset d, make(std::move(source), label, std::move(options)));
  for (const std::string& name : sequences) {
    if (name == label) {
      return runtime::invalid_argument(d.source->name(), ": the label '", label,
                                       "' cannot be a sequence");
    }
  }
  d.sparse = std::move(sequences);
  return d;
}

Result<Dataset> fashion_mnist(const std::string& split, DatasetOptions options,
                              const std::string& dir) {
  std::string prefix = split;
  if (split == "test") prefix = "t10k";
  if (prefix != "train" && prefix != "t10k") {
    return runtime::invalid_argument("fashion_mnist: split '", split, "' is not train or test");
  }
  auto find = [&](const std::string& kind) {
    const std::string base = dir + "/" + prefix + "-" + kind;
    const std::string gz = base + ".gz";
    return MappedFile::open(gz).ok() ? gz : base;
  };
  TROUPE_ASSIGN_OR_RETURN(Tensor images, read_idx(find("images-idx3-ubyte")));
  TROUPE_ASSIGN_OR_RETURN(Tensor labels, read_idx(find("labels-idx1-ubyte")));
  if (images.rank() != 3 || labels.rank() != 1 || labels.dim(0) != images.dim(0)) {
    return runtime::invalid_argument("fashion_mnist ", dir, ": ", images.shape().to_string(),
                                     " images for ", labels.shape().to_string(), " labels");
  }
  const int64_t n = images.dim(0);
  const int64_t pixels = images.dim(1) * images.dim(2);
  Tensor x(DType::kFloat32, Shape{n, pixels});
  Tensor y(DType::kInt64, Shape{n});
  const uint8_t* px = images.data<uint8_t>();
  float* fx = x.data<float>();
  for (int64_t i = 0; i < n * pixels; ++i) fx[i] = px[i] * (1.0f / 255.0f);
  for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = labels.data<uint8_t>()[i];
  TROUPE_ASSIGN_OR_RETURN(
      auto source, ColumnsSource::create("fashion-mnist " + prefix, {{"image", x}, {"label", y}}));
  return make(std::move(source), "label", std::move(options));
}

Result<Dataset> libsvm(const std::string& pattern, LibsvmOptions libsvm_options,
                       DatasetOptions options) {
  libsvm_options.skip_bad_records = libsvm_options.skip_bad_records || options.skip_bad_records;
  const bool sparse = !libsvm_options.dense;
  TROUPE_ASSIGN_OR_RETURN(auto source, LibsvmSource::open(pattern, libsvm_options));
  TROUPE_ASSIGN_OR_RETURN(Dataset d, make(std::move(source), "label", std::move(options)));
  if (sparse) d.sparse = {"indices", "values"};
  return d;
}

Result<Dataset> records(const std::string& pattern, const std::string& label,
                        DatasetOptions options) {
  TROUPE_ASSIGN_OR_RETURN(auto source, RecordSource::open(pattern, options.skip_bad_records));
  return make(std::move(source), label, std::move(options));
}

Result<Dataset> tfrecord(const std::string& pattern, const std::string& label,
                         TfRecordOptions tfrecord_options, DatasetOptions options) {
  tfrecord_options.skip_bad_records = tfrecord_options.skip_bad_records || options.skip_bad_records;
  TROUPE_ASSIGN_OR_RETURN(auto source, TfRecordSource::open(pattern, std::move(tfrecord_options)));
  std::vector<std::string> sparse = source->var_len();
  TROUPE_ASSIGN_OR_RETURN(Dataset d, make(std::move(source), label, std::move(options)));
  d.sparse = std::move(sparse);
  return d;
}

Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> dims = t.shape().dims();
  dims[0] = static_cast<int64_t>(rows.size());
  Tensor out(t.dtype(), Shape(dims));
  const int64_t per = t.dim(0) == 0 ? 0 : t.num_elements() / t.dim(0);
  if (t.dtype() == DType::kString) {
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int64_t e = 0; e < per; ++e) {
        out.data<std::string>()[i * per + e] = t.data<std::string>()[rows[i] * per + e];
      }
    }
    return out;
  }
  const size_t bytes = static_cast<size_t>(per) * dtype_size(t.dtype());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(static_cast<char*>(out.raw_data()) + i * bytes,
                static_cast<const char*>(t.raw_data()) + rows[i] * bytes, bytes);
  }
  return out;
}

Result<std::pair<std::vector<std::pair<std::string, Tensor>>,
                 std::vector<std::pair<std::string, Tensor>>>>
train_test_split(const std::vector<std::pair<std::string, Tensor>>& columns, double test_fraction,
                 uint64_t seed) {
  if (columns.empty()) return runtime::invalid_argument("train_test_split: no columns");
  if (!(test_fraction > 0 && test_fraction < 1)) {
    return runtime::invalid_argument("train_test_split: test_fraction ", test_fraction,
                                     " is not in (0, 1)");
  }
  const int64_t n = columns[0].second.rank() > 0 ? columns[0].second.dim(0) : 0;
  for (const auto& [name, t] : columns) {
    if (t.rank() < 1 || t.dim(0) != n) {
      return runtime::invalid_argument("train_test_split: column '", name, "' does not have ", n,
                                       " examples");
    }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const auto n_test = static_cast<size_t>(static_cast<double>(n) * test_fraction + 0.5);
  std::vector<int64_t> test(order.begin(), order.begin() + n_test);
  std::vector<int64_t> train(order.begin() + n_test, order.end());
  std::pair<std::vector<std::pair<std::string, Tensor>>,
            std::vector<std::pair<std::string, Tensor>>>
      out;
  for (const auto& [name, t] : columns) {
    out.first.push_back({name, gather_rows(t, train)});
    out.second.push_back({name, gather_rows(t, test)});
  }
  return out;
}

// The reading side of a pipeline read in the loop. Its calls come from the session actor
// (loop_feed) and from user threads (next, runner_stats), never at once, except stats asked
// while a loop reads: hence the lock, which nothing else waits on.
struct Pipeline::LoopReader {
  std::mutex mu;
  std::shared_ptr<const actors::Source> source;
  actors::ExampleOrder order;
  actors::RunnerStats stats;

  LoopReader(std::shared_ptr<const actors::Source> s, const actors::RunnerOptions& options)
      : source(s), order(std::move(s), options) {}

  Result<std::vector<Tensor>> next() {
    std::lock_guard<std::mutex> lock(mu);
    if (!stats.status.ok()) return stats.status;
    for (;;) {
      std::vector<Tensor> batch;
      auto n = order.next_batch(&batch);
      if (n.ok() && *n > 0) {
        stats.examples += *n;
        return batch;
      }
      Status s = n.status();
      if (s.ok() && order.units_done()) {
        stats.done = true;
        return runtime::out_of_range("the end of ", source->name());
      }
      if (s.ok()) {
        const int64_t seq = order.units_taken();
        s = order.take(actors::decode_unit(*source, nullptr, seq, order.unit_at(seq))).status();
      }
      if (!s.ok()) {
        stats.status = s;
        stats.done = true;
        return s;
      }
    }
  }
};

namespace {

// Bytes of one example of every component of `source` (its first unit's first), or -1 when
// its units do not say (none, or an error reading the first).
int64_t example_bytes(const actors::Source& source) {
  if (source.num_units() == 0) return -1;
  std::vector<actors::Chunk> chunks;
  int64_t skipped = 0;
  if (!source.read(0, &chunks, &skipped).ok() || chunks.empty()) return -1;
  int64_t bytes = 0;
  for (const Tensor& t : chunks[0].components) {
    if (t.dtype() == DType::kString || t.rank() == 0) return -1;
    bytes += t.num_elements() / std::max<int64_t>(1, t.dim(0)) *
             static_cast<int64_t>(runtime::dtype_size(t.dtype()));
  }
  return bytes;
}

bool read_in_loop(const Dataset& d) {
  const DatasetOptions& o = d.options;
  if (!d.source->in_memory() || o.map || o.map_example || d.pad || !d.sparse.empty() ||
      o.batch_size <= 0) {
    return false;
  }
  const int64_t bytes = example_bytes(*d.source);
  return bytes >= 0 && bytes * o.batch_size <= Pipeline::kLoopBatchBytes;
}

}  // namespace

Result<std::unique_ptr<Pipeline>> Pipeline::start(actors::Runtime& runtime, const Dataset& dataset,
                                                  int64_t skip_batches) {
  if (!dataset.source) return runtime::invalid_argument("a dataset without a source");
  const DatasetOptions& o = dataset.options;
  actors::RunnerOptions r;
  r.num_readers = std::max(1, o.num_readers);
  r.num_epochs = o.num_epochs;
  r.shuffle = o.shuffle;
  r.seed = o.seed;
  r.shuffle_buffer = o.shuffle_buffer;
  r.batch_size = o.batch_size;
  r.drop_remainder = o.drop_remainder;
  r.pad = dataset.pad;
  const std::vector<std::string> names = dataset.source->components();
  for (const std::string& c : dataset.sparse) {
    if (std::find(names.begin(), names.end(), c) == names.end()) {
      return runtime::invalid_argument(dataset.source->name(), " has no component '", c,
                                       "' to batch as a sparse tensor");
    }
  }
  for (const std::string& c : names) r.sparse.push_back(dataset.is_sparse(c));
  r.skip = skip_batches;
  if (read_in_loop(dataset)) {
    auto reader = std::make_shared<LoopReader>(dataset.source, r);
    return std::unique_ptr<Pipeline>(new Pipeline(runtime, dataset, actors::Queue(runtime, {}),
                                                  caf::actor(), std::move(reader)));
  }
  actors::QueueOptions q;
  q.kind = actors::QueueKind::kFifo;
  q.capacity = std::max<int64_t>(1, o.prefetch_batches);  // batches: the runner stacks them
  q.name = "the input queue of " + dataset.source->name();
  actors::Queue queue = actors::Queue::create(runtime, q);
  auto map = o.map;
  auto map_example = o.map_example;
  if (map || map_example) {
    r.map = [map, map_example](actors::Chunk& c) -> Status {
      if (map_example) TROUPE_RETURN_IF_ERROR(map_each_example(map_example, c));
      if (map) {
        if (c.first() != 0 || c.last() != c.rows()) {
          // The user function sees exactly the chunk's examples.
          TROUPE_ASSIGN_OR_RETURN(
              c.components,
              actors::stack_rows(actors::rows_of(std::make_shared<const actors::Chunk>(c)), false));
          c.begin = 0;
          c.end = -1;
        }
        TROUPE_RETURN_IF_ERROR(map(c.components));
      }
      return runtime::ok_status();
    };
  }
  caf::actor runner =
      actors::spawn_queue_runner(runtime.system(), dataset.source, queue.actor(), std::move(r));
  queue.watch(runner, "the runner of " + dataset.source->name());
  return std::unique_ptr<Pipeline>(
      new Pipeline(runtime, dataset, std::move(queue), std::move(runner), nullptr));
}

Pipeline::Pipeline(actors::Runtime& runtime, Dataset dataset, actors::Queue queue,
                   caf::actor runner, std::shared_ptr<LoopReader> reader)
    : runtime_(runtime),
      dataset_(std::move(dataset)),
      queue_(std::move(queue)),
      runner_(std::move(runner)),
      reader_(std::move(reader)) {}

Pipeline::~Pipeline() {
  if (reader_) return;
  caf::anon_send_exit(runner_, caf::exit_reason::user_shutdown);
  queue_.stop();
}

std::function<Status(runtime::FeedList*)> Pipeline::loop_feed(
    std::vector<runtime::Output> inputs) const {
  if (!reader_) return nullptr;
  return [reader = reader_, inputs = std::move(inputs)](runtime::FeedList* feeds) -> Status {
    TROUPE_ASSIGN_OR_RETURN(std::vector<Tensor> batch, reader->next());
    if (batch.size() != inputs.size()) {
      return runtime::invalid_argument(reader->source->name(), " gives ", batch.size(),
                                       " components for ", inputs.size(), " inputs");
    }
    for (size_t k = 0; k < inputs.size(); ++k) feeds->push_back({inputs[k], std::move(batch[k])});
    return runtime::ok_status();
  };
}

void Pipeline::attach(actors::LoopRequest* loop, std::vector<runtime::Output> inputs) const {
  if (!reader_) {
    loop->input = queue_actor();
    loop->input_feeds = std::move(inputs);
    loop->batch_size = 0;
    return;
  }
  auto read = loop_feed(std::move(inputs));
  auto then = std::move(loop->feed);
  loop->feed = [read, then](int64_t i, runtime::FeedList* feeds) -> Status {
    TROUPE_RETURN_IF_ERROR(read(feeds));
    return then ? then(i, feeds) : runtime::ok_status();
  };
}

Result<std::vector<Tensor>> Pipeline::next() {
  return reader_ ? reader_->next() : queue_.dequeue();
}

actors::QueueStats Pipeline::queue_stats() {
  return reader_ ? actors::QueueStats{} : queue_.stats();
}

void Pipeline::log_skipped(const char* what) {
  const actors::RunnerStats stats = runner_stats();
  if (stats.skipped > 0) {
    runtime::log_warning(what, " skipped ", stats.skipped, " bad records of ",
                         dataset_.source->name());
  }
}

actors::RunnerStats Pipeline::runner_stats() {
  if (reader_) {
    std::lock_guard<std::mutex> lock(reader_->mu);
    actors::RunnerStats stats = reader_->stats;
    stats.epochs = reader_->order.epochs();
    stats.skipped = reader_->order.skipped();
    return stats;
  }
  caf::scoped_actor self{runtime_.system()};
  actors::RunnerStats result;
  self->request(runner_, caf::infinite, actors::stats_atom::value)
      .receive([&](actors::RunnerStats& s) { result = s; },
               [&](caf::error& e) {
                 result.status = runtime::unavailable("runner: ", runtime_.system().render(e));
               });
  return result;
}

}  // namespace troupe::estimators::input
