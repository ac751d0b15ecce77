// Device names and placement strings, as TensorFlow writes them.
//
//   Result<DeviceSpec> d = DeviceSpec::parse("/job:worker/task:0/device:cpu:0");
//   d->job;        // "worker"
//   d->device;     // DeviceId{DeviceType::kCpu, 0}
//   d->to_string();
//   kernel_device("/job:ps/task:0");   // DeviceType::kCpu: no device named
//
// Partial specs ("/job:ps", "/device:gpu:1", "/cpu:0") are allowed; missing parts stay unset.
// Plain values; thread-safe.
#pragma once

#include <string>

#include "runtime/status.h"

namespace troupe::runtime {

enum class DeviceType { kCpu, kGpu };
const char* device_type_name(DeviceType t);

struct DeviceId {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const DeviceId& o) const { return type == o.type && index == o.index; }
  std::string to_string() const;  // "cpu:0"
};

struct DeviceSpec {
  std::string job;  // empty: unset
  int task = -1;    // -1: unset
  bool has_device = false;
  DeviceId device;

  static Result<DeviceSpec> parse(const std::string& spec);
  std::string to_string() const;
};

// The kind of device whose kernel runs a node placed at `placement` (a Node's device string):
// the device it names, else the CPU. The one place that decides; a placement that does not
// parse was refused when the node was added (GraphBuilder), and counts as the CPU here.
DeviceType kernel_device(const std::string& placement);

}  // namespace troupe::runtime
