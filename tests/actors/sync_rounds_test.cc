// SyncRounds, a shard's part in synchronous training, without actors: updates averaged over
// the replicas of a round and applied once, stale ones dropped, short rounds closed at their
// timeout, replicas that leave not waited for, elastic rounds of the live replicas, and the
// barrier answered when the global step passes.
#include "actors/sync_rounds.h"

#include <doctest/doctest.h>

#include <memory>
#include <random>

#include "actors/parameter_shard.h"

using namespace troupe;
using actors::ShardCall;
using actors::SyncRounds;
using namespace troupe::runtime;

namespace {

ShardCall sgd(int replica, std::vector<float> grad, uint32_t aggregate = 2,
              uint32_t min_aggregate = 0) {
  ShardCall c;
  c.node_name = "w/ApplyGradientDescent";
  c.op = "ApplyGradientDescent";
  c.attrs = {{"var", std::string("w")}, {"shape", Shape{2}}, {"dtype", DType::kFloat32}};
  c.inputs = {Tensor::from_vector<float>(Shape{2}, grad), Tensor::scalar<float>(1.0f)};
  c.sync = actors::SyncTag{replica, aggregate, 1000, min_aggregate};
  return c;
}

ShardCall increment(int replica) {
  ShardCall c;
  c.node_name = "global_step/AssignAdd";
  c.op = "AssignAdd";
  c.attrs = {{"var", std::string("global_step")}, {"shape", Shape{}}, {"dtype", DType::kInt64}};
  c.inputs = {Tensor::scalar<int64_t>(1)};
  c.sync = actors::SyncTag{replica, 2, 1000};
  return c;
}

ShardCall barrier(int64_t step) {
  ShardCall c;
  c.node_name = "sync";
  c.op = "SyncReplicasBarrier";
  c.inputs = {Tensor::scalar<int64_t>(step)};
  c.sync = actors::SyncTag{0, 2, 1000};
  return c;
}

std::vector<float> w(const runtime::VariableStore& store) {
  return store.read("w")->to_vector<float>();
}

struct Fixture {
  std::shared_ptr<runtime::VariableStore> store = std::make_shared<runtime::VariableStore>();
  actors::ShardCalls calls{store};
  SyncRounds sync{[this](const std::string& var) { return store->read(var); },
                  [this](ShardCall c) { return calls.run(std::move(c)); }};
  SyncRounds::Clock::time_point t0 = SyncRounds::Clock::now();
  std::vector<actors::ShardReply> answered;  // updates answered when their round closed
  // Whether the update is answered at once.
  bool contribute(ShardCall c, SyncRounds::Clock::time_point at) {
    auto later = [this](actors::ShardReply r) { answered.push_back(std::move(r)); };
    return sync.contribute(std::move(c), later, at).has_value();
  }
  Fixture() {
    store->assign("w", Tensor::from_vector<float>(Shape{2}, {10, 20}));
    store->assign("global_step", Tensor::scalar<int64_t>(0));
  }
};

}  // namespace

TEST_CASE("a round applies the mean of its replicas' gradients once") {
  Fixture f;
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  CHECK_FALSE(f.contribute(sgd(0, {2, 4}), f.t0));   // answered when the round closes
  CHECK(w(*f.store) == std::vector<float>{10, 20});  // waiting for the other replica
  CHECK(f.sync.round("w") == 0);
  CHECK(f.answered.empty());
  CHECK(f.contribute(sgd(1, {4, 8}), f.t0));        // it closes the round: answered at once
  CHECK(w(*f.store) == std::vector<float>{7, 14});  // w -= 1 * mean
  CHECK(f.sync.round("w") == 1);
  // Replica 0's update is answered now, with the round's result: its next step reads that.
  REQUIRE(f.answered.size() == 1);
  REQUIRE(f.answered[0].status.ok());
  REQUIRE(f.answered[0].outputs.size() == 1);
  CHECK(f.answered[0].outputs[0].to_vector<float>() == std::vector<float>{7, 14});
  // The global step: one increment per round, whatever each replica sent.
  f.contribute(increment(0), f.t0);
  f.contribute(increment(1), f.t0);
  CHECK(f.store->read_int64_scalar("global_step").value() == 1);
}

TEST_CASE("a round reads its updates where they came and never writes there; a misfit is refused") {
  Fixture f;
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  // The first gradient as a frame holds it: borrowed bytes, which the round keeps alive.
  auto frame = std::make_shared<std::vector<float>>(std::vector<float>{2, 4});
  ShardCall first = sgd(0, {0, 0});
  first.inputs[0] =
      Tensor::borrowed(DType::kFloat32, Shape{2}, runtime::Buffer::borrow(frame->data(), 8, frame));
  CHECK_FALSE(f.contribute(std::move(first), f.t0));
  // A gradient shaped unlike the round's: an error naming both, and the round still waits.
  ShardCall misfit = sgd(1, {0, 0});
  misfit.inputs[0] = Tensor::from_vector<float>(Shape{3}, {1, 1, 1});
  auto refused = f.sync.contribute(
      std::move(misfit), [](actors::ShardReply) {}, f.t0);
  REQUIRE(refused.has_value());
  CHECK_FALSE(refused->status.ok());
  CHECK(refused->status.message().find("input 0 is float32[3]") != std::string::npos);
  CHECK(refused->status.message().find("float32[2]") != std::string::npos);
  CHECK(f.sync.round("w") == 0);
  CHECK(f.contribute(sgd(1, {4, 8}), f.t0));
  CHECK(w(*f.store) == std::vector<float>{7, 14});
  CHECK(*frame == std::vector<float>{2, 4});

  // A round of one: its update applied as it came.
  auto alone = std::make_shared<std::vector<float>>(std::vector<float>{1, 2});
  ShardCall one = sgd(0, {0, 0}, 1);
  one.inputs[0] =
      Tensor::borrowed(DType::kFloat32, Shape{2}, runtime::Buffer::borrow(alone->data(), 8, alone));
  f.sync.note_read(0, "w");
  CHECK(f.contribute(std::move(one), f.t0));
  CHECK(w(*f.store) == std::vector<float>{6, 12});
  CHECK(*alone == std::vector<float>{1, 2});
}

TEST_CASE("an update computed before the last round closed is dropped, and so is a second one") {
  Fixture f;
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  f.sync.note_read(2, "w");  // a backup worker
  f.contribute(sgd(0, {2, 2}), f.t0);
  CHECK(f.contribute(sgd(0, {100, 100}), f.t0));  // the same replica again: dropped at once
  f.contribute(sgd(1, {4, 4}), f.t0);
  CHECK(w(*f.store) == std::vector<float>{7, 17});
  CHECK(f.contribute(sgd(2, {1000, 1000}), f.t0));  // read the old w: stale, dropped at once
  CHECK(f.sync.dropped() == 2);
  CHECK(w(*f.store) == std::vector<float>{7, 17});
}

TEST_CASE("a round short of replicas closes at its timeout; the barrier waits for the step") {
  Fixture f;
  std::vector<std::vector<char>> answers;
  auto answered = [&](actors::ShardReply r) { answers.push_back(r.flat()); };
  f.sync.note_read(0, "global_step");
  f.contribute(increment(0), f.t0);
  CHECK_FALSE(f.sync.wait(barrier(0), answered, f.t0).has_value());
  CHECK(answers.empty());
  CHECK(f.sync.next_deadline() == f.t0 + std::chrono::milliseconds(1000));
  f.sync.expire(f.t0 + std::chrono::milliseconds(999));
  CHECK(answers.empty());
  CHECK(f.answered.empty());
  f.sync.expire(f.t0 + std::chrono::milliseconds(1000));  // replica 1 never came
  CHECK(f.store->read_int64_scalar("global_step").value() == 1);
  CHECK(f.answered.size() == 1);  // the increment, with the round it took part in
  REQUIRE(answers.size() == 1);
  auto step = actors::decode_shard_reply(std::make_shared<std::vector<char>>(answers[0]));
  REQUIRE(step.ok());
  CHECK((*step)[0].data<int64_t>()[0] == 1);
  // A barrier on a step passed already is answered at once.
  auto now = f.sync.wait(barrier(0), answered, f.t0);
  REQUIRE(now.has_value());
  CHECK(answers.size() == 1);
  // Waiting on a step nobody moves: an error at the deadline, naming it.
  CHECK_FALSE(f.sync.wait(barrier(1), answered, f.t0).has_value());
  f.sync.expire(f.t0 + std::chrono::seconds(2));
  REQUIRE(answers.size() == 2);
  auto failed = actors::decode_shard_reply(std::make_shared<std::vector<char>>(answers[1]));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("global step 1 was not passed") != std::string::npos);
}

TEST_CASE("a round its timeout closes with two replicas of three applies their mean") {
  Fixture f;
  for (int r = 0; r < 3; ++r) f.sync.note_read(r, "w");
  f.contribute(sgd(0, {2, 4}, 3), f.t0);
  f.contribute(sgd(1, {4, 8}, 3), f.t0);
  CHECK(w(*f.store) == std::vector<float>{10, 20});
  f.sync.expire(f.t0 + std::chrono::milliseconds(1000));
  CHECK(w(*f.store) == std::vector<float>{7, 14});
  CHECK(f.answered.size() == 2);
}

TEST_CASE("a replica a round missed at its timeout is not waited for until it reads again") {
  Fixture f;
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  f.contribute(sgd(0, {1, 1}), f.t0);
  f.contribute(sgd(1, {3, 3}), f.t0);
  CHECK(w(*f.store) == std::vector<float>{8, 18});  // both: the mean, 2
  // Replica 1 dies: the next round waits its timeout once, then closes with replica 0.
  f.sync.note_read(0, "w");
  f.contribute(sgd(0, {1, 1}), f.t0);
  CHECK(w(*f.store) == std::vector<float>{8, 18});
  f.sync.expire(f.t0 + std::chrono::milliseconds(1000));
  CHECK(w(*f.store) == std::vector<float>{7, 17});
  // The rounds after it close with replica 0 alone, at once.
  f.sync.note_read(0, "w");
  f.contribute(sgd(0, {1, 1}), f.t0);
  CHECK(w(*f.store) == std::vector<float>{6, 16});
  // Replica 1 comes back: it reads, and rounds need both again.
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  f.contribute(sgd(0, {2, 2}), f.t0);
  CHECK(w(*f.store) == std::vector<float>{6, 16});
  f.contribute(sgd(1, {4, 4}), f.t0);
  CHECK(w(*f.store) == std::vector<float>{3, 13});
}

TEST_CASE("a replica that leaves closes the round that waited for it, and is not waited for") {
  Fixture f;
  for (int r = 0; r < 3; ++r) f.sync.note_read(r, "w");
  CHECK(f.sync.live() == std::vector<int>{0, 1, 2});
  f.contribute(sgd(0, {2, 4}, 3), f.t0);
  f.contribute(sgd(1, {4, 8}, 3), f.t0);
  CHECK(w(*f.store) == std::vector<float>{10, 20});
  f.sync.leave(2);  // its connections closed: no timeout to wait for
  CHECK(w(*f.store) == std::vector<float>{7, 14});
  CHECK(f.answered.size() == 2);
  CHECK(f.sync.live() == std::vector<int>{0, 1});
  CHECK(f.sync.gone(2));
  // The next rounds are of the two left, closed by the second without a timeout.
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  CHECK_FALSE(f.contribute(sgd(0, {1, 1}, 3), f.t0));
  CHECK(f.contribute(sgd(1, {3, 3}, 3), f.t0));
  CHECK(w(*f.store) == std::vector<float>{5, 12});
  // A replica that leaves after sending its update still counts in its round.
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  f.contribute(sgd(1, {2, 2}, 3), f.t0);
  f.sync.leave(1);
  CHECK(w(*f.store) == std::vector<float>{5, 12});  // replica 0 is live: its update is awaited
  CHECK(f.contribute(sgd(0, {4, 4}, 3), f.t0));
  CHECK(w(*f.store) == std::vector<float>{2, 9});
  // Leaving twice, or a replica never seen, changes nothing.
  f.sync.leave(1);
  f.sync.leave(7);
  CHECK(f.sync.live() == std::vector<int>{0});
}

TEST_CASE("with backups, a replica that leaves changes no round that has enough others") {
  Fixture f;
  for (int r = 0; r < 4; ++r) f.sync.note_read(r, "w");
  f.contribute(sgd(0, {3, 3}, 3), f.t0);  // rounds of 3 of 4 replicas
  f.sync.leave(3);
  CHECK(w(*f.store) == std::vector<float>{10, 20});  // 1 and 2 may still come
  f.contribute(sgd(1, {3, 3}, 3), f.t0);
  f.sync.leave(2);  // now it cannot get 3: it closes with the two it has
  CHECK(w(*f.store) == std::vector<float>{7, 17});
}

TEST_CASE("elastic rounds aggregate the live replicas, fixed when a round opens") {
  Fixture f;
  auto sgd_elastic = [](int r, float g) { return sgd(r, {g, g}, 4, 1); };  // 1 to 4 replicas
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  // Two live: the round opens for two, and a third that joins meanwhile waits for the next.
  CHECK_FALSE(f.contribute(sgd_elastic(0, 2), f.t0));
  f.sync.note_read(2, "w");
  CHECK(f.contribute(sgd_elastic(1, 4), f.t0));
  CHECK(w(*f.store) == std::vector<float>{7, 17});
  // Its update was read from the round before: dropped. Three are live from now on.
  CHECK(f.contribute(sgd_elastic(2, 100), f.t0));
  CHECK(f.sync.dropped() == 1);
  for (int r = 0; r < 3; ++r) f.sync.note_read(r, "w");
  f.contribute(sgd_elastic(0, 1), f.t0);
  f.contribute(sgd_elastic(1, 2), f.t0);
  CHECK(w(*f.store) == std::vector<float>{7, 17});
  CHECK(f.contribute(sgd_elastic(2, 3), f.t0));
  CHECK(w(*f.store) == std::vector<float>{5, 15});
}

TEST_CASE("an elastic round short of --min-replicas waits past its timeout for one to join") {
  Fixture f;
  auto sgd_min2 = [](int r, float g) { return sgd(r, {g, g}, 4, 2); };  // 2 to 4 replicas
  f.sync.note_read(0, "w");
  f.sync.note_read(1, "w");
  f.sync.leave(1);
  CHECK_FALSE(f.contribute(sgd_min2(0, 2), f.t0));  // one live, two needed
  f.sync.expire(f.t0 + std::chrono::milliseconds(1000));
  CHECK(w(*f.store) == std::vector<float>{10, 20});  // still open, logged
  CHECK(f.answered.empty());
  CHECK(f.sync.next_deadline() == f.t0 + std::chrono::milliseconds(2000));
  f.sync.note_read(3, "w");  // a new worker joins and sends its update
  CHECK(f.contribute(sgd_min2(3, 4), f.t0 + std::chrono::milliseconds(1500)));
  CHECK(w(*f.store) == std::vector<float>{7, 17});
  CHECK(f.answered.size() == 1);
}

namespace {

ShardCall stamped(ShardCall c, int64_t stamp) {
  c.sync.stamp = stamp;
  return c;
}

}  // namespace

TEST_CASE("a stamped update's round is the global step it read, whatever it read of the variable") {
  Fixture f;
  // Replica 0 read w before round 0 closed, but its step read global step 1: it belongs to
  // round 1, which its stamp says, not to the round its read of w saw.
  f.sync.note_read(0, "w");
  CHECK_FALSE(f.contribute(stamped(sgd(1, {2, 2}), 0), f.t0));
  CHECK(f.contribute(stamped(sgd(2, {4, 4}), 0), f.t0));  // round of global step 0 closes
  CHECK(w(*f.store) == std::vector<float>{7, 17});
  CHECK_FALSE(f.contribute(stamped(sgd(0, {2, 2}), 1), f.t0));
  CHECK(f.sync.dropped() == 0);
  // A straggler of global step 0: dropped, answered with the value as it is.
  CHECK(f.contribute(stamped(sgd(3, {100, 100}), 0), f.t0));
  CHECK(f.sync.dropped() == 1);
  CHECK(f.contribute(stamped(sgd(1, {4, 4}), 1), f.t0));
  CHECK(w(*f.store) == std::vector<float>{4, 14});
  CHECK(f.answered.size() == 2);
}

TEST_CASE("an update stamped past the open round closes it with what it has") {
  Fixture f;
  CHECK_FALSE(f.contribute(stamped(sgd(0, {2, 4}), 5), f.t0));
  // Another shard closed global step 5's round without replica 1 and the global step moved on:
  // this round would wait for a replica that has gone past it.
  CHECK_FALSE(f.contribute(stamped(sgd(1, {6, 6}), 6), f.t0));
  CHECK(w(*f.store) == std::vector<float>{8, 16});  // step 5's round, replica 0's alone
  REQUIRE(f.answered.size() == 1);
  CHECK(f.answered[0].status.ok());
  // Replica 0's late second update of step 5 is stale now; step 6's round takes replica 0.
  CHECK(f.contribute(stamped(sgd(0, {9, 9}), 5), f.t0));
  CHECK(f.contribute(stamped(sgd(0, {2, 2}), 6), f.t0));
  CHECK(w(*f.store) == std::vector<float>{4, 12});
}

TEST_CASE("a model loaded anew: rounds start over from its global step, open ones dropped") {
  Fixture f;
  f.contribute(stamped(sgd(0, {1, 1}), 500), f.t0);
  f.contribute(stamped(sgd(1, {1, 1}), 500), f.t0);  // round 500 closes: w = 9, 19
  CHECK_FALSE(f.contribute(stamped(sgd(0, {5, 5}), 501), f.t0));
  // Another ps restarted and the chief restored every ps from its checkpoint, at step 400.
  f.store->assign("w", Tensor::from_vector<float>(Shape{2}, {1, 2}));
  f.sync.restart();
  // Round 501's update, from the model before, is answered with the model loaded, not applied.
  REQUIRE(f.answered.size() == 2);  // replica 0's of round 500, then this one
  CHECK(f.answered[1].outputs[0].to_vector<float>() == std::vector<float>{1, 2});
  // Step 400's updates count again, though rounds up to 500 had closed here.
  CHECK_FALSE(f.contribute(stamped(sgd(0, {2, 2}), 400), f.t0));
  CHECK(f.contribute(stamped(sgd(1, {4, 4}), 400), f.t0));
  CHECK(w(*f.store) == std::vector<float>{-2, -1});
}

// Replicas as the estimators make them, against two shards: each step reads the global step,
// sends its updates of w (on shard 0, with the global step) and b (on shard 1), and once both are
// answered its increment of the global step. Messages are delivered in a random order, a step
// starts whenever a replica is free. Rounds of 2 of 3 replicas, so that a replica in three falls
// out of each: with stamps, no order leaves every replica waiting on a round that cannot close.
TEST_CASE("stamped rounds on two shards close in every order of delivery: no replica is stuck") {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    CAPTURE(seed);
    auto s0 = std::make_shared<runtime::VariableStore>();
    auto s1 = std::make_shared<runtime::VariableStore>();
    s0->assign("w", Tensor::from_vector<float>(Shape{2}, {0, 0}));
    s0->assign("global_step", Tensor::scalar<int64_t>(0));
    s1->assign("b", Tensor::from_vector<float>(Shape{2}, {0, 0}));
    actors::ShardCalls c0{s0}, c1{s1};
    SyncRounds shard[2] = {SyncRounds([&](const std::string& v) { return s0->read(v); },
                                      [&](ShardCall c) { return c0.run(std::move(c)); }),
                           SyncRounds([&](const std::string& v) { return s1->read(v); },
                                      [&](ShardCall c) { return c1.run(std::move(c)); })};
    struct Replica {
      int64_t stamp = -1;
      int pending = 0;  // updates sent and not answered
      bool stepping = false;
    };
    std::vector<Replica> replicas(3);
    struct Message {
      int replica, shard;
      ShardCall call;
    };
    std::vector<Message> in_flight;
    std::vector<int> answered_now;  // replicas whose update was answered, to act on next
    std::mt19937 rng(seed);
    auto update = [&](int r, const std::string& var) {
      ShardCall c = sgd(r, {1, 1}, 2);
      c.attrs["var"] = var;
      c.node_name = var + "/ApplyGradientDescent";
      return stamped(std::move(c), replicas[static_cast<size_t>(r)].stamp);
    };
    auto deliver = [&](Message m) {
      auto later = [&answered_now, r = m.replica](actors::ShardReply) {
        answered_now.push_back(r);
      };
      if (shard[m.shard].contribute(std::move(m.call), later, SyncRounds::Clock::now())) {
        answered_now.push_back(m.replica);
      }
    };
    auto answered = [&](int r) {
      Replica& rep = replicas[static_cast<size_t>(r)];
      if (--rep.pending > 0) return;
      if (rep.stepping) {  // w and b answered: the increment, stamped alike
        rep.stepping = false;
        rep.pending = 1;
        ShardCall inc = stamped(increment(r), rep.stamp);
        in_flight.push_back({r, 0, std::move(inc)});
      } else {
        rep.stamp = -1;  // free for its next step
      }
    };
    auto global_step = [&] { return s0->read_int64_scalar("global_step").value(); };
    bool stuck = false;
    for (int events = 0; global_step() < 30 && events < 10000 && !stuck; ++events) {
      std::vector<int> free;
      for (int r = 0; r < 3; ++r) {
        if (replicas[static_cast<size_t>(r)].stamp < 0) free.push_back(r);
      }
      const size_t choices = in_flight.size() + free.size();
      // Every replica waits on a round and nothing is on its way.
      stuck = choices == 0;
      if (stuck) break;
      const size_t pick = rng() % choices;
      if (pick < in_flight.size()) {
        Message m = std::move(in_flight[pick]);
        in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(pick));
        deliver(std::move(m));
      } else {
        const int r = free[pick - in_flight.size()];
        Replica& rep = replicas[static_cast<size_t>(r)];
        rep.stamp = global_step();
        shard[0].note_read(r, "w");
        shard[0].note_read(r, "global_step");
        shard[1].note_read(r, "b");
        rep.pending = 2;
        rep.stepping = true;
        in_flight.push_back({r, 0, update(r, "w")});
        in_flight.push_back({r, 1, update(r, "b")});
      }
      std::vector<int> now;
      now.swap(answered_now);
      for (int r : now) answered(r);
    }
    REQUIRE_FALSE_MESSAGE(stuck, "every replica waits, at global step ", global_step());
    REQUIRE(global_step() == 30);
    // Each round applied the mean of two: w and b moved alike, one round a global step.
    CHECK(s0->read("w")->to_vector<float>() == s1->read("b")->to_vector<float>());
  }
}
