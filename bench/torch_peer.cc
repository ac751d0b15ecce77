// libtorch peers for the actor bars, in their own binary (torch's headers bring glog, whose CHECK
// would shadow doctest's, and torch's OpenMP threads must not share a process with ours):
//   torch_tiny_mlp_step     10-16-3, batch 8, SGD step, median us (1 thread: its best here)
//   torch_mlp_throughput    784-512-512-10, batch 128, SGD, examples/s (2 threads)
// Run it with OMP_WAIT_POLICY=PASSIVE for the big model and without for the tiny one, each its
// best configuration (DESIGN.md §7); tools/dev bench does.
//
//   torch_peer tiny|big [--json FILE]
#include <torch/torch.h>

#include <string>

#include "bench_util.h"

namespace {

double step_seconds(int64_t in, int64_t hidden1, int64_t hidden2, int64_t out, int64_t batch,
                    bool quick) {
  torch::manual_seed(1);
  torch::nn::Sequential net;
  if (hidden2 > 0) {
    net = torch::nn::Sequential(torch::nn::Linear(in, hidden1), torch::nn::ReLU(),
                                torch::nn::Linear(hidden1, hidden2), torch::nn::ReLU(),
                                torch::nn::Linear(hidden2, out));
  } else {
    net = torch::nn::Sequential(torch::nn::Linear(in, hidden1), torch::nn::ReLU(),
                                torch::nn::Linear(hidden1, out));
  }
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::rand({batch, in});
  auto y = torch::randint(0, out, {batch}, torch::kLong);
  auto step = [&] {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
  };
  return troupe::bench::median_seconds(step, quick ? 3 : 7, quick ? 0.1 : 0.4);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: torch_peer tiny|big [--json FILE] [--quick]\n");
    return 2;
  }
  std::string which = argv[1], json = "bench_torch_" + which + ".json";
  bool quick = false;
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (flag == "--quick") {
      quick = true;
    }
  }
  troupe::bench::Bars bars("torch_peer");
  if (which == "tiny") {
    torch::set_num_threads(1);
    double us = step_seconds(10, 16, 0, 3, 8, quick) * 1e6;
    bars.add("torch_tiny_mlp_step", us, "us", "-", 0, 1);
  } else {
    torch::set_num_threads(2);
    double eps = 128 / step_seconds(784, 512, 512, 10, 128, quick);
    bars.add("torch_mlp_throughput", eps, "examples/s", "-", 0, 1);
  }
  bars.write_json(json);
  return 0;
}
