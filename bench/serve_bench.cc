// What serving costs (the serving issue's bars), on the Fashion-MNIST DNN (784-256-128-10)
// exported by an Estimator:
//   predictor_latency  Predictor::predict of one instance in-process against a bare
//                      Session::run of the same graph on the same variables (bar <= 2x)
//   serve_rps_cN[_batching]  `troupe serve` under wrk on loopback (N = 1, 16, 64 and 256
//                      connections, keep-alive, one-instance predicts as TF Serving's row
//                      form) against nginx answering the same response to the same request
//                      with `return 200` (the machine's ceiling for these sizes); bar >= 0.5
//                      of nginx's requests/s at 1 connection, 0.4 at 64 with batching
//   serve_p50_/p99_cN  wrk's latency percentiles beside nginx's (p99 at 64: bar <= 2x)
//   serve_rps_c1_batching_vs_plain  one connection with batching against one without (adaptive
//                      batching: bar >= 0.9)
//   serve_rps_c64_vs_c1  64 connections' requests/s against one's, without batching (bar >= 2)
//   serve_grpc_rps_/p99_cN[_batching]  the same predicts over gRPC (bench/grpc_load.h: one call
//                      in flight per connection) against REST's in the same run
// wrk and nginx are Debian packages (wrk, nginx-light); without them the HTTP part is skipped
// with a message. Each wrk run is 5 s (2 s with --quick); the machine's other load shows in them,
// so compare ratios from one run.
//
//   serve_bench [--quick] [--json FILE]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "bench/bench_flags.h"
#include "bench/bench_util.h"
#include "bench/grpc_load.h"
#include "tools/serve/tensor_proto.h"
#include "troupe/troupe.h"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

bool quick = false;

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

bool have(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool port_open(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(log.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

void stop(pid_t pid) {
  ::kill(pid, SIGINT);
  int status = 0;
  for (int i = 0; i < 100 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
}

struct WrkResult {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  long errors = 0;
};

double to_ms(const std::string& v) {
  const double x = std::atof(v.c_str());
  if (v.find("us") != std::string::npos) return x / 1000;
  if (v.find("ms") != std::string::npos) return x;
  if (v.find('s') != std::string::npos) return x * 1000;
  return x;
}

WrkResult wrk(uint16_t port, int connections, const std::string& script, const std::string& path) {
  const int threads = connections > 1 ? 2 : 1;
  const std::string cmd = "wrk --latency -t" + std::to_string(threads) + " -c" +
                          std::to_string(connections) + " -d" + (quick ? "2" : "5") + "s -s " +
                          script + " http://127.0.0.1:" + std::to_string(port) + path + " 2>&1";
  const std::string out = run_capture(cmd);
  WrkResult r;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first, second;
    words >> first >> second;
    if (first == "Requests/sec:") r.rps = std::atof(second.c_str());
    if (first == "50%") r.p50_ms = to_ms(second);
    if (first == "99%") r.p99_ms = to_ms(second);
    if (first == "Non-2xx") {
      std::string third, count;
      words >> third >> count;
      r.errors += std::atol(count.c_str());
    }
    if (first == "Socket" && second == "errors:") r.errors += 1;
  }
  if (r.rps == 0) std::fprintf(stderr, "wrk said:\n%s\n", out.c_str());
  return r;
}

// Connections the HTTP and gRPC lines are measured at.
constexpr int kConnections[] = {1, 16, 64, 256};

// nginx returning the same answer to the same request, at each of kConnections: the peer of
// troupe serve, measured beside it.
std::map<int, WrkResult> nginx_peer(const fs::path& work, const std::string& response,
                                    const std::string& script, const std::string& path) {
  const uint16_t nport = free_port();
  const fs::path ndir = work / "nginx";
  fs::create_directories(ndir);
  std::ofstream(ndir / "nginx.conf")
      << "daemon off; worker_processes 2; pid " << (ndir / "nginx.pid").string() << ";\n"
      << "error_log " << (ndir / "error.log").string() << ";\n"
      << "events { worker_connections 1024; }\n"
      << "http { access_log off; client_body_temp_path " << ndir.string() << ";\n"
      << "  client_max_body_size 16m; default_type application/json;\n"
      << "  server { listen 127.0.0.1:" << nport << ";\n"
      << "    location / { return 200 '" << response << "'; } } }\n";
  const pid_t ng = spawn({"nginx", "-p", ndir.string(), "-c", (ndir / "nginx.conf").string()},
                         (ndir / "stderr.log").string());
  for (int i = 0; i < 200 && !port_open(nport); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::map<int, WrkResult> results;
  for (int c : kConnections) results[c] = wrk(nport, c, script, path);
  ::kill(ng, SIGQUIT);
  ::waitpid(ng, nullptr, 0);
  return results;
}

// In-process: the predictor against a bare session on the same graph and variables, in one
// runtime configured as a server's.
void in_process_bar(const std::string& dir, const runtime::Tensor& image, bench::Bars& bars) {
  actors::Runtime rt({.idle_spin = serving::kServingIdleSpin});
  auto p = serving::load(dir, {.runtime = &rt});
  const serving::SavedModel& m = (*p)->model();
  auto store = std::make_shared<runtime::VariableStore>();
  runtime::load_into(m.variables, store.get());
  auto session = actors::Session::create(rt, m.graph, {.pipeline_depth = 1, .variables = store});
  const serving::Signature& sig = m.signatures.at("serving_default");
  std::vector<runtime::Output> fetches;
  for (const auto& [name, info] : sig.outputs) fetches.push_back(info.tensor);
  const runtime::Output x = sig.inputs.at("image").tensor;
  const double bare = bench::median_seconds(
      [&] {
        (void)(*session)->run({{x, image}}, fetches);
      },
      quick ? 3 : 7, quick ? 0.1 : 0.3);
  const double predictor = bench::median_seconds(
      [&] {
        (void)(*p)->predict({{"image", image}});
      },
      quick ? 3 : 7, quick ? 0.1 : 0.3);
  bars.add("predictor_latency_1", predictor * 1e6, "us", "session_run", bare * 1e6,
           predictor / bare);
}

// troupe serve over HTTP, without and with batching, against nginx (wrk drives the load).
void http_bars(const fs::path& work, const std::string& base, const runtime::Tensor& image,
               bench::Bars& bars) {
  // One instance in TF Serving's row form, and the answer it gets.
  std::string body = "{\"instances\": [[";
  for (int64_t i = 0; i < image.num_elements(); ++i) {
    char number[32];
    *std::to_chars(number, number + sizeof number - 1, image.data<float>()[i]).ptr = '\0';
    body += (i ? "," : "") + std::string(number);
  }
  body += "]]}";
  const std::string script = (work / "post.lua").string();
  std::ofstream(work / "body.json") << body;
  std::ofstream(script) << "wrk.method = \"POST\"\n"
                        << "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
                        << "local f = io.open(\"" << (work / "body.json").string()
                        << "\")\nwrk.body = f:read(\"*a\")\nf:close()\n";
  const std::string path = "/v1/models/fmnist:predict";
  tensorflow::serving::PredictRequest request;
  request.mutable_model_spec()->set_name("fmnist");
  serve::tensor_to_proto(image, &(*request.mutable_inputs())["image"]);

  std::map<int, WrkResult> nginx;
  double plain_c1 = 0;  // one connection's requests/s without batching
  std::string response;
  for (bool batching : {false, true}) {
    const uint16_t port = free_port(), grpc_port = free_port();
    std::vector<std::string> args = {
        TROUPE_CLI, "serve",           "--model_base_path",  base,     "--model_name",
        "fmnist",   "--rest_api_port", std::to_string(port), "--port", std::to_string(grpc_port)};
    if (batching) args.push_back("--enable_batching");
    const pid_t server = spawn(args, (work / "serve.log").string());
    for (int i = 0; i < 200 && !port_open(port); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (response.empty()) {
      response = run_capture("curl -s -X POST --data-binary @" + (work / "body.json").string() +
                             " http://127.0.0.1:" + std::to_string(port) + path);
      if (response.empty()) {
        // No curl: the answer's size is what matters to nginx; a prediction's is about this.
        response = std::string(300, 'x');
      }
    }
    for (int c : kConnections) {
      const WrkResult r = wrk(port, c, script, path);
      const bench::GrpcLoad g = bench::grpc_load(grpc_port, c, quick ? 2.0 : 5.0, request);
      if (nginx.empty()) nginx = nginx_peer(work, response, script, path);
      const WrkResult& peer = nginx.at(c);
      const std::string tag = "_c" + std::to_string(c) + (batching ? "_batching" : "");
      if (r.errors > 0) std::printf("serve_bench: %ld failed requests%s\n", r.errors, tag.c_str());
      bars.add("serve_rps" + tag, r.rps, "req/s", "nginx", peer.rps,
               peer.rps > 0 ? r.rps / peer.rps : 0);
      if (c == 1 && !batching) plain_c1 = r.rps;
      if (c == 64 && !batching) {
        bars.add("serve_rps_c64_vs_c1", r.rps, "req/s", "one_connection", plain_c1,
                 plain_c1 > 0 ? r.rps / plain_c1 : 0);
      }
      if (g.errors > 0)
        std::printf("serve_bench: %ld failed gRPC calls%s\n", g.errors, tag.c_str());
      bars.add("serve_grpc_rps" + tag, g.rps, "req/s", "rest", r.rps,
               r.rps > 0 ? g.rps / r.rps : 0);
      bars.add("serve_grpc_p99" + tag, g.p99_ms, "ms", "rest", r.p99_ms,
               r.p99_ms > 0 ? g.p99_ms / r.p99_ms : 0);
      if (c == 1 && batching) {
        // Adaptive batching: a lone client's requests wait for no company (bar >= 0.9).
        bars.add("serve_rps_c1_batching_vs_plain", r.rps, "req/s", "no_batching", plain_c1,
                 plain_c1 > 0 ? r.rps / plain_c1 : 0);
      }
      bars.add("serve_p50" + tag, r.p50_ms, "ms", "nginx", peer.p50_ms,
               peer.p50_ms > 0 ? r.p50_ms / peer.p50_ms : 0);
      bars.add("serve_p99" + tag, r.p99_ms, "ms", "nginx", peer.p99_ms,
               peer.p99_ms > 0 ? r.p99_ms / peer.p99_ms : 0);
    }
    stop(server);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags("serve_bench", "");
  flags.parse(argc, argv);
  quick = flags.quick;
  const std::string json_path = flags.json;
  bench::Bars bars("serve");
  const fs::path work =
      fs::temp_directory_path() / ("troupe_serve_bench_" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work);

  // The model: the Fashion-MNIST DNN after a few steps (its speed, not its accuracy, matters).
  estimators::RunConfig config;
  config.tf_random_seed = 1;
  config.log_step_count_steps = 1000000;
  estimators::Estimator est(
      estimators::DNNOptions{
          .hidden_units = {256, 128}, .n_classes = 10, .optimizer = ops::Optimizer::adam(0.001)}
          .model_fn(estimators::Task::kClassifier),
      config);
  auto train = estimators::input::fashion_mnist("train", {.batch_size = 128});
  if (!train.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", train.status().to_string().c_str());
    return 1;
  }
  if (auto t = est.train(*train, {.steps = 50}); !t.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", t.status().to_string().c_str());
    return 1;
  }
  const std::string base = (work / "exports").string();
  auto dir = est.export_saved_model(base);
  if (!dir.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", dir.status().to_string().c_str());
    return 1;
  }
  auto test = estimators::input::fashion_mnist("test", {.batch_size = 1});
  std::vector<actors::Chunk> chunks;
  int64_t skipped = 0;
  (void)test->source->read(0, &chunks, &skipped);
  const runtime::Tensor image =
      runtime::slice_rows(chunks[0].components[test->component("image")], chunks[0].first(), 1);

  in_process_bar(*dir, image, bars);
  if (!have("wrk") || !have("nginx")) {
    std::printf(
        "serve_bench: wrk or nginx is not installed (apt install wrk nginx-light): the "
        "HTTP bars are skipped\n");
  } else {
    http_bars(work, base, image, bars);
  }
  fs::remove_all(work);
  if (!json_path.empty() && !bars.write_json(json_path)) {
    std::fprintf(stderr, "serve_bench: cannot write %s\n", json_path.c_str());
    return 1;
  }
  return 0;
}
