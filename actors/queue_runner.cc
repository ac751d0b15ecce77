#include "actors/queue_runner.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>
#include <random>

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

struct Decoded {
  int64_t seq = 0;
  Status status;
  std::vector<Chunk> chunks;
  int64_t skipped = 0;
};

}  // namespace
}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::DecodeUnit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::Decoded)

namespace troupe::actors {
namespace {

// Reads and maps one unit, in a reader or, for a source in memory without a map, the runner.
Decoded decode(const Source& source, const std::function<Status(Chunk&)>& map,
               const DecodeUnit& u) {
  Decoded d;
  d.seq = u.seq;
  // User code (a source, a map) may throw: that fails the pipeline with what it said, instead
  // of killing the reader.
  try {
    d.status = source.read(u.unit, &d.chunks, &d.skipped);
    for (Chunk& c : d.chunks) {
      if (!d.status.ok()) break;
      if (map) d.status = map(c).with_context("map");
      if (d.status.ok()) d.status = check_chunk(c);
    }
  } catch (const std::exception& e) {
    d.status = runtime::internal_error("reading unit ", u.unit, " threw: ", e.what());
  }
  if (!d.status.ok()) d.status = d.status.with_context(source.name());
  return d;
}

caf::behavior reader_actor(caf::event_based_actor*, std::shared_ptr<const Source> source,
                           std::function<Status(Chunk&)> map) {
  return {
      [source, map](DecodeUnit& u) { return decode(*source, map, u); },
  };
}

struct RunnerState {
  std::shared_ptr<const Source> source;
  caf::actor queue;
  RunnerOptions options;
  std::vector<caf::actor> readers;
  int64_t units = 0;
  int64_t dispatched = 0;  // next sequence number to decode
  int64_t taken = 0;       // next sequence number to hand to the queue
  std::map<int64_t, Decoded> ready;
  std::map<int64_t, std::vector<int64_t>> orders;  // epoch -> unit order
  std::vector<RowRef> buffer;                      // the shuffle buffer
  std::deque<RowRef> pending;                      // examples not yet stacked into a batch
  std::mt19937_64 rng;
  int enqueues_outstanding = 0;  // sent, not yet wholly taken by the queue
  int64_t enqueue_batches = 1;   // the most batches the next enqueue carries
  bool finished = false;
  int64_t skip = 0;  // elements still to drop (RunnerOptions::skip)
  RunnerStats stats;
  GraphCore graph_core;  // kept for the runner's life (graph_core.h)
};

using RunnerActor = caf::stateful_actor<RunnerState>;

int64_t total_units(const RunnerState& st) {
  return st.options.num_epochs == 0 ? INT64_MAX : st.units * st.options.num_epochs;
}

int64_t unit_at(RunnerState& st, int64_t seq) {
  const int64_t epoch = seq / st.units;
  auto it = st.orders.find(epoch);
  if (it == st.orders.end()) {
    std::vector<int64_t> order(static_cast<size_t>(st.units));
    std::iota(order.begin(), order.end(), 0);
    if (st.options.shuffle) {
      std::mt19937_64 g(st.options.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
      std::shuffle(order.begin(), order.end(), g);
    }
    while (!st.orders.empty() && st.orders.begin()->first < epoch - 1)
      st.orders.erase(st.orders.begin());
    it = st.orders.emplace(epoch, std::move(order)).first;
  }
  return it->second[static_cast<size_t>(seq % st.units)];
}

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
  const int64_t rows = static_cast<int64_t>(st.pending.size());
  if (rows == 0) return false;
  if (rows >= st.enqueue_batches * st.options.batch_size) return true;
  int64_t row_bytes = 0;
  for (const runtime::Tensor& t : st.pending.front().chunk->components) {
    row_bytes += t.num_elements() / std::max<int64_t>(1, t.dim(0)) *
                 static_cast<int64_t>(runtime::dtype_size(t.dtype()));
  }
  return rows * row_bytes >= kEnqueueBytes;
}

// Stacks the next batches of the examples waiting and hands them to the queue in one enqueue,
// when fewer than kEnqueuesOutstanding are in flight: the runner stacks batches as the consumer
// takes them (its work keeps pace with training instead of coming in bursts of a unit's or a
// shuffle buffer's worth) and at most kEnqueuesOutstanding x kEnqueueBytes of them wait outside
// the queue. Enqueues start at one batch and grow eightfold, so that the first step waits for
// one batch, not a megabyte of them, and an epoch of small batches costs a few enqueues. Once the
// input is done, the rest goes as a smaller batch unless drop_remainder. Returns whether batches
// went out (or the runner failed).
bool send_batches(RunnerActor* self, bool input_done) {
  RunnerState& st = self->state;
  const size_t batch = static_cast<size_t>(st.options.batch_size);
  std::vector<RowRef> batches;
  int64_t examples = 0, bytes = 0;
  while (bytes < kEnqueueBytes && static_cast<int64_t>(batches.size()) < st.enqueue_batches &&
         (st.pending.size() >= batch || (input_done && !st.pending.empty()))) {
    const size_t take = std::min(st.pending.size(), batch);
    if (take < batch && st.options.drop_remainder) {
      st.pending.clear();
      break;
    }
    auto end = st.pending.begin() + static_cast<std::ptrdiff_t>(take);
    if (st.skip > 0) {
      --st.skip;
      st.pending.erase(st.pending.begin(), end);
      continue;
    }
    std::vector<RowRef> part(std::make_move_iterator(st.pending.begin()),
                             std::make_move_iterator(end));
    st.pending.erase(st.pending.begin(), end);
    auto stacked = stack_rows(part, st.options.pad, /*background=*/true, st.options.sparse);
    if (!stacked.ok()) {
      fail(self, stacked.status().with_context(st.source->name()));
      return true;
    }
    auto chunk = std::make_shared<Chunk>();
    for (runtime::Tensor& t : *stacked) {
      std::vector<int64_t> dims{1};
      dims.insert(dims.end(), t.shape().dims().begin(), t.shape().dims().end());
      bytes += static_cast<int64_t>(t.num_elements() * runtime::dtype_size(t.dtype()));
      chunk->components.push_back(t.reshaped(runtime::Shape(dims)));
    }
    batches.push_back(RowRef{std::move(chunk), 0});
    examples += static_cast<int64_t>(take);
  }
  if (batches.empty()) return false;
  st.enqueue_batches = std::min<int64_t>(st.enqueue_batches * 8, int64_t{1} << 20);
  send_rows(self, std::move(batches), examples);
  return true;
}

// Hands decoded examples on: to the queue as they are, or to the examples waiting to be
// stacked into batches.
void emit(RunnerActor* self, std::vector<RowRef> rows) {
  RunnerState& st = self->state;
  if (st.options.batch_size > 0) {
    for (RowRef& r : rows) st.pending.push_back(std::move(r));
    return;
  }
  const int64_t dropped = std::min<int64_t>(st.skip, static_cast<int64_t>(rows.size()));
  rows.erase(rows.begin(), rows.begin() + dropped);
  st.skip -= dropped;
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n > 0) send_rows(self, std::move(rows), n);
}

// While fewer enqueues than kEnqueuesOutstanding are in flight: sends the next batches if whole
// ones wait, else takes the next decoded unit in order; then decodes more, and closes the queue
// after the last epoch.
void advance(RunnerActor* self) {
  RunnerState& st = self->state;
  if (st.finished) return;
  const int64_t total = total_units(st);
  while (st.enqueues_outstanding < kEnqueuesOutstanding && !st.finished) {
    // Batches go out once they fill an enqueue, or when no unit is at hand to add to them: each
    // enqueue acknowledged wakes this thread. Sent a unit at a time (1024 rows of an in-memory
    // source), estimator_bench's 500 batches an epoch took 21 enqueues; filled and grown
    // eightfold, 4, and the pipeline's step went from 20.0 to 18.2 us.
    const bool unit_at_hand =
        st.taken < total && (st.readers.empty() || st.ready.count(st.taken) > 0);
    if (st.options.batch_size > 0 && (!unit_at_hand || enqueue_full(st)) &&
        send_batches(self, st.taken == total)) {
      continue;
    }
    if (st.taken == total) break;
    auto it = st.ready.find(st.taken);
    if (it == st.ready.end() && st.readers.empty()) {
      it = st.ready
               .emplace(st.taken, decode(*st.source, st.options.map,
                                         DecodeUnit{st.taken, unit_at(st, st.taken)}))
               .first;
      st.dispatched = st.taken + 1;
    }
    if (it == st.ready.end()) break;
    Decoded d = std::move(it->second);
    st.ready.erase(it);
    ++st.taken;
    if (!d.status.ok()) return fail(self, std::move(d.status));
    st.stats.skipped += d.skipped;
    std::vector<RowRef> out;
    for (Chunk& c : d.chunks) {
      auto chunk = std::make_shared<const Chunk>(std::move(c));
      for (int64_t r = chunk->first(); r < chunk->last(); ++r) {
        RowRef row{chunk, r};
        if (!st.options.shuffle) {
          out.push_back(std::move(row));
        } else if (static_cast<int64_t>(st.buffer.size()) <
                   std::max<int64_t>(1, st.options.shuffle_buffer)) {
          st.buffer.push_back(std::move(row));
        } else {
          std::uniform_int_distribution<size_t> pick(0, st.buffer.size() - 1);
          std::swap(st.buffer[pick(st.rng)], row);
          out.push_back(std::move(row));
        }
      }
    }
    const bool epoch_end = st.taken % st.units == 0;
    if (epoch_end) {
      std::shuffle(st.buffer.begin(), st.buffer.end(), st.rng);
      for (RowRef& r : st.buffer) out.push_back(std::move(r));
      st.buffer.clear();
      ++st.stats.epochs;
    }
    emit(self, std::move(out));
  }
  if (st.finished) return;
  const int64_t window = st.options.units_in_flight > 0
                             ? st.options.units_in_flight
                             : 2 * static_cast<int64_t>(st.readers.size());
  while (!st.readers.empty() && st.dispatched < total && st.dispatched - st.taken < window) {
    const int64_t seq = st.dispatched++;
    const caf::actor& reader = st.readers[static_cast<size_t>(seq) % st.readers.size()];
    self->request(reader, caf::infinite, DecodeUnit{seq, unit_at(st, seq)})
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
  if (st.taken == total && st.enqueues_outstanding == 0 && st.pending.empty()) {
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
  st.units = st.source->num_units();
  st.rng.seed(st.options.seed);
  st.skip = std::max<int64_t>(0, st.options.skip);
  self->set_default_handler(caf::print_and_drop);
  // Before the readers start: their threads leave the graph's core as they start.
  st.graph_core = GraphCore::reserve();
  leave_graph_core();
  const bool reads_itself = st.source->in_memory() && !st.options.map;
  for (int i = 0; i < (reads_itself ? 0 : std::max(1, st.options.num_readers)); ++i) {
    st.readers.push_back(
        self->spawn<caf::detached + caf::linked>(reader_actor, st.source, st.options.map));
  }
  if (st.units == 0) {
    st.options.num_epochs = 1;  // nothing to repeat: end at once
  }
  self->send(self, start_atom::value);
  return {
      [self](start_atom) {
        if (self->state.units == 0) {
          self->state.finished = self->state.stats.done = true;
          if (self->state.options.close_queue_at_end) close_queue(self);
          return;
        }
        advance(self);
      },
      [self](stats_atom) { return self->state.stats; },
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
