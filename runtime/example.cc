#include "runtime/example.h"

#include <algorithm>
#include <cstring>

#include "schema/example.pb.h"

namespace troupe::runtime {

std::string to_string(const FeatureSpec& spec) {
  const std::string type = std::string(dtype_name(spec.dtype)) + " ";
  switch (spec.kind) {
    case FeatureSpec::Kind::kVarLen:
      return type + "varlen";
    case FeatureSpec::Kind::kSequence:
      return type + spec.shape.to_string() + " sequence";
    case FeatureSpec::Kind::kSparse:
      return type + "sparse [" + std::to_string(spec.size) + "] of " + spec.value_key + " at " +
             spec.index_key;
    case FeatureSpec::Kind::kFixedLen:
      break;
  }
  return type + spec.shape.to_string();
}

namespace {

// The values of a feature, as a kind and a count.
DType kind_of(const tensorflow::Feature& f) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kFloatList:
      return DType::kFloat32;
    case tensorflow::Feature::kInt64List:
      return DType::kInt64;
    case tensorflow::Feature::kBytesList:
      return DType::kString;
    default:
      return DType::kInvalid;  // no values: any kind
  }
}

int64_t count_of(const tensorflow::Feature& f) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kFloatList:
      return f.float_list().value_size();
    case tensorflow::Feature::kInt64List:
      return f.int64_list().value_size();
    case tensorflow::Feature::kBytesList:
      return f.bytes_list().value_size();
    default:
      return 0;
  }
}

// Copies the `count` values of `f` (of `dtype`, checked) to `out` from element `at` on.
void copy_values(const tensorflow::Feature& f, Tensor* out, int64_t at) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kFloatList:
      std::memcpy(out->data<float>() + at, f.float_list().value().data(),
                  sizeof(float) * static_cast<size_t>(f.float_list().value_size()));
      break;
    case tensorflow::Feature::kInt64List:
      std::memcpy(out->data<int64_t>() + at, f.int64_list().value().data(),
                  sizeof(int64_t) * static_cast<size_t>(f.int64_list().value_size()));
      break;
    case tensorflow::Feature::kBytesList:
      for (int i = 0; i < f.bytes_list().value_size(); ++i) {
        out->data<std::string>()[at + i] = f.bytes_list().value(i);
      }
      break;
    default:
      break;
  }
}

}  // namespace

Status check_feature_spec(const std::string& name, const FeatureSpec& s) {
  if (s.dtype != DType::kFloat32 && s.dtype != DType::kInt64 && s.dtype != DType::kString) {
    return invalid_argument("feature '", name, "': ", dtype_name(s.dtype),
                            " is not float32, int64 or string (tf.Example's kinds)");
  }
  if (s.kind != FeatureSpec::Kind::kFixedLen && s.default_value) {
    return invalid_argument("feature '", name, "': only a FixedLen feature has a default");
  }
  if (s.kind == FeatureSpec::Kind::kVarLen) return ok_status();
  if (s.kind == FeatureSpec::Kind::kSparse) {
    if (s.index_key.empty() || s.value_key.empty() || s.size < 1) {
      return invalid_argument("feature '", name,
                              "': a sparse feature names its index and value features and has a "
                              "size of at least 1");
    }
    return ok_status();
  }
  for (int64_t d : s.shape.dims()) {
    if (d < 0) {
      return invalid_argument("feature '", name, "': FixedLen shape ", s.shape.to_string(),
                              " is not fully defined");
    }
  }
  if (s.default_value && (s.default_value->dtype() != s.dtype ||
                          s.default_value->num_elements() != s.shape.num_elements())) {
    return invalid_argument("feature '", name, "': its default is ",
                            dtype_name(s.default_value->dtype()), " ",
                            s.default_value->shape().to_string(), ", not ", to_string(s));
  }
  return ok_status();
}

namespace {

// One example's feature list into row `row` of `t` ([n, length, step...]): its first `length`
// steps, then padding (zeros, or empty strings).
Status fill_sequence(const tensorflow::FeatureList* list, const std::string& name,
                     const FeatureSpec& s, int64_t length, int64_t row, Tensor* t) {
  const int64_t per = s.shape.num_elements();
  const int64_t have = list ? list->feature_size() : 0;
  const int64_t keep = std::min(have, length);
  for (int64_t k = 0; k < keep; ++k) {
    const tensorflow::Feature& step = list->feature(static_cast<int>(k));
    const DType kind = kind_of(step);
    if ((kind != DType::kInvalid && kind != s.dtype) || count_of(step) != per) {
      return invalid_argument("feature list '", name, "': step ", k, " has ", count_of(step),
                              " values of ", dtype_name(kind), ", not a step of ", to_string(s));
    }
    copy_values(step, t, (row * length + k) * per);
  }
  const int64_t from = (row * length + keep) * per, to = (row + 1) * length * per;
  if (s.dtype == DType::kString) {
    for (int64_t e = from; e < to; ++e) t->data<std::string>()[e].clear();
  } else if (to > from) {
    const size_t size = dtype_size(s.dtype);
    std::memset(static_cast<char*>(t->raw_data()) + size * static_cast<size_t>(from), 0,
                size * static_cast<size_t>(to - from));
  }
  return ok_status();
}

// One example's values of each feature into row `row` of `out` (FixedLen and sequence
// features: [n, ...] tensors made by the caller) or into a [1, len] tensor of its own (VarLen).
// `context` holds an Example's features or a SequenceExample's context; `lists` its feature
// lists (null for an Example). The example's most steps go to `steps` when given.
Status fill(const tensorflow::Features& context, const tensorflow::FeatureLists* lists,
            const FeatureSpecs& spec, int64_t length, int64_t row, std::vector<Tensor>* out,
            int64_t* steps = nullptr) {
  const auto& features = context.feature();
  size_t i = 0;
  for (const auto& [name, s] : spec) {
    Tensor& t = (*out)[i++];
    if (s.kind == FeatureSpec::Kind::kSparse) continue;  // parse_examples reads these
    if (s.kind == FeatureSpec::Kind::kSequence) {
      const tensorflow::FeatureList* list = nullptr;
      if (lists) {
        auto it = lists->feature_list().find(name);
        if (it != lists->feature_list().end()) list = &it->second;
      }
      if (steps && list) *steps = std::max<int64_t>(*steps, list->feature_size());
      TROUPE_RETURN_IF_ERROR(fill_sequence(list, name, s, length, row, &t));
      continue;
    }
    auto it = features.find(name);
    const bool present = it != features.end();
    const DType kind = present ? kind_of(it->second) : DType::kInvalid;
    const int64_t n = present ? count_of(it->second) : 0;
    if (kind != DType::kInvalid && kind != s.dtype) {
      return invalid_argument("feature '", name, "' is ", dtype_name(kind), ", not ", to_string(s));
    }
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      t = Tensor(s.dtype, Shape{1, n});
      if (n > 0) copy_values(it->second, &t, 0);
      continue;
    }
    const int64_t per = s.shape.num_elements();
    if (n == 0 && !(present && per == 0)) {
      if (!s.default_value) {
        return invalid_argument("feature '", name, "' is missing and its spec has no default");
      }
      if (s.dtype == DType::kString) {
        for (int64_t e = 0; e < per; ++e) {
          t.data<std::string>()[row * per + e] = s.default_value->data<std::string>()[e];
        }
      } else {
        const size_t bytes = dtype_size(s.dtype) * static_cast<size_t>(per);
        std::memcpy(static_cast<char*>(t.raw_data()) + bytes * static_cast<size_t>(row),
                    s.default_value->raw_data(), bytes);
      }
      continue;
    }
    if (n != per) {
      return invalid_argument("feature '", name, "' has ", n, " values, not the ", per, " of ",
                              to_string(s));
    }
    copy_values(it->second, &t, row * per);
  }
  return ok_status();
}

// Rows of one VarLen feature ([1, count] each, as fill leaves them) as a [rows, longest] sparse
// tensor, entry j of a row at column j; with `positions`, at column positions[row][j] of a
// [rows, width] one.
SparseTensor stack_rows(DType dtype, const std::vector<Tensor>& rows,
                        const std::vector<std::vector<int64_t>>* positions = nullptr,
                        int64_t width = 0) {
  int64_t nnz = 0, longest = 0;
  for (const Tensor& r : rows) {
    nnz += r.num_elements();
    longest = std::max(longest, r.num_elements());
  }
  SparseTensor st{
      Tensor(DType::kInt64, Shape{nnz, 2}), Tensor(dtype, Shape{nnz}),
      Tensor::from_vector(Shape{2}, std::vector<int64_t>{static_cast<int64_t>(rows.size()),
                                                         positions ? width : longest})};
  int64_t* index = st.indices.data<int64_t>();
  int64_t at = 0;
  const size_t size = dtype == DType::kString ? 0 : dtype_size(dtype);
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t n = rows[r].num_elements();
    for (int64_t j = 0; j < n; ++j) {
      index[2 * (at + j)] = static_cast<int64_t>(r);
      index[2 * (at + j) + 1] = positions ? (*positions)[r][static_cast<size_t>(j)] : j;
      if (dtype == DType::kString) {
        st.values.data<std::string>()[at + j] = rows[r].data<std::string>()[j];
      }
    }
    if (size > 0 && n > 0) {
      std::memcpy(static_cast<char*>(st.values.raw_data()) + size * static_cast<size_t>(at),
                  rows[r].raw_data(), size * static_cast<size_t>(n));
    }
    at += n;
  }
  return st;
}

// One example's entries of the kSparse feature `name`: its values ([1, k]) and their positions,
// in order of position.
Status sparse_row(const tensorflow::Features& features, const std::string& name,
                  const FeatureSpec& s, Tensor* values, std::vector<int64_t>* positions) {
  const auto& all = features.feature();
  auto idx = all.find(s.index_key);
  auto val = all.find(s.value_key);
  const int64_t ni = idx == all.end() ? 0 : count_of(idx->second);
  const int64_t nv = val == all.end() ? 0 : count_of(val->second);
  if (ni > 0 && kind_of(idx->second) != DType::kInt64) {
    return invalid_argument("sparse feature '", name, "': its index feature '", s.index_key,
                            "' is ", dtype_name(kind_of(idx->second)), ", not int64");
  }
  if (nv > 0 && kind_of(val->second) != s.dtype) {
    return invalid_argument("sparse feature '", name, "': its value feature '", s.value_key,
                            "' is ", dtype_name(kind_of(val->second)), ", not ",
                            dtype_name(s.dtype));
  }
  if (ni != nv) {
    return invalid_argument("sparse feature '", name, "': ", ni, " positions in '", s.index_key,
                            "' for ", nv, " values in '", s.value_key, "'");
  }
  Tensor raw(s.dtype, Shape{1, nv});
  if (nv > 0) copy_values(val->second, &raw, 0);
  std::vector<int64_t> order(static_cast<size_t>(nv));
  for (int64_t j = 0; j < nv; ++j) {
    const int64_t p = idx->second.int64_list().value(static_cast<int>(j));
    if (p < 0 || p >= s.size) {
      return invalid_argument("sparse feature '", name, "': position ", p, " (value ", j,
                              ") is outside [0, ", s.size, ")");
    }
    order[static_cast<size_t>(j)] = j;
  }
  auto position = [&](int64_t j) { return idx->second.int64_list().value(static_cast<int>(j)); };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return position(a) < position(b); });
  *values = Tensor(s.dtype, Shape{1, nv});
  positions->clear();
  const size_t size = s.dtype == DType::kString ? 0 : dtype_size(s.dtype);
  for (int64_t k = 0; k < nv; ++k) {
    const int64_t j = order[static_cast<size_t>(k)];
    positions->push_back(position(j));
    if (s.dtype == DType::kString) {
      values->data<std::string>()[k] = raw.data<std::string>()[j];
    } else {
      std::memcpy(static_cast<char*>(values->raw_data()) + size * static_cast<size_t>(k),
                  static_cast<const char*>(raw.raw_data()) + size * static_cast<size_t>(j), size);
    }
  }
  return ok_status();
}

}  // namespace

std::vector<Tensor> example_batch(const FeatureSpecs& spec, int64_t rows, int64_t length) {
  std::vector<Tensor> out;
  for (const auto& [name, s] : spec) {
    if (s.kind == FeatureSpec::Kind::kVarLen || s.kind == FeatureSpec::Kind::kSparse) {
      out.emplace_back();
      continue;
    }
    std::vector<int64_t> dims = {rows};
    if (s.kind == FeatureSpec::Kind::kSequence) dims.push_back(length);
    for (int64_t d : s.shape.dims()) dims.push_back(d);
    out.emplace_back(s.dtype, Shape(dims));
  }
  return out;
}

Result<FeatureSpecs> infer_feature_specs(const std::vector<std::string_view>& records,
                                         const std::string& where, int64_t* most_steps) {
  if (records.empty()) {
    return invalid_argument(where, ": no records to infer the features from; give them");
  }
  struct Seen {
    DType dtype = DType::kInvalid;
    int64_t records = 0, least = INT64_MAX, most = 0;
  };
  std::map<std::string, Seen> seen, lists;  // a context's (an Example's) features; feature lists
  auto see = [&](Seen& s, const tensorflow::Feature& f, const std::string& name, size_t r) {
    const DType kind = kind_of(f);
    if (kind != DType::kInvalid && s.dtype != DType::kInvalid && kind != s.dtype) {
      return invalid_argument(where, ": feature '", name, "' is ", dtype_name(s.dtype),
                              " in one record and ", dtype_name(kind), " in record ", r);
    }
    if (kind != DType::kInvalid) s.dtype = kind;
    s.least = std::min(s.least, count_of(f));
    s.most = std::max(s.most, count_of(f));
    return ok_status();
  };
  *most_steps = 0;
  tensorflow::SequenceExample ex;  // an Example's bytes read as one: its features the context
  for (size_t r = 0; r < records.size(); ++r) {
    if (!ex.ParseFromArray(records[r].data(), static_cast<int>(records[r].size()))) {
      return invalid_argument(where, ": record ", r,
                              " is not a tf.Example or tf.train.SequenceExample");
    }
    for (const auto& [name, f] : ex.context().feature()) {
      TROUPE_RETURN_IF_ERROR(see(seen[name], f, name, r));
      ++seen[name].records;
    }
    for (const auto& [name, list] : ex.feature_lists().feature_list()) {
      if (seen.count(name)) {
        return invalid_argument(where, ": '", name,
                                "' is both a context feature and a feature list");
      }
      for (const tensorflow::Feature& step : list.feature()) {
        TROUPE_RETURN_IF_ERROR(see(lists[name], step, name, r));
      }
      *most_steps = std::max<int64_t>(*most_steps, list.feature_size());
    }
  }
  FeatureSpecs spec;
  for (const auto& [name, s] : seen) {
    const DType dtype = s.dtype == DType::kInvalid ? DType::kFloat32 : s.dtype;
    const bool fixed = s.records == static_cast<int64_t>(records.size()) && s.least == s.most;
    if (!fixed) {
      spec[name] = FeatureSpec{.kind = FeatureSpec::Kind::kVarLen, .dtype = dtype};
    } else {
      spec[name] = FeatureSpec{.dtype = dtype, .shape = s.most == 1 ? Shape{} : Shape{s.most}};
    }
  }
  for (const auto& [name, s] : lists) {
    if (spec.count(name)) {
      return invalid_argument(where, ": '", name, "' is both a context feature and a feature list");
    }
    if (s.least != s.most) {
      return invalid_argument(where, ": feature list '", name, "' has steps of ", s.least,
                              " and of ", s.most,
                              " values; a sequence feature's steps are of one size");
    }
    spec[name] = FeatureSpec{.kind = FeatureSpec::Kind::kSequence,
                             .dtype = s.dtype == DType::kInvalid ? DType::kFloat32 : s.dtype,
                             .shape = s.most == 1 ? Shape{} : Shape{s.most}};
  }
  return spec;
}

Result<std::vector<Tensor>> parse_examples(const std::vector<std::string_view>& serialized,
                                           const FeatureSpecs& spec,
                                           std::map<std::string, SparseTensor>* var_len) {
  for (const auto& [name, s] : spec) {
    TROUPE_RETURN_IF_ERROR(check_feature_spec(name, s));
    if ((s.kind == FeatureSpec::Kind::kVarLen || s.kind == FeatureSpec::Kind::kSparse) &&
        !var_len) {
      return invalid_argument("parse_examples: feature '", name,
                              "' is a sparse tensor, and there is nowhere to put it");
    }
    if (s.kind == FeatureSpec::Kind::kSequence) {
      return invalid_argument("parse_examples: feature '", name,
                              "' is a feature list: parse_sequence_examples reads those");
    }
  }
  std::vector<Tensor> out = example_batch(spec, static_cast<int64_t>(serialized.size()), 0);
  // Each VarLen and kSparse feature's values, example by example; kSparse ones' positions.
  std::map<std::string, std::vector<Tensor>> rows;
  std::map<std::string, std::vector<std::vector<int64_t>>> positions;
  tensorflow::Example ex;
  for (size_t r = 0; r < serialized.size(); ++r) {
    const std::string where = "parse_examples: example " + std::to_string(r);
    if (!ex.ParseFromArray(serialized[r].data(), static_cast<int>(serialized[r].size()))) {
      return invalid_argument(where, " is not a tf.Example");
    }
    TROUPE_RETURN_IF_ERROR(
        fill(ex.features(), nullptr, spec, 0, static_cast<int64_t>(r), &out).with_context(where));
    size_t i = 0;
    for (const auto& [name, s] : spec) {
      if (s.kind == FeatureSpec::Kind::kVarLen) rows[name].push_back(std::move(out[i]));
      if (s.kind == FeatureSpec::Kind::kSparse) {
        Tensor values;
        std::vector<int64_t> at;
        TROUPE_RETURN_IF_ERROR(
            sparse_row(ex.features(), name, s, &values, &at).with_context(where));
        rows[name].push_back(std::move(values));
        positions[name].push_back(std::move(at));
      }
      ++i;
    }
  }
  size_t i = 0;
  for (const auto& [name, s] : spec) {
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      (*var_len)[name] = stack_rows(s.dtype, rows[name]);
      out[i] = Tensor();
    } else if (s.kind == FeatureSpec::Kind::kSparse) {
      (*var_len)[name] = stack_rows(s.dtype, rows[name], &positions[name], s.size);
      out[i] = Tensor();
    }
    ++i;
  }
  return out;
}

Result<std::vector<Tensor>> parse_sequence_examples(
    const std::vector<std::string_view>& serialized, const FeatureSpecs& spec,
    int64_t sequence_length, std::vector<int64_t>* lengths,
    std::map<std::string, std::vector<int64_t>>* list_lengths) {
  if (sequence_length < 0) {
    return invalid_argument("parse_sequence_examples: sequence_length ", sequence_length,
                            " is negative");
  }
  for (const auto& [name, s] : spec) {
    TROUPE_RETURN_IF_ERROR(check_feature_spec(name, s));
    if (s.kind == FeatureSpec::Kind::kVarLen || s.kind == FeatureSpec::Kind::kSparse) {
      return invalid_argument("parse_sequence_examples: feature '", name,
                              "' is a sparse tensor; a Dataset batches those");
    }
  }
  if (sequence_length == 0) {
    // As tf.io.parse_sequence_example pads a batch: to its longest list of the spec's.
    tensorflow::SequenceExample ex;
    for (size_t r = 0; r < serialized.size(); ++r) {
      if (!ex.ParseFromArray(serialized[r].data(), static_cast<int>(serialized[r].size()))) {
        return invalid_argument("parse_sequence_examples: example ", r,
                                " is not a tf.train.SequenceExample");
      }
      for (const auto& [name, list] : ex.feature_lists().feature_list()) {
        auto it = spec.find(name);
        if (it != spec.end() && it->second.kind == FeatureSpec::Kind::kSequence) {
          sequence_length = std::max<int64_t>(sequence_length, list.feature_size());
        }
      }
    }
  }
  std::vector<Tensor> out =
      example_batch(spec, static_cast<int64_t>(serialized.size()), sequence_length);
  if (lengths) lengths->assign(serialized.size(), 0);
  tensorflow::SequenceExample ex;
  for (size_t r = 0; r < serialized.size(); ++r) {
    if (!ex.ParseFromArray(serialized[r].data(), static_cast<int>(serialized[r].size()))) {
      return invalid_argument("parse_sequence_examples: example ", r,
                              " is not a tf.train.SequenceExample");
    }
    TROUPE_RETURN_IF_ERROR(
        fill(ex.context(), &ex.feature_lists(), spec, sequence_length, static_cast<int64_t>(r),
             &out, lengths ? &(*lengths)[r] : nullptr)
            .with_context("parse_sequence_examples: example " + std::to_string(r)));
    if (!list_lengths) continue;
    for (const auto& [name, f] : spec) {
      if (f.kind != FeatureSpec::Kind::kSequence) continue;
      auto it = ex.feature_lists().feature_list().find(name);
      (*list_lengths)[name].push_back(
          it == ex.feature_lists().feature_list().end() ? 0 : it->second.feature_size());
    }
  }
  return out;
}

namespace {

// Element `e` of `t` as a feature's value.
void add_value(const Tensor& t, int64_t e, tensorflow::Feature* f) {
  switch (t.dtype()) {
    case DType::kFloat32:
      f->mutable_float_list()->add_value(t.data<float>()[e]);
      break;
    case DType::kFloat64:
      f->mutable_float_list()->add_value(static_cast<float>(t.data<double>()[e]));
      break;
    case DType::kInt32:
      f->mutable_int64_list()->add_value(t.data<int32_t>()[e]);
      break;
    case DType::kInt64:
      f->mutable_int64_list()->add_value(t.data<int64_t>()[e]);
      break;
    case DType::kUInt8:
      f->mutable_int64_list()->add_value(t.data<uint8_t>()[e]);
      break;
    case DType::kBool:
      f->mutable_int64_list()->add_value(t.data<bool>()[e] ? 1 : 0);
      break;
    case DType::kString:
      f->mutable_bytes_list()->add_value(t.data<std::string>()[e]);
      break;
    default:
      break;
  }
}

}  // namespace

Result<FeatureSpecs> split_sparse_features(const FeatureSpecs& spec) {
  FeatureSpecs out;
  auto put = [&](const std::string& name, const FeatureSpec& f) -> Status {
    auto [it, added] = out.emplace(name, f);
    if (!added && (it->second.kind != f.kind || it->second.dtype != f.dtype)) {
      return invalid_argument("feature '", name, "' is read as ", to_string(it->second), " and as ",
                              to_string(f));
    }
    return ok_status();
  };
  for (const auto& [name, f] : spec) {
    if (f.kind != FeatureSpec::Kind::kSparse) {
      TROUPE_RETURN_IF_ERROR(put(name, f));
      continue;
    }
    TROUPE_RETURN_IF_ERROR(check_feature_spec(name, f));
    TROUPE_RETURN_IF_ERROR(
        put(f.index_key, {.kind = FeatureSpec::Kind::kVarLen, .dtype = DType::kInt64}));
    TROUPE_RETURN_IF_ERROR(
        put(f.value_key, {.kind = FeatureSpec::Kind::kVarLen, .dtype = f.dtype}));
  }
  return out;
}

Status parse_example_into(std::string_view record, const FeatureSpecs& spec,
                          int64_t sequence_length, int64_t row, std::vector<Tensor>* batch,
                          int64_t* steps) {
  // One message a thread, kept: parsing into it again reuses its buffers.
  thread_local tensorflow::SequenceExample ex;
  if (!ex.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    return data_loss("not a tf.Example or tf.train.SequenceExample");
  }
  return fill(ex.context(), &ex.feature_lists(), spec, sequence_length, row, batch, steps);
}

Status encode_example(const std::vector<std::string>& names, const std::vector<Tensor>& columns,
                      int64_t row, std::string* out) {
  tensorflow::Example ex;
  auto* features = ex.mutable_features()->mutable_feature();
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor& t = columns[i];
    switch (t.dtype()) {
      case DType::kFloat32:
      case DType::kFloat64:
      case DType::kInt32:
      case DType::kInt64:
      case DType::kUInt8:
      case DType::kBool:
      case DType::kString:
        break;
      default:
        return invalid_argument("column '", names[i], "': ", dtype_name(t.dtype()),
                                " has no tf.Example kind");
    }
    const int64_t rows = t.rank() > 0 ? t.dim(0) : 1;
    if (row < 0 || row >= rows) {
      return invalid_argument("column '", names[i], "' has no row ", row);
    }
    const int64_t per = rows > 0 ? t.num_elements() / rows : 0;
    tensorflow::Feature& feature = (*features)[names[i]];
    // An empty list keeps its kind, so that a reader sees which one it is.
    if (t.dtype() == DType::kString) {
      feature.mutable_bytes_list();
    } else if (t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat64) {
      feature.mutable_float_list();
    } else {
      feature.mutable_int64_list();
    }
    for (int64_t e = row * per; e < (row + 1) * per; ++e) add_value(t, e, &feature);
  }
  out->clear();
  if (!ex.SerializeToString(out)) return internal_error("cannot serialize a tf.Example");
  return ok_status();
}

}  // namespace troupe::runtime
