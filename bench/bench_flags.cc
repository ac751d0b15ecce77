#include "bench/bench_flags.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace troupe::bench {

namespace po = boost::program_options;

Flags::Flags(std::string program, std::string json_default, const char* json_what)
    : json(std::move(json_default)), program_(std::move(program)), options_("options") {
  options_.add_options()("help", "print this and exit")(
      "quick", po::bool_switch(&quick), "fewer and shorter rounds, for a smoke test")(
      "json", po::value<std::string>(&json)->default_value(json)->value_name(json_what),
      "where the figures go, as JSON");
}

void Flags::value(const char* name, std::string* out, const char* what, const char* help) {
  options_.add_options()(name, po::value<std::string>(out)->default_value(*out)->value_name(what),
                         help);
}

void Flags::value(const char* name, int64_t* out, const char* what, const char* help) {
  options_.add_options()(name, po::value<int64_t>(out)->default_value(*out)->value_name(what),
                         help);
}

void Flags::toggle(const char* name, bool* out, const char* help) {
  options_.add_options()(name, po::bool_switch(out), help);
}

void Flags::parse(int argc, char** argv) {
  std::ostringstream usage;
  usage << "usage: " << program_ << " [options]\n" << options_;
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(options_).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "%s: %s\n%s", program_.c_str(), e.what(), usage.str().c_str());
    std::exit(2);
  }
  if (vm.count("help")) {
    std::fputs(usage.str().c_str(), stdout);
    std::exit(0);
  }
}

}  // namespace troupe::bench
