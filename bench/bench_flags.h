// The command line of a benchmark, through Boost.Program_options: every benchmark takes
// --quick (fewer and shorter rounds) and --json (where its figures go), and adds its own flags.
// A flag it does not know, a flag without its value or a stray argument prints what is wrong
// and the usage and exits with 2; --help prints the usage and exits with 0.
//
//   bench::Flags flags("canned_bench", "canned.json");
//   std::string only;
//   flags.value("only", &only, "MODEL", "run this model alone");
//   flags.parse(argc, argv);                 // may exit
//   if (flags.quick) ...;  write to flags.json
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <string>

namespace troupe::bench {

class Flags {
 public:
  // `json`: the default of --json; `json_what` names its value in the usage (FILE, DIR).
  Flags(std::string program, std::string json, const char* json_what = "FILE");

  // --NAME VALUE into *out, whose value is the default.
  void value(const char* name, std::string* out, const char* what, const char* help);
  void value(const char* name, int64_t* out, const char* what, const char* help);
  // --NAME sets *out.
  void toggle(const char* name, bool* out, const char* help);
  void parse(int argc, char** argv);

  bool quick = false;
  std::string json;

 private:
  std::string program_;
  boost::program_options::options_description options_;
};

}  // namespace troupe::bench
