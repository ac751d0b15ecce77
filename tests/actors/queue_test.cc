// Queue and runner actors: FIFO, shuffle and padding semantics, close and OutOfRange, blocking
// and back-pressure, exactly-once delivery across parallel readers, seeded reproducibility, a
// failing source, a session loop fed from a queue, and the runner's example order driven
// without a runner (actors/example_order.h).
#include "actors/queue.h"

#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "actors/example_order.h"
#include "actors/graph_core.h"
#include "actors/queue_runner.h"
#include "actors/session.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/state_ops.h"
#include "runtime/allocator.h"
#include "runtime/graph_builder.h"
#include "runtime/sparse_tensor.h"

using namespace troupe;
using actors::Queue;
using actors::QueueKind;
using namespace troupe::runtime;

namespace {

Tensor iota(int64_t n, int64_t start = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return Tensor::from_vector(Shape{n}, v);
}

// A source of `units` units of `rows` examples each: example k holds k. Slow and failing units
// on request.
class CountingSource : public actors::Source {
 public:
  CountingSource(int64_t units, int64_t rows) : units_(units), rows_(rows) {}
  std::string name() const override { return "counting"; }
  std::vector<std::string> components() const override { return {"k"}; }
  int64_t num_units() const override { return units_; }
  bool in_memory() const override { return memory; }
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out, int64_t*) const override {
    if (unit == fail_unit) return runtime::data_loss("unit ", unit, " is bad");
    if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us * (unit % 3)));
    out->push_back(actors::Chunk{{iota(rows_, unit * rows_)}});
    return runtime::ok_status();
  }
  int64_t fail_unit = -1;
  int delay_us = 0;
  bool memory = false;

 private:
  int64_t units_, rows_;
};

// 0, 1, ... n - 1: what a CountingSource of n examples gives in order.
std::vector<int64_t> drain_expected(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// Dequeues up to n single examples; how many came.
int64_t drain_some(Queue& q, int64_t n) {
  int64_t got = 0;
  while (got < n && q.dequeue().ok()) ++got;
  return got;
}

std::vector<int64_t> drain(Queue& q, int64_t batch, runtime::Status* end = nullptr) {
  std::vector<int64_t> got;
  while (true) {
    auto b = q.dequeue_up_to(batch);
    if (!b.ok()) {
      if (end) *end = b.status();
      break;
    }
    auto v = (*b)[0].to_vector<int64_t>();
    got.insert(got.end(), v.begin(), v.end());
  }
  return got;
}

}  // namespace

TEST_CASE("FIFO queue: order, single examples, close and OutOfRange") {
  actors::Runtime rt;
  {
    Queue q = Queue::create(rt, {QueueKind::kFifo, 100});
    REQUIRE(q.enqueue_many(
                 {iota(5), Tensor::from_vector<float>(Shape{5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})})
                .ok());
    REQUIRE(q.enqueue({Tensor::scalar<int64_t>(5), Tensor::from_vector<float>(Shape{2}, {10, 11})})
                .ok());
    CHECK(q.size() == 6);
    auto one = q.dequeue();
    REQUIRE(one.ok());
    CHECK((*one)[0].shape() == Shape{});
    CHECK((*one)[0].data<int64_t>()[0] == 0);
    CHECK((*one)[1].to_vector<float>() == std::vector<float>{0, 1});
    auto three = q.dequeue_many(3);
    REQUIRE(three.ok());
    CHECK((*three)[0].to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
    CHECK((*three)[1].shape() == Shape{3, 2});
    REQUIRE(q.close().ok());
    CHECK(q.enqueue({Tensor::scalar<int64_t>(9), Tensor::from_vector<float>(Shape{2}, {0, 0})})
              .code() == runtime::Code::kCancelled);
    auto many = q.dequeue_many(5);  // only 2 left: exactly-n fails once closed
    CHECK(many.status().code() == runtime::Code::kOutOfRange);
    auto rest = q.dequeue_up_to(5);
    REQUIRE(rest.ok());
    CHECK((*rest)[0].to_vector<int64_t>() == std::vector<int64_t>{4, 5});
    CHECK(q.dequeue_up_to(5).status().code() == runtime::Code::kOutOfRange);
    CHECK(q.dequeue().status().code() == runtime::Code::kOutOfRange);
    q.stop();
  }
}

TEST_CASE("queue: a dequeue of what is ready takes up to n examples, at least one, in order") {
  actors::Runtime rt;
  Queue q = Queue::create(rt, {QueueKind::kFifo, 100});
  caf::scoped_actor self{rt.system()};
  auto ready = [&](int64_t n) {
    actors::Batch got;
    self->request(q.actor(), std::chrono::seconds(10), actors::dequeue_atom::value,
                  actors::DequeueRequest{n, actors::DequeueMode::kReady})
        .receive(
            [&](actors::Batch& b) { got = std::move(b); },
            [&](caf::error& e) { got.status = runtime::internal_error(rt.system().render(e)); });
    return got;
  };
  auto first_of = [](const std::vector<Tensor>& example) { return example[0].data<int64_t>()[0]; };
  REQUIRE(q.enqueue_many({iota(5)}).ok());
  actors::Batch three = ready(3);
  REQUIRE(three.status.ok());
  CHECK(three.components[0].shape() == Shape{});  // examples as a single dequeue gives them
  CHECK(first_of(three.components) == 0);
  REQUIRE(three.more.size() == 2);
  CHECK(first_of(three.more[0]) == 1);
  CHECK(first_of(three.more[1]) == 2);
  actors::Batch rest = ready(8);  // two are ready: two, without waiting for eight
  REQUIRE(rest.status.ok());
  CHECK(first_of(rest.components) == 3);
  REQUIRE(rest.more.size() == 1);
  CHECK(first_of(rest.more[0]) == 4);
  REQUIRE(q.close().ok());
  CHECK(ready(8).status.code() == runtime::Code::kOutOfRange);
  CHECK(ready(0).status.code() == runtime::Code::kInvalidArgument);
  q.stop();
}

TEST_CASE("queue: a dequeue waits for data, an enqueue waits for room") {
  actors::Runtime rt;
  Queue q = Queue::create(rt, {QueueKind::kFifo, 4});
  // Waits by count, not by the clock: a loaded machine may take its time to get there.
  auto until = [&](auto done) {
    for (int i = 0; i < 5000 && !done(q.stats()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done(q.stats());
  };
  std::atomic<bool> got{false};
  std::thread consumer([&] {
    auto b = q.dequeue_many(2);
    CHECK(b.ok());
    got = true;
  });
  REQUIRE(until([](const actors::QueueStats& s) { return s.waiting_dequeues == 1; }));
  CHECK(!got);
  REQUIRE(q.enqueue_many({iota(2)}).ok());
  consumer.join();
  CHECK(got);
  CHECK(q.stats().starved == 1);  // that dequeue waited

  std::atomic<bool> enqueued{false};
  std::thread producer([&] {
    CHECK(q.enqueue_many({iota(6)}).ok());  // 4 fit; 2 wait for room
    enqueued = true;
  });
  REQUIRE(until([](const actors::QueueStats& s) { return s.waiting_enqueues == 1; }));
  CHECK(!enqueued);
  CHECK(q.size() == 4);
  CHECK(q.stats().peak_size == 4);
  REQUIRE(q.dequeue_many(3).ok());
  producer.join();
  CHECK(enqueued);
  CHECK(q.size() == 3);
  CHECK(q.stats().starved == 1);  // this one found its elements

  // Closing with cancel fails the waiting enqueue; closing without lets it finish first.
  REQUIRE(q.enqueue_many({iota(1)}).ok());
  std::thread cancelled(
      [&] { CHECK(q.enqueue_many({iota(3)}).code() == runtime::Code::kCancelled); });
  REQUIRE(until([](const actors::QueueStats& s) { return s.waiting_enqueues == 1; }));
  REQUIRE(q.close(/*cancel_pending_enqueues=*/true).ok());
  cancelled.join();
  CHECK(drain(q, 10).size() == 4);

  Queue q2 = Queue::create(rt, {QueueKind::kFifo, 2});
  std::thread pending([&] { CHECK(q2.enqueue_many({iota(5)}).ok()); });
  for (int i = 0; i < 5000 && q2.stats().waiting_enqueues == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(q2.close(false).ok());
  CHECK(drain(q2, 2) == std::vector<int64_t>{0, 1, 2, 3, 4});
  pending.join();
  q.stop();
  q2.stop();
}

TEST_CASE("random shuffle queue: a seeded permutation that keeps min_after_dequeue") {
  actors::Runtime rt;
  auto order = [&](uint64_t seed) {
    Queue q = Queue::create(rt, {QueueKind::kRandomShuffle, 1000, 10, seed});
    REQUIRE(q.enqueue_many({iota(100)}).ok());
    auto first = q.dequeue_many(90);
    REQUIRE(first.ok());
    std::vector<int64_t> got = (*first)[0].to_vector<int64_t>();
    std::atomic<bool> done{false};
    std::thread t([&] {
      auto more = q.dequeue_many(5);  // would leave 5 < min_after_dequeue: waits for close
      done = true;
      REQUIRE(more.ok());
      auto v = (*more)[0].to_vector<int64_t>();
      got.insert(got.end(), v.begin(), v.end());
    });
    for (int i = 0; i < 5000 && q.stats().waiting_dequeues == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(!done);
    REQUIRE(q.close().ok());
    t.join();
    auto rest = drain(q, 100);
    got.insert(got.end(), rest.begin(), rest.end());
    q.stop();
    return got;
  };
  auto a = order(7), b = order(7), c = order(8);
  CHECK(a == b);
  CHECK(a != c);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(100).to_vector<int64_t>());
  CHECK(a != iota(100).to_vector<int64_t>());
}

TEST_CASE("padding queue pads variable-length examples; a FIFO queue refuses them") {
  actors::Runtime rt;
  for (QueueKind kind : {QueueKind::kPadding, QueueKind::kFifo}) {
    Queue q = Queue::create(rt, {kind, 10});
    REQUIRE(q.enqueue({Tensor::from_vector<float>(Shape{2}, {1, 2})}).ok());
    REQUIRE(q.enqueue({Tensor::from_vector<float>(Shape{3}, {3, 4, 5})}).ok());
    auto b = q.dequeue_many(2);
    if (kind == QueueKind::kPadding) {
      REQUIRE(b.ok());
      CHECK((*b)[0].shape() == Shape{2, 3});
      CHECK((*b)[0].to_vector<float>() == std::vector<float>{1, 2, 0, 3, 4, 5});
    } else {
      CHECK(b.status().code() == runtime::Code::kInvalidArgument);
      CHECK(b.status().message().find("padding queue") != std::string::npos);
    }
    q.stop();
  }
}

TEST_CASE("stack_rows batches lists of varying length as sparse tensors beside dense parts") {
  // Three examples of (id, tags): the tags 2, 0 and 1 long; a scalar id in each.
  auto example = [](int64_t id, std::vector<std::string> tags) {
    auto chunk = std::make_shared<actors::Chunk>();
    chunk->components = {
        Tensor::from_vector<int64_t>(Shape{1}, {id}),
        Tensor::from_vector<std::string>(Shape{1, static_cast<int64_t>(tags.size())}, tags)};
    return actors::RowRef{chunk, 0};
  };
  std::vector<actors::RowRef> rows{example(7, {"a", "b"}), example(8, {}), example(9, {"c"})};
  auto b = actors::stack_rows(rows, false, false, {false, true});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  REQUIRE(b->size() == 4);
  CHECK((*b)[0].to_vector<int64_t>() == std::vector<int64_t>{7, 8, 9});
  CHECK((*b)[1].shape() == Shape{3, 2});
  CHECK((*b)[1].to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 1, 2, 0});
  CHECK((*b)[2].to_vector<std::string>() == std::vector<std::string>{"a", "b", "c"});
  CHECK((*b)[3].to_vector<int64_t>() == std::vector<int64_t>{3, 2});
  CHECK(runtime::check_sparse({(*b)[1], (*b)[2], (*b)[3]}, "tags").ok());
  // Without the mark the lists differ in shape, which only padding accepts.
  CHECK(actors::stack_rows(rows, false).status().message().find("padding") != std::string::npos);
  // A sparse component holds lists, not matrices.
  auto matrix = std::make_shared<actors::Chunk>();
  matrix->components = {Tensor::from_vector<int64_t>(Shape{1}, {1}),
                        Tensor::from_vector<std::string>(Shape{1, 1, 1}, {"x"})};
  auto bad = actors::stack_rows({actors::RowRef{matrix, 0}}, false, false, {false, true});
  CHECK(bad.status().message().find("must be lists") != std::string::npos);
}

TEST_CASE("runner: every example exactly once per epoch across parallel readers, in order") {
  actors::Runtime rt;
  auto src = std::make_shared<CountingSource>(37, 11);
  src->delay_us = 300;  // readers finish out of order
  Queue q = Queue::create(rt, {QueueKind::kFifo, 64});
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), {4, 3});
  runtime::Status end;
  std::vector<int64_t> got = drain(q, 50, &end);
  CHECK(end.code() == runtime::Code::kOutOfRange);
  REQUIRE(got.size() == 3u * 37 * 11);
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == static_cast<int64_t>(i % (37 * 11)));
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

TEST_CASE("runner: the graph's worker keeps a core to itself while a runner lives") {
  actors::Runtime rt;
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  const bool two_cpus = CPU_COUNT(&mine) >= 2;
  auto wait_for = [](auto done) {
    for (int i = 0; i < 500 && !done(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  };
  REQUIRE(actors::graph_core() == -1);
  Queue q = Queue::create(rt, {QueueKind::kFifo, 4});
  auto runner = actors::spawn_queue_runner(rt.system(), std::make_shared<CountingSource>(4, 10),
                                           q.actor(), {2, 0});  // epochs until stopped
  if (two_cpus) CHECK(wait_for([] { return actors::graph_core() >= 0; }));
  CHECK(drain_some(q, 3) == 3);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  CHECK(wait_for([] { return actors::graph_core() == -1; }));
  q.stop();
}

TEST_CASE("runner: a seeded shuffle is reproducible and each epoch is a permutation") {
  actors::Runtime rt;
  auto src = std::make_shared<CountingSource>(20, 10);
  src->delay_us = 200;
  auto run = [&](uint64_t seed) {
    Queue q = Queue::create(rt, {QueueKind::kFifo, 32});
    actors::RunnerOptions o;
    o.num_readers = 3;
    o.num_epochs = 2;
    o.shuffle = true;
    o.seed = seed;
    o.shuffle_buffer = 50;
    auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), o);
    auto got = drain(q, 16);
    caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
    q.stop();
    return got;
  };
  auto a = run(1), b = run(1), c = run(2);
  CHECK(a == b);
  CHECK(a != c);
  REQUIRE(a.size() == 400);
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> epoch(a.begin() + e * 200, a.begin() + (e + 1) * 200);
    CHECK(epoch != iota(200).to_vector<int64_t>());
    std::sort(epoch.begin(), epoch.end());
    CHECK(epoch == iota(200).to_vector<int64_t>());
  }
  CHECK(std::vector<int64_t>(a.begin(), a.begin() + 200) !=
        std::vector<int64_t>(a.begin() + 200, a.end()));
}

TEST_CASE("runner: skipping k batches gives exactly the rest of the seeded sequence") {
  actors::Runtime rt;
  auto src = std::make_shared<CountingSource>(20, 10);
  auto run = [&](int64_t skip, int64_t batch) {
    Queue q = Queue::create(rt, {QueueKind::kFifo, 8});
    actors::RunnerOptions o;
    o.num_readers = 2;
    o.num_epochs = 2;
    o.shuffle = true;
    o.seed = 7;
    o.shuffle_buffer = 50;
    o.batch_size = batch;
    o.skip = skip;
    auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), o);
    auto got = drain(q, 1);  // an element is a batch when batching
    caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
    q.stop();
    return got;
  };
  // Batches of 16 over 2 epochs of 200: 25 batches (the last one of 16 too, since they span
  // epochs). Skipping 7 batches resumes at example 7 * 16, across the epoch boundary as well.
  const auto all = run(0, 16);
  REQUIRE(all.size() == 400);
  for (int64_t k : {1, 7, 13, 24}) {
    CHECK(run(k, 16) == std::vector<int64_t>(all.begin() + k * 16, all.end()));
  }
  CHECK(run(25, 16).empty());
  CHECK(run(1000, 16).empty());
  // Without batching, examples are skipped.
  const auto single = run(0, 0);
  CHECK(run(150, 0) == std::vector<int64_t>(single.begin() + 150, single.end()));
}

TEST_CASE("example order: driven alone, it gives the runner's batches, skips and last one") {
  actors::Runtime rt;
  // Units of 50 in order: batches sliced from one unit and batches across two.
  auto src = std::make_shared<CountingSource>(8, 50);
  src->memory = true;
  for (int variant = 0; variant < 8; ++variant) {
    const bool shuffle = variant & 1, drop = variant & 2;
    const int64_t skip = variant & 4 ? 5 : 0;
    CAPTURE(shuffle);
    CAPTURE(drop);
    CAPTURE(skip);
    actors::RunnerOptions o;
    o.num_epochs = 2;
    o.shuffle = shuffle;
    o.seed = 3;
    o.shuffle_buffer = 30;
    o.batch_size = 24;  // 800 examples: 33 batches and 8 left
    o.drop_remainder = drop;
    o.skip = skip;
    Queue q = Queue::create(rt, {QueueKind::kFifo, 8});
    auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), o);
    const auto from_runner = drain(q, 1);
    caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
    q.stop();

    actors::ExampleOrder order(src, o);
    std::vector<int64_t> alone, sizes;
    for (;;) {
      std::vector<Tensor> batch;
      auto n = order.next_batch(&batch);
      REQUIRE(n.ok());
      if (*n > 0) {
        auto v = batch[0].to_vector<int64_t>();
        alone.insert(alone.end(), v.begin(), v.end());
        sizes.push_back(*n);
        continue;
      }
      if (order.units_done()) break;
      const int64_t seq = order.units_taken();
      REQUIRE(order.take(actors::decode_unit(*src, nullptr, seq, order.unit_at(seq))).ok());
    }
    CHECK(alone == from_runner);
    CHECK(alone.size() == from_runner.size());
    CHECK(static_cast<int64_t>(sizes.size()) == 33 - skip + (drop ? 0 : 1));
    CHECK(sizes.back() == (drop ? 24 : 8));
    CHECK(order.epochs() == 2);
  }
  // A unit that does not decode is the order's error, naming the source.
  src->fail_unit = 4;
  actors::ExampleOrder order(src, {.batch_size = 8});
  runtime::Status failed;
  for (int64_t seq = 0; seq < 8 && failed.ok(); ++seq) {
    failed = order.take(actors::decode_unit(*src, nullptr, seq, order.unit_at(seq))).status();
  }
  CHECK(failed.code() == runtime::Code::kDataLoss);
  CHECK(failed.message().find("counting") != std::string::npos);
}

TEST_CASE("runner: a slow consumer back-pressures the readers; memory stays bounded") {
  actors::Runtime rt;
  auto src = std::make_shared<CountingSource>(1000, 10);  // 10k examples
  Queue q = Queue::create(rt, {QueueKind::kFifo, 40});
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), {2, 1});
  for (int i = 0; i < 20; ++i) {
    REQUIRE(q.dequeue_many(8).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  actors::QueueStats s = q.stats();
  CHECK(s.peak_size <= 40);
  // The runner is held back: far from all 10k examples were taken from the source.
  CHECK(s.enqueued <= 160 + 40 + 10);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

// Rows of 16 KB held in memory, handed out 100 to a unit without copying (as ColumnsSource).
class WideRowsSource : public actors::Source {
 public:
  WideRowsSource() : rows_(DType::kFloat32, Shape{1000, 4096}) {
    for (int64_t r = 0; r < 1000; ++r) rows_.data<float>()[r * 4096] = static_cast<float>(r);
  }
  std::string name() const override { return "wide rows"; }
  std::vector<std::string> components() const override { return {"x"}; }
  int64_t num_units() const override { return 10; }
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out, int64_t*) const override {
    out->push_back(actors::Chunk{{rows_}, unit * 100, unit * 100 + 100});
    return runtime::ok_status();
  }

 private:
  Tensor rows_;
};

TEST_CASE("runner: batches are stacked as the queue takes them, not a shuffle buffer at once") {
  actors::Runtime rt;
  auto src = std::make_shared<WideRowsSource>();
  runtime::Allocator* pool = runtime::cpu_allocator();
  const int64_t before = pool->stats().bytes_in_use;
  Queue q = Queue::create(rt, {QueueKind::kFifo, 2});
  actors::RunnerOptions o;
  o.num_readers = 1;
  o.shuffle = true;  // the whole epoch fits the shuffle buffer: all 1000 rows come out at once
  o.seed = 3;
  o.batch_size = 10;
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), o);
  for (int i = 0; i < 500 && q.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // A 160 KB batch takes a 256 KB block. The queue holds 2; two enqueues wait to go in, each at
  // most 1 MB of batches and one more (7 blocks). Stacking all 100 batches at once would take
  // 25 MB.
  CHECK(q.size() == 2);
  CHECK(pool->stats().bytes_in_use - before <= (2 + 2 * 7) * 256 * 1024);
  std::vector<float> firsts;
  while (true) {
    auto b = q.dequeue();
    if (!b.ok()) break;
    for (int64_t r = 0; r < (*b)[0].dim(0); ++r) firsts.push_back((*b)[0].data<float>()[r * 4096]);
  }
  std::sort(firsts.begin(), firsts.end());
  REQUIRE(firsts.size() == 1000u);
  for (int64_t r = 0; r < 1000; ++r) REQUIRE(firsts[static_cast<size_t>(r)] == r);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

TEST_CASE("runner: small enqueues first, and the next one waits while the queue takes one in") {
  actors::Runtime rt;
  // 2000 batches of one example: a megabyte's worth would be all of them in one enqueue.
  auto src = std::make_shared<CountingSource>(1, 2000);
  Queue q = Queue::create(rt, {QueueKind::kFifo, 1});
  actors::RunnerOptions o;
  o.num_readers = 1;
  o.batch_size = 1;
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), o);
  // The first enqueue (one batch) fills the queue; the second (two) and third (four) wait:
  // the runner stacked seven batches, not two thousand, and the loop's next batch is ready.
  actors::QueueStats st;
  for (int i = 0; i < 1000; ++i) {
    st = q.stats();
    if (st.waiting_enqueues == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(st.waiting_enqueues == 2);
  CHECK(st.enqueued == 1);
  std::vector<int64_t> got;
  while (true) {
    auto b = q.dequeue();
    if (!b.ok()) break;
    got.push_back((*b)[0].data<int64_t>()[0]);
  }
  REQUIRE(got.size() == 2000u);
  for (int64_t k = 0; k < 2000; ++k) REQUIRE(got[static_cast<size_t>(k)] == k);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

TEST_CASE("runner: a source in memory is read by the runner itself, a file by reader threads") {
  actors::Runtime rt;
  auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                         std::filesystem::directory_iterator());
  };
  // The count once it has not moved for 100 ms: threads of earlier tests and the last round's
  // runner and readers end on their own time, and one ending mid-count would miscount.
  auto settled = [&] {
    auto n = threads();
    for (int same = 0, i = 0; same < 10 && i < 1000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const auto now = threads();
      same = now == n ? same + 1 : 0;
      n = now;
    }
    return n;
  };
  for (bool memory : {true, false}) {
    auto src = std::make_shared<CountingSource>(4, 10);
    src->memory = memory;
    Queue q = Queue::create(rt, {QueueKind::kFifo, 1});
    actors::RunnerOptions o;
    o.num_readers = 2;
    o.batch_size = 5;
    const auto before = settled();
    auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), o);
    for (int i = 0; i < 1000 && q.size() < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // The runner's thread, and the readers' unless the source is in memory.
    CHECK(threads() - before == (memory ? 1 : 3));
    std::vector<int64_t> got;
    for (auto b = q.dequeue(); b.ok(); b = q.dequeue()) {
      for (int64_t v : (*b)[0].to_vector<int64_t>()) got.push_back(v);
    }
    CHECK(got == drain_expected(40));
    caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
    q.stop();
  }
}

TEST_CASE("runner: a failing unit fails the queue with the source's name; nothing hangs") {
  actors::Runtime rt;
  auto src = std::make_shared<CountingSource>(10, 5);
  src->fail_unit = 6;
  Queue q = Queue::create(rt, {QueueKind::kFifo, 100});
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), {2, 1});
  runtime::Status end;
  drain(q, 7, &end);
  CHECK(end.code() == runtime::Code::kDataLoss);
  CHECK(end.message().find("counting") != std::string::npos);
  CHECK(end.message().find("unit 6 is bad") != std::string::npos);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

TEST_CASE("session loop fed from a queue: a step per batch, ending cleanly with the data") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto k = ops::placeholder(b, DType::kInt64, Shape{-1}, "k");
  auto total = ops::reduce_sum(b, k);
  REQUIRE(b.ok());
  auto session = actors::Session::create(rt, g);
  REQUIRE(session.ok());
  auto src = std::make_shared<CountingSource>(10, 10);  // 0..99
  Queue q = Queue::create(rt, {QueueKind::kFifo, 32});
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), {2, 2});
  int64_t sum = 0, steps = 0, last_batch = 0;
  actors::LoopRequest loop;
  loop.steps = 1000;
  loop.fetches = {total, k};
  loop.input = q.actor();
  loop.input_feeds = {k};
  loop.batch_size = 16;
  loop.on_step = [&](int64_t i, const std::vector<Tensor>& v) {
    CHECK(i == steps);
    ++steps;
    sum += v[0].data<int64_t>()[0];
    last_batch = v[1].dim(0);
    return true;
  };
  bool end_of_input = false;
  auto done = (*session)->run_loop(loop, &end_of_input);
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  CHECK(end_of_input);
  CHECK(*done == 13);  // 200 examples: 12 batches of 16 and one of 8
  CHECK(sum == 2 * 4950);
  CHECK(last_batch == 8);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

TEST_CASE("session loop: batches taken by a loop that stops early go to the next loop") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto k = ops::placeholder(b, DType::kInt64, Shape{-1}, "k");
  auto acc = ops::variable(b, "acc", Shape{}, DType::kInt64, ops::zeros(b, Shape{}, DType::kInt64),
                           /*trainable=*/false);
  auto add = ops::assign_add(b, acc, ops::reduce_sum(b, k));
  int init = ops::global_variables_initializer(b);
  REQUIRE(b.ok());
  auto session = actors::Session::create(rt, g, {.pipeline_depth = 3});
  REQUIRE(session.ok());
  REQUIRE((*session)->run({}, {}, {init}).ok());
  auto src = std::make_shared<CountingSource>(10, 10);  // 0..99
  Queue q = Queue::create(rt, {QueueKind::kFifo, 8});
  actors::RunnerOptions o;
  o.batch_size = 7;
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), o);
  int segments = 0;
  for (bool end = false; !end && segments < 20; ++segments) {
    actors::LoopRequest loop;
    loop.steps = 1000;
    loop.targets = {add.node};
    loop.input = q.actor();
    loop.input_feeds = {k};
    int64_t here = 0;
    // Stop after two steps, with more steps in flight and batches asked for.
    loop.on_step = [&](int64_t, const std::vector<Tensor>&) { return ++here < 2; };
    auto done = (*session)->run_loop(loop, &end);
    REQUIRE(done.ok());
  }
  CHECK(segments > 2);
  // Every example was added exactly once: none dropped with a stopped loop.
  auto sum = (*session)->run({}, {acc});
  REQUIRE(sum.ok());
  CHECK((*sum)[0].data<int64_t>()[0] == 4950);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

TEST_CASE("queue: stopping it answers a waiting dequeue with an error") {
  actors::Runtime rt;
  Queue q = Queue::create(rt, {QueueKind::kFifo, 4});
  runtime::Status got = runtime::ok_status();
  std::thread consumer([&] { got = q.dequeue().status(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  q.stop();
  consumer.join();
  CHECK(got.code() == runtime::Code::kCancelled);
  CHECK(got.message() == "queue was stopped");
}

TEST_CASE("runner: a source that throws fails the queue, naming the source; nothing hangs") {
  class Throwing : public CountingSource {
   public:
    Throwing() : CountingSource(5, 5) {}
    runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out, int64_t* s) const override {
      if (unit == 3) throw std::runtime_error("disk on fire");
      return CountingSource::read(unit, out, s);
    }
  };
  actors::Runtime rt;
  Queue q = Queue::create(rt, {QueueKind::kFifo, 100});
  auto runner =
      actors::spawn_queue_runner(rt.system(), std::make_shared<Throwing>(), q.actor(), {2, 1});
  runtime::Status end;
  drain(q, 4, &end);
  CHECK(!end.ok());
  CHECK(end.code() == runtime::Code::kInternal);
  CHECK(end.message().find("counting: reading unit 3 threw: disk on fire") != std::string::npos);
  caf::anon_send_exit(runner, caf::exit_reason::user_shutdown);
  q.stop();
}

TEST_CASE("queue: a watched runner that dies fails the queue instead of leaving it open") {
  actors::Runtime rt;
  auto src = std::make_shared<CountingSource>(1000, 10);
  Queue q = Queue::create(rt, {QueueKind::kFifo, 20});
  auto runner = actors::spawn_queue_runner(rt.system(), src, q.actor(), {1, 1});
  q.watch(runner, "the runner of counting");
  REQUIRE(q.dequeue_many(5).ok());
  caf::anon_send_exit(runner, caf::exit_reason::kill);
  runtime::Status end;
  drain(q, 5, &end);
  CHECK(end.code() == runtime::Code::kUnavailable);
  CHECK(end.message().find("the runner of counting stopped") != std::string::npos);
  q.stop();
}
