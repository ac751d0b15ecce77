// The cluster model against what can be worked out by hand: one worker's step is its compute
// and each way's slowest part, a shared ps link or core divides among the workers on it, a
// synchronous round moves at the pace of all its workers' transfers, and a ps's link caps
// asynchronous workers' rate.
#include "bench/cluster_model.h"

#include <doctest/doctest.h>

namespace {

using troupe::bench::Cluster;
using troupe::bench::Link;
using troupe::bench::simulate;
using troupe::bench::StepCosts;

constexpr StepCosts kCosts{/*compute_s=*/4e-3, /*worker_comm_s=*/1e-3, /*bytes_per_step=*/2e6,
                           /*ps_cpu_per_update_s=*/5e-4};
const Link kLink{1e9, 1e-4};  // 1 GB/s each way, 100 us each way

}  // namespace

TEST_CASE("one worker's step: its compute, two latencies, and each way its slowest part") {
  // Each way 1 MB on a 1 GB/s link (1 ms) outlasts the CPU at its ends (0.5 and 0.25 ms), which
  // goes on beside it.
  const double step = 4e-3 + 2 * 1e-4 + 2 * 1e-3;
  for (bool sync : {false, true}) {
    CAPTURE(sync);
    const auto p = simulate(kCosts, Cluster::separate(1, 1, kLink), sync);
    CHECK(p.steps_per_s == doctest::Approx(1 / step).epsilon(1e-6));
    CHECK(p.efficiency == doctest::Approx(4e-3 / step).epsilon(1e-6));
  }
  // Two ps tasks take half each, side by side; the bytes all pass the worker's own link.
  CHECK(simulate(kCosts, Cluster::separate(1, 2, kLink), false).steps_per_s ==
        doctest::Approx(1 / step).epsilon(1e-6));
  // A slow CPU sets the pace where it is the slowest part: a ps of 4 ms an update.
  StepCosts busy_ps = kCosts;
  busy_ps.ps_cpu_per_update_s = 4e-3;
  CHECK(simulate(busy_ps, Cluster::separate(1, 1, kLink), false).steps_per_s ==
        doctest::Approx(1 / (4e-3 + 2 * 1e-4 + 2 * 2e-3)).epsilon(1e-6));
}

TEST_CASE("a synchronous round waits for every worker's transfer through the ps's link") {
  // 4 workers in step: their 1 MB each share the ps's link both ways (4 ms each way).
  const double round = 4e-3 + 2 * 1e-4 + 2 * 4e-3;
  const auto p = simulate(kCosts, Cluster::separate(4, 1, kLink, 4), true);
  CHECK(p.steps_per_s == doctest::Approx(1 / round).epsilon(1e-6));
  CHECK(p.efficiency == doctest::Approx(4e-3 / round).epsilon(1e-6));
  // A ps beside each worker: each link carries half a worker's bytes each way (the other half
  // stays on its machine, beside), 0.5 ms each way.
  const auto pair = simulate(kCosts, Cluster::colocated(2, kLink), true);
  CHECK(pair.steps_per_s == doctest::Approx(1 / (4e-3 + 2 * 1e-4 + 2 * 0.5e-3)).epsilon(1e-6));
  // More workers, more to move through one link: the efficiency falls.
  const double eight = simulate(kCosts, Cluster::separate(8, 1, kLink, 4), true).efficiency;
  CHECK(eight < p.efficiency);
}

TEST_CASE("asynchronous workers fill a ps's link and go no faster") {
  const StepCosts light{1e-5, 0, 2e6, 0};
  const double cap = 1e9 / 1e6;  // 1 MB up and 1 MB down a step, each way on its own
  const auto one = simulate(light, Cluster::separate(1, 1, {1e9, 0}), false);
  const auto many = simulate(light, Cluster::separate(16, 1, {1e9, 0}), false);
  const auto more = simulate(light, Cluster::separate(32, 1, {1e9, 0}), false);
  CHECK(one.steps_per_s == doctest::Approx(1 / (1e-5 + 2e-3)).epsilon(1e-6));
  CHECK(many.steps_per_s <= cap * (1 + 1e-9));
  // Workers in step send together, then receive together: the link's two ways take turns.
  CHECK(many.steps_per_s >= 0.49 * cap);
  CHECK(more.steps_per_s == doctest::Approx(many.steps_per_s).epsilon(0.01));
  CHECK(more.efficiency == doctest::Approx(many.efficiency / 2).epsilon(0.01));
}

TEST_CASE("on one machine the workers and the ps share its cores, none idle") {
  const StepCosts compute_only{1e-3, 0, 0, 0};
  const Link loopback{1e12, 0};
  CHECK(simulate(compute_only, Cluster::one_machine(2, 1, 1, loopback), false).efficiency ==
        doctest::Approx(0.5).epsilon(1e-6));
  CHECK(simulate(compute_only, Cluster::one_machine(2, 1, 2, loopback), false).efficiency ==
        doctest::Approx(1).epsilon(1e-6));
  // One worker on one core: its compute, then the ps's 1 ms an update, half each way.
  const StepCosts with_ps{1e-3, 0, 0, 1e-3};
  const double one = simulate(with_ps, Cluster::one_machine(1, 1, 1, loopback), false).steps_per_s;
  CHECK(one == doctest::Approx(1 / 2e-3).epsilon(1e-6));
  // Two on one core, asynchronous: the core is never idle, and 2 steps take 4 ms of it.
  CHECK(simulate(with_ps, Cluster::one_machine(2, 1, 1, loopback), false).steps_per_s ==
        doctest::Approx(2 / 4e-3).epsilon(1e-6));
  // Transfers whose ends share the cores, the worker's end faster than the ps's: what the
  // worker's ends leave, the ps's take. A step is 4 ms of CPU (1 its math, 1 the worker's calls,
  // 2 the ps's): 2 workers on 2 cores make 2 steps each 4 ms at best, and come close.
  const StepCosts both{1e-3, 1e-3, 0, 2e-3};
  CHECK(simulate(both, Cluster::one_machine(2, 1, 2, loopback), false).steps_per_s <=
        2 / 4e-3 * (1 + 1e-9));
  CHECK(simulate(both, Cluster::one_machine(2, 1, 2, loopback), false).steps_per_s >=
        0.9 * 2 / 4e-3);
}
