#include "tools/serve/json_tensors.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "runtime/example.h"

namespace troupe::serve {

using runtime::DType;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr size_t kMaxRank = 32;

Result<std::string> from_base64(const std::string& text, const std::string& name) {
  if (text.size() % 4 != 0) {
    return runtime::invalid_argument("input '", name, "': b64 is not base64 (length ", text.size(),
                                     ")");
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return runtime::invalid_argument("input '", name, "': b64 is not base64");
  size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string to_base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                  reinterpret_cast<const unsigned char*>(bytes.data()),
                  static_cast<int>(bytes.size()));
  return out;
}

using simdjson::dom::element;
using simdjson::dom::element_type;

std::string shown(element v) {
  std::string text = simdjson::minify(v);
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}

const char* type_name(element v) {
  switch (v.type()) {
    case element_type::ARRAY:
      return "a list";
    case element_type::OBJECT:
      return "an object";
    case element_type::STRING:
      return "a string";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
    default:
      return "a number";
  }
}

template <class T>
Status leaf(element v, const std::string& name, T* out) {
  auto wrong = [&] {
    return runtime::invalid_argument("input '", name, "' holds ", type_name(v), " ", shown(v),
                                     " where ", runtime::dtype_name(runtime::dtype_of<T>()),
                                     " is expected");
  };
  if constexpr (std::is_same_v<T, std::string>) {
    std::string_view text;
    if (v.get_string().get(text) == simdjson::SUCCESS) {
      out->assign(text);
      return runtime::ok_status();
    }
    simdjson::dom::object o;
    if (v.get_object().get(o) == simdjson::SUCCESS && o.size() == 1 &&
        o.at_key("b64").get_string().get(text) == simdjson::SUCCESS) {
      TROUPE_ASSIGN_OR_RETURN(*out, from_base64(std::string(text), name));
      return runtime::ok_status();
    }
    return wrong();
  } else if constexpr (std::is_same_v<T, bool>) {
    bool b;
    if (v.get_bool().get(b) != simdjson::SUCCESS) return wrong();
    *out = b;
    return runtime::ok_status();
  } else if constexpr (std::is_floating_point_v<T>) {
    double d;
    if (v.get_double().get(d) != simdjson::SUCCESS) return wrong();
    *out = static_cast<T>(d);
    return runtime::ok_status();
  } else {
    auto out_of_range = [&] {
      return runtime::invalid_argument("input '", name, "': ", shown(v), " is out of range for ",
                                       runtime::dtype_name(runtime::dtype_of<T>()));
    };
    if (v.type() == element_type::UINT64) {
      const uint64_t u = v.get_uint64().value_unsafe();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return out_of_range();
      *out = static_cast<T>(u);
      return runtime::ok_status();
    }
    if (v.type() != element_type::INT64) return wrong();
    const int64_t i = v.get_int64().value_unsafe();
    if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return out_of_range();
    }
    *out = static_cast<T>(i);
    return runtime::ok_status();
  }
}

// The dimensions of v read along its first elements.
Status dims_of(element v, const std::string& name, std::vector<int64_t>* dims) {
  while (v.type() == element_type::ARRAY) {
    if (dims->size() == kMaxRank) {
      return runtime::invalid_argument("input '", name, "' is nested deeper than ", kMaxRank);
    }
    simdjson::dom::array a = v.get_array().value_unsafe();
    dims->push_back(static_cast<int64_t>(a.size()));
    if (a.size() == 0) break;
    v = *a.begin();
  }
  return runtime::ok_status();
}

// Checks that v is a rectangular list of dims (counting from `depth`).
Status check_shape(element v, size_t depth, const std::vector<int64_t>& dims,
                   const std::string& name) {
  const bool list = v.type() == element_type::ARRAY;
  if (depth == dims.size()) {
    if (list) {
      return runtime::invalid_argument("input '", name, "' is ragged: a list at depth ", depth,
                                       " where others hold values");
    }
    return runtime::ok_status();
  }
  const int64_t size = list ? static_cast<int64_t>(v.get_array().value_unsafe().size()) : -1;
  if (size != dims[depth]) {
    return runtime::invalid_argument("input '", name, "' is ragged: at depth ", depth, " ",
                                     list ? "a list of " + std::to_string(size) : "a value",
                                     " where others hold lists of ", dims[depth]);
  }
  const simdjson::dom::array items = v.get_array().value_unsafe();
  if (depth + 1 == dims.size()) {
    // The innermost lists, where all the values are (most of the work): checked in one loop.
    for (element e : items) {
      if (e.type() == element_type::ARRAY) {
        return runtime::invalid_argument("input '", name, "' is ragged: a list at depth ",
                                         depth + 1, " where others hold values");
      }
    }
    return runtime::ok_status();
  }
  for (element e : items) TROUPE_RETURN_IF_ERROR(check_shape(e, depth + 1, dims, name));
  return runtime::ok_status();
}

template <class T>
Status fill(element v, size_t depth, size_t rank, const std::string& name, T** out) {
  if (depth == rank) {
    TROUPE_RETURN_IF_ERROR(leaf<T>(v, name, *out));
    ++*out;
    return runtime::ok_status();
  }
  const simdjson::dom::array items = v.get_array().value_unsafe();
  if (depth + 1 == rank) {
    for (element e : items) {
      TROUPE_RETURN_IF_ERROR(leaf<T>(e, name, *out));
      ++*out;
    }
    return runtime::ok_status();
  }
  for (element e : items) TROUPE_RETURN_IF_ERROR(fill<T>(e, depth + 1, rank, name, out));
  return runtime::ok_status();
}

template <class T>
json json_value(const T& v, bool bytes) {
  if constexpr (std::is_same_v<T, float>) {
    return json_float(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (bytes) return json{{"b64", to_base64(v)}};
    return v;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return static_cast<int>(v);
  } else {
    return v;
  }
}

template <class T>
json nested(const T* data, const std::vector<int64_t>& dims, size_t depth, int64_t stride,
            bool bytes) {
  if (depth == dims.size()) return json_value<T>(*data, bytes);
  json list = json::array();
  const int64_t inner = dims[depth] > 0 ? stride / dims[depth] : 0;
  for (int64_t i = 0; i < dims[depth]; ++i) {
    list.push_back(nested<T>(data + i * inner, dims, depth + 1, inner, bytes));
  }
  return list;
}

template <class F>
bool visit_all(DType t, F&& f) {
  if (t == DType::kString) {
    f(std::string());
    return true;
  }
  return runtime::visit_numeric(t, std::forward<F>(f));
}

bool ends_with_bytes(const std::string& name) {
  return name.size() >= 6 && name.compare(name.size() - 6, 6, "_bytes") == 0;
}

}  // namespace

json json_float(float v) {
  if (!std::isfinite(v))
    return std::isnan(v) ? json("NaN") : json(v > 0 ? "Infinity" : "-Infinity");
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

namespace {

// A tensor of `dims` holding the leaves of `parts` in order, each part `depth` lists deep (its
// shape already checked).
Result<Tensor> filled(DType dtype, const std::vector<int64_t>& dims,
                      const std::vector<element>& parts, size_t depth, const std::string& name) {
  Tensor t(dtype, runtime::Shape(dims));
  Status s = runtime::ok_status();
  const bool known = visit_all(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = t.data<T>();
    for (size_t i = 0; i < parts.size() && s.ok(); ++i) {
      s = fill<T>(parts[i], 0, depth, name, &out);
    }
  });
  if (!known) return runtime::invalid_argument("input '", name, "' has no JSON form");
  if (!s.ok()) return s;
  return t;
}

}  // namespace

Result<Tensor> tensor_from_rows(const std::vector<element>& rows, DType dtype,
                                const std::string& name) {
  std::vector<int64_t> dims{static_cast<int64_t>(rows.size())};
  if (!rows.empty()) TROUPE_RETURN_IF_ERROR(dims_of(rows[0], name, &dims));
  const std::vector<int64_t> row_dims(dims.begin() + 1, dims.end());
  for (element r : rows) TROUPE_RETURN_IF_ERROR(check_shape(r, 0, row_dims, name));
  return filled(dtype, dims, rows, row_dims.size(), name);
}

Result<Tensor> tensor_from_json(element value, DType dtype, const std::string& name) {
  std::vector<int64_t> dims;
  TROUPE_RETURN_IF_ERROR(dims_of(value, name, &dims));
  TROUPE_RETURN_IF_ERROR(check_shape(value, 0, dims, name));
  return filled(dtype, dims, {value}, dims.size(), name);
}

std::string to_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json json_from_tensor(const Tensor& t, const std::string& name) {
  json out;
  visit_all(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    out = nested<T>(t.data<T>(), t.shape().dims(), 0, t.num_elements(), ends_with_bytes(name));
  });
  return out;
}

json json_row(const Tensor& t, int64_t row, const std::string& name) {
  std::vector<int64_t> inner(t.shape().dims().begin() + 1, t.shape().dims().end());
  const int64_t stride = t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0;
  json out;
  visit_all(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    out = nested<T>(t.data<T>() + row * stride, inner, 0, stride, ends_with_bytes(name));
  });
  return out;
}

namespace {

// The tf.Example kind of a feature's JSON value, as TF Serving reads one: strings (or b64
// objects) are bytes, numbers that are all integers an Int64List, other numbers a FloatList.
Result<DType> feature_kind(element v, const std::string& name) {
  bool strings = false, floats = false, numbers = false;
  std::vector<element> todo{v};
  while (!todo.empty()) {
    element e = todo.back();
    todo.pop_back();
    switch (e.type()) {
      case element_type::ARRAY: {
        // A copy: the result object get_array() returns dies at the end of this statement.
        const simdjson::dom::array list = e.get_array().value_unsafe();
        for (element x : list) todo.push_back(x);
        break;
      }
      case element_type::STRING:
      case element_type::OBJECT:  // {"b64": ...}, checked when read
        strings = true;
        break;
      case element_type::DOUBLE:
        floats = numbers = true;
        break;
      case element_type::INT64:
      case element_type::UINT64:
        numbers = true;
        break;
      default:
        return runtime::invalid_argument("feature '", name, "' holds ", type_name(e), " ", shown(e),
                                         ": a tf.Example holds numbers or strings");
    }
  }
  if (strings && numbers) {
    return runtime::invalid_argument("feature '", name, "' mixes strings and numbers");
  }
  return strings ? DType::kString : floats ? DType::kFloat32 : DType::kInt64;
}

}  // namespace

Result<std::string> example_from_json(simdjson::dom::object features,
                                      const simdjson::dom::object* context) {
  std::vector<std::string> names;
  std::vector<Tensor> columns;
  auto add = [&](simdjson::dom::object o) -> runtime::Status {
    for (auto field : o) {
      const std::string name(field.key);
      // The example's own value wins over the context's, as a proto merged after it does.
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      TROUPE_ASSIGN_OR_RETURN(DType kind, feature_kind(field.value, name));
      TROUPE_ASSIGN_OR_RETURN(Tensor t, tensor_from_json(field.value, kind, name));
      names.push_back(name);
      columns.push_back(t.reshaped(runtime::Shape{1, t.num_elements()}));
    }
    return runtime::ok_status();
  };
  TROUPE_RETURN_IF_ERROR(add(features));
  if (context) TROUPE_RETURN_IF_ERROR(add(*context));
  std::string bytes;
  TROUPE_RETURN_IF_ERROR(runtime::encode_example(names, columns, 0, &bytes));
  return bytes;
}

}  // namespace troupe::serve
