#include "runtime/device.h"

#include <doctest/doctest.h>

using namespace troupe::runtime;

TEST_CASE("device strings parse as TensorFlow writes them") {
  auto d = DeviceSpec::parse("/job:worker/task:3/device:gpu:1");
  REQUIRE(d.ok());
  CHECK(d->job == "worker");
  CHECK(d->task == 3);
  CHECK(d->has_device);
  CHECK(d->device == DeviceId{DeviceType::kGpu, 1});
  CHECK(d->to_string() == "/job:worker/task:3/device:gpu:1");

  auto partial = DeviceSpec::parse("/job:ps");
  REQUIRE(partial.ok());
  CHECK(partial->task == -1);
  CHECK_FALSE(partial->has_device);

  auto short_form = DeviceSpec::parse("/cpu:0");
  REQUIRE(short_form.ok());
  CHECK(short_form->device.type == DeviceType::kCpu);
  CHECK(DeviceSpec::parse("").ok());
}

TEST_CASE("bad device strings are errors that name them") {
  for (const char* bad : {"job:worker", "/job:", "/task:x", "/device:tpu:0", "/device:cpu",
                          "/nonsense", "/task:99999999999"}) {
    auto d = DeviceSpec::parse(bad);
    CHECK_FALSE(d.ok());
    CHECK(d.status().message().find(bad) != std::string::npos);
  }
}

TEST_CASE("a node's kernel runs on the device its placement names, else the CPU") {
  CHECK(kernel_device("") == DeviceType::kCpu);
  CHECK(kernel_device("/job:ps/task:0") == DeviceType::kCpu);
  CHECK(kernel_device("/job:worker/task:1/device:gpu:1") == DeviceType::kGpu);
  CHECK(kernel_device("/device:CPU:0") == DeviceType::kCpu);
  CHECK(kernel_device("/nonsense") == DeviceType::kCpu);
}
