// The order a dataset's examples are read in, and the batches cut from them: units in a seeded
// order each epoch, examples through a shuffle buffer, batches across epochs (the last one
// smaller unless drop_remainder), the first RunnerOptions::skip elements dropped. A queue runner
// drives one with the units its readers decode (queue_runner.h); a training loop that reads a
// small dataset held in memory drives one by itself (estimators/input/dataset.h). Both hand out
// the same examples in the same order for the same options, so a run resumed either way reads on
// where it stopped.
//
//   ExampleOrder order(source, {.num_epochs = 2, .shuffle = true, .seed = 7, .batch_size = 32});
//   std::vector<Tensor> batch;
//   for (;;) {
//     auto n = order.next_batch(&batch);        // Result<int64_t>: examples in it, 0: none ready
//     if (!n.ok()) return n.status();           // examples that do not stack, naming the source
//     if (*n > 0) { use(batch); continue; }
//     if (order.units_done()) break;            // the data's end
//     const int64_t seq = order.units_taken();
//     auto taken = order.take(decode_unit(*source, nullptr, seq, order.unit_at(seq)));
//     if (!taken.ok()) return taken.status();   // a unit that did not decode
//   }
//
// Not thread-safe: one actor or one loop drives it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "actors/queue.h"
#include "actors/queue_runner.h"
#include "runtime/status.h"

namespace troupe::actors {

// One unit read: its examples in chunks, or the error reading it.
struct Decoded {
  int64_t seq = 0;  // its place in the order
  runtime::Status status;
  std::vector<Chunk> chunks;
  int64_t skipped = 0;  // bad records skipped
};

// Reads unit `unit` of `source` as the seq-th and applies `map` (may be null) to each chunk; an
// error names the source. A reader's work, or the order's driver's for a source in memory.
Decoded decode_unit(const Source& source, const std::function<runtime::Status(Chunk&)>& map,
                    int64_t seq, int64_t unit);

class ExampleOrder {
 public:
  ExampleOrder(std::shared_ptr<const Source> source, const RunnerOptions& options);

  // Units read in all: every epoch's; INT64_MAX when the data repeats until stopped.
  int64_t total_units() const;
  int64_t units_taken() const { return taken_; }
  bool units_done() const { return taken_ == total_units(); }
  // The source's unit read as the seq-th (each epoch's order seeded by the seed and the epoch).
  int64_t unit_at(int64_t seq);

  // Takes the next unit in the order (decoded.seq == units_taken()): its examples pass the
  // shuffle buffer, which empties at an epoch's end. Without a batch size, returns the examples
  // to hand on (those still to skip dropped); with one, keeps them to stack and returns none.
  // The unit's error, when it failed.
  runtime::Result<std::vector<RowRef>> take(Decoded decoded);
  // Stacks the next batch into *batch: when a whole batch waits, or the units are done and some
  // examples wait (unless drop_remainder). Returns the examples in it, 0 when none is ready.
  // Batches still to skip are dropped unstacked. `background`: stack_rows's (queue.h).
  runtime::Result<int64_t> next_batch(std::vector<runtime::Tensor>* batch, bool background = false);

  int64_t waiting_examples() const { return waiting_; }
  // Bytes of the first example waiting (0 when none waits).
  int64_t example_bytes() const;
  int64_t epochs() const { return epochs_; }    // completed
  int64_t skipped() const { return skipped_; }  // bad records skipped

 private:
  std::shared_ptr<const Source> source_;
  RunnerOptions options_;
  int64_t units_ = 0;
  int64_t taken_ = 0;
  int64_t skip_ = 0;  // elements still to drop
  int64_t epochs_ = 0;
  int64_t skipped_ = 0;
  std::map<int64_t, std::vector<int64_t>> orders_;  // epoch -> unit order
  std::vector<RowRef> buffer_;                      // the shuffle buffer
  // Examples not yet stacked into a batch, as runs of rows of a chunk: a chunk read in order
  // waits as one run and its batches are slices of it (slice_rows), with no reference per row.
  struct Run {
    std::shared_ptr<const Chunk> chunk;
    int64_t first = 0, last = 0;  // rows [first, last)
  };
  std::deque<Run> pending_;
  int64_t waiting_ = 0;  // rows in pending_
  bool slices_ = false;  // batches of one run may be sliced: no padding, no sparse component
  std::mt19937_64 rng_;

  // References to the first n examples waiting, which drop_waiting(n) then drops.
  std::vector<RowRef> first_rows(int64_t n);
  void drop_waiting(int64_t n);  // the first n examples waiting
};

}  // namespace troupe::actors
