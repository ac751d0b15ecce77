#include "actors/queue_runner.h"

#include <algorithm>
#include <map>

#include "actors/example_order.h"
#include "actors/graph_core.h"
#include "actors/messages.h"

namespace troupe::actors {

using runtime::Status;

namespace {

using start_atom = caf::atom_constant<caf::atom("start")>;

struct DecodeUnit {
  int64_t seq = 0;
  int64_t unit = 0;
};

}  // namespace
}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::DecodeUnit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::Decoded)

namespace troupe::actors {
namespace {

caf::behavior reader_actor(caf::event_based_actor*, std::shared_ptr<const Source> source,
                           std::function<Status(Chunk&)> map) {
  return {
      [source, map](DecodeUnit& u) { return decode_unit(*source, map, u.seq, u.unit); },
  };
}

struct RunnerState {
  std::shared_ptr<const Source> source;
  caf::actor queue;
  RunnerOptions options;
  std::unique_ptr<ExampleOrder> order;
  std::vector<caf::actor> readers;
  int64_t dispatched = 0;  // next sequence number to decode
  std::map<int64_t, Decoded> ready;
  int enqueues_outstanding = 0;  // sent, not yet wholly taken by the queue
  int64_t enqueue_batches = 1;   // the most batches the next enqueue carries
  bool finished = false;
  RunnerStats stats;     // epochs and skipped come from the order
  GraphCore graph_core;  // kept for the runner's life (graph_core.h)
};

using RunnerActor = caf::stateful_actor<RunnerState>;

void fail(RunnerActor* self, Status status) {
  RunnerState& st = self->state;
  if (st.finished) return;
  st.finished = true;
  st.stats.status = status;
  st.stats.done = true;
  self->send(st.queue, fail_atom::value, std::move(status));
}

void advance(RunnerActor* self);

void close_queue(RunnerActor* self) {
  self->request(self->state.queue, caf::infinite, close_atom::value, false)
      .then([](Status&) {}, [](caf::error&) {});
}

void send_rows(RunnerActor* self, std::vector<RowRef> rows, int64_t n) {
  RunnerState& st = self->state;
  ++st.enqueues_outstanding;
  self->request(st.queue, caf::infinite, enqueue_atom::value, EnqueueRequest{std::move(rows)})
      .then(
          [self, n](Status& s) {
            RunnerState& st = self->state;
            --st.enqueues_outstanding;
            if (!s.ok()) {
              // The consumer closed the queue or it failed: nothing left to do.
              st.finished = true;
              st.stats.done = true;
              if (s.code() != runtime::Code::kCancelled) st.stats.status = s;
              return;
            }
            st.stats.examples += n;
            advance(self);
          },
          [self](caf::error& e) {
            --self->state.enqueues_outstanding;
            fail(self, runtime::unavailable("queue: ", self->system().render(e)));
          });
}

// One enqueue carries stacked batches up to this many bytes (at least one batch). Each enqueue
// costs the graph's worker, which runs the queue actor, a message and a wake-up of the runner:
// per batch, that halved the Estimator's rate on a linear model's 23 us steps
// (bench/estimator_bench). Fashion-MNIST's 400 KB batches go three at a time.
constexpr int64_t kEnqueueBytes = 1 << 20;
// Enqueues in flight at once: while the queue takes in one, the runner stacks the next. With
// one, the training loop emptied the queue while the runner stacked the next megabyte (1600 of
// estimator_bench's linear-model batches, about 5 ms) and waited for it.
constexpr int kEnqueuesOutstanding = 2;

// Whether the examples waiting fill the next enqueue (its batches, or its bytes).
bool enqueue_full(const RunnerState& st) {
  const int64_t rows = st.order->waiting_examples();
  if (rows == 0) return false;
  if (rows >= st.enqueue_batches * st.options.batch_size) return true;
  return rows * st.order->example_bytes() >= kEnqueueBytes;
}

// Stacks the next batches of the examples waiting and hands them to the queue in one enqueue,
// when fewer than kEnqueuesOutstanding are in flight: the runner stacks batches as the consumer
// takes them (its work keeps pace with training instead of coming in bursts of a unit's or a
// shuffle buffer's worth) and at most kEnqueuesOutstanding x kEnqueueBytes of them wait outside
// the queue. Enqueues start at one batch and grow eightfold, so that the first step waits for
// one batch, not a megabyte of them, and an epoch of small batches costs a few enqueues. Once the
// input is done, the rest goes as a smaller batch unless drop_remainder. Returns whether batches
// went out (or the runner failed).
bool send_batches(RunnerActor* self) {
  RunnerState& st = self->state;
  std::vector<RowRef> batches;
  int64_t examples = 0, bytes = 0;
  while (bytes < kEnqueueBytes && static_cast<int64_t>(batches.size()) < st.enqueue_batches) {
    std::vector<runtime::Tensor> stacked;
    auto n = st.order->next_batch(&stacked, /*background=*/true);
    if (!n.ok()) {
      fail(self, n.status());
      return true;
    }
    if (*n == 0) break;
    auto chunk = std::make_shared<Chunk>();
    for (runtime::Tensor& t : stacked) {
      std::vector<int64_t> dims{1};
      dims.insert(dims.end(), t.shape().dims().begin(), t.shape().dims().end());
      bytes += static_cast<int64_t>(t.num_elements() * runtime::dtype_size(t.dtype()));
      chunk->components.push_back(t.reshaped(runtime::Shape(dims)));
    }
    batches.push_back(RowRef{std::move(chunk), 0});
    examples += *n;
  }
  if (batches.empty()) return false;
  st.enqueue_batches = std::min<int64_t>(st.enqueue_batches * 8, int64_t{1} << 20);
  send_rows(self, std::move(batches), examples);
  return true;
}

// While fewer enqueues than kEnqueuesOutstanding are in flight: sends the next batches if whole
// ones wait, else takes the next decoded unit in order; then decodes more, and closes the queue
// after the last epoch.
void advance(RunnerActor* self) {
  RunnerState& st = self->state;
  if (st.finished) return;
  ExampleOrder& order = *st.order;
  while (st.enqueues_outstanding < kEnqueuesOutstanding && !st.finished) {
    // Batches go out once they fill an enqueue, or when no unit is at hand to add to them: each
    // enqueue acknowledged wakes this thread. Sent a unit at a time (1024 rows of an in-memory
    // source), estimator_bench's 500 batches an epoch took 21 enqueues; filled and grown
    // eightfold, 4, and the pipeline's step went from 20.0 to 18.2 us.
    const bool unit_at_hand =
        !order.units_done() && (st.readers.empty() || st.ready.count(order.units_taken()) > 0);
    if (st.options.batch_size > 0 && (!unit_at_hand || enqueue_full(st)) && send_batches(self)) {
      continue;
    }
    if (order.units_done()) break;
    const int64_t seq = order.units_taken();
    auto it = st.ready.find(seq);
    if (it == st.ready.end() && st.readers.empty()) {
      it = st.ready.emplace(seq, decode_unit(*st.source, st.options.map, seq, order.unit_at(seq)))
               .first;
      st.dispatched = seq + 1;
    }
    if (it == st.ready.end()) break;
    Decoded d = std::move(it->second);
    st.ready.erase(it);
    auto rows = order.take(std::move(d));
    if (!rows.ok()) return fail(self, rows.status());
    const int64_t n = static_cast<int64_t>(rows->size());
    if (n > 0) send_rows(self, std::move(*rows), n);
  }
  if (st.finished) return;
  const int64_t total = order.total_units();
  const int64_t window = st.options.units_in_flight > 0
                             ? st.options.units_in_flight
                             : 2 * static_cast<int64_t>(st.readers.size());
  while (!st.readers.empty() && st.dispatched < total &&
         st.dispatched - order.units_taken() < window) {
    const int64_t seq = st.dispatched++;
    const caf::actor& reader = st.readers[static_cast<size_t>(seq) % st.readers.size()];
    self->request(reader, caf::infinite, DecodeUnit{seq, order.unit_at(seq)})
        .then(
            [self](Decoded& d) {
              self->state.ready.emplace(d.seq, std::move(d));
              advance(self);
            },
            [self](caf::error& e) {
              fail(self, runtime::internal_error(self->state.source->name(),
                                                 ": a reader died: ", self->system().render(e)));
            });
  }
  if (order.units_done() && st.enqueues_outstanding == 0 && order.waiting_examples() == 0) {
    st.finished = true;
    st.stats.done = true;
    if (st.options.close_queue_at_end) close_queue(self);
  }
}

caf::behavior runner_actor(RunnerActor* self, std::shared_ptr<const Source> source,
                           caf::actor queue, RunnerOptions options) {
  RunnerState& st = self->state;
  st.source = std::move(source);
  st.queue = std::move(queue);
  st.options = std::move(options);
  st.order = std::make_unique<ExampleOrder>(st.source, st.options);
  self->set_default_handler(caf::print_and_drop);
  // Before the readers start: their threads leave the graph's core as they start.
  st.graph_core = GraphCore::reserve();
  leave_graph_core();
  const bool reads_itself = st.source->in_memory() && !st.options.map;
  for (int i = 0; i < (reads_itself ? 0 : std::max(1, st.options.num_readers)); ++i) {
    st.readers.push_back(
        self->spawn<caf::detached + caf::linked>(reader_actor, st.source, st.options.map));
  }
  self->send(self, start_atom::value);
  return {
      [self](start_atom) { advance(self); },
      [self](stats_atom) {
        RunnerStats stats = self->state.stats;
        stats.epochs = self->state.order->epochs();
        stats.skipped = self->state.order->skipped();
        return stats;
      },
  };
}

}  // namespace

caf::actor spawn_queue_runner(caf::actor_system& system, std::shared_ptr<const Source> source,
                              caf::actor queue, RunnerOptions options) {
  // Detached: shuffling and stacking batches copies memory, which must not hold up the CAF
  // worker that runs the graph.
  return system.spawn<caf::detached>(runner_actor, std::move(source), std::move(queue),
                                     std::move(options));
}

}  // namespace troupe::actors
