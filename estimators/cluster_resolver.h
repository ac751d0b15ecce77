// The cluster a process plays a part in, as a batch system's launcher describes it: Slurm's
// step variables (TF's SlurmClusterResolver) or an MPI launcher's rank with a hostfile.
//
//   auto c = slurm_cluster(std::getenv, {.ps = 2});   // Result<ClusterConfig>
//   // SLURM_PROCID=3, SLURM_STEP_NUM_TASKS=6, SLURM_STEP_NODELIST=node[01-02],
//   // SLURM_STEP_TASKS_PER_NODE=3(x2): ps 0 and 1 are node01:8888 and :8889, worker 0 (the
//   // chief) node01:8890, and rank 3 is worker 1 at node02:8888.
//
// Ranks go to jobs in the order of the jobs' names and contiguously (ps first, then workers);
// with no chief job, worker 0 is the chief (parse_tf_config's rule). Each task listens on
// a base port plus its index among the tasks of its node.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "estimators/run_config.h"
#include "runtime/status.h"

namespace troupe::estimators {

// Slurm's hostlist syntax expanded: "node[01-03,07],gpu1" is node01, node02, node03, node07,
// gpu1 (zero padding kept). An error names the list and what is wrong in it.
runtime::Result<std::vector<std::string>> expand_hostlist(const std::string& list);
// SLURM_STEP_TASKS_PER_NODE's syntax: "3(x2),2,1" is 3, 3, 2, 1.
runtime::Result<std::vector<int>> expand_tasks_per_node(const std::string& spec);

struct LauncherJobs {
  int ps = 0;                 // the first ranks
  uint16_t port_base = 8888;  // TF's SlurmClusterResolver's
};

// An environment's variable, or null (std::getenv; a test's map).
using Env = std::function<const char*(const char*)>;

// From SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE
// (the SLURM_ ones without STEP_ when a batch script runs it outside a step). Hosts sorted by
// name; ranks on a host as Slurm's block distribution puts them.
runtime::Result<ClusterConfig> slurm_cluster(const Env& env, const LauncherJobs& jobs);

// From an MPI launcher's rank and size (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, PMIX_RANK
// with the size from the hostfile) and its hostfile ("host slots=N" as Open MPI writes it, or
// "host:N" as MPICH's; a host without a count has one slot), in the hostfile's order, each
// host's slots filled before the next (--map-by slot).
runtime::Result<ClusterConfig> mpi_cluster(const Env& env, const std::string& hostfile,
                                           const LauncherJobs& jobs);

}  // namespace troupe::estimators
