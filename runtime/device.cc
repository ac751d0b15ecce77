#include "runtime/device.h"

#include <cctype>
#include <sstream>
#include <vector>

namespace troupe::runtime {

const char* device_type_name(DeviceType t) { return t == DeviceType::kGpu ? "gpu" : "cpu"; }

std::string DeviceId::to_string() const {
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

namespace {

bool parse_int(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *out = std::stoi(s);
  return true;
}

bool parse_device(const std::string& type, const std::string& index, DeviceId* out) {
  std::string t;
  for (char c : type) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "cpu") {
    out->type = DeviceType::kCpu;
  } else if (t == "gpu" || t == "cuda") {
    out->type = DeviceType::kGpu;
  } else {
    return false;
  }
  return parse_int(index, &out->index);
}

}  // namespace

Result<DeviceSpec> DeviceSpec::parse(const std::string& spec) {
  DeviceSpec d;
  if (spec.empty()) return d;
  auto bad = [&](const std::string& why) {
    return invalid_argument("device string '", spec, "': ", why,
                            " (expected e.g. /job:worker/task:0/device:cpu:0)");
  };
  if (spec[0] != '/') return bad("must start with '/'");
  std::vector<std::string> parts;
  std::stringstream ss(spec.substr(1));
  for (std::string p; std::getline(ss, p, '/');) parts.push_back(p);
  for (const std::string& p : parts) {
    auto colon = p.find(':');
    if (colon == std::string::npos) return bad("part '" + p + "' has no ':'");
    std::string key = p.substr(0, colon), value = p.substr(colon + 1);
    if (key == "job") {
      if (value.empty()) return bad("empty job name");
      d.job = value;
    } else if (key == "task" || key == "replica") {
      int t;
      if (!parse_int(value, &t)) return bad("task '" + value + "' is not a number");
      if (key == "task") d.task = t;
    } else if (key == "device") {
      auto c2 = value.find(':');
      if (c2 == std::string::npos ||
          !parse_device(value.substr(0, c2), value.substr(c2 + 1), &d.device)) {
        return bad("unknown device '" + value + "'");
      }
      d.has_device = true;
    } else if (parse_device(key, value, &d.device)) {  // short form "/cpu:0"
      d.has_device = true;
    } else {
      return bad("unknown part '" + p + "'");
    }
  }
  return d;
}

std::string DeviceSpec::to_string() const {
  std::string s;
  if (!job.empty()) s += "/job:" + job;
  if (task >= 0) s += "/task:" + std::to_string(task);
  if (has_device) s += "/device:" + device.to_string();
  return s;
}

DeviceType kernel_device(const std::string& placement) {
  if (placement.empty()) return DeviceType::kCpu;
  Result<DeviceSpec> spec = DeviceSpec::parse(placement);
  return spec.ok() && spec->has_device ? spec->device.type : DeviceType::kCpu;
}

}  // namespace troupe::runtime
