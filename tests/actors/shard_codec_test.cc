// The bytes of shard calls: round trips, and garbage from a peer answered with an error.
#include "actors/shard_codec.h"

#include <doctest/doctest.h>

#include <random>

#include "actors/messages.h"
#include "actors/parameter_shard.h"
#include "actors/runtime_system.h"
#include "ops/array_ops.h"
#include "ops/state_ops.h"

using namespace troupe;
using namespace troupe::runtime;

TEST_CASE("shard calls and replies round-trip") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto v =
      ops::variable(b, "w", Shape{2}, DType::kFloat32, ops::zeros(b, Shape{2}, DType::kFloat32));
  auto upd = ops::assign_add(b, v, ops::placeholder(b, DType::kFloat32, Shape{2}, "delta"));
  REQUIRE(b.ok());
  std::vector<char> blob;
  Tensor delta = Tensor::from_vector<float>(Shape{2}, {1, 2});
  REQUIRE(actors::encode_shard_call(g, g.node(upd.node), {delta}, &blob).ok());
  auto call = actors::decode_shard_call(std::make_shared<const std::vector<char>>(blob));
  REQUIRE(call.ok());
  CHECK(call->op == "AssignAdd");
  CHECK(runtime::attr_get<std::string>(call->attrs, "var") == "w");
  CHECK(call->inputs[0].to_vector<float>() == std::vector<float>{1, 2});

  blob = actors::make_shard_reply(runtime::ok_status(), {delta}).flat();
  auto reply = actors::decode_shard_reply(std::make_shared<const std::vector<char>>(blob));
  REQUIRE(reply.ok());
  CHECK((*reply)[0].to_vector<float>() == std::vector<float>{1, 2});
  blob = actors::make_shard_reply(runtime::invalid_argument("bad"), {}).flat();
  reply = actors::decode_shard_reply(std::make_shared<const std::vector<char>>(blob));
  CHECK(reply.status().message() == "invalid argument: bad");
}

TEST_CASE("a reply references its outputs' data; flattened, its blob is sized exactly first") {
  // A DNN's read of six variables: the message's header is some hundreds of bytes, which a
  // blob reserved for the tensors' bytes alone overflowed, copying them all again.
  std::vector<Tensor> outputs;
  for (int64_t rows : {784, 256, 128, 1, 1, 1}) {
    outputs.push_back(
        Tensor::from_vector<float>(Shape{rows, 10}, std::vector<float>(rows * 10, 1)));
  }
  actors::ShardReply made = actors::make_shard_reply(runtime::ok_status(), outputs);
  // A data server writes the segments as they are: the biggest output's is its own buffer.
  bool referenced = false;
  for (const auto& segment : made.message->getSegmentsForOutput()) {
    referenced |= static_cast<const void*>(segment.begin()) == outputs[0].data<float>();
  }
  CHECK(referenced);
  std::vector<char> blob = made.flat();
  CHECK(blob.capacity() == blob.size());
  auto reply = actors::decode_shard_reply(std::make_shared<const std::vector<char>>(blob));
  REQUIRE(reply.ok());
  CHECK(reply->size() == 6);
  CHECK((*reply)[0].shape() == Shape{784, 10});
}

TEST_CASE(
    "a shard answers garbage, truncated calls and unknown ops with errors and keeps serving") {
  actors::Runtime rt;
  auto store = std::make_shared<runtime::VariableStore>();
  caf::actor shard = actors::spawn_parameter_shard(
      rt.system(), std::make_shared<actors::ShardCalls>(store), uint16_t{0});
  caf::scoped_actor self{rt.system()};
  auto call = [&](std::vector<char> blob) {
    runtime::Status status;
    self->request(shard, caf::infinite, actors::call_atom::value, std::move(blob))
        .receive(
            [&](std::vector<char>& reply) {
              auto r = actors::decode_shard_reply(
                  std::make_shared<const std::vector<char>>(std::move(reply)));
              status = r.status();
            },
            [&](caf::error& e) { status = runtime::internal_error(rt.system().render(e)); });
    return status;
  };
  std::mt19937 rng(9);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<char> garbage(rng() % 200);
    for (char& c : garbage) c = static_cast<char>(rng());
    CHECK_FALSE(call(garbage).ok());
  }
  // A well-formed call naming an op that does not exist, and one with a wrong input.
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto v =
      ops::variable(b, "w", Shape{2}, DType::kFloat32, ops::zeros(b, Shape{2}, DType::kFloat32));
  auto upd = ops::assign_add(b, v, ops::placeholder(b, DType::kFloat32, Shape{2}));
  std::vector<char> blob;
  REQUIRE(actors::encode_shard_call(g, g.node(upd.node), {Tensor(DType::kFloat32, Shape{2})}, &blob)
              .ok());
  runtime::Status s = call(blob);
  CHECK(s.message().find("variable 'w' is not initialized") != std::string::npos);
  REQUIRE(actors::encode_shard_call(g, g.node(upd.node), {Tensor(DType::kInt32, Shape{2})}, &blob)
              .ok());
  CHECK(call(blob).message().find("AssignAdd") != std::string::npos);
  for (size_t cut = 8; cut < blob.size(); cut += 24) {
    CHECK_FALSE(call(std::vector<char>(blob.begin(), blob.begin() + cut)).ok());
  }
  store->assign("w", Tensor::from_vector<float>(Shape{2}, {1, 1}));
  REQUIRE(actors::encode_shard_call(g, g.node(upd.node),
                                    {Tensor::from_vector<float>(Shape{2}, {2, 3})}, &blob)
              .ok());
  CHECK(call(blob).ok());
  CHECK(store->read("w")->to_vector<float>() == std::vector<float>{3, 4});
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
}

TEST_CASE("a shard's cached node is rebuilt when a call's attributes differ; updates are checked") {
  actors::Runtime rt;
  auto store = std::make_shared<runtime::VariableStore>();
  caf::actor shard = actors::spawn_parameter_shard(
      rt.system(), std::make_shared<actors::ShardCalls>(store), uint16_t{0});
  caf::scoped_actor self{rt.system()};
  auto call = [&](const runtime::Graph& g, int node, std::vector<Tensor> inputs) {
    std::vector<char> blob;
    REQUIRE(actors::encode_shard_call(g, g.node(node), inputs, &blob).ok());
    runtime::Result<std::vector<Tensor>> out = runtime::internal_error("no reply");
    self->request(shard, caf::infinite, actors::call_atom::value, std::move(blob))
        .receive(
            [&](std::vector<char>& reply) {
              out = actors::decode_shard_reply(
                  std::make_shared<const std::vector<char>>(std::move(reply)));
            },
            [&](caf::error& e) { out = runtime::internal_error(rt.system().render(e)); });
    return out;
  };
  // Two nodes of one name and op, as two peers (or one peer's two graphs) may send them.
  auto fill_node = [](runtime::Graph* g, double value) {
    runtime::GraphBuilder b(g);
    return ops::fill(b, Shape{2}, value, DType::kFloat32, "same").node;
  };
  runtime::Graph one, five;
  const int n1 = fill_node(&one, 1), n5 = fill_node(&five, 5);
  auto r1 = call(one, n1, {});
  REQUIRE(r1.ok());
  CHECK((*r1)[0].to_vector<float>() == std::vector<float>{1, 1});
  auto r5 = call(five, n5, {});
  REQUIRE(r5.ok());
  CHECK((*r5)[0].to_vector<float>() == std::vector<float>{5, 5});

  // An update declared for another shape than the stored variable's: refused, store unchanged.
  store->assign("w", Tensor::from_vector<float>(Shape{2}, {1, 1}));
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto v =
      ops::variable(b, "w", Shape{3}, DType::kFloat32, ops::zeros(b, Shape{3}, DType::kFloat32));
  auto upd = ops::assign_add(b, v, ops::placeholder(b, DType::kFloat32, Shape{3}));
  REQUIRE(b.ok());
  auto r = call(g, upd.node, {Tensor::from_vector<float>(Shape{3}, {1, 2, 3})});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("variable 'w' holds float32[2]") != std::string::npos);
  CHECK(store->read("w")->to_vector<float>() == std::vector<float>{1, 1});
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
}

TEST_CASE("a shard keeps at most kMaxNodes nodes, however many a peer names") {
  auto store = std::make_shared<runtime::VariableStore>();
  actors::ShardCalls calls(store);
  const size_t n = actors::ShardCalls::kMaxNodes + 100;
  for (size_t i = 0; i < n; ++i) {
    runtime::Graph g;
    runtime::GraphBuilder b(&g);
    const int node = ops::fill(b, Shape{1}, 1, DType::kFloat32, "n" + std::to_string(i)).node;
    std::vector<char> blob;
    REQUIRE(actors::encode_shard_call(g, g.node(node), {}, &blob).ok());
    calls.run(actors::decode_shard_call(std::make_shared<const std::vector<char>>(blob)));
  }
  CHECK(calls.cached_nodes() == actors::ShardCalls::kMaxNodes);
}

TEST_CASE("a call whose outputs nobody needs is run and answered without them") {
  auto store = std::make_shared<runtime::VariableStore>();
  actors::ShardCalls calls(store);
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  const int node = ops::fill(b, Shape{1000}, 1, DType::kFloat32, "ones").node;
  for (bool discard : {false, true}) {
    std::vector<char> blob;
    REQUIRE(
        actors::encode_shard_call(g, g.node(node), {}, &blob, {.discard_outputs = discard}).ok());
    auto reply = actors::decode_shard_reply(std::make_shared<const std::vector<char>>(
        calls.run(actors::decode_shard_call(std::make_shared<const std::vector<char>>(blob)))
            .flat()));
    REQUIRE(reply.ok());
    CHECK(reply->size() == (discard ? 0u : 1u));
  }
}

namespace {

// A shard holding a (float[2]), b (float[1]) and c (int64), and a graph of the nodes that read
// and write them, whose calls run() sends through the codec as a peer's come.
struct RideAlong {
  std::shared_ptr<runtime::VariableStore> store = std::make_shared<runtime::VariableStore>();
  actors::ShardCalls calls{store};
  runtime::Graph g;
  runtime::Output a, v, c, bump, sub;
  RideAlong() {
    store->assign("a", Tensor::from_vector<float>(Shape{2}, {1, 2}));
    store->assign("b", Tensor::from_vector<float>(Shape{1}, {3}));
    store->assign("c", Tensor::scalar<int64_t>(4));
    runtime::GraphBuilder b(&g);
    a = ops::variable(b, "a", Shape{2}, DType::kFloat32, ops::zeros(b, Shape{2}, DType::kFloat32));
    v = ops::variable(b, "b", Shape{1}, DType::kFloat32, ops::zeros(b, Shape{1}, DType::kFloat32));
    c = ops::variable(b, "c", Shape{}, DType::kInt64, ops::zeros(b, Shape{}, DType::kInt64));
    bump = ops::assign_add(b, c, ops::placeholder(b, DType::kInt64, Shape{}, "one"));
    sub = ops::assign_sub(b, a, ops::placeholder(b, DType::kFloat32, Shape{2}, "delta"));
    REQUIRE(b.ok());
  }
  const runtime::Node* node(runtime::Output o) const { return &g.node(o.node); }
  runtime::Result<std::vector<Tensor>> run(runtime::Output o, std::vector<Tensor> inputs,
                                           const actors::ShardCallExtras& extras) {
    std::vector<char> blob;
    REQUIRE(actors::encode_shard_call(g, *node(o), inputs, &blob, extras).ok());
    auto call = actors::decode_shard_call(std::make_shared<const std::vector<char>>(blob));
    REQUIRE(call.ok());
    CHECK(call->reads.size() == extras.reads.size());
    CHECK(call->updates.size() == extras.updates.size());
    return actors::decode_shard_reply(
        std::make_shared<const std::vector<char>>(calls.run(std::move(call)).flat()));
  }
};

}  // namespace

TEST_CASE("a call reads further variables after its node; only reads may ride along") {
  RideAlong s;
  // The node's outputs first, then each read's, in order.
  auto got = s.run(s.bump, {Tensor::scalar<int64_t>(1)}, {.reads = {s.node(s.v), s.node(s.a)}});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  REQUIRE(got->size() == 3);
  CHECK((*got)[0].data<int64_t>()[0] == 5);
  CHECK((*got)[1].to_vector<float>() == std::vector<float>{3});
  CHECK((*got)[2].to_vector<float>() == std::vector<float>{1, 2});
  // A write smuggled in as a read is refused, naming it, and runs not.
  auto smuggled = s.run(s.a, {}, {.reads = {s.node(s.bump)}});
  CHECK(smuggled.status().message().find("is not a variable read without inputs") !=
        std::string::npos);
  CHECK(s.store->read("c")->data<int64_t>()[0] == 5);
  // One variable named over and over would make a reply of any size: refused.
  auto twice = s.run(s.c, {}, {.reads = {s.node(s.a), s.node(s.v), s.node(s.a)}});
  CHECK(twice.status().message().find("reads a variable the call reads already") !=
        std::string::npos);
}

TEST_CASE("a call makes further updates after its node, each with its inputs; only updates") {
  RideAlong s;
  const std::vector<Tensor> inputs{Tensor::from_vector<float>(Shape{2}, {0.5f, 1}),
                                   Tensor::scalar<int64_t>(3)};
  // The node takes its one input, the update the next: both applied, nothing sent back.
  auto got = s.run(s.sub, inputs, {.discard_outputs = true, .updates = {s.node(s.bump)}});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(got->empty());
  CHECK(s.store->read("a")->to_vector<float>() == std::vector<float>{0.5f, 1});
  CHECK(s.store->read("c")->data<int64_t>()[0] == 7);
  // Inputs that do not add up to the nodes' are refused before anything is sent.
  std::vector<char> blob;
  CHECK(actors::encode_shard_call(s.g, *s.node(s.sub), {inputs[0]}, &blob,
                                  {.discard_outputs = true, .updates = {s.node(s.bump)}})
            .message()
            .find("1 inputs for 2") != std::string::npos);
  // A call that wants its outputs back, or a read riding as an update, is refused whole: nothing
  // is applied, not even the node's own update.
  auto wants = s.run(s.sub, inputs, {.updates = {s.node(s.bump)}});
  CHECK(wants.status().message().find("carries updates but asks for its outputs") !=
        std::string::npos);
  auto read = s.run(s.bump, {Tensor::scalar<int64_t>(1)},
                    {.discard_outputs = true, .updates = {s.node(s.a)}});
  CHECK(read.status().message().find("is not a variable update") != std::string::npos);
  CHECK(s.store->read("a")->to_vector<float>() == std::vector<float>{0.5f, 1});
  CHECK(s.store->read("c")->data<int64_t>()[0] == 7);
}
