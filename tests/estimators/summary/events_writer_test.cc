// TensorBoard events: the reference's byte-exact vectors, and a written file whose frames read
// back in order with the version record first.
#include "estimators/summary/events_writer.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "harness/bytes.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "runtime/graph_builder.h"

using namespace troupe;

using troupe::testing::hex;

TEST_CASE("event protos match the reference's test vectors") {
  CHECK(hex(estimators::version_event(1.0)) == "09000000000000f03f1a0d627261696e2e4576656e743a32");
  CHECK(hex(estimators::scalar_event(2.0, 1, "loss", 0.5f)) ==
        "09000000000000004010012a0d0a0b0a046c6f7373150000003f");
}

TEST_CASE("session logs: START where training (re)starts, CHECKPOINT with its path") {
  // Event { wall_time = 1.0; step = 500; session_log (7) = SessionLog { status = START } }
  CHECK(hex(estimators::session_log_event(1.0, 500, estimators::SessionStatus::kStart)) ==
        "09000000000000f03f10f4033a020801");
  // SessionLog { status = CHECKPOINT; checkpoint_path = "m" }
  CHECK(hex(estimators::session_log_event(1.0, 1, estimators::SessionStatus::kCheckpoint, "m")) ==
        "09000000000000f03f10013a05080312016d");
}

TEST_CASE("an events file: version first, then scalars, a histogram and the graph") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe_events_" + std::to_string(::getpid())))
          .string();
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto x = ops::placeholder(b, runtime::DType::kFloat32, runtime::Shape{-1, 3}, "x");
  ops::reduce_sum(b, ops::square(b, x));
  REQUIRE(b.ok());
  std::string path;
  {
    auto w = estimators::EventsWriter::open(dir + "/train");
    REQUIRE(w.ok());
    path = (*w)->path();
    CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
    REQUIRE((*w)->add_scalar("loss", 0.25, 10).ok());
    REQUIRE(
        (*w)->add_histogram(
                "w", runtime::Tensor::from_vector<float>(runtime::Shape{4}, {-1, 0, 0.5, 3}), 10)
            .ok());
    REQUIRE((*w)->add_graph(g).ok());
    CHECK(!(*w)->add_histogram(
                   "s", runtime::Tensor::from_vector<std::string>(runtime::Shape{1}, {"a"}), 1)
               .ok());
    REQUIRE((*w)->flush().ok());
    // A second writer in the same second (a second Estimator on this model_dir) gets a file of
    // its own instead of truncating this one.
    auto other = estimators::EventsWriter::open(dir + "/train");
    REQUIRE(other.ok());
    CHECK((*other)->path() != path);
  }
  std::string bytes;
  REQUIRE(runtime::read_file(path, &bytes).ok());
  runtime::RecordReader r(bytes.data(), bytes.size(), path);
  std::vector<std::string> records;
  std::string_view rec;
  while (true) {
    auto more = r.next(&rec);
    REQUIRE(more.ok());
    if (!*more) break;
    records.emplace_back(rec);
  }
  REQUIRE(records.size() == 4);
  CHECK(records[0].find("brain.Event:2") != std::string::npos);
  CHECK(records[1].find("loss") != std::string::npos);
  CHECK(records[1].substr(9, 2) == std::string("\x10\x0a", 2));  // step 10
  CHECK(records[2].find('w') != std::string::npos);
  CHECK(records[3].find("Square") != std::string::npos);
  CHECK(records[3].find("Placeholder") != std::string::npos);
  std::filesystem::remove_all(dir);
}
