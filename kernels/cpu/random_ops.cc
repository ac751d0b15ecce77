#include "kernels/cpu/kernel.h"
// Random kernels. Each execution of a node draws from its own stream, seeded by (seed, seed2,
// invocation): a seeded graph repeats exactly across runs and processes, and each step still gets
// fresh values. seed == seed2 == 0 means unseeded (std::random_device).
#include <cmath>
#include <random>
#include <vector>

namespace troupe::kernels::cpu {

namespace {

std::mt19937_64 stream_for(const KernelContext& ctx) {
  int64_t seed = ctx.attr<int64_t>("seed"), seed2 = ctx.attr<int64_t>("seed2");
  if (seed == 0 && seed2 == 0) {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }
  uint64_t n = ctx.invocation();
  std::seed_seq seq{uint32_t(seed),  uint32_t(uint64_t(seed) >> 32),
                    uint32_t(seed2), uint32_t(uint64_t(seed2) >> 32),
                    uint32_t(n),     uint32_t(n >> 32)};
  return std::mt19937_64(seq);
}

// Uniform in [0, 1) with the full mantissa of T.
template <class T>
T uniform(std::mt19937_64& g) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(g() >> 40) * 0x1.0p-24f;
  } else {
    return static_cast<double>(g() >> 11) * 0x1.0p-53;
  }
}

// Standard normal by Box-Muller; `spare` holds the second value of each pair.
template <class T>
T normal(std::mt19937_64& g, bool* has_spare, T* spare) {
  if (*has_spare) {
    *has_spare = false;
    return *spare;
  }
  T u1 = uniform<T>(g), u2 = uniform<T>(g);
  T r = std::sqrt(T(-2) * std::log(T(1) - u1));  // 1 - u1 is in (0, 1]
  T theta = T(2 * M_PI) * u2;
  *spare = r * std::sin(theta);
  *has_spare = true;
  return r * std::cos(theta);
}

enum class Dist { kUniform, kNormal, kTruncated };

template <Dist D>
struct RandomKernel {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      Shape shape = ctx.num_inputs() > 0 ? ctx.input(0).shape() : ctx.attr<Shape>("shape");
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &y));
      std::mt19937_64 g = stream_for(ctx);
      bool has_spare = false;
      T spare = 0;
      T* out = y->data<T>();
      for (int64_t i = 0; i < y->num_elements(); ++i) {
        if constexpr (D == Dist::kUniform) {
          out[i] = uniform<T>(g);
        } else if constexpr (D == Dist::kNormal) {
          out[i] = normal<T>(g, &has_spare, &spare);
        } else {
          T v;
          do {
            v = normal<T>(g, &has_spare, &spare);
          } while (std::abs(v) > T(2));
          out[i] = v;
        }
      }
      return runtime::ok_status();
    }
  };
};

// LogUniform- and UniformCandidateSampler (ops/candidate_sampling.h): draws from the op's
// stream, and the expected count of a class with probability p in the draws, as TF's
// RangeSampler: num_sampled * p, or with unique draws after `tries` tries, 1 - (1 - p)^tries.
template <bool kLogUniform>
Status candidate_sampler(KernelContext& ctx) {
  const int64_t num_sampled = ctx.attr<int64_t>("num_sampled");
  const int64_t range_max = ctx.attr<int64_t>("range_max");
  const bool unique = ctx.attr<bool>("unique");
  const Tensor& labels = ctx.input(0);
  const double log_range = std::log1p(static_cast<double>(range_max));
  auto probability = [&](int64_t k) {
    if (k < 0 || k >= range_max) return 0.0;
    if constexpr (kLogUniform) {
      return (std::log(static_cast<double>(k) + 2) - std::log(static_cast<double>(k) + 1)) /
             log_range;
    }
    return 1.0 / static_cast<double>(range_max);
  };
  std::mt19937_64 g = stream_for(ctx);
  auto draw = [&]() -> int64_t {
    const double u = uniform<double>(g);
    int64_t k;
    if constexpr (kLogUniform) {
      k = static_cast<int64_t>(std::exp(u * log_range)) - 1;
    } else {
      k = static_cast<int64_t>(u * static_cast<double>(range_max));
    }
    return std::min(std::max<int64_t>(k, 0), range_max - 1);
  };
  Tensor* sampled;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{num_sampled}, &sampled));
  int64_t* out = sampled->data<int64_t>();
  int64_t tries = 0;
  if (unique) {
    std::vector<bool> seen(static_cast<size_t>(range_max), false);
    for (int64_t n = 0; n < num_sampled; ++tries) {
      const int64_t k = draw();
      if (seen[static_cast<size_t>(k)]) continue;
      seen[static_cast<size_t>(k)] = true;
      out[n++] = k;
    }
  } else {
    for (int64_t n = 0; n < num_sampled; ++n) out[n] = draw();
  }
  auto expected = [&](int64_t k) {
    const double p = probability(k);
    if (!unique) return static_cast<float>(p * static_cast<double>(num_sampled));
    return static_cast<float>(-std::expm1(static_cast<double>(tries) * std::log1p(-p)));
  };
  Tensor* true_count;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(1, labels.shape(), &true_count));
  for (int64_t i = 0; i < labels.num_elements(); ++i) {
    true_count->data<float>()[i] = expected(labels.data<int64_t>()[i]);
  }
  Tensor* sampled_count;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(2, Shape{num_sampled}, &sampled_count));
  for (int64_t n = 0; n < num_sampled; ++n) sampled_count->data<float>()[n] = expected(out[n]);
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_KERNELS(random_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<RandomKernel<Dist::kUniform>::Kernel, float, double>("RandomUniform", kCpu);
  registry.add_typed<RandomKernel<Dist::kNormal>::Kernel, float, double>("RandomNormal", kCpu);
  registry.add_typed<RandomKernel<Dist::kTruncated>::Kernel, float, double>("TruncatedNormal",
                                                                            kCpu);
  registry.add("LogUniformCandidateSampler", kCpu, DType::kInt64, &candidate_sampler<true>);
  registry.add("UniformCandidateSampler", kCpu, DType::kInt64, &candidate_sampler<false>);
}

}  // namespace troupe::kernels::cpu
