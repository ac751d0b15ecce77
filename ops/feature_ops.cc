#include "ops/feature_ops.h"

#include <algorithm>

#include "ops/op_def_names.h"
#include "runtime/op_registry.h"

namespace troupe::ops {

namespace {

Status positive_buckets(InferenceContext& c, const char* attr) {
  if (c.attr<int64_t>(attr) < 1)
    return c.error(attr, " must be positive, got ", c.attr<int64_t>(attr));
  return runtime::ok_status();
}

bool is_id_dtype(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

}  // namespace

TROUPE_REGISTER_OP(StringToHashBucketFast)
    .input("strings")
    .output("ids")
    .required_attr<int64_t>("num_buckets")
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      if (c.input_dtype(0) != DType::kString && !is_id_dtype(c.input_dtype(0))) {
        return c.error("needs strings or integers, got ", runtime::dtype_name(c.input_dtype(0)));
      }
      TROUPE_RETURN_IF_ERROR(positive_buckets(c, "num_buckets"));
      c.set_output(0, DType::kInt64, c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "ids = fingerprint64(strings) % num_buckets (runtime/fingerprint.h); integers hash "
        "by their decimal text, as TF's hash bucket column of ints");

TROUPE_REGISTER_OP(Bucketize)
    .input("x")
    .output("ids")
    .attr("boundaries", std::vector<double>{})
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      if (!runtime::is_numeric(c.input_dtype(0))) {
        return c.error("needs numbers, got ", runtime::dtype_name(c.input_dtype(0)));
      }
      const auto& bounds = c.attr<std::vector<double>>("boundaries");
      for (size_t i = 1; i < bounds.size(); ++i) {
        if (!(bounds[i - 1] < bounds[i])) return c.error("boundaries must be ascending");
      }
      c.set_output(0, DType::kInt64, c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("ids = the number of boundaries <= x (x < boundaries[0] is bucket 0)");

// The builder sorts the vocabulary once (keys) and keeps each key's position (ids), so that a
// step looks values up by binary search with nothing to build.
TROUPE_REGISTER_OP(VocabularyLookup)
    .input("values")
    .output("ids")
    .required_attr<Tensor>("keys")
    .required_attr<Tensor>("ids")
    .attr("num_oov_buckets", int64_t{0})
    .attr("default_value", int64_t{-1})
    .attr("column", std::string())
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      const Tensor& keys = c.attr<Tensor>("keys");
      const Tensor& ids = c.attr<Tensor>("ids");
      const std::string& column = c.attr<std::string>("column");
      if (c.input_dtype(0) != DType::kString && c.input_dtype(0) != DType::kInt64) {
        return c.error("column '", column, "': needs strings or int64, got ",
                       runtime::dtype_name(c.input_dtype(0)));
      }
      if (!keys.valid() || keys.dtype() != c.input_dtype(0) || keys.rank() != 1 || !ids.valid() ||
          ids.dtype() != DType::kInt64 || ids.shape() != keys.shape()) {
        return c.error("column '", column, "': the vocabulary must be a list of ",
                       runtime::dtype_name(c.input_dtype(0)), " with an int64 id each");
      }
      if (c.attr<int64_t>("num_oov_buckets") < 0) return c.error("negative num_oov_buckets");
      c.set_output(0, DType::kInt64, c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "ids = position in the vocabulary; others vocabulary size + fingerprint % "
        "num_oov_buckets, or default_value, or an error naming the column");

TROUPE_REGISTER_OP(CategoricalIdentity)
    .input("values")
    .output("ids")
    .required_attr<int64_t>("num_buckets")
    .attr("default_value", int64_t{-1})
    .attr("column", std::string())
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      if (!is_id_dtype(c.input_dtype(0))) {
        return c.error("column '", c.attr<std::string>("column"), "': needs integers, got ",
                       runtime::dtype_name(c.input_dtype(0)));
      }
      TROUPE_RETURN_IF_ERROR(positive_buckets(c, "num_buckets"));
      if (c.attr<int64_t>("default_value") >= c.attr<int64_t>("num_buckets")) {
        return c.error("default_value outside [0, num_buckets)");
      }
      c.set_output(0, DType::kInt64, c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("ids = values in [0, num_buckets); others default_value, or an error naming the column");

TROUPE_REGISTER_OP(HashCross)
    .variadic_input("inputs", 2)
    .output("ids")
    .required_attr<int64_t>("num_buckets")
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(positive_buckets(c, "num_buckets"));
      int64_t batch = -1, k = 1;
      for (int i = 0; i < c.num_inputs(); ++i) {
        DType t = c.input_dtype(i);
        if (t != DType::kString && !is_id_dtype(t)) {
          return c.error("input ", i, " must be strings or integers, got ", runtime::dtype_name(t));
        }
        const Shape& s = c.input_shape(i);
        if (!s.rank_known() || s.rank() < 1 || s.rank() > 2) {
          return c.error("input ", i, " must be [batch] or [batch, k], got ", s);
        }
        if (s.dim(0) >= 0) {
          if (batch >= 0 && batch != s.dim(0)) return c.error("inputs of different batch sizes");
          batch = s.dim(0);
        }
        const int64_t ki = s.rank() == 2 ? s.dim(1) : 1;
        k = (k < 0 || ki < 0) ? -1 : k * ki;
      }
      c.set_output(0, DType::kInt64, Shape{batch, k});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "ids[n] = fingerprint_cat64 over one value of each input, for every combination, % n; "
        "-1 where a value is missing (\"\" or -1)");

Output string_to_hash_bucket(GraphBuilder& b, Output strings, int64_t num_buckets,
                             const std::string& name) {
  return b.add("StringToHashBucketFast", {strings}, {{"num_buckets", num_buckets}}, name);
}

Output bucketize(GraphBuilder& b, Output x, const std::vector<double>& boundaries,
                 const std::string& name) {
  return b.add("Bucketize", {x}, {{"boundaries", boundaries}}, name);
}

namespace {

template <class T>
Status sorted_vocabulary(const Tensor& vocabulary, const std::string& column, Tensor* keys,
                         Tensor* ids) {
  const int64_t n = vocabulary.num_elements();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  const T* v = vocabulary.data<T>();
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[a] < v[b]; });
  *keys = Tensor(vocabulary.dtype(), Shape{n});
  *ids = Tensor(DType::kInt64, Shape{n});
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0 && v[order[i]] == v[order[i - 1]]) {
      return runtime::invalid_argument("column '", column, "': the vocabulary holds ", v[order[i]],
                                       " twice");
    }
    keys->data<T>()[i] = v[order[i]];
    ids->data<int64_t>()[i] = order[i];
  }
  return runtime::ok_status();
}

}  // namespace

Output vocabulary_lookup(GraphBuilder& b, Output values, const Tensor& vocabulary,
                         int64_t num_oov_buckets, const std::string& column,
                         int64_t default_value) {
  Tensor keys, ids;
  Status s = runtime::invalid_argument("column '", column,
                                       "': the vocabulary must be a list of strings or int64");
  if (vocabulary.valid() && vocabulary.rank() == 1 && vocabulary.dtype() == DType::kString) {
    s = sorted_vocabulary<std::string>(vocabulary, column, &keys, &ids);
  } else if (vocabulary.valid() && vocabulary.rank() == 1 && vocabulary.dtype() == DType::kInt64) {
    s = sorted_vocabulary<int64_t>(vocabulary, column, &keys, &ids);
  }
  if (!s.ok()) {
    b.record_error(s);
    return Output{};
  }
  return b.add("VocabularyLookup", {values},
               {{"keys", keys},
                {"ids", ids},
                {"num_oov_buckets", num_oov_buckets},
                {"default_value", default_value},
                {"column", column}});
}

Output categorical_identity(GraphBuilder& b, Output values, int64_t num_buckets,
                            const std::string& column, int64_t default_value) {
  return b.add(
      "CategoricalIdentity", {values},
      {{"num_buckets", num_buckets}, {"default_value", default_value}, {"column", column}});
}

Output hash_cross(GraphBuilder& b, const std::vector<Output>& inputs, int64_t num_buckets,
                  const std::string& name) {
  return b.add("HashCross", inputs, {{"num_buckets", num_buckets}}, name);
}

}  // namespace troupe::ops
