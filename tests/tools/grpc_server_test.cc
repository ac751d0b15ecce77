// troupe serve's gRPC port as a TF Serving user calls it: a Python client generated from
// schema/*.proto by Debian's grpc_tools calls each method of PredictionService and ModelService
// (tests/tools/grpc_client.py) against half_plus_two, by version and by label; reloads of the
// models served; then a bearer token, TLS, garbage on the port, and the metrics of gRPC calls.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/half_plus_two.h"
#include "harness/raw_socket.h"
#include "harness/self_signed.h"
#include "harness/temp_dir.h"
#include "tools/serve/grpc_server.h"

using namespace troupe;
using namespace troupe::serve;
using json = nlohmann::json;

namespace {

// The client's JSON, or a failed check with what it printed.
json run_client(uint16_t port, const std::string& out, const std::string& extra = "") {
  const std::string command = std::string("/usr/bin/python3 ") + TROUPE_GRPC_CLIENT + " " +
                              TROUPE_SCHEMA + " " + out + " " + std::to_string(port) + extra +
                              " 2>&1";
  std::string text;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
  const int status = ::pclose(pipe);
  REQUIRE_MESSAGE(status == 0, command, "\n", text);
  const json parsed = json::parse(text, nullptr, false);
  REQUIRE_MESSAGE(!parsed.is_discarded(), text);
  return parsed;
}

struct Served {
  std::string dir = testing::temp_dir("grpc");
  actors::Runtime rt;
  ServingMetrics metrics;
  std::unique_ptr<ServedModels> models;

  Served() {
    write_half_plus_two(dir + "/hp2", "1", 1.0);  // y = 0.5 x + 1
    write_half_plus_two(dir + "/hp2", "2", 2.0);  // y = 0.5 x + 2
    ModelOptions defaults;
    defaults.poll_interval = std::chrono::milliseconds(0);
    defaults.batching.enabled = false;
    models = std::make_unique<ServedModels>(defaults, rt, &metrics);
    models->apply({{"hp2", dir + "/hp2", VersionPolicy::all(), {{"stable", 1}, {"gone", 9}}}});
  }
};

}  // namespace

TEST_CASE("gRPC: a client generated from TF Serving's protos calls every method") {
  Served served;
  auto server = GrpcServer::start({.port = 0}, *served.models, &served.metrics);
  REQUIRE_MESSAGE(server.ok(), server.status().to_string());
  const json r = run_client((*server)->port(), served.dir + "/stubs");

  CHECK(r["predict"]["y"] == json::array({2.5, 3.0, 4.0}));  // the newest version, 2
  CHECK(r["predict"]["dtype"] == 1);                         // DT_FLOAT
  CHECK(r["predict"]["shape"] == json::array({3}));
  CHECK(r["predict"]["version"] == 2);
  CHECK(r["predict"]["signature"] == "serving_default");
  CHECK(r["predict_v1"] == json::array({2.0}));
  CHECK(r["predict_stable"] == json::array({2.0}));  // the label names version 1
  CHECK(r["predict_filtered"] == json::array({"x_again"}));

  CHECK(r["classify"] == json::parse(R"([[["y", 3.0]], [["y", 5.0]]])"));
  CHECK(r["regress"] == json::array({3.0, 4.0}));
  CHECK(r["regress_signature"] == "regression");
  CHECK(r["regress_context"] == json::array({6.0, 6.0, 6.0}));  // x from the context

  // MultiInference: each task's result is its Classify or Regress answer, of the first task's
  // version.
  const json multi = json::parse(R"([
      {"signature": "classify_x_to_y", "version": 2, "kind": "classification_result",
       "classes": [[["y", 3.0]], [["y", 5.0]]], "values": []},
      {"signature": "regression", "version": 2, "kind": "regression_result",
       "classes": [], "values": [3.0, 5.0]}])");
  CHECK(r["multi"] == multi);
  CHECK(r["multi_v1"][0]["version"] == 1);
  CHECK(r["multi_v1"][0]["classes"] == json::parse(R"([[["y", 2.0]], [["y", 4.0]]])"));
  CHECK(r["multi_v1"][1]["values"] == json::array({2.0, 4.0}));

  CHECK(r["metadata"]["version"] == 2);
  CHECK(r["metadata"]["method"] == "tensorflow/serving/predict");
  CHECK(r["metadata"]["x_dtype"] == 1);
  CHECK(r["metadata"]["x_shape"] == json::array({-1}));
  CHECK(r["metadata"]["signatures"].size() == 7);

  REQUIRE(r["status"].size() == 2);
  CHECK(r["status"][0] == json::parse(R"({"version": 2, "state": "AVAILABLE", "error_code": 0})"));
  CHECK(r["status"][1]["version"] == 1);

  const json& e = r["errors"];
  auto starts = [&](const char* key, const std::string& prefix, const std::string& says) {
    const std::string got = e[key].get<std::string>();
    CHECK_MESSAGE(got.rfind(prefix, 0) == 0, key, ": ", got);
    CHECK_MESSAGE(got.find(says) != std::string::npos, key, ": ", got);
  };
  starts("unknown_model", "NOT_FOUND", "Latest(nope)");
  starts("unknown_version", "NOT_FOUND", "Specific(hp2, 7)");
  starts("unknown_label", "NOT_FOUND", "names version 9, which is not available");
  starts("wrong_dtype", "INVALID_ARGUMENT", "'x'");
  starts("shape_lies", "INVALID_ARGUMENT", "2 values for [5]");
  starts("huge_fill", "RESOURCE_EXHAUSTED", "more than a request may hold");
  starts("unknown_signature", "INVALID_ARGUMENT", "\"nope\" not found");
  starts("no_metadata_field", "INVALID_ARGUMENT", "at least one metadata_field");
  starts("classify_named_inputs", "INVALID_ARGUMENT", "takes named inputs");
  starts("no_examples", "INVALID_ARGUMENT", "holds no examples");
  starts("multi_no_tasks", "INVALID_ARGUMENT", "Expected at least one task");
  starts("multi_two_models", "INVALID_ARGUMENT", "must access the same model name");
  starts("multi_twice", "INVALID_ARGUMENT", "Duplicate evaluation of signature: regression");
  starts("multi_method", "UNIMPLEMENTED", "Unsupported signature method_name");
  starts("multi_wrong_method", "INVALID_ARGUMENT", "is a classify signature, not regress");
  starts("multi_named_inputs", "INVALID_ARGUMENT", "takes named inputs");
  starts("multi_no_examples", "INVALID_ARGUMENT", "holds no examples");

  // Counted as TF Serving counts them, beside REST's.
  const std::string scrape = served.metrics.render();
  CHECK(scrape.find(":tensorflow:serving:request_count{entrypoint=\"GRPC\",model_name=\"hp2\","
                    "model_version=\"2\",API=\"predict\",status=\"200\"}") != std::string::npos);
  CHECK(scrape.find("entrypoint=\"GRPC\",model_name=\"nope\"") != std::string::npos);
  (*server)->stop(std::chrono::seconds(5));
}

TEST_CASE("gRPC: HandleReloadConfigRequest replaces the models served; a bad config changes none") {
  Served served;
  write_half_plus_two(served.dir + "/hp3", "1", 3.0);  // y = 0.5 x + 3
  std::filesystem::create_directories(served.dir + "/empty");
  auto server = GrpcServer::start({.port = 0}, *served.models, &served.metrics);
  REQUIRE(server.ok());
  const json r = run_client((*server)->port(), served.dir + "/stubs", " --reload " + served.dir);
  const json& steps = r["steps"];
  REQUIRE(steps.size() == 5);
  // hp3 added beside hp2.
  CHECK(steps[0] == json::parse(R"({"reload": "OK 0", "hp2": [2.5], "hp3": [3.5]})"));
  // hp2 dropped: unloaded, and its requests are NOT_FOUND.
  CHECK(steps[1] == json::parse(R"({"reload": "OK 0", "hp2": "NOT_FOUND", "hp3": [3.5]})"));
  // A model with nothing to serve yet: applied, and the answer names it.
  const std::string idle = steps[2]["reload"].get<std::string>();
  CHECK_MESSAGE(idle == "NOT_FOUND: model idle serves no version: its base path " + served.dir +
                            "/empty holds no version folder yet",
                idle);
  CHECK(steps[2]["hp3"] == json::array({3.5}));
  CHECK(served.models->find("idle") != nullptr);
  // A config that does not check out changes nothing.
  const std::string bad = steps[3]["reload"].get<std::string>();
  CHECK_MESSAGE(bad.rfind("INVALID_ARGUMENT: ReloadConfigRequest: model 'a/b'", 0) == 0, bad);
  CHECK(steps[3]["hp3"] == json::array({3.5}));
  CHECK(served.models->find("idle") != nullptr);
  // No config at all: nothing to do, as TF Serving.
  CHECK(steps[4] == json::parse(R"({"reload": "OK 0", "hp2": "NOT_FOUND", "hp3": [3.5]})"));
}

TEST_CASE("gRPC: with a bearer token, a call without it is UNAUTHENTICATED") {
  Served served;
  auto server =
      GrpcServer::start({.port = 0, .auth_token = "s3cret"}, *served.models, &served.metrics);
  REQUIRE(server.ok());
  const json r = run_client((*server)->port(), served.dir + "/stubs", " --token s3cret");
  CHECK(r["without_token"].get<std::string>().rfind("UNAUTHENTICATED", 0) == 0);
  CHECK(r["with_token"] == json::array({3.0}));
}

TEST_CASE("gRPC over TLS: a client that trusts the certificate is answered; plain is not") {
  Served served;
  const auto [cert_pem, key_pem] = testing::self_signed();
  std::ofstream(served.dir + "/cert.pem") << cert_pem;
  std::ofstream(served.dir + "/key.pem") << key_pem;
  auto server = GrpcServer::start({.port = 0,
                                   .ssl_cert_file = served.dir + "/cert.pem",
                                   .ssl_key_file = served.dir + "/key.pem"},
                                  *served.models);
  REQUIRE_MESSAGE(server.ok(), server.status().to_string());
  const json r =
      run_client((*server)->port(), served.dir + "/stubs", " --tls " + served.dir + "/cert.pem");
  CHECK(r["over_tls"] == json::array({3.0}));
  CHECK_MESSAGE(r["plain"].get<std::string>().rfind("UNAVAILABLE", 0) == 0, r["plain"]);
}

TEST_CASE("gRPC: garbage on the port is dropped and the server serves on") {
  Served served;
  auto server = GrpcServer::start({.port = 0}, *served.models);
  REQUIRE(server.ok());
  for (const std::string& junk :
       {std::string(64, '\0'), std::string("GET / HTTP/1.1\r\n\r\n"),
        std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(200, '\xff')}) {
    const int fd = testing::connect_to((*server)->port());
    testing::send_all(fd, junk);
    ::close(fd);
  }
  const json r = run_client((*server)->port(), served.dir + "/stubs");
  CHECK(r["predict"]["version"] == 2);
}

TEST_CASE("gRPC: a port that cannot be had is an error naming it") {
  Served served;
  auto first = GrpcServer::start({.port = 0}, *served.models);
  REQUIRE(first.ok());
  auto second = GrpcServer::start({.port = (*first)->port()}, *served.models);
  REQUIRE(!second.ok());
  CHECK(second.status().message().find(std::to_string((*first)->port())) != std::string::npos);
  auto half = GrpcServer::start({.port = 0, .ssl_cert_file = "c.pem"}, *served.models);
  REQUIRE(!half.ok());
  CHECK(half.status().message().find("both a certificate and its key") != std::string::npos);
}
