// Private to the cli module: the pure parts of the job commands (cli_job.cpp), apart so tests
// reach them without a server: the body `job run` sends, and what the commands print of a job
// and of its output.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace gp::cli {

// `job run`'s flags as given.
struct JobRunFlags {
  std::string name, image, offering;
  std::vector<std::string> command;  // everything after `--`
  std::optional<int64_t> count, gang, max_duration, retries;
  std::vector<std::string> volumes;  // KIND or KIND:ro
  std::vector<std::string> secrets;
  std::vector<std::string> env;  // NAME=VALUE
  std::string restart;           // empty: the server's default (never)
  std::string priority;          // empty: the server's default (normal)
  bool preemptible = false;
};

// The body of POST .../jobs. invalid_argument, naming the flag, for what the server would refuse
// for its form alone (no command, a volume that is not a project volume kind, an env entry
// without `=`); everything else is the server's to judge.
Result<Json> job_run_body(const JobRunFlags& f);

// One line for a job (the API's Job JSON): its id, name, state, exit code and reason; a queued
// job gives the scheduler's reason for the wait (its allocation's).
std::string job_summary(const Json& job);

// The status `job run --follow` exits with: 0 for a job that succeeded, the exit code of one
// that failed with a code (1 to 255), 1 otherwise.
int job_exit_status(const Json& job);

// Prints what a job's members wrote, from replies of GET .../jobs/{job}/logs: one reply for
// `job logs`, or poll after poll for a follower, each time only what it has not printed yet.
// When the job has more than one member, each member's block is headed "== rank R ==".
class JobLogPrinter {
 public:
  // `members`: the ranks whose output a follower waits for (its --rank, or every member of the
  // job). A member that has written nothing yet is asked for from its start, and blocks are
  // headed when there are several. Empty: the members the replies show.
  explicit JobLogPrinter(const std::vector<int64_t>& members = {});

  // The text to print for `reply`. Remembers how far each member's output has been printed,
  // so what a later reply repeats is printed once.
  std::string take(const Json& reply);
  // The `since` of the next poll: the least of the members' printed positions (0 for a member
  // not seen yet); nullopt before the first reply (ask for all that is kept, or its tail).
  std::optional<int64_t> since() const;
  // Whether the text printed last left its line unfinished.
  bool line_open() const { return line_open_; }

 private:
  std::map<int64_t, int64_t> printed_to_;  // rank -> the byte after the last one printed
  std::optional<int64_t> last_rank_;       // whose text was printed last
  bool multi_ = false;                     // more than one member: blocks get headings
  bool taken_ = false;                     // a reply has come
  bool line_open_ = false;
};

}  // namespace gp::cli
