#include "bench/cluster_model.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace troupe::bench {

Cluster Cluster::separate(int workers, int ps, Link link, double ps_cores) {
  Cluster c;
  for (int w = 0; w < workers; ++w) {
    c.worker_on.push_back(static_cast<int>(c.machines.size()));
    c.machines.push_back({1, link});
  }
  for (int p = 0; p < ps; ++p) {
    c.ps_on.push_back(static_cast<int>(c.machines.size()));
    c.machines.push_back({ps_cores, link});
  }
  return c;
}

Cluster Cluster::colocated(int workers, Link link, double cores) {
  Cluster c;
  for (int w = 0; w < workers; ++w) {
    c.worker_on.push_back(w);
    c.ps_on.push_back(w);
    c.machines.push_back({cores, link});
  }
  return c;
}

Cluster Cluster::one_machine(int workers, int ps, double cores, Link loopback) {
  Cluster c;
  c.machines.push_back({cores, loopback});
  c.worker_on.assign(static_cast<size_t>(workers), 0);
  c.ps_on.assign(static_cast<size_t>(ps), 0);
  return c;
}

namespace {

// Something under way: a wait (a link's latency, `left` seconds), or work on the machines'
// cores and links, `left` the part not done (1 at the start). A transfer streams: its sender's
// CPU, its bytes on the link and its receiver's CPU go on at once, at the pace of the slowest.
struct Activity {
  bool wait = false;
  double left = 1, total = 1;
  int from = 0, to = 0;
  double cpu_from = 0, bytes = 0, cpu_to = 0;  // core-seconds at each end, bytes between
  std::function<void()> done;
};

class Simulation {
 public:
  Simulation(const StepCosts& costs, const Cluster& cluster, bool sync, int steps)
      : costs_(costs), cluster_(cluster), sync_(sync), steps_(steps) {
    const size_t workers = cluster.worker_on.size(), ps = cluster.ps_on.size();
    done_steps_.assign(workers, 0);
    replies_.assign(workers, 0);
    round_.assign(ps, 0);
  }

  Prediction run() {
    for (size_t w = 0; w < cluster_.worker_on.size(); ++w) start_step(static_cast<int>(w));
    while (!active_.empty()) {
      if (!advance()) break;
    }
    Prediction p;
    const double workers = static_cast<double>(cluster_.worker_on.size());
    if (end_ <= settled_ || workers == 0) return p;
    const double worker_steps = workers * steps_ / (end_ - settled_);
    p.steps_per_s = sync_ ? worker_steps / workers : worker_steps;
    p.examples_rate_vs_alone = worker_steps * costs_.compute_s;
    p.efficiency = p.examples_rate_vs_alone / workers;
    return p;
  }

 private:
  void add(Activity a) {
    const bool nothing = a.wait ? a.left <= 0 : a.cpu_from <= 0 && a.bytes <= 0 && a.cpu_to <= 0;
    if (nothing) return a.done();
    a.total = a.left;
    active_.push_back(std::move(a));
  }
  void cpu(int machine, double seconds, std::function<void()> then) {
    Activity a;
    a.from = a.to = machine;
    a.cpu_from = seconds;
    a.done = std::move(then);
    add(std::move(a));
  }
  // After the link's latency, `bytes` from one machine to another with the CPU each end spends.
  void send(int from, int to, double bytes, double cpu_from, double cpu_to,
            std::function<void()> then) {
    Activity t;
    t.from = from;
    t.to = to;
    t.cpu_from = cpu_from;
    t.bytes = bytes;
    t.cpu_to = cpu_to;
    t.done = std::move(then);
    Activity w;
    w.wait = true;
    w.left = cluster_.machines[static_cast<size_t>(from)].link.latency_s;
    w.done = [this, t] { add(t); };
    add(std::move(w));
  }

  int shards() const { return static_cast<int>(cluster_.ps_on.size()); }
  double share(double amount) const { return amount / std::max(1, shards()); }

  // A step: the worker computes, then streams each ps its part of the gradients (half the
  // worker's calls' CPU and half the ps's on the way), and each ps answers with the values.
  void start_step(int w) {
    const int machine = cluster_.worker_on[static_cast<size_t>(w)];
    cpu(machine, costs_.compute_s, [this, w, machine] {
      for (int s = 0; s < shards(); ++s) {
        const int ps = cluster_.ps_on[static_cast<size_t>(s)];
        send(machine, ps, share(costs_.bytes_per_step / 2), share(costs_.worker_comm_s / 2),
             share(costs_.ps_cpu_per_update_s / 2), [this, w, s] { arrived(w, s); });
      }
    });
  }

  void arrived(int w, int s) {
    if (!sync_) return reply(w, s);
    waiting_.push_back({s, w});
    if (++round_[static_cast<size_t>(s)] < cluster_.worker_on.size()) return;
    round_[static_cast<size_t>(s)] = 0;
    std::vector<std::pair<int, int>> mine;
    auto it = std::stable_partition(waiting_.begin(), waiting_.end(),
                                    [s](const auto& x) { return x.first != s; });
    mine.assign(it, waiting_.end());
    waiting_.erase(it, waiting_.end());
    for (const auto& [shard, worker] : mine) reply(worker, shard);
  }

  void reply(int w, int s) {
    const int ps = cluster_.ps_on[static_cast<size_t>(s)];
    const int machine = cluster_.worker_on[static_cast<size_t>(w)];
    send(ps, machine, share(costs_.bytes_per_step / 2), share(costs_.ps_cpu_per_update_s / 2),
         share(costs_.worker_comm_s / 2), [this, w] {
           if (++replies_[static_cast<size_t>(w)] < shards()) return;
           replies_[static_cast<size_t>(w)] = 0;
           const int n = ++done_steps_[static_cast<size_t>(w)];
           ++total_steps_;
           const size_t workers = cluster_.worker_on.size();
           if (total_steps_ == workers * static_cast<size_t>(steps_)) settled_ = now_;
           if (total_steps_ == 2 * workers * static_cast<size_t>(steps_)) end_ = now_;
           if (n < 2 * steps_) start_step(w);
         });
  }

  // The rate each activity runs at now (its part a second). Each machine's cores, and each
  // link's two ways (the loopback, one), are resources; a transfer uses its ends' cores and the
  // link between, a computation its machine's cores, each end one core at most. They share by
  // progressive filling: every activity's share of each resource it uses grows alike (as parts
  // of the resources), each at the pace of its scarcest, until a resource is full or an end has
  // its core; those activities keep their rate and the rest grow on, so that nothing is left
  // idle that an activity could use (max-min fairness).
  std::vector<double> rates() const {
    struct Use {
      size_t resource;
      double demand;  // the resource's units for the whole activity
      bool core;      // one core at most
    };
    const size_t m = cluster_.machines.size();
    std::vector<double> left(4 * m);  // per machine: cores, out, in, loopback
    for (size_t i = 0; i < m; ++i) {
      left[4 * i] = cluster_.machines[i].cores;
      for (size_t k = 1; k < 4; ++k) left[4 * i + k] = cluster_.machines[i].link.bytes_per_s;
    }
    const std::vector<double> capacity = left;
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<Use>> uses(active_.size());
    for (size_t i = 0; i < active_.size(); ++i) {
      const Activity& a = active_[i];
      if (a.wait) continue;
      const auto f = static_cast<size_t>(a.from), t = static_cast<size_t>(a.to);
      if (a.cpu_from > 0) uses[i].push_back({4 * f, a.cpu_from, true});
      if (a.cpu_to > 0) uses[i].push_back({4 * t, a.cpu_to, true});
      if (a.bytes > 0) uses[i].push_back({4 * f + (f == t ? 3 : 1), a.bytes, false});
      if (a.bytes > 0 && f != t) uses[i].push_back({4 * t + 2, a.bytes, false});
    }
    // At fill level x an unfixed activity runs at x * pace: its scarcest resource's part x.
    std::vector<double> rate(active_.size(), 0), pace(active_.size(), inf);
    std::vector<bool> fixed(active_.size(), false);
    for (size_t i = 0; i < active_.size(); ++i) {
      if (active_[i].wait) {
        rate[i] = 1;
        fixed[i] = true;
      }
      for (const Use& u : uses[i]) pace[i] = std::min(pace[i], capacity[u.resource] / u.demand);
    }
    double level = 0;
    for (;;) {
      std::vector<double> pull(left.size(), 0);  // each resource's use a level more
      bool any = false;
      for (size_t i = 0; i < active_.size(); ++i) {
        if (fixed[i]) continue;
        any = true;
        for (const Use& u : uses[i]) pull[u.resource] += u.demand * pace[i];
      }
      if (!any) break;
      // The next level where a resource fills or an end reaches its core.
      double next = inf;
      for (size_t r = 0; r < left.size(); ++r) {
        if (pull[r] > 0) next = std::min(next, level + left[r] / pull[r]);
      }
      for (size_t i = 0; i < active_.size(); ++i) {
        if (fixed[i]) continue;
        for (const Use& u : uses[i]) {
          if (u.core) next = std::min(next, 1 / (u.demand * pace[i]));
        }
      }
      const double step = next - level;
      for (size_t r = 0; r < left.size(); ++r) left[r] -= pull[r] * step;
      level = next;
      for (size_t i = 0; i < active_.size(); ++i) {
        if (fixed[i]) continue;
        rate[i] = level * pace[i];
        for (const Use& u : uses[i]) {
          const bool full = left[u.resource] <= capacity[u.resource] * 1e-12;
          const bool own_core = u.core && rate[i] * u.demand >= 1 - 1e-12;
          if (full || own_core) fixed[i] = true;
        }
      }
    }
    return rate;
  }

  // Runs to the next end of an activity and calls what follows it; false when nothing moves.
  bool advance() {
    const std::vector<double> r = rates();
    double dt = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < active_.size(); ++i) {
      if (r[i] > 0) dt = std::min(dt, active_[i].left / r[i]);
    }
    if (!(dt < std::numeric_limits<double>::infinity())) return false;
    now_ += dt;
    std::vector<Activity> finished, going;
    for (size_t i = 0; i < active_.size(); ++i) {
      Activity& a = active_[i];
      a.left -= r[i] * dt;
      (a.left <= a.total * 1e-9 ? finished : going).push_back(std::move(a));
    }
    active_ = std::move(going);
    for (Activity& a : finished) a.done();
    return true;
  }

  const StepCosts& costs_;
  const Cluster& cluster_;
  const bool sync_;
  const int steps_;
  std::vector<Activity> active_;
  std::vector<int> done_steps_, replies_;
  std::vector<size_t> round_;                 // a ps's updates in its open round
  std::vector<std::pair<int, int>> waiting_;  // {ps, worker} updates in open rounds
  size_t total_steps_ = 0;
  double now_ = 0, settled_ = 0, end_ = 0;
};

}  // namespace

Prediction simulate(const StepCosts& costs, const Cluster& cluster, bool sync, int steps) {
  return Simulation(costs, cluster, sync, std::max(1, steps)).run();
}

}  // namespace troupe::bench
