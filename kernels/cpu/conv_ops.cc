// Conv2D (NHWC, HWIO filters) as im2col + GEMM, its two gradients, _FusedConv2D (Conv2D,
// BiasAdd and Relu in one), depthwise convolution and its gradients (direct loops: each output
// channel reads one input channel, so there is no GEMM to hand it to), and max / average
// pooling.
// One image at a time, so the column buffer stays small (out_h * out_w * k_h * k_w * in_c).
#include <limits>
#include <vector>

#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/fused_epilogue.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel.h"
#include "ops/conv_ops.h"

namespace troupe::kernels::cpu {

using ops::ConvGeometry;

namespace {

Status geometry(const KernelContext& ctx, const Tensor& input, const Shape& filter,
                ConvGeometry* g) {
  return ops::conv_geometry_for(ctx.node(), input.shape(), filter, g);
}

// Calls f(out_row, col, in_y, in_x) for each (output position, window tap) whose tap lies inside
// the image; taps in the padding are skipped (they read zeros).
template <class F>
void for_each_tap(const ConvGeometry& g, F&& f) {
  for (int64_t oy = 0; oy < g.out_h; ++oy) {
    for (int64_t ox = 0; ox < g.out_w; ++ox) {
      const int64_t row = oy * g.out_w + ox;
      for (int64_t ky = 0; ky < g.k_h; ++ky) {
        const int64_t iy = oy * g.stride_h + ky * g.dilation_h - g.pad_top;
        if (iy < 0 || iy >= g.in_h) continue;
        for (int64_t kx = 0; kx < g.k_w; ++kx) {
          const int64_t ix = ox * g.stride_w + kx * g.dilation_w - g.pad_left;
          if (ix < 0 || ix >= g.in_w) continue;
          f(row, ky * g.k_w + kx, iy, ix);
        }
      }
    }
  }
}

// col[out_h * out_w, k_h * k_w * in_c] of one image.
template <class T>
void im2col(const ConvGeometry& g, const T* image, T* col) {
  const int64_t taps = g.k_h * g.k_w, c = g.in_c;
  std::fill_n(col, g.out_h * g.out_w * taps * c, T(0));
  for_each_tap(g, [&](int64_t row, int64_t tap, int64_t iy, int64_t ix) {
    std::copy_n(image + (iy * g.in_w + ix) * c, c, col + (row * taps + tap) * c);
  });
}

template <class T>
void col2im(const ConvGeometry& g, const T* col, T* image) {
  const int64_t taps = g.k_h * g.k_w, c = g.in_c;
  for_each_tap(g, [&](int64_t row, int64_t tap, int64_t iy, int64_t ix) {
    T* dst = image + (iy * g.in_w + ix) * c;
    const T* src = col + (row * taps + tap) * c;
    for (int64_t i = 0; i < c; ++i) dst[i] += src[i];
  });
}

// Output 0 = input 0 convolved with filter 1; `epilogue(y, rows, out_c)` runs on each image's
// output [rows, out_c] right after its GEMM, while it is still in cache.
template <class T, class F>
Status conv2d_to_output(KernelContext& ctx, const ConvGeometry& g, F&& epilogue) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  Tensor* y;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{g.batch, g.out_h, g.out_w, g.out_c}, &y));
  const int64_t rows = g.out_h * g.out_w, k = g.k_h * g.k_w * g.in_c;
  std::vector<T> col(rows * k);
  for (int64_t b = 0; b < g.batch; ++b) {
    im2col(g, x.data<T>() + b * g.in_h * g.in_w * g.in_c, col.data());
    T* image = y->data<T>() + b * rows * g.out_c;
    gemm<T>(false, false, rows, g.out_c, k, col.data(), w.data<T>(), image);
    epilogue(image, rows, g.out_c);
  }
  return runtime::ok_status();
}

template <class T>
struct Conv2DKernel {
  static Status compute(KernelContext& ctx) {
    ConvGeometry g;
    TROUPE_RETURN_IF_ERROR(geometry(ctx, ctx.input(0), ctx.input(1).shape(), &g));
    return conv2d_to_output<T>(ctx, g, [](T*, int64_t, int64_t) {});
  }
};

// The bias and the activation go over each image's output in one pass (fused_epilogue.h).
template <class T>
struct FusedConv2DKernel {
  static Status compute(KernelContext& ctx) {
    TROUPE_ASSIGN_OR_RETURN(const bool relu, fused_relu(ctx));
    ConvGeometry g;
    TROUPE_RETURN_IF_ERROR(geometry(ctx, ctx.input(0), ctx.input(1).shape(), &g));
    const Tensor& bias = ctx.input(2);
    TROUPE_RETURN_IF_ERROR(check_bias(bias, g.out_c));
    const T* b = bias.data<T>();
    return conv2d_to_output<T>(
        ctx, g, [&](T* y, int64_t rows, int64_t n) { add_bias_and_activate(y, rows, n, b, relu); });
  }
};

template <class T>
struct Conv2DBackpropInputKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    ConvGeometry g;
    TROUPE_RETURN_IF_ERROR(geometry(ctx, x, w.shape(), &g));
    if (dy.shape() != Shape{g.batch, g.out_h, g.out_w, g.out_c}) {
      return runtime::invalid_argument("dy has shape ", dy.shape(), " for a conv output of [",
                                       g.batch, ",", g.out_h, ",", g.out_w, ",", g.out_c, "]");
    }
    Tensor* dx;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &dx));
    std::fill_n(dx->data<T>(), dx->num_elements(), T(0));
    const int64_t rows = g.out_h * g.out_w, k = g.k_h * g.k_w * g.in_c;
    std::vector<T> col(rows * k);
    for (int64_t b = 0; b < g.batch; ++b) {
      gemm<T>(false, true, rows, k, g.out_c, dy.data<T>() + b * rows * g.out_c, w.data<T>(),
              col.data());
      col2im(g, col.data(), dx->data<T>() + b * g.in_h * g.in_w * g.in_c);
    }
    return runtime::ok_status();
  }
};

template <class T>
struct Conv2DBackpropFilterKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    ConvGeometry g;
    TROUPE_RETURN_IF_ERROR(geometry(ctx, x, w.shape(), &g));
    if (dy.shape() != Shape{g.batch, g.out_h, g.out_w, g.out_c}) {
      return runtime::invalid_argument("dy has shape ", dy.shape(), " for this convolution");
    }
    Tensor* dw;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, w.shape(), &dw));
    std::fill_n(dw->data<T>(), dw->num_elements(), T(0));
    const int64_t rows = g.out_h * g.out_w, k = g.k_h * g.k_w * g.in_c;
    std::vector<T> col(rows * k);
    for (int64_t b = 0; b < g.batch; ++b) {
      im2col(g, x.data<T>() + b * g.in_h * g.in_w * g.in_c, col.data());
      gemm<T>(true, false, k, g.out_c, rows, col.data(), dy.data<T>() + b * rows * g.out_c,
              dw->data<T>(), T(1));
    }
    return runtime::ok_status();
  }
};

// DepthwiseConv2dNative and its two gradients walk the same (image, output position, tap,
// output channel) loop: y += x * w, dx += dy * w, or dw += x * dy. Output channel k = c * m + q
// reads input channel c = k / m and filter[tap, c, q], which is filter element tap * in_c * m + k.
enum class Depthwise { kForward, kInput, kFilter };

template <class T, Depthwise D>
Status depthwise(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  ConvGeometry g;
  TROUPE_RETURN_IF_ERROR(geometry(ctx, x, w.shape(), &g));
  const int64_t m = g.out_c, out_c = g.in_c * m;  // geometry's out_c is the filter's last dim
  const Shape y_shape{g.batch, g.out_h, g.out_w, out_c};
  const T* dy = nullptr;
  if constexpr (D != Depthwise::kForward) {
    if (ctx.input(2).shape() != y_shape) {
      return runtime::invalid_argument("dy has shape ", ctx.input(2).shape(),
                                       " for a depthwise output of ", y_shape);
    }
    dy = ctx.input(2).data<T>();
  }
  Tensor* out;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0,
                                             D == Depthwise::kForward ? y_shape
                                             : D == Depthwise::kInput ? x.shape()
                                                                      : w.shape(),
                                             &out));
  T* o = out->data<T>();
  std::fill_n(o, out->num_elements(), T(0));
  const T* xs = x.data<T>();
  const T* ws = w.data<T>();
  for (int64_t b = 0; b < g.batch; ++b) {
    const int64_t image = b * g.in_h * g.in_w * g.in_c, outputs = b * g.out_h * g.out_w * out_c;
    for_each_tap(g, [&](int64_t row, int64_t tap, int64_t iy, int64_t ix) {
      const int64_t xi = image + (iy * g.in_w + ix) * g.in_c, yi = outputs + row * out_c,
                    wi = tap * out_c;
      for (int64_t k = 0; k < out_c; ++k) {
        const int64_t c = k / m;
        if constexpr (D == Depthwise::kForward) {
          o[yi + k] += xs[xi + c] * ws[wi + k];
        } else if constexpr (D == Depthwise::kInput) {
          o[xi + c] += dy[yi + k] * ws[wi + k];
        } else {
          o[wi + k] += xs[xi + c] * dy[yi + k];
        }
      }
    });
  }
  return runtime::ok_status();
}

template <class T>
struct DepthwiseKernel {
  static Status compute(KernelContext& ctx) { return depthwise<T, Depthwise::kForward>(ctx); }
};
template <class T>
struct DepthwiseBackpropInputKernel {
  static Status compute(KernelContext& ctx) { return depthwise<T, Depthwise::kInput>(ctx); }
};
template <class T>
struct DepthwiseBackpropFilterKernel {
  static Status compute(KernelContext& ctx) { return depthwise<T, Depthwise::kFilter>(ctx); }
};

// Calls f(out_index, in_index) for each input position inside window (b, oy, ox, c); returns
// nothing. Pools use the same geometry as convolutions, with channels kept.
template <class F>
void for_each_window(const ConvGeometry& g, F&& f) {
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const int64_t y0 = oy * g.stride_h - g.pad_top, x0 = ox * g.stride_w - g.pad_left;
        const int64_t y1 = std::min(y0 + g.k_h, g.in_h), x1 = std::min(x0 + g.k_w, g.in_w);
        const int64_t out_base = ((b * g.out_h + oy) * g.out_w + ox) * g.in_c;
        f(out_base, b, std::max<int64_t>(y0, 0), y1, std::max<int64_t>(x0, 0), x1);
      }
    }
  }
}

template <class T, bool kMax>
Status pool_forward(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ConvGeometry g;
  TROUPE_RETURN_IF_ERROR(geometry(ctx, x, Shape{}, &g));
  Tensor* y;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{g.batch, g.out_h, g.out_w, g.in_c}, &y));
  const T* in = x.data<T>();
  const int64_t channels = g.in_c;
  // Channels innermost: each window position is a contiguous run of them, so the loops over
  // channels vectorise. Each output still folds its window in the same order.
  for_each_window(g, [&](int64_t ob, int64_t b, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
    T* out = y->data<T>() + ob;
    std::fill_n(out, channels, kMax ? std::numeric_limits<T>::lowest() : T(0));
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = x0; ix < x1; ++ix) {
        const T* v = in + ((b * g.in_h + iy) * g.in_w + ix) * channels;
        for (int64_t c = 0; c < channels; ++c)
          out[c] = kMax ? std::max(out[c], v[c]) : out[c] + v[c];
      }
    }
    if (!kMax) {
      const int64_t count = (y1 - y0) * (x1 - x0);
      for (int64_t c = 0; c < channels; ++c) out[c] = count > 0 ? out[c] / T(count) : T(0);
    }
  });
  return runtime::ok_status();
}

template <class T>
struct MaxPoolKernel {
  static Status compute(KernelContext& ctx) { return pool_forward<T, true>(ctx); }
};
template <class T>
struct AvgPoolKernel {
  static Status compute(KernelContext& ctx) { return pool_forward<T, false>(ctx); }
};

template <class T>
struct MaxPoolGradKernel {  // (input, y, dy): dy goes to the first maximum of each window
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(2);
    ConvGeometry g;
    TROUPE_RETURN_IF_ERROR(geometry(ctx, x, Shape{}, &g));
    if (dy.shape() != Shape{g.batch, g.out_h, g.out_w, g.in_c}) {
      return runtime::invalid_argument("dy has shape ", dy.shape(), " for this pooling");
    }
    Tensor* dx;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &dx));
    T* d = dx->data<T>();
    std::fill_n(d, dx->num_elements(), T(0));
    const T* in = x.data<T>();
    const int64_t channels = g.in_c;
    // Per channel, the first position holding the window's maximum, found channels innermost.
    std::vector<T> best(channels);
    std::vector<int64_t> at(channels);
    for_each_window(g, [&](int64_t ob, int64_t b, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
      if (y0 >= y1 || x0 >= x1) return;
      const int64_t first = ((b * g.in_h + y0) * g.in_w + x0) * channels;
      for (int64_t c = 0; c < channels; ++c) {
        best[c] = in[first + c];
        at[c] = first + c;
      }
      for (int64_t iy = y0; iy < y1; ++iy) {
        for (int64_t ix = iy == y0 ? x0 + 1 : x0; ix < x1; ++ix) {
          const int64_t pos = ((b * g.in_h + iy) * g.in_w + ix) * channels;
          const T* v = in + pos;
          for (int64_t c = 0; c < channels; ++c) {  // selects, not branches: it vectorises
            const bool later_max = v[c] > best[c];
            best[c] = later_max ? v[c] : best[c];
            at[c] = later_max ? pos + c : at[c];
          }
        }
      }
      for (int64_t c = 0; c < channels; ++c) d[at[c]] += dy.data<T>()[ob + c];
    });
    return runtime::ok_status();
  }
};

template <class T>
struct AvgPoolGradKernel {  // (input, dy)
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    ConvGeometry g;
    TROUPE_RETURN_IF_ERROR(geometry(ctx, x, Shape{}, &g));
    if (dy.shape() != Shape{g.batch, g.out_h, g.out_w, g.in_c}) {
      return runtime::invalid_argument("dy has shape ", dy.shape(), " for this pooling");
    }
    Tensor* dx;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &dx));
    std::fill_n(dx->data<T>(), dx->num_elements(), T(0));
    T* d = dx->data<T>();
    const int64_t channels = g.in_c;
    std::vector<T> share(channels);
    for_each_window(g, [&](int64_t ob, int64_t b, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
      const int64_t count = (y1 - y0) * (x1 - x0);
      if (count <= 0) return;
      for (int64_t c = 0; c < channels; ++c) share[c] = dy.data<T>()[ob + c] / T(count);
      for (int64_t iy = y0; iy < y1; ++iy) {
        for (int64_t ix = x0; ix < x1; ++ix) {
          T* to = d + ((b * g.in_h + iy) * g.in_w + ix) * channels;
          for (int64_t c = 0; c < channels; ++c) to[c] += share[c];
        }
      }
    });
    return runtime::ok_status();
  }
};

}  // namespace

TROUPE_REGISTER_KERNELS(conv_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<Conv2DKernel, float, double>("Conv2D", kCpu);
  registry.add_typed<FusedConv2DKernel, float, double>("_FusedConv2D", kCpu);
  registry.add_typed<Conv2DBackpropInputKernel, float, double>("Conv2DBackpropInput", kCpu);
  registry.add_typed<Conv2DBackpropFilterKernel, float, double>("Conv2DBackpropFilter", kCpu);
  registry.add_typed<DepthwiseKernel, float, double>("DepthwiseConv2dNative", kCpu);
  registry.add_typed<DepthwiseBackpropInputKernel, float, double>(
      "DepthwiseConv2dNativeBackpropInput", kCpu);
  registry.add_typed<DepthwiseBackpropFilterKernel, float, double>(
      "DepthwiseConv2dNativeBackpropFilter", kCpu);
  registry.add_typed<MaxPoolKernel, float, double>("MaxPool", kCpu);
  registry.add_typed<MaxPoolGradKernel, float, double>("MaxPoolGrad", kCpu);
  registry.add_typed<AvgPoolKernel, float, double>("AvgPool", kCpu);
  registry.add_typed<AvgPoolGradKernel, float, double>("AvgPoolGrad", kCpu);
}

}  // namespace troupe::kernels::cpu
