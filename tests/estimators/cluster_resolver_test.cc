// The cluster as Slurm and MPI launchers describe it: hostlists and task counts expanded as
// Slurm writes them, ranks given to the ps job then the workers (worker 0 the chief), each task
// on a base port plus its index on its node, and errors that name the variable or the line.
#include "estimators/cluster_resolver.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "harness/temp_dir.h"

using namespace troupe;
using namespace troupe::estimators;

namespace {

Env env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::vector<std::string> hosts(const std::string& list) {
  auto expanded = expand_hostlist(list);
  REQUIRE_MESSAGE(expanded.ok(), expanded.status().to_string());
  return *expanded;
}

}  // namespace

TEST_CASE("Slurm's hostlists and tasks per node, expanded") {
  using V = std::vector<std::string>;
  CHECK(hosts("node[01-04,07]") == V{"node01", "node02", "node03", "node04", "node07"});
  CHECK(hosts("a,b[8-10],c") == V{"a", "b8", "b9", "b10", "c"});
  CHECK(hosts("rack[1-2]-n[1,3]") == V{"rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"});
  CHECK(hosts("gpu[098-101]") == V{"gpu098", "gpu099", "gpu100", "gpu101"});
  CHECK(hosts("single.example.org") == V{"single.example.org"});
  for (const char* bad : {"node[1-", "node[3-1]", "node[x]", "a,,b", "node]1[", "no de"}) {
    CHECK_MESSAGE(!expand_hostlist(bad).ok(), bad);
  }
  CHECK(expand_tasks_per_node("3(x2),2,1").value() == std::vector<int>{3, 3, 2, 1});
  CHECK(expand_tasks_per_node("4").value() == std::vector<int>{4});
  for (const char* bad : {"", "3(x", "3(x0)", "0", "a", "2(y3)"}) {
    CHECK_MESSAGE(!expand_tasks_per_node(bad).ok(), bad);
  }
}

TEST_CASE("--cluster-resolver slurm: ranks to ps then workers, ports by the index on a node") {
  // Six tasks on node02 (three), node01 (three): hosts sorted, --ps 2.
  std::map<std::string, std::string> vars = {{"SLURM_STEP_NUM_TASKS", "6"},
                                             {"SLURM_STEP_NODELIST", "node[02,01]"},
                                             {"SLURM_STEP_TASKS_PER_NODE", "3,3"}};
  auto at = [&](int rank) {
    vars["SLURM_PROCID"] = std::to_string(rank);
    auto c = slurm_cluster(env_of(vars), {.ps = 2});
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    return *c;
  };
  const ClusterConfig ps1 = at(1), chief = at(2), last = at(5);
  CHECK(ps1.task_name() == "/job:ps/task:1");
  CHECK(ps1.addresses(TaskType::kPs) == std::vector<std::string>{"node01:8888", "node01:8889"});
  CHECK(chief.task_name() == "/job:worker/task:0");
  CHECK(chief.is_chief);
  CHECK(chief.host_port().value() == std::make_pair(std::string("node01"), uint16_t{8890}));
  CHECK(last.task_name() == "/job:worker/task:3");
  CHECK_FALSE(last.is_chief);
  CHECK(last.addresses(TaskType::kWorker) ==
        std::vector<std::string>{"node01:8890", "node02:8888", "node02:8889", "node02:8890"});
  CHECK(last.num_worker_replicas == 4);
  CHECK(last.num_ps_replicas == 2);

  // Outside a step, a batch script's SLURM_NTASKS and SLURM_JOB_NODELIST serve.
  auto batch = slurm_cluster(env_of({{"SLURM_PROCID", "0"},
                                     {"SLURM_NTASKS", "2"},
                                     {"SLURM_JOB_NODELIST", "n1"},
                                     {"SLURM_TASKS_PER_NODE", "2"}}),
                             {.ps = 1, .port_base = 3000});
  REQUIRE_MESSAGE(batch.ok(), batch.status().to_string());
  CHECK(batch->host_port().value() == std::make_pair(std::string("n1"), uint16_t{3000}));

  struct Case {
    std::map<std::string, std::string> vars;
    int ps;
    const char* says;
  };
  const std::map<std::string, std::string> good = {{"SLURM_PROCID", "0"},
                                                   {"SLURM_STEP_NUM_TASKS", "4"},
                                                   {"SLURM_STEP_NODELIST", "n[1-2]"},
                                                   {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};
  auto with = [&](const std::string& k, const std::string& v) {
    auto m = good;
    if (v.empty()) {
      m.erase(k);
    } else {
      m[k] = v;
    }
    return m;
  };
  for (const Case& c : std::vector<Case>{
           {with("SLURM_PROCID", ""), 1, "SLURM_PROCID is not set (run the task with srun)"},
           {with("SLURM_PROCID", "4"), 1, "rank 4 is not below the 4 tasks"},
           {with("SLURM_STEP_NUM_TASKS", "5"), 1, "is 4 tasks, not the step's 5"},
           {with("SLURM_STEP_TASKS_PER_NODE", "2"), 1, "2 nodes (n[1-2]) but 1 task counts"},
           {with("SLURMD_NODENAME", "n2"), 1, "rank 0 runs on n2, not on n1"},
           {good, 4, "--ps 4 leaves no worker among 4 tasks"},
       }) {
    auto r = slurm_cluster(env_of(c.vars), {.ps = c.ps});
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.status().message().find(c.says) != std::string::npos, r.status().message());
  }
}

TEST_CASE("--cluster-resolver mpi: a rank and the hostfile, Open MPI's or MPICH's") {
  const std::string dir = testing::temp_dir("hostfile");
  std::filesystem::create_directories(dir);
  const std::string open_mpi = dir + "/openmpi", mpich = dir + "/mpich", bad = dir + "/bad";
  std::ofstream(open_mpi) << "# the job's hosts\nh1 slots=2\nh2 slots=2 max_slots=4\n\n";
  std::ofstream(mpich) << "h1:2\nh2:2\n";
  std::ofstream(bad) << "h1 slots=2\nh2 slots=many\n";
  for (const std::string& file : {open_mpi, mpich}) {
    auto c = mpi_cluster(env_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
                         file, {.ps = 1});
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    CHECK(c->task_name() == "/job:worker/task:1");
    CHECK(c->host_port().value() == std::make_pair(std::string("h2"), uint16_t{8888}));
    CHECK(c->addresses(TaskType::kPs) == std::vector<std::string>{"h1:8888"});
  }
  // MPICH's PMI_RANK, a size below the slots: the first slots are used.
  auto pmi = mpi_cluster(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "3"}}), mpich, {.ps = 1});
  REQUIRE_MESSAGE(pmi.ok(), pmi.status().to_string());
  CHECK(pmi->task_name() == "/job:ps/task:0");
  CHECK(pmi->num_worker_replicas == 2);
  auto line = mpi_cluster(env_of({{"PMIX_RANK", "0"}}), bad, {.ps = 1});
  REQUIRE_FALSE(line.ok());
  CHECK(line.status().message().find("line 2") != std::string::npos);
  auto over = mpi_cluster(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "9"}}), mpich, {.ps = 1});
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().message().find("9 ranks but 4 slots") != std::string::npos);
  CHECK_FALSE(mpi_cluster(env_of({}), mpich, {.ps = 1}).ok());
  CHECK_FALSE(mpi_cluster(env_of({{"PMI_RANK", "0"}}), "", {.ps = 1}).ok());
  std::filesystem::remove_all(dir);
}
