// AuditLog over a real store: the chain's head is kept for the length of a group-commit batch
// (Tx::memo), so appends batched with writes that roll back must still form one chain.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit.h"
#include "common/clock.h"
#include "store/store.h"

namespace gp::audit {
namespace {

TEST(AuditLog, AppendsBatchedWithWritesThatRollBackFormOneChain) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("gp-audit-log-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
       std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    auto store = store::open_sqlite({.path = (dir / "audit.db").string()});
    ASSERT_TRUE(store) << store.error().message;
    auto signer = Signer::generate();
    ASSERT_TRUE(signer);
    const Verifier verifier = signer->verifier();
    SystemClock clock;
    AuditLog log(clock, std::move(*signer), /*checkpoint_every=*/7);

    constexpr int kThreads = 8, kEach = 40;
    std::atomic<int> kept{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          // Every third write appends and then fails: its record goes with it.
          const bool fails = i % 3 == 2;
          auto r = (*store)->write([&](store::Tx& tx) -> Result<void> {
            Entry e{.actor = "usr_t" + std::to_string(t), .action = "test.append"};
            GP_TRY(log.append(tx, e));
            if (fails) return fail(Error::invalid("rolled back"));
            GP_TRY(log.append(tx, e));
            return ok();
          });
          EXPECT_EQ(bool(r), !fails);
          if (r) kept += 2;
        }
      });
    for (auto& th : threads) th.join();

    auto report = verify_store(**store, verifier);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_TRUE(report->ok) << report->reason;
    EXPECT_EQ(report->records_checked, kept.load());
    EXPECT_EQ(report->last_seq, kept.load());
    EXPECT_GT(report->checkpoints_checked, 0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gp::audit
