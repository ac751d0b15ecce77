// Queue actors: the bounded buffers between input readers and training steps, as TF's
// FIFOQueue, RandomShuffleQueue and PaddingFIFOQueue. An element is one example: a tuple of
// tensors ("components"). A full queue holds back enqueuers until there is room and an empty one
// holds back dequeuers until there is data, so a slow consumer back-pressures its readers and
// memory stays bounded. A closed queue serves what it holds, then answers OutOfRange: the end
// of an epoch.
//
//   actors::Runtime rt;
//   auto q = actors::Queue::create(rt, {.kind = QueueKind::kFifo, .capacity = 1024});
//   q.enqueue_many({images, labels});                     // examples along dimension 0
//   auto batch = q.dequeue_many(128);                     // Result<vector<Tensor>>: [128,...] each
//   q.close();
//   auto rest = q.dequeue_up_to(128);                     // fewer at the end; then OutOfRange
//
// Session loops dequeue straight from the actor (LoopRequest::input), the batches that are
// ready in one request, without a round trip through a user thread. Queue's methods block their
// caller; the actor itself never blocks. Examples travel as references into the chunks readers
// decoded: a batch is copied once, when it is dequeued.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/messages.h"
#include "actors/runtime_system.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::actors {

using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;
using dequeue_atom = caf::atom_constant<caf::atom("dequeue")>;
using close_atom = caf::atom_constant<caf::atom("close")>;
using fail_atom = caf::atom_constant<caf::atom("fail")>;
using size_atom = caf::atom_constant<caf::atom("size")>;
using watch_atom = caf::atom_constant<caf::atom("watch")>;

// Some examples decoded together: every component has the examples along dimension 0. The
// examples are rows [begin, end) (end -1: all), so a source that holds a whole dataset in memory
// hands out ranges of it without copying.
struct Chunk {
  std::vector<runtime::Tensor> components;
  int64_t begin = 0;
  int64_t end = -1;
  int64_t rows() const { return components.empty() ? 0 : components[0].dim(0); }
  int64_t first() const { return begin; }
  int64_t last() const { return end < 0 ? rows() : end; }  // one past
};

// One example: row `row` of a chunk.
struct RowRef {
  std::shared_ptr<const Chunk> chunk;
  int64_t row = 0;
};

// Checks that a chunk is well formed (same number of rows in every component, rank >= 1, a
// range inside them).
runtime::Status check_chunk(const Chunk& chunk);
// References to the rows [first, last) of `chunk`, in order.
std::vector<RowRef> rows_of(std::shared_ptr<const Chunk> chunk);
// Stacks examples into one tensor per component ([n, ...]). With `pad`, components whose shapes
// differ between examples are padded with zeros (empty strings) to the largest; without, such a
// difference is an error naming the component. `background` work (a runner's, beside training)
// steps aside every few examples while a kernel keeps every core busy
// (runtime/parallel_section.h).
// Components marked in `sparse` hold lists of varying length (a scalar or [len] an example):
// each becomes three tensors in its place, a [n, longest] sparse tensor's indices, values and
// dense_shape (runtime/sparse_tensor.h).
runtime::Result<std::vector<runtime::Tensor>> stack_rows(const std::vector<RowRef>& rows, bool pad,
                                                         bool background = false,
                                                         const std::vector<bool>& sparse = {});

// Rows [first, first + n) of every component of `chunk`, copied into one tensor each: the batch
// stack_rows would make of those rows, one copy per component.
runtime::Result<std::vector<runtime::Tensor>> slice_rows(const Chunk& chunk, int64_t first,
                                                         int64_t n);

enum class QueueKind { kFifo, kRandomShuffle, kPadding };

struct QueueOptions {
  QueueKind kind = QueueKind::kFifo;
  int64_t capacity = 1024;  // examples
  // RandomShuffle: dequeues wait until more than this many examples remain (unless closed), so
  // each pick is from a wide enough window.
  int64_t min_after_dequeue = 0;
  uint64_t seed = 0;
  std::string name = "queue";  // in errors
};

struct EnqueueRequest {
  std::vector<RowRef> rows;
};

enum class DequeueMode {
  kOne,   // one example, components without the batch dimension
  kMany,  // exactly n, or OutOfRange once closed with fewer
  kUpTo,  // n, or what is left once closed (at least one)
  // Up to n examples as kOne gives them, not stacked: at least one, and as many more as are
  // ready now. A loop whose queue holds whole batches takes them a few to a message.
  kReady,
};

struct DequeueRequest {
  int64_t n = 1;
  DequeueMode mode = DequeueMode::kMany;
};

// The answer to a dequeue: OutOfRange when the queue is closed and drained.
struct Batch {
  runtime::Status status;
  std::vector<runtime::Tensor> components;
  std::vector<std::vector<runtime::Tensor>> more;  // kReady: the examples after the first
};

struct QueueStats {
  int64_t size = 0;
  int64_t peak_size = 0;  // the most examples ever held at once
  int64_t enqueued = 0;
  int64_t dequeued = 0;
  // Dequeues that found too few elements and waited for more: a consumer starved for input (a
  // training loop that is input-bound counts one nearly every step).
  int64_t starved = 0;
  int64_t waiting_enqueues = 0;  // now, for want of room
  int64_t waiting_dequeues = 0;  // now, for want of elements
  bool closed = false;
};

caf::actor spawn_queue(caf::actor_system& system, QueueOptions options);

// A blocking handle for user threads; copies share one queue actor. stop() ends the actor (and
// answers waiting requests with an error).
class Queue {
 public:
  static Queue create(Runtime& runtime, QueueOptions options = {});
  Queue(Runtime& runtime, caf::actor actor) : runtime_(&runtime), actor_(std::move(actor)) {}

  // One example (waits for room).
  runtime::Status enqueue(std::vector<runtime::Tensor> example);
  // Examples along dimension 0 of every component.
  runtime::Status enqueue_many(std::vector<runtime::Tensor> examples);
  runtime::Result<std::vector<runtime::Tensor>> dequeue();
  runtime::Result<std::vector<runtime::Tensor>> dequeue_many(int64_t n);
  runtime::Result<std::vector<runtime::Tensor>> dequeue_up_to(int64_t n);
  // With `cancel_pending_enqueues`, enqueues still waiting for room fail with Cancelled; without,
  // they complete first.
  runtime::Status close(bool cancel_pending_enqueues = false);
  QueueStats stats();
  int64_t size() { return stats().size; }
  // The queue fails (every dequeue answers an error naming `what`) if `producer` ends other
  // than by a user's shutdown: a runner that died never closes its queue.
  void watch(const caf::actor& producer, std::string what);
  void stop();
  const caf::actor& actor() const { return actor_; }

 private:
  runtime::Status send_rows(std::vector<RowRef> rows);
  runtime::Result<std::vector<runtime::Tensor>> take(DequeueRequest request);
  Runtime* runtime_;
  caf::actor actor_;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::EnqueueRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::DequeueRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::Batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::QueueStats)
