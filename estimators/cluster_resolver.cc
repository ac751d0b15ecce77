#include "estimators/cluster_resolver.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

namespace troupe::estimators {

using runtime::Result;

namespace {

constexpr size_t kMostHosts = 100000;  // a list that expands to more is a mistake

Result<int64_t> number(std::string_view text, const std::string& what) {
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 0) {
    return runtime::invalid_argument(what, ": '", std::string(text), "' is not a number");
  }
  return n;
}

// Items of a list separated by commas outside brackets.
std::vector<std::string> top_level_items(const std::string& list) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  items.push_back(item);
  return items;
}

// One item: its first bracket group expanded, then the rest of it, recursively.
runtime::Status expand_item(const std::string& item, const std::string& list,
                            std::vector<std::string>* hosts) {
  const size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.empty() || item.find(']') != std::string::npos) {
      return runtime::invalid_argument("hostlist '", list, "': bad item '", item, "'");
    }
    hosts->push_back(item);
    return runtime::ok_status();
  }
  const size_t close = item.find(']', open);
  if (close == std::string::npos) {
    return runtime::invalid_argument("hostlist '", list, "': '[' without ']' in '", item, "'");
  }
  const std::string prefix = item.substr(0, open), rest = item.substr(close + 1);
  std::stringstream ranges(item.substr(open + 1, close - open - 1));
  for (std::string range; std::getline(ranges, range, ',');) {
    const size_t dash = range.find('-');
    const std::string low = range.substr(0, dash);
    const std::string high = dash == std::string::npos ? low : range.substr(dash + 1);
    TROUPE_ASSIGN_OR_RETURN(int64_t from, number(low, "hostlist '" + list + "'"));
    TROUPE_ASSIGN_OR_RETURN(int64_t to, number(high, "hostlist '" + list + "'"));
    if (to < from || to - from >= static_cast<int64_t>(kMostHosts)) {
      return runtime::invalid_argument("hostlist '", list, "': bad range '", range, "'");
    }
    for (int64_t n = from; n <= to; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
      TROUPE_RETURN_IF_ERROR(expand_item(prefix + digits + rest, list, hosts));
      if (hosts->size() > kMostHosts) {
        return runtime::invalid_argument("hostlist '", list, "' names more than ", kMostHosts,
                                         " hosts");
      }
    }
  }
  return runtime::ok_status();
}

bool plain_host(const std::string& host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

// The cluster of `addresses` (one per rank) for the process of rank `rank`: the first jobs.ps
// ranks are ps tasks, the rest workers, as parse_tf_config reads it.
Result<ClusterConfig> cluster_of_ranks(const std::vector<std::string>& addresses, int64_t rank,
                                       const LauncherJobs& jobs, const std::string& launcher) {
  const int64_t size = static_cast<int64_t>(addresses.size());
  if (jobs.ps < 0 || jobs.ps >= size) {
    return runtime::invalid_argument(launcher, ": --ps ", jobs.ps, " leaves no worker among ", size,
                                     " tasks");
  }
  if (rank < 0 || rank >= size) {
    return runtime::invalid_argument(launcher, ": rank ", rank, " is not below the ", size,
                                     " tasks");
  }
  auto list = [&](int64_t from, int64_t to) {
    std::string json = "[";
    for (int64_t i = from; i < to; ++i) {
      json += (i > from ? ", \"" : "\"") + addresses[static_cast<size_t>(i)] + "\"";
    }
    return json + "]";
  };
  const bool ps = rank < jobs.ps;
  const std::string json = "{\"cluster\": {\"ps\": " + list(0, jobs.ps) +
                           ", \"worker\": " + list(jobs.ps, size) + "}, \"task\": {\"type\": \"" +
                           (ps ? "ps" : "worker") +
                           "\", \"index\": " + std::to_string(ps ? rank : rank - jobs.ps) + "}}";
  Result<ClusterConfig> c = parse_tf_config(json.c_str());
  if (!c.ok()) return c.status().with_context(launcher);
  return c;
}

const char* first_of(const Env& env, std::initializer_list<const char*> names, std::string* which) {
  for (const char* name : names) {
    if (const char* v = env(name); v != nullptr && *v != '\0') {
      *which = name;
      return v;
    }
  }
  *which = *names.begin();
  return nullptr;
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const std::string& item : top_level_items(list)) {
    TROUPE_RETURN_IF_ERROR(expand_item(item, list, &hosts));
  }
  for (const std::string& host : hosts) {
    if (!plain_host(host)) {
      return runtime::invalid_argument("hostlist '", list, "': '", host, "' is not a host name");
    }
  }
  return hosts;
}

Result<std::vector<int>> expand_tasks_per_node(const std::string& spec) {
  std::vector<int> counts;
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t open = item.find("(x");
    const std::string what = "tasks per node '" + spec + "'";
    TROUPE_ASSIGN_OR_RETURN(int64_t tasks, number(item.substr(0, open), what));
    int64_t times = 1;
    if (open != std::string::npos) {
      if (item.back() != ')') return runtime::invalid_argument(what, ": bad item '", item, "'");
      TROUPE_ASSIGN_OR_RETURN(times, number(item.substr(open + 2, item.size() - open - 3), what));
    }
    if (tasks < 1 || times < 1 || counts.size() + static_cast<size_t>(times) > kMostHosts) {
      return runtime::invalid_argument(what, ": bad item '", item, "'");
    }
    counts.insert(counts.end(), static_cast<size_t>(times), static_cast<int>(tasks));
  }
  if (counts.empty()) return runtime::invalid_argument("tasks per node: empty");
  return counts;
}

Result<ClusterConfig> slurm_cluster(const Env& env, const LauncherJobs& jobs) {
  std::string name;
  auto required = [&](std::initializer_list<const char*> names) -> Result<std::string> {
    const char* v = first_of(env, names, &name);
    if (v == nullptr) {
      return runtime::invalid_argument("--cluster-resolver slurm: ", name,
                                       " is not set (run the task with srun)");
    }
    return std::string(v);
  };
  TROUPE_ASSIGN_OR_RETURN(std::string rank_text, required({"SLURM_PROCID"}));
  TROUPE_ASSIGN_OR_RETURN(int64_t rank, number(rank_text, name));
  TROUPE_ASSIGN_OR_RETURN(std::string size_text,
                          required({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}));
  TROUPE_ASSIGN_OR_RETURN(int64_t size, number(size_text, name));
  TROUPE_ASSIGN_OR_RETURN(std::string nodelist, required({"SLURM_STEP_NODELIST",
                                                          "SLURM_JOB_NODELIST", "SLURM_NODELIST"}));
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> hosts, expand_hostlist(nodelist));
  TROUPE_ASSIGN_OR_RETURN(std::string per_node,
                          required({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}));
  TROUPE_ASSIGN_OR_RETURN(std::vector<int> counts, expand_tasks_per_node(per_node));
  if (counts.size() != hosts.size()) {
    return runtime::invalid_argument("--cluster-resolver slurm: ", hosts.size(), " nodes (",
                                     nodelist, ") but ", counts.size(), " task counts (", per_node,
                                     ")");
  }
  std::vector<std::pair<std::string, int>> nodes;
  for (size_t i = 0; i < hosts.size(); ++i) nodes.emplace_back(hosts[i], counts[i]);
  std::sort(nodes.begin(), nodes.end());
  std::vector<std::string> addresses, host_of_rank;
  for (const auto& [host, tasks] : nodes) {
    for (int i = 0; i < tasks; ++i) {
      if (jobs.port_base + i > 65535) {
        return runtime::invalid_argument("--port-base ", jobs.port_base, " with ", tasks,
                                         " tasks on ", host, " runs past port 65535");
      }
      addresses.push_back(host + ":" + std::to_string(jobs.port_base + i));
      host_of_rank.push_back(host);
    }
  }
  if (static_cast<int64_t>(addresses.size()) != size) {
    return runtime::invalid_argument("--cluster-resolver slurm: ", per_node, " is ",
                                     addresses.size(), " tasks, not the step's ", size);
  }
  // Ranks sit on nodes as block distribution puts them; another would give a task an address
  // on a node it does not run on.
  const char* here = env("SLURMD_NODENAME");
  if (here != nullptr && rank >= 0 && rank < size &&
      host_of_rank[static_cast<size_t>(rank)] != here) {
    return runtime::invalid_argument("--cluster-resolver slurm: rank ", rank, " runs on ", here,
                                     ", not on ", host_of_rank[static_cast<size_t>(rank)],
                                     " where block distribution puts it (srun "
                                     "--distribution=block)");
  }
  return cluster_of_ranks(addresses, rank, jobs, "--cluster-resolver slurm");
}

Result<ClusterConfig> mpi_cluster(const Env& env, const std::string& hostfile,
                                  const LauncherJobs& jobs) {
  const std::string launcher = "--cluster-resolver mpi";
  std::string name;
  const char* rank_text = first_of(env, {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}, &name);
  if (rank_text == nullptr) {
    return runtime::invalid_argument(launcher,
                                     ": no rank (OMPI_COMM_WORLD_RANK, PMI_RANK or "
                                     "PMIX_RANK; run the task with mpirun)");
  }
  TROUPE_ASSIGN_OR_RETURN(int64_t rank, number(rank_text, name));
  if (hostfile.empty()) return runtime::invalid_argument(launcher, " needs --hostfile FILE");
  std::ifstream in(hostfile);
  if (!in) return runtime::not_found(launcher, ": cannot read the hostfile ", hostfile);
  std::vector<std::string> addresses;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;
    int64_t slots = 1;
    const std::string where = "hostfile " + hostfile + ", line " + std::to_string(line_number);
    if (const size_t colon = host.find(':'); colon != std::string::npos) {
      TROUPE_ASSIGN_OR_RETURN(slots, number(host.substr(colon + 1), where));
      host.resize(colon);
    }
    while (words >> word) {
      if (word.rfind("slots=", 0) == 0) {
        TROUPE_ASSIGN_OR_RETURN(slots, number(word.substr(6), where));
      }
    }
    if (!plain_host(host) || slots < 1 || slots > 4096) {
      return runtime::invalid_argument(where, ": '", line, "' is not a host and its slots");
    }
    for (int64_t i = 0; i < slots; ++i) {
      if (jobs.port_base + i > 65535) {
        return runtime::invalid_argument("--port-base ", jobs.port_base, " with ", slots,
                                         " slots on ", host, " runs past port 65535");
      }
      addresses.push_back(host + ":" + std::to_string(jobs.port_base + i));
    }
  }
  int64_t size = static_cast<int64_t>(addresses.size());
  if (const char* s = first_of(env, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, &name)) {
    TROUPE_ASSIGN_OR_RETURN(size, number(s, name));
    if (size > static_cast<int64_t>(addresses.size())) {
      return runtime::invalid_argument(launcher, ": ", size, " ranks but ", addresses.size(),
                                       " slots in ", hostfile);
    }
  }
  addresses.resize(static_cast<size_t>(size));
  return cluster_of_ranks(addresses, rank, jobs, launcher);
}

}  // namespace troupe::estimators
