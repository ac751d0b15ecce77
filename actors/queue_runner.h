// Queue runners: the actors that fill a queue from a dataset, as TF.Learn's FeedingQueueRunner
// threads did. A runner splits its source into units (a file, a range of rows, a record), hands
// them to N reader actors that decode in parallel (or reads them itself when the source is in
// memory and there is no map), and enqueues the decoded examples in unit order, so a seeded run
// delivers the same examples in the same order however the readers race (that order, the
// shuffle buffer and the batches are example_order.h's).
// It holds at most a few units beyond what the queue accepted: a slow consumer stops the readers.
// With a batch size it also stacks the batches, on its own thread, so that a training step
// takes a ready batch from the queue: as the queue takes them, at most 1 MB of them at a time
// outside it, and on another core than the graph's worker while one is free (graph_core.h).
//
//   auto runner = spawn_queue_runner(rt.system(), source, queue.actor(),
//                                    {.num_readers = 2, .num_epochs = 5, .shuffle = true});
//   ...                                   // the queue closes after the fifth epoch
//   caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);   // stops it and its readers
//
// A unit that fails to decode fails the queue with an error naming the source and where in it
// (file and line or byte offset); every waiting and later dequeue answers that error, so a bad
// file never hangs training. Readers are detached actors: file reads block, and the graph's
// CAF worker must not wait for a disk.
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/queue.h"
#include "runtime/status.h"

namespace troupe::actors {

// A dataset a runner reads. Implementations live with the input functions (estimators/input).
class Source {
 public:
  virtual ~Source() = default;
  virtual std::string name() const = 0;  // what errors call it: "csv /data/train.csv"
  virtual std::vector<std::string> components() const = 0;  // in chunk order
  virtual int64_t num_units() const = 0;
  // Decodes one unit; called from several readers at once. A bad record is an error naming the
  // file and line or offset, or, for a source told to skip bad records, counted in `skipped`.
  virtual runtime::Status read(int64_t unit, std::vector<Chunk>* out, int64_t* skipped) const = 0;
  // Whether read() only points into memory the source holds (no file, no decoding): a runner
  // without a map then reads units itself, since reader threads would buy nothing and cost
  // their start (a training or evaluation call on a small table starts a pipeline each time).
  virtual bool in_memory() const { return false; }
};

struct RunnerOptions {
  int num_readers = 2;
  int64_t num_epochs = 1;  // 0: until stopped
  bool shuffle = false;    // unit order per epoch, then a shuffle buffer of examples
  uint64_t seed = 0;
  int64_t shuffle_buffer = 10000;  // examples; an epoch is always shuffled within itself
  // Applied to each decoded chunk, in the readers (a parallel map over batches of examples).
  std::function<runtime::Status(Chunk&)> map = nullptr;
  int units_in_flight = 0;  // decoded or decoding ahead of the queue; 0: 2 per reader
  // Stack examples into batches before the queue (each batch one element, so a dequeue of one
  // element hands a step its batch without a copy on the graph's worker), as tf.data batches
  // in its pipeline; 0: enqueue single examples. Batches span epochs; the last is smaller
  // unless drop_remainder. `pad` pads examples of different shapes, as a padding queue does.
  int64_t batch_size = 0;
  bool drop_remainder = false;
  bool pad = false;
  // Per source component: examples hold lists of varying length, batched as sparse tensors
  // (stack_rows, queue.h), each three components of the batch in its place.
  std::vector<bool> sparse;
  bool close_queue_at_end = true;
  // Elements (batches when batch_size > 0, else examples) dropped from the start of the
  // sequence, unstacked: a run resumed from a checkpoint reads on where the interrupted one
  // stopped, with the same batches (the order is seeded).
  int64_t skip = 0;
};

struct RunnerStats {
  runtime::Status status;  // the first error
  int64_t examples = 0;    // handed to the queue
  int64_t skipped = 0;     // bad records skipped
  int64_t epochs = 0;      // completed
  bool done = false;
};

caf::actor spawn_queue_runner(caf::actor_system& system, std::shared_ptr<const Source> source,
                              caf::actor queue, RunnerOptions options);

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::RunnerStats)
