#include "bench/grpc_load.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "schema/serving_service.grpc.pb.h"

namespace troupe::bench {

namespace {

namespace tfs = tensorflow::serving;
using Clock = std::chrono::steady_clock;

// One connection: its channel, and the call it has in flight.
struct Connection {
  std::unique_ptr<tfs::PredictionService::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  tfs::PredictResponse response;
  Clock::time_point sent;
  std::vector<double> latencies_ms;
  long errors = 0;
};

struct Run {
  const tfs::PredictRequest* request = nullptr;
  Clock::time_point until;
  std::mutex mu;
  std::condition_variable done;
  int running = 0;

  void send(Connection* c) {
    c->context = std::make_unique<grpc::ClientContext>();
    c->response.Clear();
    c->sent = Clock::now();
    c->stub->async()->Predict(c->context.get(), request, &c->response,
                              [this, c](grpc::Status s) { answered(c, s); });
  }

  void answered(Connection* c, const grpc::Status& s) {
    const auto now = Clock::now();
    if (s.ok()) {
      c->latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - c->sent).count());
    } else {
      ++c->errors;
    }
    if (now < until) return send(c);
    std::lock_guard<std::mutex> lock(mu);
    if (--running == 0) done.notify_all();
  }
};

}  // namespace

GrpcLoad grpc_load(uint16_t port, int connections, double seconds,
                   const tfs::PredictRequest& request) {
  std::vector<Connection> conns(static_cast<size_t>(connections));
  for (Connection& c : conns) {
    // A subchannel pool of its own: a connection of its own, as each of wrk's is.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                             grpc::InsecureChannelCredentials(), args);
    channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5));
    c.stub = tfs::PredictionService::NewStub(channel);
  }
  Run run;
  run.request = &request;
  run.running = connections;
  const auto start = Clock::now();
  run.until =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (Connection& c : conns) run.send(&c);
  {
    std::unique_lock<std::mutex> lock(run.mu);
    run.done.wait(lock, [&] { return run.running == 0; });
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  GrpcLoad out;
  for (const Connection& c : conns) {
    all.insert(all.end(), c.latencies_ms.begin(), c.latencies_ms.end());
    out.errors += c.errors;
  }
  if (all.empty()) return out;
  std::sort(all.begin(), all.end());
  out.rps = static_cast<double>(all.size()) / elapsed;
  out.p50_ms = all[all.size() / 2];
  out.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return out;
}

}  // namespace troupe::bench
