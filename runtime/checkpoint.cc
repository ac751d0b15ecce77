#include "runtime/checkpoint.h"

#include <capnp/message.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/crc32c.h"
#include "runtime/log.h"
#include "runtime/record_io.h"
#include "runtime/tensor_wire.h"
#include "schema/checkpoint.capnp.h"

namespace troupe::runtime {

namespace {

constexpr char kMagic[8] = {'T', 'R', 'P', 'C', 'K', 'P', 'T', '1'};

uint32_t tensor_crc(const Tensor& t) {
  if (t.dtype() != DType::kString) return crc32c(t.raw_data(), t.byte_size());
  uint32_t crc = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const std::string& s = t.data<std::string>()[i];
    const uint64_t n = s.size();
    crc = crc32c_extend(crc, &n, sizeof n);
    crc = crc32c_extend(crc, s.data(), s.size());
  }
  return crc;
}

Status make_dirs(const std::string& dir) {
  std::string partial;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') partial = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return internal_error("cannot create directory ", partial, ": ", std::strerror(errno));
    }
  }
  return ok_status();
}

// The index is TF's text format: model_checkpoint_path first, then every kept path, oldest
// first. A name that is not a plain file name is passed over with a warning: the index may have
// been written by someone else, and the manager deletes the files it names.
std::vector<std::string> read_index(const std::string& path, std::string* latest) {
  std::vector<std::string> all;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t q1 = line.find('"');
    const size_t q2 = line.rfind('"');
    if (q1 == std::string::npos || q2 <= q1) continue;
    const std::string value = line.substr(q1 + 1, q2 - q1 - 1);
    if (!is_plain_file_name(value)) {
      log_warning(path, " names '", value, "', not a file of its directory: ignored");
      continue;
    }
    if (line.rfind("model_checkpoint_path:", 0) == 0) {
      if (latest) *latest = value;
    } else if (line.rfind("all_model_checkpoint_paths:", 0) == 0) {
      all.push_back(value);
    }
  }
  return all;
}

// best/index: "value name" lines, best first; names as read_index() takes them.
std::vector<std::pair<double, std::string>> read_best_index(const std::string& path) {
  std::vector<std::pair<double, std::string>> kept;
  std::ifstream in(path);
  double v;
  std::string n;
  while (in >> v >> n) {
    if (is_plain_file_name(n)) kept.push_back({v, n});
  }
  return kept;
}

// "<base>/part_<i>" as {base, i}; {"", -1} for any other name.
std::pair<std::string, int> part_of(const std::string& name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos || name.compare(slash + 1, 5, "part_") != 0) return {"", -1};
  const std::string digits = name.substr(slash + 6);
  if (digits.empty() || digits.size() > 6 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return {"", -1};
  }
  return {name.substr(0, slash), std::stoi(digits)};
}

// The slots of variable `var` in `data`: "<var>/<slot>", the slot without '/' and not a part.
std::vector<std::string> slots_of(const CheckpointData& data, const std::string& var) {
  std::vector<std::string> slots;
  const std::string prefix = var + "/";
  for (auto it = data.tensors.lower_bound(prefix);
       it != data.tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const std::string slot = it->first.substr(prefix.size());
    if (slot.find('/') == std::string::npos && part_of(it->first).second < 0) {
      slots.push_back(slot);
    }
  }
  return slots;
}

// Where the checkpoint holds variable `base`: its own name, or its parts 0..k-1; none: empty.
std::vector<std::string> sources_of(const CheckpointData& data, const std::string& base) {
  if (data.tensors.count(base)) return {base};
  std::vector<std::string> parts;
  while (data.tensors.count(base + "/part_" + std::to_string(parts.size()))) {
    parts.push_back(base + "/part_" + std::to_string(parts.size()));
  }
  return parts;
}

// The tensors "<source><suffix>" as one: their rows stacked, or the first of scalars (a slot
// such as an optimizer's step count is the same in every part). Null when one is missing or
// they do not stack.
Tensor whole(const CheckpointData& data, const std::vector<std::string>& sources,
             const std::string& suffix) {
  std::vector<Tensor> parts;
  for (const std::string& source : sources) {
    auto it = data.tensors.find(source + suffix);
    if (it == data.tensors.end()) return Tensor();
    parts.push_back(it->second);
  }
  if (parts.empty()) return Tensor();
  const Shape& first = parts[0].shape();
  if (parts.size() == 1 || first.rank() == 0) return parts[0];
  for (const Tensor& p : parts) {
    if (p.dtype() != parts[0].dtype() || p.shape().rank() != first.rank()) return Tensor();
    for (int d = 1; d < first.rank(); ++d) {
      if (p.shape().dim(d) != first.dim(d)) return Tensor();
    }
  }
  return concat_rows(parts);
}

}  // namespace

Status fit_partitions(CheckpointData* data, const std::vector<VariableSpec>& expected) {
  std::set<std::string> known;
  // The graph's partitioned variables: base -> its parts by index.
  std::map<std::string, std::vector<const VariableSpec*>> partitioned;
  for (const VariableSpec& v : expected) {
    known.insert(v.name);
    const auto [base, i] = part_of(v.name);
    if (i < 0) continue;
    auto& parts = partitioned[base];
    if (parts.size() <= static_cast<size_t>(i)) parts.resize(static_cast<size_t>(i) + 1, nullptr);
    parts[static_cast<size_t>(i)] = &v;
  }
  // Each graph variable the checkpoint lacks by name, as the blocks of rows it wants (one, for a
  // variable the graph keeps whole).
  struct Target {
    std::string base;
    std::vector<const VariableSpec*> blocks;
  };
  std::vector<Target> targets;
  for (const VariableSpec& v : expected) {
    if (!data->tensors.count(v.name) && part_of(v.name).second < 0)
      targets.push_back({v.name, {&v}});
  }
  for (const auto& [base, parts] : partitioned) {
    bool layout = true, same = !data->tensors.count(base + "/part_" + std::to_string(parts.size()));
    for (const VariableSpec* p : parts) {
      layout = layout && p != nullptr && p->shape.rank() >= 1;
      if (!layout) break;
      auto it = data->tensors.find(p->name);
      same = same && it != data->tensors.end() && it->second.shape() == p->shape;
    }
    if (layout && !same) targets.push_back({base, parts});
  }
  std::set<std::string> taken;
  std::map<std::string, Tensor> fitted;
  for (const Target& t : targets) {
    const std::vector<std::string> sources = sources_of(*data, t.base);
    if (sources.empty()) continue;  // not in the checkpoint: check_restore names it
    const Tensor value = whole(*data, sources, "");
    if (!value.valid() || value.shape().rank() < 1) continue;
    int64_t rows = 0;
    for (const VariableSpec* b : t.blocks) rows += b->shape.dim(0);
    if (value.dim(0) != rows) {
      return failed_precondition("variable '", t.base, "' has ", value.dim(0),
                                 " rows in the checkpoint but ", rows, " in the graph");
    }
    std::vector<std::pair<std::string, Tensor>> slots;
    for (const std::string& slot : slots_of(*data, sources[0])) {
      Tensor s = whole(*data, sources, "/" + slot);
      if (s.valid() && (s.shape().rank() == 0 || s.dim(0) == rows)) slots.emplace_back(slot, s);
    }
    for (const std::string& source : sources) {
      taken.insert(source);
      for (const std::string& slot : slots_of(*data, source)) taken.insert(source + "/" + slot);
    }
    int64_t first = 0;
    for (const VariableSpec* b : t.blocks) {
      const int64_t n = b->shape.dim(0);
      const bool all = t.blocks.size() == 1;
      fitted[b->name] = all ? value : slice_rows(value, first, n);
      for (const auto& [slot, s] : slots) {
        fitted[b->name + "/" + slot] = all || s.shape().rank() == 0 ? s : slice_rows(s, first, n);
      }
      first += n;
    }
  }
  for (const std::string& name : taken) {
    if (!known.count(name)) data->tensors.erase(name);
  }
  for (auto& [name, t] : fitted) data->tensors[name] = std::move(t);
  return ok_status();
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

Status check_restore(const CheckpointData& data, const std::vector<VariableSpec>& expected,
                     bool partial) {
  std::map<std::string, const VariableSpec*> by_name;
  for (const VariableSpec& v : expected) by_name[v.name] = &v;
  auto describe = [](const Tensor& t) { return str_cat(dtype_name(t.dtype()), t.shape()); };
  for (const VariableSpec& v : expected) {
    auto it = data.tensors.find(v.name);
    if (it == data.tensors.end()) {
      if (partial) continue;
      return failed_precondition("variable '", v.name,
                                 "' of the graph is not in the checkpoint (a different model? "
                                 "a partial restore keeps its initial value)");
    }
    if (it->second.dtype() != v.dtype || it->second.shape() != v.shape) {
      return failed_precondition("variable '", v.name, "' is ", describe(it->second),
                                 " in the checkpoint but ", dtype_name(v.dtype), v.shape,
                                 " in the graph");
    }
  }
  for (const auto& [name, t] : data.tensors) {
    const size_t slash = name.rfind('/');
    if (slash == std::string::npos || by_name.count(name)) continue;
    auto var = by_name.find(name.substr(0, slash));
    if (var == by_name.end()) continue;
    const VariableSpec& v = *var->second;
    if (t.dtype() != v.dtype || (t.shape() != v.shape && t.shape() != Shape{})) {
      return failed_precondition("slot '", name, "' is ", describe(t),
                                 " in the checkpoint, which does not fit variable '", v.name, "' (",
                                 dtype_name(v.dtype), v.shape, ")");
    }
  }
  return ok_status();
}

Result<std::string> encode_checkpoint(const CheckpointData& data) {
  capnp::MallocMessageBuilder m;
  auto root = m.initRoot<schema::Checkpoint>();
  root.setGlobalStep(data.global_step);
  auto entries = root.initEntries(static_cast<unsigned>(data.tensors.size()));
  size_t i = 0;
  for (const auto& [name, t] : data.tensors) {
    auto e = entries[static_cast<unsigned>(i++)];
    e.setName(name);
    e.setCrc32c(tensor_crc(t));
    TROUPE_RETURN_IF_ERROR(write_tensor(t, e.initTensor(), m.getOrphanage()));
  }
  auto names = root.initMetricNames(static_cast<unsigned>(data.metrics.size()));
  auto values = root.initMetricValues(static_cast<unsigned>(data.metrics.size()));
  i = 0;
  for (const auto& [name, v] : data.metrics) {
    names.set(static_cast<unsigned>(i), name);
    values.set(static_cast<unsigned>(i++), v);
  }
  root.setInputBatches(data.input.batches);
  root.setInputFingerprint(data.input.fingerprint);
  std::vector<char> blob;
  TROUPE_RETURN_IF_ERROR(write_message(m, &blob));
  std::string file(kMagic, sizeof kMagic);
  append_record_frame(blob.data(), blob.size(), &file);
  return file;
}

Status write_checkpoint(const std::string& path, const CheckpointData& data) {
  TROUPE_ASSIGN_OR_RETURN(std::string file, encode_checkpoint(data));
  return write_file_atomic(path, file);
}

Result<CheckpointData> read_checkpoint(const std::string& path) {
  std::string file;
  TROUPE_RETURN_IF_ERROR(read_file(path, &file));
  return parse_checkpoint(file, path);
}

Result<CheckpointData> parse_checkpoint(std::string_view file, const std::string& path) {
  if (file.size() < sizeof kMagic || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) {
    return data_loss(path, " is not a troupe checkpoint (bad magic)");
  }
  RecordReader reader(file.data() + sizeof kMagic, file.size() - sizeof kMagic, path);
  std::string_view body;
  TROUPE_ASSIGN_OR_RETURN(bool found, reader.next(&body));
  if (!found) return data_loss(path, ": no checkpoint record");
  auto bytes = std::make_shared<std::vector<char>>(body.begin(), body.end());
  CheckpointData data;
  Status s = read_blob(bytes, [&](capnp::MessageReader& r, std::shared_ptr<const void> keep) {
    auto root = r.getRoot<schema::Checkpoint>();
    data.global_step = root.getGlobalStep();
    for (auto e : root.getEntries()) {
      const std::string name = e.getName().cStr();
      TROUPE_ASSIGN_OR_RETURN(Tensor t, read_tensor(e.getTensor(), keep));
      if (tensor_crc(t) != e.getCrc32c()) {
        return data_loss("tensor '", name, "' fails its checksum");
      }
      // Own the data: the file's buffer goes away.
      data.tensors[name] = t.clone();
    }
    auto names = root.getMetricNames();
    auto values = root.getMetricValues();
    for (unsigned k = 0; k < names.size() && k < values.size(); ++k) {
      data.metrics[names[k].cStr()] = values[k];
    }
    data.input = {root.getInputFingerprint(), root.getInputBatches()};
    return ok_status();
  });
  if (!s.ok()) return s.with_context(path);
  return data;
}

void load_into(const CheckpointData& data, VariableStore* store) {
  for (const auto& [name, t] : data.tensors) store->assign(name, t);
}

CheckpointManager::CheckpointManager(std::string dir, CheckpointOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {}

std::vector<std::string> CheckpointManager::all() const {
  std::vector<std::string> out;
  for (const std::string& n : read_index(dir_ + "/checkpoint", nullptr))
    out.push_back(dir_ + "/" + n);
  return out;
}

std::string CheckpointManager::latest() const {
  std::string latest;
  read_index(dir_ + "/checkpoint", &latest);
  return latest.empty() ? latest : dir_ + "/" + latest;
}

Status CheckpointManager::write_index(const std::vector<std::string>& names) const {
  std::string text;
  if (!names.empty()) text += "model_checkpoint_path: \"" + names.back() + "\"\n";
  for (const std::string& n : names) text += "all_model_checkpoint_paths: \"" + n + "\"\n";
  return write_file_atomic(dir_ + "/checkpoint", text);
}

Result<std::string> CheckpointManager::save(int64_t global_step, const VariableStore& store,
                                            const std::map<std::string, double>& metrics) {
  TROUPE_RETURN_IF_ERROR(make_dirs(dir_));
  CheckpointData data;
  data.global_step = global_step;
  data.metrics = metrics;
  if (input_position_) data.input = input_position_(global_step);
  for (const std::string& name : store.names()) {
    TROUPE_ASSIGN_OR_RETURN(data.tensors[name], store.read(name));
  }
  const std::string name = options_.prefix + "-" + std::to_string(global_step);
  const std::string path = dir_ + "/" + name;
  TROUPE_RETURN_IF_ERROR(write_checkpoint(path, data));
  std::vector<std::string> names = read_index(dir_ + "/checkpoint", nullptr);
  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  names.push_back(name);
  std::vector<std::string> expired;
  if (options_.keep_max > 0 && static_cast<int>(names.size()) > options_.keep_max) {
    expired.assign(names.begin(), names.end() - options_.keep_max);
    names.erase(names.begin(), names.end() - options_.keep_max);
  }
  // The index names only files that are whole on disk; expired files go after it is replaced.
  TROUPE_RETURN_IF_ERROR(write_index(names));
  for (const std::string& old : expired) std::remove((dir_ + "/" + old).c_str());

  auto metric = metrics.find(options_.metric);
  if (options_.best_k > 0 && metric != metrics.end()) {
    const std::string best_dir = dir_ + "/best";
    TROUPE_RETURN_IF_ERROR(make_dirs(best_dir));
    std::vector<std::pair<double, std::string>> kept = read_best_index(best_dir + "/index");
    // A step saved again (a resumed run) replaces its old entry: two entries of one file would
    // let the worse one delete the file the better one keeps.
    kept.erase(
        std::remove_if(kept.begin(), kept.end(), [&](const auto& p) { return p.second == name; }),
        kept.end());
    kept.push_back({metric->second, name});
    std::stable_sort(kept.begin(), kept.end(), [&](const auto& a, const auto& b) {
      return options_.higher_is_better ? a.first > b.first : a.first < b.first;
    });
    if (std::find_if(kept.begin(), kept.begin() + std::min<size_t>(kept.size(), options_.best_k),
                     [&](const auto& p) { return p.second == name; }) !=
        kept.begin() + std::min<size_t>(kept.size(), options_.best_k)) {
      TROUPE_RETURN_IF_ERROR(write_checkpoint(best_dir + "/" + name, data));
    }
    std::string text;
    for (size_t k = 0; k < kept.size(); ++k) {
      if (static_cast<int>(k) < options_.best_k) {
        char line[64];
        std::snprintf(line, sizeof line, "%.17g ", kept[k].first);
        text += line + kept[k].second + "\n";
      } else {
        std::remove((best_dir + "/" + kept[k].second).c_str());
      }
    }
    TROUPE_RETURN_IF_ERROR(write_file_atomic(best_dir + "/index", text));
  }
  return path;
}

std::vector<std::string> CheckpointManager::best() const {
  std::vector<std::string> out;
  for (const auto& [value, name] : read_best_index(dir_ + "/best/index")) {
    out.push_back(dir_ + "/best/" + name);
  }
  return out;
}

Result<CheckpointManager::Restored> CheckpointManager::restore_latest(
    VariableStore* store, const RestoreCheck& check) const {
  std::string latest;
  std::vector<std::string> names = read_index(dir_ + "/checkpoint", &latest);
  if (!latest.empty() && (names.empty() || names.back() != latest)) names.push_back(latest);
  Restored r;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string path = dir_ + "/" + *it;
    Result<CheckpointData> data = read_checkpoint(path);
    if (!data.ok()) {
      r.refused.push_back(data.status().message());
      continue;
    }
    if (check) {
      if (Status s = check(*data); !s.ok()) return s.with_context(path);
    }
    load_into(*data, store);
    r.global_step = data->global_step;
    r.path = path;
    r.input = data->input;
    return r;
  }
  if (!r.refused.empty()) {
    std::string why;
    for (const std::string& s : r.refused) why += "\n  " + s;
    return data_loss("no readable checkpoint in ", dir_, ":", why);
  }
  return not_found("no checkpoint in ", dir_);
}

}  // namespace troupe::runtime
