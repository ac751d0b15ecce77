#include "estimators/export/saved_model.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ops/state_ops.h"
#include "runtime/graph_codec.h"
#include "runtime/record_io.h"

namespace troupe::serving {

using nlohmann::json;
using runtime::Result;
using runtime::Status;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "troupe-saved-model";
constexpr int kFormatVersion = 1;

bool is_version_name(const std::string& name) {
  return !name.empty() && name.size() <= 18 && name[0] != '0' &&
         name.find_first_not_of("0123456789") == std::string::npos;
}

json tensor_json(const runtime::Graph& g, const TensorInfo& t) {
  return {{"dtype", runtime::dtype_name(t.dtype)},
          {"shape", t.shape.dims()},
          {"tensor", g.output_name(t.tensor)}};
}

Result<TensorInfo> tensor_from(const runtime::Graph& g, const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("dtype") || !j["dtype"].is_string() || !j.contains("shape") ||
      !j["shape"].is_array() || !j.contains("tensor") || !j["tensor"].is_string()) {
    return runtime::data_loss(where, ": needs dtype, shape and tensor");
  }
  TensorInfo t;
  if (!runtime::dtype_from_name(j["dtype"].get<std::string>(), &t.dtype)) {
    return runtime::data_loss(where, ": unknown dtype '", j["dtype"].get<std::string>(), "'");
  }
  std::vector<int64_t> dims;
  for (const json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < -1) {
      return runtime::data_loss(where, ": a shape holds integers >= -1");
    }
    dims.push_back(d.get<int64_t>());
  }
  t.shape = runtime::Shape(dims);
  const std::string name = j["tensor"].get<std::string>();
  t.tensor = g.find_output(name);
  if (!t.tensor.valid()) return runtime::data_loss(where, ": the graph has no tensor ", name);
  if (g.dtype(t.tensor) != t.dtype) {
    return runtime::data_loss(where, ": ", name, " is ", runtime::dtype_name(g.dtype(t.tensor)),
                              ", not ", runtime::dtype_name(t.dtype));
  }
  return t;
}

Status check_method(const Signature& s, const std::string& where) {
  if (s.method == "predict") return runtime::ok_status();
  if (s.method == "classify") {
    if (!s.outputs.count("scores") && !s.outputs.count("classes")) {
      return runtime::data_loss(where, ": a classify signature has scores or classes");
    }
    return runtime::ok_status();
  }
  if (s.method == "regress") {
    if (!s.outputs.count("outputs")) {
      return runtime::data_loss(where, ": a regress signature has an output named outputs");
    }
    return runtime::ok_status();
  }
  return runtime::data_loss(where, ": method '", s.method, "' is not predict, classify or regress");
}

// The newest version under base, 0 when none.
int64_t newest_version(const std::string& base) {
  auto versions = list_versions(base);
  return versions.ok() && !versions->empty() ? versions->back() : 0;
}

}  // namespace

std::string method_name(const std::string& method) { return "tensorflow/serving/" + method; }

Signature make_signature(const runtime::Graph& graph, const std::string& method,
                         const std::map<std::string, runtime::Output>& inputs,
                         const std::map<std::string, runtime::Output>& outputs) {
  Signature s;
  s.method = method;
  for (const auto& [name, o] : inputs) s.inputs[name] = {graph.dtype(o), graph.shape(o), o};
  for (const auto& [name, o] : outputs) s.outputs[name] = {graph.dtype(o), graph.shape(o), o};
  return s;
}

Result<std::vector<int64_t>> list_versions(const std::string& base) {
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return runtime::not_found("no model folder ", base);
  std::vector<int64_t> versions;
  for (const fs::directory_entry& e : fs::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory(ec) && is_version_name(name)) versions.push_back(std::stoll(name));
  }
  if (ec) return runtime::unavailable("cannot list ", base, ": ", ec.message());
  std::sort(versions.begin(), versions.end());
  return versions;
}

Result<std::string> write_saved_model(const std::string& base, const SavedModel& model) {
  if (model.signatures.empty()) {
    return runtime::invalid_argument("export: a model needs at least one signature");
  }
  json sigs = json::object();
  for (const auto& [key, s] : model.signatures) {
    TROUPE_RETURN_IF_ERROR(check_method(s, "signature " + key));
    json in = json::object(), out = json::object();
    for (const auto& [name, t] : s.inputs) in[name] = tensor_json(model.graph, t);
    for (const auto& [name, t] : s.outputs) out[name] = tensor_json(model.graph, t);
    sigs[key] = {{"method", s.method}, {"inputs", in}, {"outputs", out}};
  }
  json assets = json::array();
  for (const auto& [name, bytes] : model.assets) {
    if (!runtime::is_plain_file_name(name)) {
      return runtime::invalid_argument("export: asset name '", name, "' is not a plain file name");
    }
    assets.push_back(name);
  }
  const json meta = {{"format", kFormat},
                     {"format_version", kFormatVersion},
                     {"global_step", model.variables.global_step},
                     {"class_labels", model.class_labels},
                     {"assets", assets},
                     {"signatures", sigs}};

  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t version = std::max(now, newest_version(base) + 1);
  const std::string dir = base + "/" + std::to_string(version);
  const std::string tmp =
      base + "/.tmp-" + std::to_string(version) + "-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp + "/variables", ec);
  if (!ec && !model.assets.empty()) fs::create_directories(tmp + "/assets", ec);
  if (!ec && !model.assets_extra.empty()) fs::create_directories(tmp + "/assets.extra", ec);
  if (ec) return runtime::internal_error("export: cannot create ", tmp, ": ", ec.message());
  auto written = [&]() -> Status {
    std::vector<char> graph;
    TROUPE_RETURN_IF_ERROR(runtime::encode_graph(model.graph, &graph));
    TROUPE_RETURN_IF_ERROR(runtime::write_file_atomic(
        tmp + "/graph.capnp", std::string_view(graph.data(), graph.size())));
    TROUPE_RETURN_IF_ERROR(
        runtime::write_checkpoint(tmp + "/variables/variables.ckpt", model.variables));
    for (const auto& [name, bytes] : model.assets) {
      TROUPE_RETURN_IF_ERROR(runtime::write_file_atomic(tmp + "/assets/" + name, bytes));
    }
    for (const auto& [name, bytes] : model.assets_extra) {
      TROUPE_RETURN_IF_ERROR(runtime::write_file_atomic(tmp + "/assets.extra/" + name, bytes));
    }
    return runtime::write_file_atomic(
        tmp + "/saved_model.json", meta.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  }();
  if (written.ok()) {
    fs::rename(tmp, dir, ec);
    if (ec) written = runtime::internal_error("export: cannot rename ", tmp, ": ", ec.message());
  }
  if (!written.ok()) {
    fs::remove_all(tmp, ec);
    return written;
  }
  return dir;
}

Result<SavedModel> read_saved_model(const std::string& dir) {
  SavedModel m;
  const std::string leaf = fs::path(dir).filename().string();
  m.version = is_version_name(leaf) ? std::stoll(leaf) : 0;

  const std::string meta_path = dir + "/saved_model.json";
  std::string text;
  TROUPE_RETURN_IF_ERROR(runtime::read_file(meta_path, &text));
  const json meta = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object()) {
    return runtime::data_loss(meta_path, ": not a JSON object");
  }
  if (meta.value("format", "") != kFormat) {
    return runtime::data_loss(meta_path, ": not a troupe export (format is not ", kFormat, ")");
  }
  if (!meta.contains("format_version") || !meta["format_version"].is_number_integer() ||
      meta["format_version"].get<int>() != kFormatVersion) {
    return runtime::data_loss(meta_path, ": format_version is not ", kFormatVersion,
                              " (written by another troupe?)");
  }

  const std::string graph_path = dir + "/graph.capnp";
  auto bytes = std::make_shared<std::vector<char>>();
  {
    std::string g;
    TROUPE_RETURN_IF_ERROR(runtime::read_file(graph_path, &g));
    bytes->assign(g.begin(), g.end());
  }
  if (Status s = runtime::decode_graph(bytes, &m.graph); !s.ok()) {
    return runtime::data_loss(graph_path, ": ", s.message());
  }

  const std::string vars_path = dir + "/variables/variables.ckpt";
  TROUPE_ASSIGN_OR_RETURN(m.variables, runtime::read_checkpoint(vars_path));
  std::vector<runtime::VariableSpec> expected;
  for (int id : m.graph.variables()) {
    const runtime::Node& n = m.graph.node(id);
    expected.push_back({ops::variable_name(n), n.output_dtypes[0], n.output_shapes[0]});
  }
  if (Status s = runtime::check_restore(m.variables, expected, /*partial=*/false); !s.ok()) {
    return runtime::data_loss(vars_path, ": ", s.message());
  }

  const json& sigs = meta.contains("signatures") ? meta["signatures"] : json();
  if (!sigs.is_object() || sigs.empty()) {
    return runtime::data_loss(meta_path, ": no signatures");
  }
  for (const auto& [key, sj] : sigs.items()) {
    const std::string where = meta_path + ": signature " + key;
    if (!sj.is_object() || !sj.contains("method") || !sj["method"].is_string() ||
        !sj.contains("inputs") || !sj["inputs"].is_object() || !sj.contains("outputs") ||
        !sj["outputs"].is_object() || sj["outputs"].empty()) {
      return runtime::data_loss(where, ": needs method, inputs and outputs");
    }
    Signature s;
    s.method = sj["method"].get<std::string>();
    for (const auto& [name, t] : sj["inputs"].items()) {
      TROUPE_ASSIGN_OR_RETURN(s.inputs[name], tensor_from(m.graph, t, where + " input " + name));
      const std::string& op = m.graph.node(s.inputs[name].tensor.node).op;
      if (op != "Placeholder" && op != "PlaceholderWithDefault") {
        return runtime::data_loss(where, " input ", name, ": not a placeholder of the graph");
      }
    }
    for (const auto& [name, t] : sj["outputs"].items()) {
      TROUPE_ASSIGN_OR_RETURN(s.outputs[name], tensor_from(m.graph, t, where + " output " + name));
    }
    TROUPE_RETURN_IF_ERROR(check_method(s, where));
    m.signatures[key] = std::move(s);
  }

  if (meta.contains("class_labels")) {
    if (!meta["class_labels"].is_array()) return runtime::data_loss(meta_path, ": class_labels");
    for (const json& l : meta["class_labels"]) {
      if (!l.is_string()) return runtime::data_loss(meta_path, ": class_labels are strings");
      m.class_labels.push_back(l.get<std::string>());
    }
  }
  if (meta.contains("assets")) {
    if (!meta["assets"].is_array()) return runtime::data_loss(meta_path, ": assets is a list");
    for (const json& a : meta["assets"]) {
      if (!a.is_string() || !runtime::is_plain_file_name(a.get<std::string>())) {
        return runtime::data_loss(meta_path, ": assets are plain file names");
      }
      const std::string name = a.get<std::string>();
      TROUPE_RETURN_IF_ERROR(runtime::read_file(dir + "/assets/" + name, &m.assets[name]));
    }
  }
  return m;
}

}  // namespace troupe::serving
