// troupe serve's REST API: TF Serving's documented requests and answers replayed from
// tests/tools/fixtures/rest_api.json against a half_plus_two export, then the same over HTTP with
// the cases a server meets: a body over the limit, garbage, a slow client, too many connections
// (and more than the process may open), a new version under load, a stop while requests wait
// in a batch, a bearer token, and HTTPS.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "harness/half_plus_two.h"
#include "harness/self_signed.h"
#include "runtime/record_io.h"
#include "tools/serve/http_server.h"
#include "tools/serve/json_tensors.h"
#include "tools/serve/rest_api.h"
#include "tools/serve/warmup.h"

using namespace troupe;
using namespace troupe::serve;
using runtime::DType;
using runtime::Shape;
namespace fs = std::filesystem;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {

struct Served {
  std::string base =
      (fs::temp_directory_path() / ("troupe_rest_" + std::to_string(::getpid()))).string();
  actors::Runtime rt;
  ServingMetrics metrics;
  std::unique_ptr<ServedModels> models;
  std::unique_ptr<RestApi> api;

  explicit Served(serving::BatchingOptions batching = {.enabled = false}) {
    fs::remove_all(base);
    write_half_plus_two(base, "123", 2.0);
    ModelOptions defaults;
    defaults.poll_interval = std::chrono::milliseconds(0);  // the tests poll
    defaults.batching = batching;
    models = std::make_unique<ServedModels>(defaults, rt, &metrics);
    models->apply({{"half_plus_two", base, VersionPolicy::latest(1), {}}});
    api = std::make_unique<RestApi>(*models, &metrics);
  }
  ~Served() {
    api.reset();
    models.reset();
    fs::remove_all(base);
  }
  ModelManager& model() { return *models->find("half_plus_two"); }
  HttpReply call(const std::string& method, const std::string& target, const std::string& body) {
    std::promise<HttpReply> answer;
    api->handle({method, target, body}, [&answer](HttpReply r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  }
};

// A blocking HTTP/1.1 client over one keep-alive connection.
struct Client {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  explicit Client(uint16_t port) {
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }
  http::response<http::string_body> send(http::verb verb, const std::string& target,
                                         const std::string& body, beast::error_code* ec = nullptr) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    beast::error_code local;
    beast::error_code& e = ec ? *ec : local;
    http::write(stream, req, e);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    if (!e) http::read(stream, buffer, res, e);
    if (!ec) REQUIRE_MESSAGE(!e, e.message());
    return res;
  }
};

std::string predict_body(float x) { return json{{"instances", {x}}}.dump(); }

}  // namespace

TEST_CASE("TF Serving's requests and answers, replayed from fixtures, batching on and off") {
  std::ifstream in(std::string(TROUPE_FIXTURES) + "/rest_api.json");
  REQUIRE(in);
  const json cases = json::parse(in);
  REQUIRE(cases.size() > 30);
  for (const bool batching : {false, true}) {
    CAPTURE(batching);
    Served served({.enabled = batching,
                   .max_batch_size = 4,
                   .batch_timeout = std::chrono::microseconds(200)});
    for (const json& c : cases) {
      const std::string name = c["name"].get<std::string>();
      CAPTURE(name);
      const std::string body = c.contains("raw_body") ? c["raw_body"].get<std::string>()
                               : c.contains("body")   ? c["body"].dump()
                                                      : std::string();
      const HttpReply r = served.call(c["method"], c["target"], body);
      CHECK_MESSAGE(r.status == c["status"].get<int>(), r.body);
      const json got = json::parse(r.body);
      if (c.contains("response")) {
        CHECK_MESSAGE(got == c["response"], got.dump());
      } else {
        REQUIRE(got.contains("error"));
        CHECK_MESSAGE(got["error"].get<std::string>().find(c["error"].get<std::string>()) !=
                          std::string::npos,
                      got.dump());
      }
    }
  }
}

TEST_CASE("metadata lists every signature with TF's dtype and shape spelling") {
  Served served;
  const HttpReply r = served.call("GET", "/v1/models/half_plus_two/metadata", "");
  REQUIRE(r.status == 200);
  const json m = json::parse(r.body);
  CHECK(m["model_spec"]["name"] == "half_plus_two");
  CHECK(m["model_spec"]["version"] == "123");
  const json& defs = m["metadata"]["signature_def"]["signature_def"];
  CHECK(defs.size() == 7);
  const json& x = defs["serving_default"]["inputs"]["x"];
  CHECK(x["dtype"] == "DT_FLOAT");
  CHECK(x["name"] == "x:0");
  CHECK(x["tensor_shape"]["dim"][0]["size"] == "-1");
  CHECK(defs["serving_default"]["method_name"] == "tensorflow/serving/predict");
  CHECK(defs["classify_x_to_y"]["method_name"] == "tensorflow/serving/classify");
  CHECK(defs["pair"]["inputs"]["k"]["dtype"] == "DT_INT64");
  CHECK(defs["echo"]["inputs"]["s"]["dtype"] == "DT_STRING");
  CHECK(served.call("GET", "/v1/models/half_plus_two/versions/123/metadata", "").status == 200);
}

TEST_CASE("classify and regress send each example as a serialized tf.Example the graph parses") {
  Served served;
  auto regress = [&](const std::string& examples) {
    return served.call("POST", "/v1/models/half_plus_two:regress",
                       R"({"signature_name": "regression", "examples": )" + examples + "}");
  };
  HttpReply ok = regress(R"([{"x": 1.5}, {"x": [3.0]}, {"x": 1.0, "unused": ["a", "b"]}])");
  REQUIRE_MESSAGE(ok.status == 200, ok.body);
  CHECK(json::parse(ok.body)["results"] == json::parse("[2.75, 3.5, 2.5]"));
  // What the parse refuses is the client's error, named.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"([{"x": 3}])", "'x' is int64, not float32"},
      {R"([{"y": 1.0}])", "'x' is missing"},
      {R"([{"x": [1.0, 2.0]}])", "'x' has 2 values"},
      {R"([{"x": [1.0, "a"]}])", "mixes strings and numbers"},
      {R"([{"x": true}])", "a tf.Example holds numbers or strings"},
      {R"([7])", "every example must be an object"}};
  for (const auto& [examples, says] : refused) {
    CAPTURE(examples);
    HttpReply r = regress(examples);
    CHECK(r.status == 400);
    CHECK_MESSAGE(r.body.find(says) != std::string::npos, r.body);
  }
  // A classify signature of named inputs still takes the examples' fields as those inputs.
  HttpReply named =
      served.call("POST", "/v1/models/half_plus_two:classify",
                  R"({"signature_name": "classify_named", "examples": [{"x": 1.0}]})");
  REQUIRE_MESSAGE(named.status == 200, named.body);
  CHECK(json::parse(named.body)["results"] == json::parse(R"([[["y", 2.5]]])"));
}

TEST_CASE("a version runs its warm-up requests before it is AVAILABLE; a bad one does not load") {
  const std::string base =
      (fs::temp_directory_path() / ("troupe_warmup_" + std::to_string(::getpid()))).string();
  fs::remove_all(base);
  // Warm-up files as TF Serving's users write them, by another program.
  auto warmup = [&](const std::string& version, const std::string& how) {
    const std::string command = std::string("/usr/bin/python3 ") + TROUPE_WARMUP_WRITER + " " +
                                TROUPE_SCHEMA + " " + base + "/" + version + "/" + kWarmupFile +
                                how;
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  };
  write_half_plus_two(base, "7", 2.0);
  warmup("7", "");
  actors::Runtime rt;
  ModelManager models({.model = {"half_plus_two", base, VersionPolicy::latest(1), {}},
                       .poll_interval = std::chrono::milliseconds(0),
                       .batching = {.enabled = false}},
                      rt);
  models.poll();
  std::vector<VersionState> states = *models.status(0, "");
  REQUIRE(states.size() == 1);
  CHECK(states[0].state == "AVAILABLE");
  CHECK(states[0].warmup_requests == 4);  // predict, classify, regress and multi-inference
  // A newer version whose warm-up asks for a signature it lacks: END, the error naming the
  // record; the version served before stays.
  write_half_plus_two(base, "8", 3.0);
  warmup("8", " --bad");
  models.poll();
  states = *models.status(0, "");
  REQUIRE(states.size() == 2);
  CHECK(states[0].version == 8);
  CHECK(states[0].state == "END");
  CHECK_MESSAGE(
      states[0].status.message().find(
          "warm-up record 2: the model has no signature 'no_such_signature'") != std::string::npos,
      states[0].status.to_string());
  auto served = models.servable(0, "");
  REQUIRE(served.ok());
  CHECK((*served)->version == 7);
  // An export written with the file among its assets_extra warms up the same.
  std::string requests;
  REQUIRE(runtime::read_file(base + "/7/" + kWarmupFile, &requests).ok());
  auto seven = serving::read_saved_model(base + "/7");
  REQUIRE(seven.ok());
  seven->assets_extra["tf_serving_warmup_requests"] = requests;
  auto nine = serving::write_saved_model(base, *seven);
  REQUIRE_MESSAGE(nine.ok(), nine.status().to_string());
  models.poll();
  states = *models.status(0, "");
  CHECK(states[0].state == "AVAILABLE");
  CHECK(states[0].warmup_requests == 4);
  fs::remove_all(base);
}

TEST_CASE("floats are written as the shortest decimal that reads back as the same float") {
  CHECK(json_float(0.1f).dump() == "0.1");
  CHECK(json_float(2.5f).dump() == "2.5");
  CHECK(json_float(1.0f / 3.0f).dump() == "0.33333334");
  CHECK(json_float(std::numeric_limits<float>::quiet_NaN()).dump() == "\"NaN\"");
  simdjson::dom::parser parser;
  auto parse = [&](const std::string& text) {
    simdjson::dom::element e;
    REQUIRE(parser.parse(text).get(e) == simdjson::SUCCESS);
    return e;
  };
  auto t = tensor_from_json(parse("[[1, 2], [3, 4]]"), DType::kInt32, "m");
  REQUIRE(t.ok());
  CHECK(t->shape() == Shape{2, 2});
  CHECK(json_from_tensor(*t, "m").dump() == "[[1,2],[3,4]]");
  CHECK(json_row(*t, 1, "m").dump() == "[3,4]");
  CHECK(tensor_from_json(parse("[true, 1]"), DType::kBool, "f").status().message().find("'f'") !=
        std::string::npos);
  CHECK(!tensor_from_json(parse(R"([{"b64": "***"}])"), DType::kString, "s").ok());
  CHECK(!tensor_from_json(parse("[300]"), DType::kUInt8, "u").ok());
  const std::string ragged =
      tensor_from_json(parse("[[1, 2], [3, [4]]]"), DType::kFloat32, "r").status().message();
  CHECK_MESSAGE(ragged.find("ragged: a list at depth 2") != std::string::npos, ragged);
  auto deep = tensor_from_json(parse(std::string(40, '[') + "1" + std::string(40, ']')),
                               DType::kFloat32, "d");
  CHECK(deep.status().message().find("deeper") != std::string::npos);
}

namespace {

std::unique_ptr<HttpServer> http_server(Served& served, HttpOptions options) {
  auto server = HttpServer::start(options, [&](HttpRequest r, std::function<void(HttpReply)> done) {
    served.api->handle(r, std::move(done));
  });
  REQUIRE_MESSAGE(server.ok(), server.status().to_string());
  return std::move(*server);
}

}  // namespace

TEST_CASE("over HTTP: answers, and every bad client gets its 4xx while the server serves on") {
  Served served;
  auto server = http_server(served, {.port = 0, .body_limit = 4096, .max_connections = 3});
  const uint16_t port = server->port();

  Client good(port);
  auto ok = good.send(http::verb::post, "/v1/models/half_plus_two:predict", predict_body(1));
  CHECK(ok.result_int() == 200);
  CHECK(ok[http::field::content_type] == "application/json");
  CHECK(json::parse(ok.body()) == json::parse(R"({"predictions": [2.5]})"));
  {  // beyond max_connections (3, the good one included): 503
    Client second(port), third(port);
    CHECK(second.send(http::verb::get, "/v1/models/half_plus_two", "").result_int() == 200);
    CHECK(third.send(http::verb::get, "/v1/models/half_plus_two", "").result_int() == 200);
    Client fourth(port);
    beast::error_code ec;
    auto r = fourth.send(http::verb::get, "/v1/models/half_plus_two", "", &ec);
    CHECK(!ec);
    CHECK(r.result_int() == 503);
  }
  // The server sees the others go before it takes another.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {  // a body over the limit: 413, and the connection closes
    Client big(port);
    const std::string body = "{\"instances\": [" + std::string(8000, ' ') + "1.0]}";
    auto r = big.send(http::verb::post, "/v1/models/half_plus_two:predict", body);
    CHECK(r.result_int() == 413);
    CHECK(json::parse(r.body())["error"].get<std::string>().find("limit") != std::string::npos);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {  // not HTTP at all: 400
    Client garbage(port);
    net::write(garbage.stream, net::buffer(std::string("HELLO THERE\r\n\r\n")));
    beast::flat_buffer buffer;
    http::response<http::string_body> r;
    beast::error_code ec;
    http::read(garbage.stream, buffer, r, ec);
    CHECK(!ec);
    CHECK(r.result_int() == 400);
  }
  CHECK(good.send(http::verb::post, "/v1/models/half_plus_two:predict", predict_body(5))
            .result_int() == 200);
  server->stop(std::chrono::seconds(5));
}

TEST_CASE("over HTTP: a client that dawdles over its request gets 408; others are served") {
  Served served;
  auto server = http_server(served, {.port = 0, .idle_timeout = std::chrono::milliseconds(300)});
  Client slow(server->port());
  net::write(
      slow.stream,
      net::buffer(std::string("POST /v1/models/half_plus_two:predict HTTP/1.1\r\nContent-Le")));
  const auto start = std::chrono::steady_clock::now();
  Client good(server->port());
  CHECK(good.send(http::verb::post, "/v1/models/half_plus_two:predict", predict_body(2))
            .result_int() == 200);
  beast::flat_buffer buffer;
  http::response<http::string_body> r;
  beast::error_code ec;
  http::read(slow.stream, buffer, r, ec);
  CHECK_MESSAGE(!ec, ec.message());
  CHECK(r.result_int() == 408);
  CHECK(!r.keep_alive());
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(250));
  CHECK(waited < std::chrono::seconds(10));
  {  // a kept-alive connection that sends nothing is closed without an answer
    Client idle(server->port());
    char byte;
    idle.stream.socket().read_some(net::buffer(&byte, 1), ec);
    CHECK(ec == net::error::eof);
  }
  Client after(server->port());
  CHECK(after.send(http::verb::get, "/v1/models/half_plus_two", "").result_int() == 200);
  server->stop(std::chrono::seconds(5));
}

TEST_CASE("a new version under load: picked up without a restart, no request lost") {
  Served served({.enabled = true,
                 .max_batch_size = 8,
                 .batch_timeout = std::chrono::microseconds(500),
                 .num_batch_threads = 2});
  auto server = http_server(served, {.port = 0, .threads = 2});
  std::atomic<bool> done{false};
  std::atomic<int> answered{0}, failed{0}, old_answers{0}, new_answers{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      Client client(server->port());
      while (!done) {
        beast::error_code ec;
        auto r =
            client.send(http::verb::post, "/v1/models/half_plus_two:predict", predict_body(2), &ec);
        if (ec || r.result_int() != 200) {
          ++failed;
          continue;
        }
        ++answered;
        const double y = json::parse(r.body())["predictions"][0].get<double>();
        if (y == 3.0) ++old_answers;
        if (y == 11.0) ++new_answers;  // version 124: 0.5 x + 10
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  write_half_plus_two(served.base, "124", 10.0);
  served.model().poll();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  done = true;
  for (auto& t : clients) t.join();
  CHECK(failed == 0);
  CHECK(old_answers > 0);
  CHECK(new_answers > 0);
  CHECK(old_answers + new_answers == answered);
  const json status = json::parse(served.call("GET", "/v1/models/half_plus_two", "").body);
  CHECK(status["model_version_status"][0]["version"] == "124");
  CHECK(status["model_version_status"][0]["state"] == "AVAILABLE");
  CHECK(status["model_version_status"][1]["state"] == "END");
  CHECK(served.call("POST", "/v1/models/half_plus_two/versions/123:predict", predict_body(1))
            .status == 404);
  server->stop(std::chrono::seconds(5));
}

TEST_CASE("a broken newer version is reported and the served one stays") {
  Served served;
  fs::create_directories(served.base + "/200");
  std::ofstream(served.base + "/200/saved_model.json") << "{";
  served.model().poll();
  const json status = json::parse(served.call("GET", "/v1/models/half_plus_two", "").body);
  CHECK(status["model_version_status"][0]["version"] == "200");
  CHECK(status["model_version_status"][0]["state"] == "END");
  CHECK(status["model_version_status"][0]["status"]["error_code"] == "DATA_LOSS");
  CHECK(status["model_version_status"][0]["status"]["error_message"].get<std::string>().find(
            "saved_model.json") != std::string::npos);
  CHECK(served.call("POST", "/v1/models/half_plus_two:predict", predict_body(1)).status == 200);
}

TEST_CASE("stopping answers the requests waiting in a batch before it closes") {
  Served served({.enabled = true,
                 .max_batch_size = 1000,
                 .batch_timeout = std::chrono::milliseconds(300),
                 .num_batch_threads = 1});
  auto server = http_server(served, {.port = 0, .threads = 2});
  std::vector<std::future<int>> replies;
  for (int c = 0; c < 3; ++c) {
    replies.push_back(std::async(std::launch::async, [port = server->port()] {
      Client client(port);
      beast::error_code ec;
      auto r =
          client.send(http::verb::post, "/v1/models/half_plus_two:predict", predict_body(1), &ec);
      return ec ? -1 : static_cast<int>(r.result_int());
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all three wait in the batch
  server->stop(std::chrono::seconds(5));
  for (auto& r : replies) CHECK(r.get() == 200);
}

namespace {

// What `target` answers for x = 2: 0.5 * 2 + the version's offset, or minus the HTTP status.
double y_at_2(Served& served, const std::string& target) {
  const HttpReply r = served.call("POST", target, predict_body(2));
  if (r.status != 200) return -r.status;
  return json::parse(r.body)["predictions"][0].get<double>();
}

// Versions 1, 2 and 3 of half_plus_two under `base`, version v answering 0.5 x + v.
std::string three_versions(const Served& served) {
  const std::string base = served.base + "/multi";
  for (int v = 1; v <= 3; ++v) write_half_plus_two(base, std::to_string(v), v);
  return base;
}

}  // namespace

TEST_CASE("a config's models: each version policy and label, over TF Serving's routes") {
  Served served;
  const std::string multi = three_versions(served);
  served.models->apply({{"a", multi, VersionPolicy::latest(2), {{"stable", 2}, {"canary", 3}}},
                        {"b", multi, VersionPolicy::specific({1}), {{"old", 3}}},
                        {"c", multi, VersionPolicy::all(), {}}});
  CHECK(y_at_2(served, "/v1/models/a:predict") == 4);  // the newest served
  CHECK(y_at_2(served, "/v1/models/a/versions/2:predict") == 3);
  CHECK(y_at_2(served, "/v1/models/a/versions/1:predict") == -404);  // not among the latest 2
  CHECK(y_at_2(served, "/v1/models/a/labels/stable:predict") == 3);
  CHECK(y_at_2(served, "/v1/models/a/labels/canary:predict") == 4);
  const HttpReply nope = served.call("POST", "/v1/models/a/labels/nope:predict", predict_body(2));
  CHECK(nope.status == 404);
  CHECK_MESSAGE(nope.body.find("model a has no version label 'nope'") != std::string::npos,
                nope.body);
  const HttpReply old = served.call("POST", "/v1/models/b/labels/old:predict", predict_body(2));
  CHECK(old.status == 404);
  CHECK_MESSAGE(old.body.find("names version 3, which is not available") != std::string::npos,
                old.body);
  CHECK(y_at_2(served, "/v1/models/b:predict") == 2);
  CHECK(y_at_2(served, "/v1/models/c:predict") == 4);
  CHECK(y_at_2(served, "/v1/models/c/versions/1:predict") == 2);
  CHECK(y_at_2(served, "/v1/models/half_plus_two:predict") == -404);  // not in the config
  // Status and metadata by label, as TF Serving's GET routes take them.
  const json a = json::parse(served.call("GET", "/v1/models/a", "").body);
  REQUIRE(a["model_version_status"].size() == 2);
  CHECK(a["model_version_status"][0]["version"] == "3");
  CHECK(a["model_version_status"][1]["version"] == "2");
  CHECK(a["model_version_status"][1]["state"] == "AVAILABLE");
  const json stable = json::parse(served.call("GET", "/v1/models/a/labels/stable", "").body);
  REQUIRE(stable["model_version_status"].size() == 1);
  CHECK(stable["model_version_status"][0]["version"] == "2");
  const json meta = json::parse(served.call("GET", "/v1/models/a/labels/canary/metadata", "").body);
  CHECK(meta["model_spec"]["version"] == "3");
  CHECK(served.call("GET", "/v1/models/a/labels/", "").status == 400);

  // A reload: a's policy and labels change, b goes, d comes.
  served.models->apply({{"a", multi, VersionPolicy::specific({1}), {{"stable", 1}}},
                        {"d", multi, VersionPolicy::latest(1), {}}});
  CHECK(y_at_2(served, "/v1/models/a:predict") == 2);
  CHECK(y_at_2(served, "/v1/models/a/versions/3:predict") == -404);
  CHECK(y_at_2(served, "/v1/models/a/labels/stable:predict") == 2);
  CHECK(y_at_2(served, "/v1/models/a/labels/canary:predict") == -404);
  CHECK(y_at_2(served, "/v1/models/b:predict") == -404);
  CHECK(y_at_2(served, "/v1/models/d:predict") == 4);
  const json after = json::parse(served.call("GET", "/v1/models/a", "").body);
  REQUIRE(after["model_version_status"].size() == 3);
  CHECK(after["model_version_status"][0]["state"] == "END");
  CHECK(after["model_version_status"][1]["state"] == "END");
  CHECK(after["model_version_status"][2]["version"] == "1");
  CHECK(after["model_version_status"][2]["state"] == "AVAILABLE");
}

TEST_CASE("when a picked version fails to load, the policy picks the next one") {
  Served served;
  const std::string multi = served.base + "/multi";
  write_half_plus_two(multi, "1", 1);
  write_half_plus_two(multi, "2", 2);
  fs::create_directories(multi + "/3");
  std::ofstream(multi + "/3/saved_model.json") << "{";
  served.models->apply({{"a", multi, VersionPolicy::latest(2), {}}});
  CHECK(y_at_2(served, "/v1/models/a:predict") == 3);
  CHECK(y_at_2(served, "/v1/models/a/versions/1:predict") == 2);
  const json status = json::parse(served.call("GET", "/v1/models/a", "").body);
  REQUIRE(status["model_version_status"].size() == 3);
  CHECK(status["model_version_status"][0]["status"]["error_code"] == "DATA_LOSS");
}

TEST_CASE("a reload says which models serve no version, and why, and applies the config anyway") {
  Served served;
  const std::string broken = served.base + "/broken", empty = served.base + "/empty";
  fs::create_directories(broken + "/1");
  std::ofstream(broken + "/1/saved_model.json") << "{";
  fs::create_directories(empty);
  CHECK(served.models->reload({{"half_plus_two", served.base, VersionPolicy::latest(1), {}}}).ok());
  runtime::Status one =
      served.models->reload({{"half_plus_two", served.base, VersionPolicy::latest(1), {}},
                             {"b", broken, VersionPolicy::latest(1), {}}});
  CHECK(one.code() == runtime::Code::kDataLoss);  // the version's own error
  CHECK_MESSAGE(one.message().rfind("model b serves no version: version 1: ", 0) == 0,
                one.to_string());
  CHECK_MESSAGE(one.message().find("saved_model.json") != std::string::npos, one.to_string());
  runtime::Status two =
      served.models->reload({{"e", empty, VersionPolicy::latest(1), {}},
                             {"half_plus_two", served.base, VersionPolicy::latest(1), {}},
                             {"b", broken, VersionPolicy::latest(1), {}}});
  CHECK(two.code() == runtime::Code::kNotFound);  // the first's
  CHECK_MESSAGE(two.message().rfind("2 of 3 models serve no version (e, b); e: its base path " +
                                        empty + " holds no version folder yet",
                                    0) == 0,
                two.to_string());
  // Applied all the same: the model served answers, and one appearing later is picked up.
  CHECK(y_at_2(served, "/v1/models/half_plus_two:predict") == 3);
  write_half_plus_two(empty, "1", 1);
  served.models->find("e")->poll();
  CHECK(y_at_2(served, "/v1/models/e:predict") == 2);
}

TEST_CASE("a watched config file: a change is applied, a broken one leaves the models served") {
  Served served;
  const std::string multi = three_versions(served);
  const std::string file = served.base + "/models.config";
  auto write = [&](const std::string& text) {
    std::ofstream(file + ".tmp") << text;
    fs::rename(file + ".tmp", file);  // as a deployment replaces it: never half written
  };
  write("model_config_list { config { name: 'a' base_path: '" + multi + "' } }");
  served.models->apply(*read_model_config(file));
  served.models->watch(file, std::chrono::milliseconds(20));
  auto wait_for = [&](const std::string& target, double y) {
    for (int i = 0; i < 500 && y_at_2(served, target) != y; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return y_at_2(served, target) == y;
  };
  CHECK(wait_for("/v1/models/a:predict", 4));
  write("model_config_list { config { name: 'a' base_path: '" + multi +
        "' model_version_policy { specific { versions: 2 } } }\n"
        "config { name: 'b' base_path: '" +
        multi + "' } }");
  CHECK(wait_for("/v1/models/a:predict", 3));
  CHECK(wait_for("/v1/models/b:predict", 4));
  write("model_config_list { config { name: 'a' base_path: ");  // broken: logged, not applied
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(y_at_2(served, "/v1/models/a:predict") == 3);
  CHECK(y_at_2(served, "/v1/models/b:predict") == 4);
  write("model_config_list { config { name: 'b' base_path: '" + multi + "' } }");
  CHECK(wait_for("/v1/models/a:predict", -404));
  CHECK(y_at_2(served, "/v1/models/b:predict") == 4);
}

TEST_CASE("a model dropped from the config still answers the requests that wait for it") {
  Served served({.enabled = true,
                 .max_batch_size = 1000,
                 .batch_timeout = std::chrono::milliseconds(300),
                 .num_batch_threads = 1,
                 .adaptive = false});
  const std::string multi = three_versions(served);
  served.models->apply(
      {{"a", multi, VersionPolicy::latest(1), {}}, {"b", multi, VersionPolicy::latest(1), {}}});
  std::vector<std::future<HttpReply>> waiting;
  for (int i = 0; i < 3; ++i) {
    auto answer = std::make_shared<std::promise<HttpReply>>();
    waiting.push_back(answer->get_future());
    served.api->handle({"POST", "/v1/models/b:predict", predict_body(2)},
                       [answer](HttpReply r) { answer->set_value(std::move(r)); });
  }
  served.models->apply(
      {{"a", multi, VersionPolicy::latest(1), {}}});  // while the three wait in b's batch
  for (auto& w : waiting) {
    const HttpReply r = w.get();
    CHECK(r.status == 200);
    CHECK(json::parse(r.body)["predictions"][0].get<double>() == 4);
  }
  CHECK(served.call("POST", "/v1/models/b:predict", predict_body(2)).status == 404);
}

TEST_CASE("reloads under load: a label moved and a model added and dropped lose no request") {
  Served served;
  const std::string multi = three_versions(served);
  auto config = [&](int live, bool with_e) {
    std::vector<ModelConfig> c{{"a", multi, VersionPolicy::all(), {{"live", live}}}};
    if (with_e) c.push_back({"e", multi, VersionPolicy::latest(1), {}});
    return c;
  };
  served.models->apply(config(1, false));
  std::atomic<bool> done{false};
  std::atomic<int> failed{0}, ones{0}, twos{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!done) {
        const double y = y_at_2(served, "/v1/models/a/labels/live:predict");
        if (y == 2) {
          ++ones;
        } else if (y == 3) {
          ++twos;
        } else {
          ++failed;
        }
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    served.models->apply(config(1 + i % 2, i % 2 == 0));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  done = true;
  for (auto& t : clients) t.join();
  CHECK(failed == 0);
  CHECK(ones > 0);
  CHECK(twos > 0);
}

namespace {

// User and system CPU seconds `pid` has used (Linux's /proc/PID/stat).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field && i <= 15; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

// A forked child's whole life: a server that may open 256 files, its port told through `up`,
// until it is killed.
[[noreturn]] void serve_with_256_files(int up) {
  rlimit limit{256, 256};
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(2);
  auto server =
      HttpServer::start({.port = 0}, [](HttpRequest, std::function<void(HttpReply)> done) {
        done({200, "{}", {}});
      });
  const uint16_t port = server.ok() ? (*server)->port() : 0;
  if (::write(up, &port, sizeof port) != sizeof port) ::_exit(1);
  ::pause();
  ::_exit(0);
}

TEST_CASE("over HTTP under a descriptor limit of 256, 300 held sockets: 503s, no spin, then 200s") {
  // The server in a child of its own: the limit is the child's alone.
  int up[2];
  REQUIRE(::pipe(up) == 0);
  const pid_t child = ::fork();
  if (child == 0) serve_with_256_files(up[1]);
  REQUIRE(child > 0);
  ::close(up[1]);
  uint16_t port = 0;
  REQUIRE(::read(up[0], &port, sizeof port) == sizeof port);
  ::close(up[0]);
  REQUIRE(port != 0);
  std::vector<std::unique_ptr<Client>> held;
  int served = 0, refused = 0, failed = 0;
  for (int i = 0; i < 300; ++i) {
    held.push_back(std::make_unique<Client>(port));
    beast::error_code ec;
    auto r = held.back()->send(http::verb::get, "/", "", &ec);
    if (ec) {
      ++failed;
    } else if (r.result_int() == 200) {
      ++served;
    } else if (r.result_int() == 503) {
      ++refused;
    }
  }
  CHECK(served > 0);
  CHECK(refused > 0);
  CHECK(failed == 0);  // every client was answered
  // Held, nothing to do: a second's CPU time is nearly none.
  const double before = cpu_seconds(child);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  CHECK(cpu_seconds(child) - before < 0.3);
  held.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Client again(port);
  CHECK(again.send(http::verb::get, "/", "").result_int() == 200);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

namespace {

http::request<http::string_body> get_request(const std::string& token = "") {
  http::request<http::string_body> req{http::verb::get, "/v1/models/half_plus_two", 11};
  req.set(http::field::host, "127.0.0.1");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  return req;
}

}  // namespace

TEST_CASE("over HTTP with a bearer token: 401 without it or with another, 200 with it") {
  Served served;
  auto server = http_server(served, {.port = 0, .auth_token = "s3cret-token"});
  for (const std::string& token :
       {std::string(), std::string("wrong"), std::string("s3cret-toke")}) {
    Client client(server->port());
    auto req = get_request(token);
    http::write(client.stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(client.stream, buffer, res);
    CHECK(res.result_int() == 401);
    CHECK(res[http::field::www_authenticate] == "Bearer");
  }
  Client client(server->port());
  auto req = get_request("s3cret-token");
  http::write(client.stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(client.stream, buffer, res);
  CHECK(res.result_int() == 200);
  server->stop(std::chrono::seconds(5));
}

TEST_CASE("over HTTPS: a client that trusts the certificate is answered; plain HTTP is not") {
  const std::string dir = "/tmp/troupe_https_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const auto [cert_pem, key_pem] = testing::self_signed();
  std::ofstream(dir + "/cert.pem") << cert_pem;
  std::ofstream(dir + "/key.pem") << key_pem;
  Served served;
  auto server = http_server(
      served, {.port = 0, .ssl_cert_file = dir + "/cert.pem", .ssl_key_file = dir + "/key.pem"});
  {
    net::io_context ioc;
    net::ssl::context tls(net::ssl::context::tls_client);
    tls.add_certificate_authority(net::buffer(cert_pem));
    tls.set_verify_mode(net::ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> stream(ioc, tls);
    beast::get_lowest_layer(stream).connect(
        net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), server->port()));
    stream.handshake(net::ssl::stream_base::client);
    auto req = get_request();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    CHECK(res.result_int() == 200);
    CHECK(json::parse(res.body())["model_version_status"].size() > 0);
  }
  {
    Client plain(server->port());
    beast::error_code ec;
    auto r = plain.send(http::verb::get, "/v1/models/half_plus_two", "", &ec);
    CHECK(ec);  // TLS's alert or a closed connection, never an HTTP answer
  }
  // Half a pair is an error that says what is missing.
  auto half = HttpServer::start({.port = 0, .ssl_cert_file = dir + "/cert.pem"},
                                [](HttpRequest, std::function<void(HttpReply)>) {});
  CHECK(half.status().message().find("both a certificate file and a key file") !=
        std::string::npos);
  server->stop(std::chrono::seconds(5));
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "Prometheus metrics at TF Serving's path, as the Prometheus project's parser reads them") {
  Served served({.enabled = true, .max_batch_size = 4});
  for (int i = 0; i < 5; ++i) {
    CHECK(served.call("POST", "/v1/models/half_plus_two:predict", predict_body(i)).status == 200);
  }
  CHECK(served.call("POST", "/v1/models/half_plus_two:predict", "{garbage").status == 400);
  CHECK(served.call("POST", "/v1/models/other:predict", predict_body(1)).status == 404);
  CHECK(served.call("GET", "/v1/models/half_plus_two/metadata", "").status == 200);
  const HttpReply scrape = served.call("GET", ServingMetrics::kPath, "");
  REQUIRE(scrape.status == 200);
  CHECK(scrape.content_type == "text/plain; version=0.0.4");
  CHECK(served.call("POST", ServingMetrics::kPath, "").status == 405);
  const std::string file = served.base + "/scrape.txt";
  std::ofstream(file) << scrape.body;
  const std::string parsed = file + ".parsed";
  REQUIRE(std::system(
              ("/usr/bin/python3 " TROUPE_PROMETHEUS_PARSER " " + file + " > " + parsed).c_str()) ==
          0);
  std::ifstream in(parsed);
  const std::string samples((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto has = [&](const std::string& line) {
    CHECK_MESSAGE(samples.find(line) != std::string::npos, line, "\n", samples);
  };
  // The parser names a counter's sample with "_total", as Prometheus does.
  const std::string count = "counter :tensorflow:serving:request_count_total ";
  has(count +
      "API=predict,entrypoint=REST,model_name=half_plus_two,model_version=123,status=200 5.0");
  has(count +
      "API=predict,entrypoint=REST,model_name=half_plus_two,model_version=123,status=400 1.0");
  has(count + "API=predict,entrypoint=REST,model_name=other,model_version=,status=404 1.0");
  has(count +
      "API=metadata,entrypoint=REST,model_name=half_plus_two,model_version=123,status=200 1.0");
  // Every predict of the model timed (6, the bad one too); every good one batched.
  has("histogram :tensorflow:serving:request_latency_count API=predict,entrypoint=REST,"
      "model_name=half_plus_two 6.0");
  has("histogram :tensorflow:serving:request_latency_bucket API=predict,entrypoint=REST,le=+Inf,"
      "model_name=half_plus_two 6.0");
  has("histogram :tensorflow:serving:batching_session:queuing_latency_count "
      "model_name=half_plus_two 5.0");
  has("histogram :tensorflow:serving:batching_session:input_batch_size_sum "
      "model_name=half_plus_two 5.0");
}
