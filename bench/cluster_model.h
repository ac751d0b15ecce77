// A model of data-parallel training on a cluster of workers and ps tasks, to predict what this
// machine cannot run: fed with a step's measured costs, it simulates the workers' steps (their
// compute, each gradient's trip to its ps and the values' trip back, the ps's work on each
// update, synchronous rounds) on machines whose cores and links are shared fairly among what
// runs on them at once, and reports the rate and the scaling efficiency.
//
//   StepCosts dnn{.compute_s = 3e-3, .worker_comm_s = 4e-4, .bytes_per_step = 2.1e6,
//                 .ps_cpu_per_update_s = 3e-4};
//   Cluster c = Cluster::separate(16, 4, Link::gbit(10, 50e-6));  // 16 workers, 4 ps hosts
//   Prediction p = simulate(dnn, c, /*sync=*/true);
//   p.efficiency;  // examples a second against 16 workers computing alone, 0..1
//
// The model is a fluid one (events where an activity ends; between them every core and every
// link is shared fairly among the activities on it, none left idle that one could use; a
// transfer's CPU at both ends and its bytes go on at once, at the pace of the slowest),
// deterministic, and knows nothing of troupe:
// the cluster benchmark measures the costs and checks the model against the runs it can make.
#pragma once

#include <vector>

namespace troupe::bench {

// What one worker's step costs, measured on one machine. The CPU of the calls is spent half on
// the way up and half on the way down, as the bytes stream (sealing, copying, the stack).
struct StepCosts {
  double compute_s = 0;            // the step's math alone: a process training without a ps
  double worker_comm_s = 0;        // a worker's CPU for its calls beyond its math
  double bytes_per_step = 0;       // both ways: the gradients up and the values down
  double ps_cpu_per_update_s = 0;  // all ps tasks' CPU for one worker's step, split evenly
};

struct Link {
  double bytes_per_s = 0;  // each way (full duplex)
  double latency_s = 0;    // one way
  static Link gbit(double gbit_per_s, double latency_s) {
    return {gbit_per_s * 1e9 / 8, latency_s};
  }
};

// Where the workers and ps tasks run: machines with cores and a link each.
struct Cluster {
  struct Machine {
    double cores = 1;
    Link link;
  };
  std::vector<Machine> machines;
  std::vector<int> worker_on, ps_on;  // each worker's and each ps's machine

  // Every worker and ps on a machine of its own; a worker uses one core, a ps `ps_cores`.
  static Cluster separate(int workers, int ps, Link link, double ps_cores = 4);
  // A worker and a ps on each of `workers` machines, as TF's distributed benchmarks ran them:
  // each machine's link carries its worker's transfers and its ps's (a worker's part for its own
  // ps stays on the machine, at the link's rate).
  static Cluster colocated(int workers, Link link, double cores = 8);
  // All on one machine of `cores` cores, the link its loopback (shared by every transfer).
  static Cluster one_machine(int workers, int ps, double cores, Link loopback);
};

struct Prediction {
  double steps_per_s = 0;             // every worker's steps (async) or rounds (sync) a second
  double examples_rate_vs_alone = 0;  // worker steps a second against one worker's compute alone
  double efficiency = 0;              // examples_rate_vs_alone / workers
};

// Simulates `steps` steps of each worker (after as many to settle) and measures the rate over
// the second half. Synchronous: a round aggregates every worker's update before any is answered.
Prediction simulate(const StepCosts& costs, const Cluster& cluster, bool sync, int steps = 200);

}  // namespace troupe::bench
