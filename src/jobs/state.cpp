// A job's states and the transitions between them (jobs.h).
#include <fmt/format.h>

#include <array>

#include "jobs/jobs.h"

namespace gp::jobs {

namespace {

constexpr std::array<std::string_view, 9> kEventNames = {"placed",       "started",   "exited",
                                                         "start_failed", "node_lost", "deadline",
                                                         "cancel",       "preempt",   "evicted"};

}  // namespace

std::string_view state_name(State s) { return kJobStateNames[static_cast<size_t>(s)]; }

std::optional<State> parse_state(std::string_view s) {
  for (size_t i = 0; i < kJobStateNames.size(); ++i)
    if (kJobStateNames[i] == s) return static_cast<State>(i);
  return std::nullopt;
}

std::string_view failure_name(Failure f) { return kFailureNames[static_cast<size_t>(f)]; }

Result<Transition> next_state(State from, const Event& e, const JobSpec& spec, int attempts) {
  auto refuse = [&] {
    return fail(Error::conflict(
        fmt::format("a {} job does not take the event {}", state_name(from), kEventNames[e.kind])));
  };
  if (finished(from)) return refuse();
  switch (e.kind) {
    case Event::kCancel:
      return Transition{State::kCancelled};
    case Event::kPreempt:
      return Transition{State::kPreempted};
    case Event::kPlaced:
      if (from != State::kQueued) return refuse();
      return Transition{State::kStarting};
    case Event::kStarted:
      if (from != State::kStarting) return refuse();
      return Transition{State::kRunning};
    case Event::kStartFailed:
      if (from != State::kStarting) return refuse();
      return Transition{State::kFailed, e.start_failure == Failure::kImagePull
                                            ? Failure::kImagePull
                                            : Failure::kStartFailed};
    case Event::kNodeLost:
      if (from == State::kQueued) return refuse();
      if (spec.restart == RestartPolicy::kOnFailure && attempts <= spec.retries)
        return Transition{State::kQueued, Failure::kNodeLost, false, true};
      return Transition{State::kFailed, Failure::kNodeLost};
    case Event::kEvicted:
      if (from == State::kQueued) return refuse();
      return Transition{State::kQueued, Failure::kNone, false, true};
    case Event::kDeadline:
      if (from != State::kRunning) return refuse();
      return Transition{State::kFailed, Failure::kDeadline};
    case Event::kExited: {
      if (from != State::kRunning && from != State::kStarting) return refuse();
      if (e.exit_code == 0 && !e.oom) return Transition{State::kSucceeded};
      Failure why = e.oom ? Failure::kOom : Failure::kExitCode;
      // attempts counts the starts so far: with retries r a member starts at most r + 1 times.
      if (spec.restart == RestartPolicy::kOnFailure && attempts <= spec.retries)
        return Transition{State::kStarting, why, true};
      return Transition{State::kFailed, why};
    }
  }
  return refuse();
}

}  // namespace gp::jobs
