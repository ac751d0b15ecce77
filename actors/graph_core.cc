#include "actors/graph_core.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace troupe::actors {

namespace {

struct Registry {
  std::mutex mu;
  std::condition_variable registered;
  int ever = 0;                // workers registered so far
  std::vector<pid_t> workers;  // threads in the quiet worker loop
  int reservations = 0;
  pid_t worker = 0;  // the pinned worker, while reserved
  int core = -1;
  cpu_set_t allowed{};  // the worker's CPUs before it was pinned
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: workers may outlive main
  return *r;
}

// The CPU thread `tid` of this process last ran on (field 39 of its stat), or -1.
int current_cpu(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t comm_end = stat.rfind(')');  // the thread's name may hold spaces
  if (comm_end == std::string::npos) return -1;
  std::istringstream fields(stat.substr(comm_end + 2));
  std::string field;
  for (int i = 3; i <= 39 && fields >> field; ++i) {
    if (i == 39) return std::stoi(field);
  }
  return -1;
}

void start_reservation(Registry& r) {
  if (r.workers.size() != 1) return;
  const pid_t worker = r.workers[0];
  cpu_set_t allowed;
  if (sched_getaffinity(worker, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
  int core = current_cpu(worker);
  if (core < 0 || core >= CPU_SETSIZE || !CPU_ISSET(core, &allowed)) {
    for (core = 0; !CPU_ISSET(core, &allowed); ++core) {
    }
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(core, &one);
  if (sched_setaffinity(worker, sizeof one, &one) != 0) return;
  r.worker = worker;
  r.core = core;
  r.allowed = allowed;
}

void end_reservation(Registry& r) {
  if (r.core < 0) return;
  sched_setaffinity(r.worker, sizeof r.allowed, &r.allowed);  // it may have exited: ESRCH
  r.core = -1;
  r.worker = 0;
}

}  // namespace

GraphCore GraphCore::reserve() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.reservations++ == 0) start_reservation(r);
  GraphCore held;
  held.held_ = true;
  return held;
}

GraphCore& GraphCore::operator=(GraphCore&& other) noexcept {
  if (this != &other) {
    GraphCore released(std::move(*this));
    held_ = other.held_;
    other.held_ = false;
  }
  return *this;
}

GraphCore::~GraphCore() {
  if (!held_) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (--r.reservations == 0) end_reservation(r);
}

void leave_graph_core() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.core < 0 || gettid() == r.worker) return;
  cpu_set_t others = r.allowed;
  CPU_CLR(r.core, &others);
  sched_setaffinity(0, sizeof others, &others);
}

int graph_core() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.core;
}

void register_worker_thread() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.workers.push_back(gettid());
  ++r.ever;
  r.registered.notify_all();
  // A second worker, started during a reservation (of another runtime, or of this one on a
  // loaded machine): GraphCoreHook moved it off the graph's core, which is not its business,
  // and with two workers neither is the graph's.
  if (r.core >= 0) {
    sched_setaffinity(0, sizeof r.allowed, &r.allowed);
    end_reservation(r);
  }
  // A runner that reserved before the worker thread got to run (a loaded machine) found no
  // worker to pin: pin it now.
  if (r.core < 0 && r.reservations > 0) start_reservation(r);
}

void unregister_worker_thread() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const pid_t self = gettid();
  r.workers.erase(std::remove(r.workers.begin(), r.workers.end(), self), r.workers.end());
  if (self == r.worker) {
    r.core = -1;  // nothing left to give back
    r.worker = 0;
  }
}

int workers_registered() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.ever;
}

void await_workers(int count, std::chrono::milliseconds limit) {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mu);
  r.registered.wait_for(lock, limit, [&] { return r.ever >= count; });
}

}  // namespace troupe::actors
