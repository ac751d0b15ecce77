// Conv2D and pooling kernels against direct loops, SAME and VALID, strided and dilated;
// _FusedConv2D against the Conv2D -> BiasAdd (-> Relu) chain it stands for, bit for bit;
// depthwise_conv2d against a conv2d per channel.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/conv_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/strided_slice.h"
#include "runtime/gradients.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

struct Geometry {
  int64_t out_h, out_w, pad_top, pad_left;
};

Geometry geometry(int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                  int64_t dw, bool same) {
  auto one = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t* out, int64_t* pad) {
    int64_t span = (k - 1) * d + 1;
    if (same) {
      *out = (in + s - 1) / s;
      *pad = std::max<int64_t>((*out - 1) * s + span - in, 0) / 2;
    } else {
      *out = (in - span) / s + 1;
      *pad = 0;
    }
  };
  Geometry g;
  one(h, kh, sh, dh, &g.out_h, &g.pad_top);
  one(w, kw, sw, dw, &g.out_w, &g.pad_left);
  return g;
}

// SAME and VALID, strided, dilated, and a window as large as the image.
struct ConvCase {
  Shape in, filter;
  int64_t sh, sw, dh, dw;
  bool same;
};
const std::vector<ConvCase> kConvCases = {{{2, 5, 6, 3}, {3, 3, 3, 4}, 1, 1, 1, 1, true},
                                          {{1, 7, 7, 2}, {3, 2, 2, 3}, 2, 3, 1, 1, true},
                                          {{1, 7, 8, 1}, {2, 3, 1, 2}, 1, 2, 2, 1, false},
                                          {{3, 4, 4, 2}, {4, 4, 2, 1}, 1, 1, 1, 1, false}};

}  // namespace

TEST_CASE("conv2d matches a direct loop") {
  std::mt19937_64 rng(21);
  for (const ConvCase& c : kConvCases) {
    INFO("input ", c.in, " filter ", c.filter);
    Tensor x = testing::random_tensor<double>(c.in, rng);
    Tensor w = testing::random_tensor<double>(c.filter, rng);
    OpTest t;
    Tensor y = t.eval(ops::conv2d(t.b, t.feed(x), t.feed(w), {c.sh, c.sw},
                                  c.same ? "SAME" : "VALID", {c.dh, c.dw}));
    const int64_t N = c.in.dim(0), H = c.in.dim(1), W = c.in.dim(2), C = c.in.dim(3);
    const int64_t KH = c.filter.dim(0), KW = c.filter.dim(1), O = c.filter.dim(3);
    Geometry g = geometry(H, W, KH, KW, c.sh, c.sw, c.dh, c.dw, c.same);
    REQUIRE(y.shape() == Shape{N, g.out_h, g.out_w, O});
    std::vector<double> want;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < g.out_h; ++i)
        for (int64_t j = 0; j < g.out_w; ++j)
          for (int64_t o = 0; o < O; ++o) {
            double s = 0;
            for (int64_t ki = 0; ki < KH; ++ki)
              for (int64_t kj = 0; kj < KW; ++kj)
                for (int64_t ch = 0; ch < C; ++ch) {
                  int64_t yy = i * c.sh + ki * c.dh - g.pad_top,
                          xx = j * c.sw + kj * c.dw - g.pad_left;
                  if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                  s += x.data<double>()[((n * H + yy) * W + xx) * C + ch] *
                       w.data<double>()[((ki * KW + kj) * C + ch) * O + o];
                }
            want.push_back(s);
          }
    CHECK_CLOSE_TENSOR(y, want, 1e-12);
  }
  OpTest bad;
  ops::conv2d(bad.b, bad.feed(Tensor(runtime::DType::kFloat32, Shape{1, 4, 4, 3})),
              bad.feed(Tensor(runtime::DType::kFloat32, Shape{2, 2, 2, 1})), {1, 1}, "SAME");
  CHECK(bad.b.status().message().find("3 channels, the filter expects 2") != std::string::npos);
  OpTest bad2;
  ops::conv2d(bad2.b, bad2.feed(Tensor(runtime::DType::kFloat32, Shape{1, 4, 4, 1})),
              bad2.feed(Tensor(runtime::DType::kFloat32, Shape{2, 2, 1, 1})), {1, 1}, "FULL");
  CHECK(bad2.b.status().message().find("SAME or VALID") != std::string::npos);
}

TEST_CASE("_FusedConv2D gives the bits of Conv2D, BiasAdd and Relu run one after another") {
  std::mt19937_64 rng(22);
  for (const ConvCase& c : kConvCases) {
    for (const char* activation : {"", "Relu"}) {
      INFO("input ", c.in, " filter ", c.filter, " activation ", activation);
      OpTest t;
      Output x = t.feed(testing::random_tensor<float>(c.in, rng));
      Output w = t.feed(testing::random_tensor<float>(c.filter, rng));
      Output bias = t.feed(testing::random_tensor<float>(Shape{c.filter.dim(3)}, rng));
      const std::string padding = c.same ? "SAME" : "VALID";
      Output conv = ops::conv2d(t.b, x, w, {c.sh, c.sw}, padding, {c.dh, c.dw});
      Output chain = ops::bias_add(t.b, conv, bias);
      if (*activation) chain = ops::relu(t.b, chain);
      runtime::AttrMap attrs = t.g.node(conv.node).attrs;
      attrs["activation"] = std::string(activation);
      Output fused = t.b.add("_FusedConv2D", {x, w, bias}, attrs);
      auto r = t.run({chain, fused});
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      REQUIRE((*r)[1].shape() == (*r)[0].shape());
      CHECK((*r)[1].to_vector<float>() == (*r)[0].to_vector<float>());
    }
  }
  OpTest t;
  Output x = t.feed(testing::random_tensor<float>(Shape{1, 4, 4, 2}, rng));
  Output w = t.feed(testing::random_tensor<float>(Shape{3, 3, 2, 5}, rng));
  t.b.add("_FusedConv2D", {x, w, t.feed(testing::random_tensor<float>(Shape{4}, rng))});
  REQUIRE(!t.b.ok());
  CHECK(t.b.status().message().find("bias of shape [4] for a product with 5 columns") !=
        std::string::npos);
}

TEST_CASE("max_pool and avg_pool match direct loops (SAME averages only real elements)") {
  std::mt19937_64 rng(22);
  Tensor x = testing::random_tensor<double>(Shape{2, 5, 4, 3}, rng);
  for (bool same : {true, false}) {
    OpTest t;
    Output in = t.feed(x);
    const char* pad = same ? "SAME" : "VALID";
    Tensor mx = t.eval(ops::max_pool(t.b, in, {3, 2}, {2, 2}, pad));
    Tensor av = t.eval(ops::avg_pool(t.b, in, {3, 2}, {2, 2}, pad));
    Geometry g = geometry(5, 4, 3, 2, 2, 2, 1, 1, same);
    REQUIRE(mx.shape() == Shape{2, g.out_h, g.out_w, 3});
    std::vector<double> want_max, want_avg;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < g.out_h; ++i)
        for (int64_t j = 0; j < g.out_w; ++j)
          for (int64_t c = 0; c < 3; ++c) {
            double m = -std::numeric_limits<double>::infinity(), s = 0;
            int count = 0;
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 2; ++kj) {
                int64_t yy = i * 2 + ki - g.pad_top, xx = j * 2 + kj - g.pad_left;
                if (yy < 0 || yy >= 5 || xx < 0 || xx >= 4) continue;
                double v = x.data<double>()[((n * 5 + yy) * 4 + xx) * 3 + c];
                m = std::max(m, v);
                s += v;
                ++count;
              }
            want_max.push_back(m);
            want_avg.push_back(s / count);
          }
    CHECK_CLOSE_TENSOR(mx, want_max, 0);
    CHECK_CLOSE_TENSOR(av, want_avg, 1e-12);
  }
}

TEST_CASE("pool gradients match direct loops: ties go to the first maximum, overlaps add up") {
  std::mt19937_64 rng(23);
  // Values from {0, 1, 2}: most windows hold their maximum more than once.
  Tensor x(runtime::DType::kFloat64, Shape{2, 5, 4, 3});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<double>()[i] = double(rng() % 3);
  for (bool same : {true, false}) {
    const char* pad = same ? "SAME" : "VALID";
    INFO(pad);
    Geometry g = geometry(5, 4, 3, 2, 2, 1, 1, 1, same);  // 3x2 windows, stride 2x1: overlapping
    Tensor w = testing::random_tensor<double>(Shape{2, g.out_h, g.out_w, 3}, rng);
    OpTest t;
    Output in = t.feed(x);
    Output weights = t.feed(w);
    Output max_loss =
        ops::reduce_sum(t.b, ops::mul(t.b, ops::max_pool(t.b, in, {3, 2}, {2, 1}, pad), weights));
    Output avg_loss =
        ops::reduce_sum(t.b, ops::mul(t.b, ops::avg_pool(t.b, in, {3, 2}, {2, 1}, pad), weights));
    Output dmax = runtime::gradients(t.b, {max_loss}, {in})[0];
    Output davg = runtime::gradients(t.b, {avg_loss}, {in})[0];
    auto r = t.run({dmax, davg});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    std::vector<double> want_max(x.num_elements(), 0), want_avg(x.num_elements(), 0);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < g.out_h; ++i)
        for (int64_t j = 0; j < g.out_w; ++j)
          for (int64_t c = 0; c < 3; ++c) {
            const double dy = w.data<double>()[((n * g.out_h + i) * g.out_w + j) * 3 + c];
            std::vector<int64_t> inside;
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 2; ++kj) {
                int64_t yy = i * 2 + ki - g.pad_top, xx = j + kj - g.pad_left;
                if (yy < 0 || yy >= 5 || xx < 0 || xx >= 4) continue;
                inside.push_back(((n * 5 + yy) * 4 + xx) * 3 + c);
              }
            int64_t first_max = inside[0];
            for (int64_t k : inside) {
              if (x.data<double>()[k] > x.data<double>()[first_max]) first_max = k;
              want_avg[k] += dy / double(inside.size());
            }
            want_max[first_max] += dy;
          }
    CHECK_CLOSE_TENSOR((*r)[0], want_max, 0);
    CHECK_CLOSE_TENSOR((*r)[1], want_avg, 1e-12);
  }
}

TEST_CASE("conv2d_transpose is conv2d's adjoint: <conv2d(x, f), y> = <x, conv2d_transpose(y, f)>") {
  std::mt19937_64 rng(5);
  for (const char* padding : {"SAME", "VALID"}) {
    CAPTURE(padding);
    const Shape x_shape{2, 5, 5, 2};
    OpTest t;
    Tensor x = testing::random_tensor<double>(x_shape, rng);
    Tensor f = testing::random_tensor<double>(Shape{3, 3, 2, 4}, rng);
    Output fx = t.feed(x), ff = t.feed(f);
    Output forward = ops::conv2d(t.b, fx, ff, {2, 2}, padding);
    Tensor y_shaped = t.eval(forward);
    Tensor y = testing::random_tensor<double>(y_shaped.shape(), rng);
    Tensor back = t.eval(ops::conv2d_transpose(t.b, t.feed(y), ff, x_shape, {2, 2}, padding));
    REQUIRE(back.shape() == x_shape);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < y.num_elements(); ++i)
      lhs += y_shaped.data<double>()[i] * y.data<double>()[i];
    for (int64_t i = 0; i < x.num_elements(); ++i)
      rhs += x.data<double>()[i] * back.data<double>()[i];
    CHECK(lhs == doctest::Approx(rhs).epsilon(1e-12));
  }
}

TEST_CASE("depthwise_conv2d is a conv2d of each channel with its own filters, channels in order") {
  std::mt19937_64 rng(11);
  struct Case {
    Shape x, f;
    std::array<int64_t, 2> strides, dilations;
    const char* padding;
  };
  for (const Case& c : {Case{{2, 5, 6, 3}, {3, 3, 3, 2}, {1, 1}, {1, 1}, "SAME"},
                        Case{{1, 7, 7, 2}, {2, 3, 2, 3}, {2, 1}, {1, 2}, "VALID"},
                        Case{{1, 4, 4, 4}, {1, 1, 4, 1}, {2, 2}, {1, 1}, "SAME"}}) {
    CAPTURE(c.x);
    OpTest t;
    Output x = t.feed(testing::random_tensor<float>(c.x, rng));
    Output f = t.feed(testing::random_tensor<float>(c.f, rng));
    Output y = ops::depthwise_conv2d(t.b, x, f, c.strides, c.padding, c.dilations);
    const int64_t channels = c.x.dim(3);
    std::vector<Output> per_channel;
    for (int64_t ch = 0; ch < channels; ++ch) {
      Output xc = ops::slice(t.b, x, {0, 0, 0, ch}, {-1, -1, -1, 1});
      Output fc = ops::slice(t.b, f, {0, 0, ch, 0}, {-1, -1, 1, -1});
      per_channel.push_back(ops::conv2d(t.b, xc, fc, c.strides, c.padding, c.dilations));
    }
    Output want = ops::concat(t.b, per_channel, 3);
    CHECK(t.g.shape(y) == t.g.shape(want));
    CHECK_CLOSE_TENSOR(t.eval(y), t.eval(want), 1e-5);
  }
  OpTest bad;
  ops::depthwise_conv2d(bad.b, bad.feed(Tensor(DType::kFloat32, Shape{1, 4, 4, 3})),
                        bad.feed(Tensor(DType::kFloat32, Shape{3, 3, 2, 1})), {1, 1}, "SAME");
  CHECK(bad.b.status().message().find("channels") != std::string::npos);
}
