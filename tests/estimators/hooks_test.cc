// The periodic hooks act as their timer says: a checkpoint saver asks for a sync point once a
// period has passed since the session started (resumed or not), saves there, not twice at one step,
// and once more at the end; stop_at_step counts from the session's start.
#include "estimators/hooks.h"

#include <doctest/doctest.h>

#include "harness/temp_dir.h"

using namespace troupe;
using namespace troupe::estimators;

namespace {

bool asks_sync(SessionRunHook& hook, int64_t step) {
  std::vector<runtime::Tensor> none;
  StepContext c(step, none, 0);
  REQUIRE(hook.after_run(c).ok());
  return c.sync_requested();
}

}  // namespace

TEST_CASE("checkpoint_saver_hook saves every N steps from the step it resumed at, and at the end") {
  const std::string dir = testing::temp_dir("saver_hook");
  runtime::CheckpointManager manager(dir);
  runtime::VariableStore vars;
  vars.assign("w", runtime::Tensor::scalar<float>(1));
  std::vector<int64_t> saved;
  auto hook = checkpoint_saver_hook(
      &manager, 5, 0, {{nullptr, [&](int64_t s, const std::string&) { saved.push_back(s); }}});
  HookContext at_start{7, vars, dir};
  REQUIRE(hook->after_create_session(at_start).ok());
  CHECK(hook->next_sync_step(7) == 12);
  CHECK(!asks_sync(*hook, 8));
  CHECK(!asks_sync(*hook, 11));
  CHECK(asks_sync(*hook, 12));
  HookContext early{10, vars, dir};
  REQUIRE(hook->at_sync(early).ok());  // another hook's sync point, before a period passed
  CHECK(saved.empty());
  HookContext at_12{12, vars, dir};
  REQUIRE(hook->at_sync(at_12).ok());
  REQUIRE(hook->at_sync(at_12).ok());  // a second sync point at the same step saves nothing
  CHECK(saved == std::vector<int64_t>{12});
  CHECK(hook->next_sync_step(12) == 17);
  HookContext at_end{14, vars, dir};
  REQUIRE(hook->end(at_end).ok());
  CHECK(saved == std::vector<int64_t>{12, 14});
  CHECK(manager.all().size() == 2);
}

TEST_CASE("stop_at_step_hook counts num_steps from the session's start") {
  runtime::VariableStore vars;
  const std::string dir;
  auto hook = stop_at_step_hook(3, 0);
  HookContext start{10, vars, dir};
  REQUIRE(hook->after_create_session(start).ok());
  CHECK(hook->stop_step() == 13);
  std::vector<runtime::Tensor> none;
  StepContext before(12, none, 0);
  REQUIRE(hook->after_run(before).ok());
  CHECK(!before.stop_requested());
  StepContext last(13, none, 0);
  REQUIRE(hook->after_run(last).ok());
  CHECK(last.stop_requested());
}
