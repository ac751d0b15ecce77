// Categorical id kernels: hashing, bucketizing, vocabulary and identity lookups, hashed crosses
// (ops/feature_ops.h). Each step reads its attrs as built; nothing is cached between steps.
#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/cpu/kernel.h"
#include "runtime/fingerprint.h"

namespace troupe::kernels::cpu {

namespace {

// The batch row of element j of a [batch, ...] input, for errors.
int64_t row_of(const Tensor& t, int64_t j) {
  const int64_t per_row = t.rank() == 0 || t.dim(0) == 0 ? 1 : t.num_elements() / t.dim(0);
  return j / std::max<int64_t>(per_row, 1);
}

uint64_t fingerprint_of(const std::string& s) { return runtime::fingerprint64(s); }
uint64_t fingerprint_of(int64_t v) { return runtime::fingerprint64(std::to_string(v)); }

template <class T>
struct HashBucketKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    const auto n = static_cast<uint64_t>(ctx.attr<int64_t>("num_buckets"));
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, in.shape(), &out));
    const T* v = in.data<T>();
    int64_t* ids = out->data<int64_t>();
    for (int64_t j = 0; j < in.num_elements(); ++j) {
      if constexpr (std::is_same_v<T, std::string>) {
        ids[j] = static_cast<int64_t>(fingerprint_of(v[j]) % n);
      } else {
        ids[j] = static_cast<int64_t>(fingerprint_of(int64_t{v[j]}) % n);
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct BucketizeKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    const auto& bounds = ctx.attr<std::vector<double>>("boundaries");
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, in.shape(), &out));
    const T* x = in.data<T>();
    int64_t* ids = out->data<int64_t>();
    for (int64_t j = 0; j < in.num_elements(); ++j) {
      ids[j] = std::upper_bound(bounds.begin(), bounds.end(), static_cast<double>(x[j])) -
               bounds.begin();
    }
    return runtime::ok_status();
  }
};

template <class T>
struct VocabularyLookupKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    const Tensor& keys = ctx.attr<Tensor>("keys");
    const int64_t* key_ids = ctx.attr<Tensor>("ids").data<int64_t>();
    const int64_t size = keys.num_elements();
    const int64_t oov = ctx.attr<int64_t>("num_oov_buckets");
    const int64_t fallback = ctx.attr<int64_t>("default_value");
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, in.shape(), &out));
    const T* v = in.data<T>();
    const T* begin = keys.data<T>();
    int64_t* ids = out->data<int64_t>();
    for (int64_t j = 0; j < in.num_elements(); ++j) {
      const T* it = std::lower_bound(begin, begin + size, v[j]);
      if (it != begin + size && *it == v[j]) {
        ids[j] = key_ids[it - begin];
      } else if (oov > 0) {
        ids[j] = size + static_cast<int64_t>(fingerprint_of(v[j]) % static_cast<uint64_t>(oov));
      } else if (fallback >= 0) {
        ids[j] = fallback;
      } else {
        return runtime::invalid_argument("column '", ctx.attr<std::string>("column"), "': value '",
                                         v[j], "' in row ", row_of(in, j),
                                         " of the batch is not in its vocabulary of ", size,
                                         " and the column has no out-of-vocabulary buckets");
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct CategoricalIdentityKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    const int64_t n = ctx.attr<int64_t>("num_buckets");
    const int64_t fallback = ctx.attr<int64_t>("default_value");
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, in.shape(), &out));
    const T* v = in.data<T>();
    int64_t* ids = out->data<int64_t>();
    for (int64_t j = 0; j < in.num_elements(); ++j) {
      if (v[j] >= 0 && v[j] < n) {
        ids[j] = v[j];
      } else if (fallback >= 0) {
        ids[j] = fallback;
      } else {
        return runtime::invalid_argument("column '", ctx.attr<std::string>("column"), "': id ",
                                         int64_t(v[j]), " in row ", row_of(in, j),
                                         " of the batch is outside [0, ", n, ")");
      }
    }
    return runtime::ok_status();
  }
};

// Fingerprints of input i as [batch, k_i].
// Each value's fingerprint, and whether it is missing ("" or -1, as TF's feature columns read).
Status fingerprints(const Tensor& in, int64_t batch, std::vector<uint64_t>* out,
                    std::vector<char>* missing) {
  out->resize(in.num_elements());
  missing->resize(in.num_elements());
  for (int64_t j = 0; j < in.num_elements(); ++j) {
    switch (in.dtype()) {
      case DType::kString:
        (*out)[j] = fingerprint_of(in.data<std::string>()[j]);
        (*missing)[j] = in.data<std::string>()[j].empty();
        break;
      case DType::kInt32:
        (*out)[j] = fingerprint_of(int64_t{in.data<int32_t>()[j]});
        (*missing)[j] = in.data<int32_t>()[j] == -1;
        break;
      default:
        (*out)[j] = fingerprint_of(in.data<int64_t>()[j]);
        (*missing)[j] = in.data<int64_t>()[j] == -1;
    }
  }
  if (in.rank() < 1 || in.dim(0) != batch) {
    return runtime::invalid_argument("HashCross: an input of shape ", in.shape(),
                                     " for a batch of ", batch);
  }
  return runtime::ok_status();
}

Status hash_cross(KernelContext& ctx) {
  const int64_t batch = ctx.input(0).rank() > 0 ? ctx.input(0).dim(0) : 0;
  const auto n = static_cast<uint64_t>(ctx.attr<int64_t>("num_buckets"));
  std::vector<std::vector<uint64_t>> prints(ctx.num_inputs());
  std::vector<std::vector<char>> missing(ctx.num_inputs());
  std::vector<int64_t> per_row(ctx.num_inputs());
  int64_t k = 1;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    TROUPE_RETURN_IF_ERROR(fingerprints(ctx.input(i), batch, &prints[i], &missing[i]));
    per_row[i] = batch == 0 ? 0 : ctx.input(i).num_elements() / batch;
    k *= per_row[i];
  }
  Tensor* out;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{batch, k}, &out));
  int64_t* ids = out->data<int64_t>();
  std::vector<int64_t> pick(ctx.num_inputs());
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      // c in mixed radix (per_row), the last input varying fastest.
      int64_t rest = c;
      for (int i = ctx.num_inputs() - 1; i >= 0; --i) {
        pick[i] = rest % per_row[i];
        rest /= per_row[i];
      }
      uint64_t h = prints[0][r * per_row[0] + pick[0]];
      bool absent = missing[0][r * per_row[0] + pick[0]];
      for (int i = 1; i < ctx.num_inputs(); ++i) {
        h = runtime::fingerprint_cat64(h, prints[i][r * per_row[i] + pick[i]]);
        absent = absent || missing[i][r * per_row[i] + pick[i]];
      }
      ids[r * k + c] = absent ? -1 : static_cast<int64_t>(h % n);
    }
  }
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_KERNELS(feature_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<HashBucketKernel, std::string, int32_t, int64_t>("StringToHashBucketFast",
                                                                      kCpu);
  registry.add_typed<BucketizeKernel, float, double, int32_t, int64_t>("Bucketize", kCpu);
  registry.add_typed<VocabularyLookupKernel, std::string, int64_t>("VocabularyLookup", kCpu);
  registry.add_typed<CategoricalIdentityKernel, int32_t, int64_t>("CategoricalIdentity", kCpu);
  registry.add("HashCross", kCpu, DType::kInt64, &hash_cross);
}

}  // namespace troupe::kernels::cpu
