// Softmax and log-softmax kernels: a row gets the same bits alone as anywhere in a batch, which
// a server that batches requests promises (estimators/export/batcher.h).
#include <doctest/doctest.h>

#include <cstring>

#include "harness/op_harness.h"
#include "ops/nn_ops.h"

using namespace troupe;
using runtime::Shape;
using runtime::Tensor;
using testing::OpTest;
using testing::random_tensor;

TEST_CASE("softmax and log-softmax give a row the bits it gets alone, at every place in a batch") {
  std::mt19937_64 rng(3);
  for (int64_t classes : {3, 10, 17, 40}) {
    CAPTURE(classes);
    const Tensor x = random_tensor<float>(Shape{1, classes}, rng);
    for (bool log : {false, true}) {
      auto apply = [&](const Tensor& in) {
        OpTest t;
        return t.eval(log ? ops::log_softmax(t.b, t.feed(in)) : ops::softmax(t.b, t.feed(in)));
      };
      const Tensor alone = apply(x);
      // Rows at every offset modulo a packet's 16 floats.
      for (int64_t at = 0; at < 17; ++at) {
        Tensor batch = random_tensor<float>(Shape{17, classes}, rng);
        std::memcpy(batch.data<float>() + at * classes, x.data<float>(), classes * 4);
        const Tensor got = apply(batch);
        CHECK_MESSAGE(
            std::memcmp(got.data<float>() + at * classes, alone.data<float>(), classes * 4) == 0,
            "row ", at, log ? " of log_softmax" : " of softmax");
      }
    }
  }
}
