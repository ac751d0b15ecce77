#include "tools/serve/rest_api.h"

#include <google/protobuf/util/json_util.h>

#include <cctype>

#include "tools/serve/inference.h"
#include "tools/serve/json_tensors.h"
#include "tools/serve/tensor_proto.h"

namespace troupe::serve {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;
using serving::NamedTensors;
using serving::Signature;

namespace {

const char* kPrefix = "/v1/models/";

struct Route {
  std::string name;
  int64_t version = 0;  // 0: the newest, or the one `label` names
  std::string label;
  bool metadata = false;
  std::string verb;  // predict, classify, regress; empty for GETs
};

bool digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
}

Result<Route> parse_route(const std::string& target) {
  std::string path = target.substr(0, target.find('?'));
  const std::string malformed = "Malformed request: " + path;
  if (path.rfind(kPrefix, 0) != 0) return runtime::not_found(malformed);
  path = path.substr(std::char_traits<char>::length(kPrefix));
  Route r;
  if (const size_t colon = path.find(':'); colon != std::string::npos) {
    r.verb = path.substr(colon + 1);
    path = path.substr(0, colon);
  }
  std::vector<std::string> parts;
  for (size_t at = 0; at <= path.size();) {
    const size_t slash = std::min(path.find('/', at), path.size());
    parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  if (parts.empty() || parts[0].empty()) return runtime::not_found(malformed);
  r.name = parts[0];
  size_t next = 1;
  if (parts.size() >= 3 && parts[1] == "versions") {
    if (!digits(parts[2]) || std::stoll(parts[2]) == 0) {
      return runtime::invalid_argument("Malformed version: ", parts[2]);
    }
    r.version = std::stoll(parts[2]);
    next = 3;
  } else if (parts.size() >= 3 && parts[1] == "labels") {
    if (parts[2].empty()) return runtime::invalid_argument("Malformed label: an empty one");
    r.label = parts[2];
    next = 3;
  }
  if (next < parts.size() && parts[next] == "metadata" && r.verb.empty()) {
    r.metadata = true;
    ++next;
  }
  if (next != parts.size()) return runtime::not_found(malformed);
  return r;
}

std::string upper_code(runtime::Code c) {
  std::string s = runtime::code_name(c);
  for (char& ch : s) ch = ch == ' ' ? '_' : static_cast<char>(std::toupper(ch));
  return s;
}

HttpReply error(const Status& s) { return {http_status(s.code()), error_body(s.message()), {}}; }

HttpReply ok(const json& body) { return {200, to_text(body), {}}; }

// As TF Serving's REST API writes GetModelMetadata's answer: the SignatureDefMap in protobuf's
// JSON mapping (int64 sizes as strings, every field printed), under model_spec.
json metadata_json(const Route& r, const Servable& s) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string defs;
  (void)google::protobuf::util::MessageToJsonString(signature_defs(s.predictor->model()), &defs,
                                                    options);
  return {{"model_spec",
           {{"name", r.name}, {"signature_name", ""}, {"version", std::to_string(s.version)}}},
          {"metadata", {{"signature_def", json::parse(defs)}}}};
}

json status_json(const std::vector<VersionState>& states) {
  json list = json::array();
  for (const VersionState& v : states) {
    list.push_back({{"version", std::to_string(v.version)},
                    {"state", v.state},
                    {"status",
                     {{"error_code", upper_code(v.status.code())},
                      {"error_message", v.status.ok() ? "" : v.status.message()}}}});
  }
  return {{"model_version_status", list}};
}

using simdjson::dom::element;
using simdjson::dom::element_type;

bool is_b64(element v) {
  simdjson::dom::object o;
  return v.get_object().get(o) == simdjson::SUCCESS && o.size() == 1 &&
         o.at_key("b64").error() == simdjson::SUCCESS;
}

// Stacks the value of each input over a list of objects (rows, or examples with the context).
Result<NamedTensors> inputs_from_objects(const Signature& sig, simdjson::dom::array rows,
                                         const simdjson::dom::object* context) {
  std::vector<simdjson::dom::object> objects;
  for (element row : rows) {
    simdjson::dom::object o;
    if (row.get_object().get(o) != simdjson::SUCCESS) {
      return runtime::invalid_argument("every element must be an object of named inputs");
    }
    for (auto field : o) {
      if (!sig.inputs.count(std::string(field.key))) {
        return runtime::invalid_argument("the signature has no input '", field.key, "'");
      }
    }
    objects.push_back(o);
  }
  NamedTensors inputs;
  for (const auto& [name, info] : sig.inputs) {
    std::vector<element> column;
    for (simdjson::dom::object o : objects) {
      element v;
      if (o.at_key(name).get(v) == simdjson::SUCCESS ||
          (context && context->at_key(name).get(v) == simdjson::SUCCESS)) {
        column.push_back(v);
      } else {
        return runtime::invalid_argument("input '", name, "' is missing from an element");
      }
    }
    TROUPE_ASSIGN_OR_RETURN(inputs[name], tensor_from_rows(column, info.dtype, name));
  }
  return inputs;
}

// The examples, each merged with the context, as a [n] vector of serialized tf.Example.
Result<NamedTensors> serialized_examples(simdjson::dom::array examples,
                                         const simdjson::dom::object* context) {
  Tensor serialized(runtime::DType::kString, runtime::Shape{static_cast<int64_t>(examples.size())});
  int64_t i = 0;
  for (element e : examples) {
    simdjson::dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) {
      return runtime::invalid_argument("every example must be an object of features");
    }
    TROUPE_ASSIGN_OR_RETURN(serialized.data<std::string>()[i++], example_from_json(o, context));
  }
  return NamedTensors{{"inputs", std::move(serialized)}};
}

Result<NamedTensors> predict_inputs(const Signature& sig, simdjson::dom::object body, bool* rows) {
  element instances, columns;
  const bool has_instances = body.at_key("instances").get(instances) == simdjson::SUCCESS;
  const bool has_inputs = body.at_key("inputs").get(columns) == simdjson::SUCCESS;
  if (has_instances == has_inputs) {
    return runtime::invalid_argument(has_instances
                                         ? "Request body may contain only one of \"instances\" or "
                                           "\"inputs\""
                                         : "Missing \"instances\" or \"inputs\" key");
  }
  *rows = has_instances;
  if (has_instances) {
    simdjson::dom::array list;
    if (instances.get_array().get(list) != simdjson::SUCCESS || list.size() == 0) {
      return runtime::invalid_argument("\"instances\" must be a non-empty list");
    }
    bool objects = true;
    for (element i : list) objects = objects && i.type() == element_type::OBJECT;
    // A single input's rows may be plain values; {"b64": ...} is a value, not named inputs.
    if (objects && !(sig.inputs.size() == 1 && is_b64(*list.begin()))) {
      return inputs_from_objects(sig, list, nullptr);
    }
    if (sig.inputs.size() != 1) {
      return runtime::invalid_argument("the signature has ", sig.inputs.size(),
                                       " inputs: each instance must be an object naming them");
    }
    const auto& [name, info] = *sig.inputs.begin();
    NamedTensors inputs;
    TROUPE_ASSIGN_OR_RETURN(inputs[name], tensor_from_json(instances, info.dtype, name));
    return inputs;
  }
  NamedTensors inputs;
  simdjson::dom::object named;
  if (columns.get_object().get(named) != simdjson::SUCCESS || is_b64(columns)) {
    if (sig.inputs.size() != 1) {
      return runtime::invalid_argument("the signature has ", sig.inputs.size(),
                                       " inputs: \"inputs\" must be an object naming them");
    }
    const auto& [name, info] = *sig.inputs.begin();
    TROUPE_ASSIGN_OR_RETURN(inputs[name], tensor_from_json(columns, info.dtype, name));
    return inputs;
  }
  for (auto field : named) {
    if (!sig.inputs.count(std::string(field.key))) {
      return runtime::invalid_argument("the signature has no input '", field.key, "'");
    }
  }
  for (const auto& [name, info] : sig.inputs) {
    element v;
    if (named.at_key(name).get(v) != simdjson::SUCCESS) {
      return runtime::invalid_argument("input '", name, "' is missing");
    }
    TROUPE_ASSIGN_OR_RETURN(inputs[name], tensor_from_json(v, info.dtype, name));
  }
  return inputs;
}

Result<json> predict_outputs(const NamedTensors& out, bool rows) {
  if (!rows) {
    if (out.size() == 1)
      return json{{"outputs", json_from_tensor(out.begin()->second, out.begin()->first)}};
    json columns = json::object();
    for (const auto& [name, t] : out) columns[name] = json_from_tensor(t, name);
    return json{{"outputs", columns}};
  }
  int64_t batch = -1;
  for (const auto& [name, t] : out) {
    const int64_t n = t.rank() > 0 ? t.dim(0) : -1;
    if (n < 0 || (batch >= 0 && n != batch)) {
      return runtime::invalid_argument(
          "output tensors do not share a batch size in dimension 0: use the columnar "
          "\"inputs\" form");
    }
    batch = n;
  }
  json predictions = json::array();
  for (int64_t i = 0; i < batch; ++i) {
    if (out.size() == 1) {
      predictions.push_back(json_row(out.begin()->second, i, out.begin()->first));
      continue;
    }
    json row = json::object();
    for (const auto& [name, t] : out) row[name] = json_row(t, i, name);
    predictions.push_back(std::move(row));
  }
  return json{{"predictions", predictions}};
}

json score_json(double v, runtime::DType dtype) {
  return dtype == runtime::DType::kFloat32 ? json_float(static_cast<float>(v)) : json(v);
}

Result<json> classify_results(const NamedTensors& out, const std::vector<std::string>& labels) {
  TROUPE_ASSIGN_OR_RETURN(Classes c, classes_of(out, labels));
  json results = json::array();
  for (const auto& row : c.rows) {
    json classes = json::array();
    for (const auto& [label, score] : row) classes.push_back({label, score_json(score, c.dtype)});
    results.push_back(std::move(classes));
  }
  return json{{"results", results}};
}

Result<json> regress_results(const NamedTensors& out) {
  TROUPE_ASSIGN_OR_RETURN(Regressions r, regressions_of(out));
  json results = json::array();
  for (double v : r.values) results.push_back(score_json(v, r.dtype));
  return json{{"results", results}};
}

}  // namespace

std::string error_body(const std::string& message) { return to_text(json{{"error", message}}); }

int http_status(runtime::Code code) {
  switch (code) {
    case runtime::Code::kOk:
      return 200;
    case runtime::Code::kInvalidArgument:
    case runtime::Code::kFailedPrecondition:
    case runtime::Code::kOutOfRange:
      return 400;
    case runtime::Code::kNotFound:
      return 404;
    case runtime::Code::kAlreadyExists:
      return 409;
    case runtime::Code::kResourceExhausted:
      return 429;
    case runtime::Code::kCancelled:
      return 499;
    case runtime::Code::kUnimplemented:
      return 501;
    case runtime::Code::kUnavailable:
      return 503;
    case runtime::Code::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

void RestApi::handle(const HttpRequest& request, std::function<void(HttpReply)> reply) {
  if (metrics_ != nullptr && request.target == ServingMetrics::kPath) {
    if (request.method != "GET") {
      return reply({405, error_body(request.method + " " + request.target + ": use GET"), {}});
    }
    HttpReply scrape{200, metrics_->render(), {}, "text/plain; version=0.0.4"};
    return reply(std::move(scrape));
  }
  if (metrics_ == nullptr) {
    RequestLabels unused;
    return serve_request(request, &unused, reply);
  }
  // Counted when answered, on whichever thread answers; the labels are filled in as the request
  // is understood (its model, its API, the version that answers).
  auto labels = std::make_shared<RequestLabels>();
  const auto started = std::chrono::steady_clock::now();
  serve_request(request, labels.get(),
                [this, labels, started, reply = std::move(reply)](HttpReply r) {
                  metrics_->request(*labels, r.status,
                                    std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now() - started));
                  reply(std::move(r));
                });
}

void RestApi::serve_request(const HttpRequest& request, RequestLabels* counted,
                            const std::function<void(HttpReply)>& reply) {
  auto route = parse_route(request.target);
  if (!route.ok()) return reply(error(route.status()));
  const Route r = *route;
  counted->model = r.name;
  counted->api = !r.verb.empty() ? r.verb : r.metadata ? "metadata" : "status";
  if (r.verb.empty()) {
    if (request.method != "GET") {
      return reply({405, error_body(request.method + " " + request.target + ": use GET"), {}});
    }
    if (!r.metadata) {
      auto states = models_.status(r.name, r.version, r.label);
      if (!states.ok()) return reply(error(states.status()));
      return reply(ok(status_json(*states)));
    }
    auto found = models_.servable(r.name, r.version, r.label);
    if (!found.ok()) return reply(error(found.status()));
    std::shared_ptr<Servable> s = std::move(*found);
    counted->version = s->version;
    HttpReply out = ok(metadata_json(r, *s));
    out.keep = std::move(s);
    return reply(std::move(out));
  }
  if (r.verb != "predict" && r.verb != "classify" && r.verb != "regress") {
    return reply(error(runtime::not_found("Malformed request: unknown verb '", r.verb,
                                          "' (predict, classify or regress)")));
  }
  if (request.method != "POST") {
    return reply({405, error_body(request.method + " " + request.target + ": use POST"), {}});
  }
  auto found = models_.servable(r.name, r.version, r.label);
  if (!found.ok()) return reply(error(found.status()));
  std::shared_ptr<Servable> s = std::move(*found);
  counted->version = s->version;

  // One parser per server thread: it keeps its buffers between requests, and what it parsed
  // is turned into tensors before the next request on the thread.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object body;
  element doc;
  if (auto e = parser.parse(request.body).get(doc); e != simdjson::SUCCESS) {
    return reply(
        error(runtime::invalid_argument("JSON Parse error: ", simdjson::error_message(e))));
  }
  if (doc.get_object().get(body) != simdjson::SUCCESS) {
    return reply(error(runtime::invalid_argument("the request body must be a JSON object")));
  }
  const std::string method = r.verb;
  std::string given;
  if (element name; body.at_key("signature_name").get(name) == simdjson::SUCCESS) {
    std::string_view text;
    if (name.get_string().get(text) != simdjson::SUCCESS) {
      return reply(error(runtime::invalid_argument("signature_name must be a string")));
    }
    given = text;
  }
  auto signature = choose_signature(*s->predictor, given, method);
  if (!signature.ok()) return reply(error(signature.status()));
  const Signature& sig = *s->predictor->signature(*signature);

  bool rows = true;
  Result<NamedTensors> inputs = runtime::invalid_argument("no inputs");
  if (method == "predict") {
    inputs = predict_inputs(sig, body, &rows);
  } else {
    simdjson::dom::object context;
    element c;
    const bool has_context = body.at_key("context").get(c) == simdjson::SUCCESS;
    if (has_context && c.get_object().get(context) != simdjson::SUCCESS) {
      return reply(error(runtime::invalid_argument("\"context\" must be an object")));
    }
    simdjson::dom::array examples;
    if (body.at_key("examples").get_array().get(examples) != simdjson::SUCCESS ||
        examples.size() == 0) {
      return reply(error(runtime::invalid_argument("\"examples\" must be a non-empty list")));
    }
    inputs = takes_examples(sig)
                 ? serialized_examples(examples, has_context ? &context : nullptr)
                 : inputs_from_objects(sig, examples, has_context ? &context : nullptr);
  }
  if (!inputs.ok()) return reply(error(inputs.status()));

  const std::vector<std::string> labels = s->predictor->model().class_labels;
  auto answer = [method, rows, labels](Result<NamedTensors> out) {
    HttpReply a;
    Result<json> body = runtime::internal_error("no answer");
    if (!out.ok()) {
      body = out.status();
    } else if (method == "predict") {
      body = predict_outputs(*out, rows);
    } else {
      body = method == "classify" ? classify_results(*out, labels) : regress_results(*out);
    }
    if (body.ok()) {
      a.body = to_text(*body);
    } else {
      a.status = http_status(body.status().code());
      a.body = error_body(body.status().message());
    }
    return a;
  };
  if (!s->batcher) {
    // No batching: the prediction runs here, on the server's thread, as TF Serving's does.
    HttpReply a = answer(s->predictor->predict(*inputs, *signature));
    a.keep = std::move(s);
    return reply(std::move(a));
  }
  // The servable rides in the reply, moved out of this callback when it runs: the callback
  // itself dies on a runner's thread, where unloading a version would deadlock.
  auto holder = std::make_shared<std::shared_ptr<Servable>>(s);
  serving::Batcher& batcher = *s->batcher;
  s.reset();
  batcher.submit(*signature, std::move(*inputs),
                 [reply = std::move(reply), holder, answer](Result<NamedTensors> out) {
                   HttpReply a = answer(std::move(out));
                   a.keep = std::move(*holder);
                   reply(std::move(a));
                 });
}

}  // namespace troupe::serve
