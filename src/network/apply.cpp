// Applying rulesets with the real nft (the agent's imperative shell around render_nftables).
#include <fmt/format.h>

#include "common/subprocess.h"
#include "network/network.h"

namespace gp::network {
namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Result<ProcessResult> run_nft(const NftCommand& nft, std::vector<std::string> args,
                              std::string_view input) {
  std::vector<std::string> argv = nft.argv;
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, input, nft.timeout);
}

Result<void> run_file(const NftCommand& nft, std::vector<std::string> args, std::string_view text,
                      std::string_view what) {
  auto r = GP_TRY(run_nft(nft, std::move(args), text));
  if (r.exit_code != 0)
    return fail(Error::internal(
        fmt::format("{} failed (exit {}): {}", what, r.exit_code, trimmed(r.err + r.out))));
  return ok();
}

}  // namespace

Result<void> apply_ruleset(std::string_view ruleset, const NftCommand& nft) {
  return run_file(nft, {"-f", "-"}, ruleset, "nft -f (apply ruleset)");
}

Result<void> remove_ruleset(const NftCommand& nft) {
  return run_file(nft, {"-f", "-"}, removal_ruleset(), "nft -f (remove ruleset)");
}

Result<void> check_ruleset(std::string_view ruleset, const NftCommand& nft) {
  return run_file(nft, {"-c", "-f", "-"}, ruleset, "nft -c (check ruleset)");
}

Result<std::string> list_ruleset(const NftCommand& nft) {
  auto r = GP_TRY(
      run_nft(nft, {"list", "table", std::string(kTableFamily), std::string(kTableName)}, ""));
  if (r.exit_code != 0) {
    if (r.err.find("No such file or directory") != std::string::npos)
      return fail(
          Error::not_found(fmt::format("table {} {} does not exist", kTableFamily, kTableName)));
    return fail(
        Error::internal(fmt::format("nft list failed (exit {}): {}", r.exit_code, trimmed(r.err))));
  }
  return r.out;
}

}  // namespace gp::network
