// Parameter servers in processes of their own for the distributed tests: a child forked to serve
// a shard (before the test's process starts threads: a child forked later is beyond
// ThreadSanitizer), a ps process per task, and the reference runs in one process that a
// cluster's steps must match. Failures are doctest REQUIREs.
//
//   uint16_t port = 0;  int keep_alive = -1;
//   pid_t child = testing::start_server(&port, &keep_alive);
//   ... options.cluster = {{"/job:ps/task:0", "127.0.0.1:" + std::to_string(port)}};
//   testing::stop_server(child, keep_alive);
#pragma once

#include <sys/types.h>
#include <caf/all.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/job_secret.h"
#include "actors/runtime_system.h"
#include "actors/session.h"
#include "runtime/executor.h"
#include "runtime/graph.h"

namespace troupe::testing {

// A child forked to serve a parameter shard once told to (run_server), until its pipe from the
// parent closes.
struct ForkedServer {
  pid_t pid = -1;
  int up = -1, down = -1;
};

// With a secret, the server speaks only to members of that job; `log` takes its stderr.
ForkedServer fork_server(std::shared_ptr<const actors::JobSecret> secret = nullptr,
                         const std::string& log = "", uint16_t at_port = 0);
// Starts a forked server; returns its pid, with its port and the pipe that keeps it alive.
pid_t run_server(ForkedServer server, uint16_t* port, int* keep_alive_fd);
// Forks a child that serves a parameter shard until its pipe closes; returns its pid.
pid_t start_server(uint16_t* port, int* keep_alive_fd,
                   std::shared_ptr<const actors::JobSecret> secret = nullptr,
                   const std::string& log = "", uint16_t at_port = 0);
// Ends a server start_server forked: its pipe closes, it exits, it is reaped.
void stop_server(pid_t child, int keep_alive_fd);

// A ps server process per task, on 127.0.0.1; all stopped and reaped when it goes.
struct PsTasks {
  std::vector<pid_t> children;
  std::vector<int> keep_alive;
  std::map<std::string, std::string> cluster;  // task -> address

  explicit PsTasks(const std::vector<std::string>& tasks);
  ~PsTasks();
  // Ends task `i`'s process now (its peers see it go), as the destructor would.
  void stop(size_t i);
  // "/job:ps/task:0" .. "/job:ps/task:<n-1>".
  static std::vector<std::string> named(int n);
  // What `task` holds now (its variables and their slots) into `held`, pulled over a client
  // of its own.
  void pull(actors::Runtime& rt, const std::string& task, runtime::VariableStore* held) const;
};

// Each step's loss in one process, from `init`: what a cluster's steps must give.
std::vector<float> losses_in_one_process(const runtime::Graph& g, int init, int train,
                                         runtime::Output loss,
                                         const std::vector<runtime::FeedList>& batches,
                                         runtime::VariableStore* store);
// Runs the same steps in `session`, each loss as `want` has it.
void check_losses(actors::Session& session, int train, runtime::Output loss,
                  const std::vector<runtime::FeedList>& batches, const std::vector<float>& want);

// A new job secret in temp_dir(name)/job.secret, loaded.
std::shared_ptr<const actors::JobSecret> new_job_secret(const std::string& name);
// The reader's secret of `job` (an evaluator's), written beside it and loaded.
std::shared_ptr<const actors::JobSecret> reader_secret(const actors::JobSecret& job);

// The data port a server tells its peers; 0 when it does not answer.
uint16_t data_port_told(actors::Runtime& rt, const caf::actor& server);

// A two-layer classifier whose variables sit on /job:ps/task:0, Adam, seeded.
struct PsModel {
  runtime::Graph g;
  runtime::Output x, y, loss, w;
  int train = -1, init = -1;
};
PsModel ps_model();
runtime::FeedList ps_batch(const PsModel& m, int i);  // 16 examples, from seed 100 + i

}  // namespace troupe::testing
