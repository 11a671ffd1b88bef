// The fscrypt primitives (agent/fscrypt.h) against the real kernel: ext4 images made with
// mkfs.ext4 and loop-mounted in a temp dir, so these tests need root and loop devices and skip,
// saying why, without them. They check effects, not return values alone: what a plain write
// leaves in the raw image (a scan that is shown to find an unencrypted control file), what root
// can open once the key is gone, and that the same key bytes open the files again.
#include "agent/fscrypt.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/enforce.h"
#include "common/crypto.h"
#include "test_util.h"

namespace gp::agent::fscrypt {
namespace {

namespace fs = std::filesystem;
using gp::testing::run_shell;

constexpr std::string_view kFileName = "tenant-plan-7f3a.txt";
constexpr std::string_view kMarker = "GPUPLANE-PLAINTEXT-MARKER-";
constexpr std::string_view kControlName = "control-plan-5c1e.txt";
constexpr std::string_view kControlMarker = "GPUPLANE-CONTROL-MARKER-";

// `marker` repeated to 64 KiB.
std::string contents_of(std::string_view marker) {
  std::string out;
  while (out.size() < 64 * 1024) out += marker;
  return out;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string out(fs::file_size(path), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// Flushes the filesystem holding `path` to its device (for a loop mount: into the image file's
// page cache, which is what reading the image sees).
void flush(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  EXPECT_EQ(::syncfs(fd), 0) << std::strerror(errno);
  ::close(fd);
}

bool contains(std::string_view raw, std::string_view needle) {
  return raw.find(needle) != std::string_view::npos;
}

// Writes `data` to a new file at `path` and fsyncs it; "" on success, else what failed.
std::string write_synced(const fs::path& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return "open " + path.string() + ": " + std::strerror(errno);
  bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) &&
            ::fsync(fd) == 0;
  std::string why = ok ? "" : "write " + path.string() + ": " + std::strerror(errno);
  ::close(fd);
  return why;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  return names;
}

// The hex identifier of the key `dir` is encrypted under, "none" when it is not encrypted.
std::string policy_of(const fs::path& dir) {
  auto policy = get_policy(dir);
  if (!policy) return "error: " + policy.error().message;
  return *policy ? (*policy)->hex() : "none";
}

// The key's status on the filesystem holding `fs_dir`, in words.
std::string status_of(const fs::path& fs_dir, const KeyIdentifier& id) {
  auto status = key_status(fs_dir, id);
  if (!status) return "error: " + status.error().message;
  switch (*status) {
    case KeyStatus::kAbsent:
      return "absent";
    case KeyStatus::kPresent:
      return "present";
    case KeyStatus::kIncompletelyRemoved:
      return "incompletely removed";
  }
  return "?";
}

// errno of opening `path` read-only; 0 when it opened.
int open_errno(const fs::path& path, int flags = O_RDONLY) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

TEST(Fscrypt, AKeyOfTheWrongLengthIsRefusedWithoutCallingTheKernel) {
  // The path does not exist: reaching the kernel would have been not_found.
  for (size_t size : {size_t{0}, size_t{32}, kRawKeyBytes - 1, kRawKeyBytes + 1}) {
    auto id = add_key("/nonexistent/gpuplane-fscrypt", std::string(size, 'k'));
    ASSERT_FALSE(id.has_value()) << size;
    EXPECT_EQ(id.error().code, ErrorCode::kInvalidArgument) << id.error().message;
    EXPECT_NE(id.error().message.find("64 bytes"), std::string::npos) << id.error().message;
  }
}

TEST(Fscrypt, KeyIdentifiersReadBackFromTheirHex) {
  auto id = parse_key_identifier("00112233445566778899AABBCCDDEEFF");
  ASSERT_TRUE(id.has_value()) << id.error().message;
  EXPECT_EQ(id->hex(), "00112233445566778899aabbccddeeff");
  EXPECT_EQ(id->bytes[15], 0xFF);
  EXPECT_EQ(*parse_key_identifier(id->hex()), *id);
  for (std::string_view bad :
       {"", "0011", "00112233445566778899aabbccddeeff00", "00112233445566778899aabbccddeefz"}) {
    auto parsed = parse_key_identifier(bad);
    ASSERT_FALSE(parsed.has_value()) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(Fscrypt, AMissingPathIsNotFound) {
  auto probed = probe("/nonexistent/gpuplane-fscrypt");
  ASSERT_FALSE(probed.has_value());
  EXPECT_EQ(probed.error().code, ErrorCode::kNotFound);
  EXPECT_NE(probed.error().message.find("/nonexistent/gpuplane-fscrypt"), std::string::npos);
}

// A fresh 64 MiB ext4 image made with `-O encrypt`, loop-mounted at mnt_; further images and
// tmpfs mounts on request. Everything mounted is unmounted (and its loop device detached) and
// the temp dir removed, whatever the test did.
class FscryptExt4 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a loop-device ext4 image";
    if (!run_shell("command -v mkfs.ext4").first) GTEST_SKIP() << "mkfs.ext4 is not installed";
    if (!fs::exists("/dev/loop-control")) GTEST_SKIP() << "no loop devices (/dev/loop-control)";
    std::string tmpl = (fs::temp_directory_path() / "gp-fscrypt-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    work_ = tmpl;
    image_ = work_ / "volumes.img";
    mnt_ = work_ / "mnt";
    if (std::string why = make_ext4(image_, "-O encrypt"); !why.empty()) GTEST_SKIP() << why;
    if (std::string why = mount_image(image_, mnt_); !why.empty()) GTEST_SKIP() << why;
  }

  void TearDown() override {
    while (!mounts_.empty()) unmount(mounts_.back().first);
    if (!work_.empty()) {
      std::error_code ec;
      fs::remove_all(work_, ec);
    }
  }

  // "" when made, else why not.
  static std::string make_ext4(const fs::path& image, const std::string& options) {
    auto [made, out] = run_shell("truncate -s 64M " + quoted(image) + " && mkfs.ext4 -q -F " +
                                 options + " " + quoted(image));
    return made ? "" : "mkfs.ext4 " + options + " failed: " + out;
  }

  // "" when mounted, else why not.
  std::string mount_image(const fs::path& image, const fs::path& at) {
    fs::create_directories(at);
    auto [mounted, out] = run_shell("mount -o loop " + quoted(image) + " " + quoted(at));
    if (!mounted) return "cannot loop-mount " + image.string() + ": " + out;
    mounts_.emplace_back(at, image);
    return "";
  }

  std::string mount_tmpfs(const fs::path& at) {
    fs::create_directories(at);
    auto [mounted, out] = run_shell("mount -t tmpfs -o size=16M gp-fscrypt-test " + quoted(at));
    if (!mounted) return "cannot mount tmpfs: " + out;
    mounts_.emplace_back(at, fs::path());
    return "";
  }

  // Unmounts `at` and detaches the loop device still backing its image, if any.
  void unmount(const fs::path& at) {
    for (auto it = mounts_.begin(); it != mounts_.end(); ++it) {
      if (it->first != at) continue;
      auto [unmounted, out] = run_shell("umount " + quoted(at));
      if (!unmounted) {
        ADD_FAILURE() << "umount " << at << ": " << out;
        run_shell("umount -l " + quoted(at));
      }
      if (!it->second.empty())
        run_shell("losetup -n -O NAME -j " + quoted(it->second) + " | xargs -r -n1 losetup -d");
      mounts_.erase(it);
      return;
    }
  }

  // A new directory under the encrypted image's mount, encrypted under a new key.
  std::pair<fs::path, KeyIdentifier> encrypted_dir(const std::string& name,
                                                   const std::string& key) {
    fs::path dir = mnt_ / name;
    fs::create_directory(dir);
    auto id = add_key(mnt_, key);
    EXPECT_TRUE(id.has_value()) << id.error().message;
    if (!id) return {dir, {}};
    auto set = set_policy(dir, *id);
    EXPECT_TRUE(set.has_value()) << set.error().message;
    return {dir, *id};
  }

  fs::path work_, image_, mnt_;
  std::vector<std::pair<fs::path, fs::path>> mounts_;  // mount point, image ("" for tmpfs)
};

TEST_F(FscryptExt4, AFileWrittenUnderTheKeyReadsBackWhileTheKeyIsPresent) {
  const std::string key = random_bytes(kRawKeyBytes);
  auto [dir, id] = encrypted_dir("ten_7f3a", key);
  ASSERT_EQ(write_synced(dir / kFileName, contents_of(kMarker)), "");

  EXPECT_EQ(slurp(dir / kFileName), contents_of(kMarker));
  EXPECT_EQ(names_in(dir), std::vector<std::string>{std::string(kFileName)});
  EXPECT_EQ(policy_of(dir), id.hex());
  EXPECT_EQ(status_of(mnt_, id), "present");
  EXPECT_EQ(status_of(dir, id), "present") << "any directory on the filesystem will do";
}

TEST_F(FscryptExt4, AFileWrittenUnderTheKeyHoldsNoPlaintextOnDiskOnceTheKeyIsRemoved) {
  auto [dir, id] = encrypted_dir("ten_7f3a", random_bytes(kRawKeyBytes));
  ASSERT_EQ(write_synced(dir / kFileName, contents_of(kMarker)), "");
  // The control: the same kind of file, unencrypted, on the same filesystem.
  fs::create_directory(mnt_ / "plain");
  ASSERT_EQ(write_synced(mnt_ / "plain" / kControlName, contents_of(kControlMarker)), "");
  flush(mnt_);
  std::string raw = slurp(image_);
  ASSERT_TRUE(contains(raw, kControlMarker)) << "the scan must see what reached the disk";
  ASSERT_TRUE(contains(raw, kControlName)) << "the scan must see names that reached the disk";
  EXPECT_FALSE(contains(raw, kMarker)) << "contents are encrypted even while the key is in";
  EXPECT_FALSE(contains(raw, kFileName)) << "names are encrypted even while the key is in";

  auto removal = remove_key(mnt_, id);
  ASSERT_TRUE(removal.has_value()) << removal.error().message;
  EXPECT_FALSE(removal->files_busy);
  flush(mnt_);
  raw = slurp(image_);
  EXPECT_FALSE(contains(raw, kMarker));
  EXPECT_FALSE(contains(raw, kFileName));

  // Nothing mounted, nothing cached: the image is all that is left.
  unmount(mnt_);
  raw = slurp(image_);
  EXPECT_TRUE(contains(raw, kControlMarker));
  EXPECT_FALSE(contains(raw, kMarker));
  EXPECT_FALSE(contains(raw, kFileName));
}

TEST_F(FscryptExt4, OnceTheKeyIsRemovedEvenRootCannotOpenOrCreateFilesOrSeeTheirNames) {
  auto [dir, id] = encrypted_dir("ten_7f3a", random_bytes(kRawKeyBytes));
  ASSERT_EQ(write_synced(dir / kFileName, contents_of(kMarker)), "");
  ASSERT_TRUE(remove_key(mnt_, id).has_value());
  EXPECT_EQ(status_of(mnt_, id), "absent");

  std::vector<std::string> names = names_in(dir);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_NE(names[0], kFileName);
  EXPECT_EQ(names[0].find("tenant-plan"), std::string::npos) << names[0];
  EXPECT_EQ(open_errno(dir / kFileName), ENOENT) << "the plaintext name no longer resolves";
  EXPECT_EQ(open_errno(dir / names[0]), ENOKEY) << "the encrypted name resolves but won't open";
  EXPECT_EQ(open_errno(dir / "new.txt", O_WRONLY | O_CREAT | O_EXCL), ENOKEY);
  EXPECT_EQ(policy_of(dir), id.hex()) << "the policy is metadata: readable without the key";
}

TEST_F(FscryptExt4, TheSameKeyBytesOpenTheFilesAgainAfterARemount) {
  const std::string key = random_bytes(kRawKeyBytes);
  auto [dir, id] = encrypted_dir("ten_7f3a", key);
  ASSERT_EQ(write_synced(dir / kFileName, contents_of(kMarker)), "");
  ASSERT_TRUE(remove_key(mnt_, id).has_value());
  unmount(mnt_);
  ASSERT_EQ(mount_image(image_, mnt_), "");
  EXPECT_EQ(status_of(mnt_, id), "absent") << "nothing of the key was on the disk";
  EXPECT_NE(names_in(dir), std::vector<std::string>{std::string(kFileName)});

  auto again = add_key(mnt_, key);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(*again, id) << "the identifier is a function of the key bytes";
  EXPECT_EQ(names_in(dir), std::vector<std::string>{std::string(kFileName)});
  EXPECT_EQ(slurp(dir / kFileName), contents_of(kMarker));
}

TEST_F(FscryptExt4, AnotherKeyDoesNotOpenTheFiles) {
  auto [dir, id] = encrypted_dir("ten_7f3a", random_bytes(kRawKeyBytes));
  ASSERT_EQ(write_synced(dir / kFileName, contents_of(kMarker)), "");
  ASSERT_TRUE(remove_key(mnt_, id).has_value());
  auto other = add_key(mnt_, random_bytes(kRawKeyBytes));
  ASSERT_TRUE(other.has_value()) << other.error().message;
  EXPECT_NE(*other, id);
  EXPECT_EQ(open_errno(dir / kFileName), ENOENT);
  EXPECT_EQ(status_of(mnt_, id), "absent");
}

TEST_F(FscryptExt4, AddingAKeyTwiceGivesTheSameIdentifierAndOneRemovalRemovesIt) {
  const std::string key = random_bytes(kRawKeyBytes);
  auto first = add_key(mnt_, key);
  auto second = add_key(mnt_, key);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(*first, *second);
  ASSERT_TRUE(remove_key(mnt_, *first).has_value());
  EXPECT_EQ(status_of(mnt_, *first), "absent");
}

TEST_F(FscryptExt4, RemovingAnAbsentKeySucceeds) {
  auto never_added = parse_key_identifier("00112233445566778899aabbccddeeff");
  ASSERT_TRUE(never_added.has_value());
  auto removal = remove_key(mnt_, *never_added);
  ASSERT_TRUE(removal.has_value()) << removal.error().message;
  EXPECT_FALSE(removal->files_busy);

  auto id = add_key(mnt_, random_bytes(kRawKeyBytes));
  ASSERT_TRUE(id.has_value()) << id.error().message;
  ASSERT_TRUE(remove_key(mnt_, *id).has_value());
  EXPECT_TRUE(remove_key(mnt_, *id).has_value()) << "a second removal is not an error";
}

TEST_F(FscryptExt4, AKeyRemovedWhileAFileIsOpenStaysUntilTheFileIsClosedAndTheRemovalRetried) {
  auto [dir, id] = encrypted_dir("ten_7f3a", random_bytes(kRawKeyBytes));
  ASSERT_EQ(write_synced(dir / kFileName, contents_of(kMarker)), "");
  ASSERT_EQ(write_synced(dir / "other.txt", "closed"), "");
  int fd = ::open((dir / kFileName).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);

  auto busy = remove_key(mnt_, id);
  ASSERT_TRUE(busy.has_value()) << busy.error().message;
  EXPECT_TRUE(busy->files_busy);
  EXPECT_EQ(status_of(mnt_, id), "incompletely removed");
  std::string head(kMarker.size(), '\0');
  EXPECT_EQ(::pread(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  EXPECT_EQ(head, kMarker) << "the running job keeps reading what it has open";
  EXPECT_EQ(open_errno(dir / "other.txt"), ENOKEY) << "files nobody had open are locked already";
  EXPECT_EQ(open_errno(dir / "new.txt", O_WRONLY | O_CREAT | O_EXCL), ENOKEY);
  ::close(fd);
  EXPECT_EQ(status_of(mnt_, id), "incompletely removed") << "closing does not finish the removal";

  auto retried = remove_key(mnt_, id);
  ASSERT_TRUE(retried.has_value()) << retried.error().message;
  EXPECT_FALSE(retried->files_busy);
  EXPECT_EQ(status_of(mnt_, id), "absent");
  EXPECT_EQ(open_errno(dir / kFileName), ENOENT);
}

TEST_F(FscryptExt4, EverythingCreatedUnderAnEncryptedDirectoryInheritsItsKey) {
  auto [dir, id] = encrypted_dir("ten_7f3a", random_bytes(kRawKeyBytes));
  fs::create_directories(dir / "prj_1" / "vol_data");
  fs::create_directory(mnt_ / "plain");
  EXPECT_EQ(policy_of(dir / "prj_1"), id.hex());
  EXPECT_EQ(policy_of(dir / "prj_1" / "vol_data"), id.hex());
  EXPECT_EQ(policy_of(mnt_ / "plain"), "none");
}

TEST_F(FscryptExt4, SettingThePolicyOnANonEmptyDirectoryIsRefused) {
  auto id = add_key(mnt_, random_bytes(kRawKeyBytes));
  ASSERT_TRUE(id.has_value()) << id.error().message;
  fs::create_directory(mnt_ / "ten_full");
  ASSERT_EQ(write_synced(mnt_ / "ten_full" / "already-here.txt", "x"), "");
  auto set = set_policy(mnt_ / "ten_full", *id);
  ASSERT_FALSE(set.has_value());
  EXPECT_EQ(set.error().code, ErrorCode::kConflict);
  EXPECT_NE(set.error().message.find("not empty"), std::string::npos) << set.error().message;
  EXPECT_NE(set.error().message.find("ten_full"), std::string::npos) << set.error().message;
  EXPECT_EQ(policy_of(mnt_ / "ten_full"), "none");
}

TEST_F(FscryptExt4, SettingThePolicyWithAKeyNeverAddedIsRefused) {
  auto never_added = parse_key_identifier("00112233445566778899aabbccddeeff");
  ASSERT_TRUE(never_added.has_value());
  fs::create_directory(mnt_ / "ten_1");
  auto set = set_policy(mnt_ / "ten_1", *never_added);
  ASSERT_FALSE(set.has_value());
  EXPECT_EQ(set.error().code, ErrorCode::kNotFound);
  EXPECT_NE(set.error().message.find("not added"), std::string::npos) << set.error().message;
  EXPECT_EQ(policy_of(mnt_ / "ten_1"), "none");
}

TEST_F(FscryptExt4, SettingTheSamePolicyAgainSucceedsAndAnotherKeyIsRefused) {
  auto [dir, id] = encrypted_dir("ten_1", random_bytes(kRawKeyBytes));
  ASSERT_EQ(write_synced(dir / kFileName, "x"), "");
  EXPECT_TRUE(set_policy(dir, id).has_value()) << "same key, same policy: nothing to change";

  auto other = add_key(mnt_, random_bytes(kRawKeyBytes));
  ASSERT_TRUE(other.has_value()) << other.error().message;
  fs::create_directory(mnt_ / "ten_2");
  ASSERT_TRUE(set_policy(mnt_ / "ten_2", *other).has_value());
  auto set = set_policy(mnt_ / "ten_2", id);
  ASSERT_FALSE(set.has_value());
  EXPECT_EQ(set.error().code, ErrorCode::kConflict);
  EXPECT_NE(set.error().message.find(other->hex()), std::string::npos) << set.error().message;
  EXPECT_EQ(policy_of(mnt_ / "ten_2"), other->hex());
}

TEST_F(FscryptExt4, ThePolicyIsNeverSetThroughASymlinkOrOnAFile) {
  auto id = add_key(mnt_, random_bytes(kRawKeyBytes));
  ASSERT_TRUE(id.has_value()) << id.error().message;
  fs::create_directory(mnt_ / "ten_1");
  fs::create_directory_symlink(mnt_ / "ten_1", mnt_ / "link");
  auto through_link = set_policy(mnt_ / "link", *id);
  ASSERT_FALSE(through_link.has_value());
  EXPECT_EQ(through_link.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(through_link.error().message.find("symlink"), std::string::npos)
      << through_link.error().message;
  ASSERT_EQ(write_synced(mnt_ / "file", ""), "");
  auto on_file = set_policy(mnt_ / "file", *id);
  ASSERT_FALSE(on_file.has_value());
  EXPECT_EQ(on_file.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(policy_of(mnt_ / "ten_1"), "none");
}

TEST_F(FscryptExt4, ProbeReportsSupportOnExt4MadeWithTheEncryptFeature) {
  auto [dir, id] = encrypted_dir("ten_1", random_bytes(kRawKeyBytes));
  for (const fs::path& path : {mnt_, dir}) {
    auto probed = probe(path);
    ASSERT_TRUE(probed.has_value()) << probed.error().message;
    EXPECT_EQ(probed->support, Support::kSupported) << path << ": " << probed->detail;
    EXPECT_EQ(probed->detail, "");
  }
}

TEST_F(FscryptExt4, Ext4WithoutTheEncryptFeatureIsReportedWithHowToTurnItOn) {
  const fs::path image = work_ / "plain.img";
  const fs::path at = work_ / "plain-mnt";
  ASSERT_EQ(make_ext4(image, "-O ^encrypt"), "");
  ASSERT_EQ(mount_image(image, at), "");

  auto probed = probe(at);
  ASSERT_TRUE(probed.has_value()) << probed.error().message;
  EXPECT_EQ(probed->support, Support::kNotEnabled) << probed->detail;
  EXPECT_NE(probed->detail.find("tune2fs -O encrypt"), std::string::npos) << probed->detail;

  auto added = add_key(at, random_bytes(kRawKeyBytes));
  ASSERT_FALSE(added.has_value());
  EXPECT_EQ(added.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(added.error().message.find("tune2fs -O encrypt"), std::string::npos)
      << added.error().message;
  fs::create_directory(at / "ten_1");
  auto set = set_policy(at / "ten_1", *parse_key_identifier("00112233445566778899aabbccddeeff"));
  ASSERT_FALSE(set.has_value());
  EXPECT_EQ(set.error().code, ErrorCode::kUnavailable) << set.error().message;
}

TEST_F(FscryptExt4, TmpfsIsReportedAsUnableToEncrypt) {
  const fs::path at = work_ / "tmpfs";
  ASSERT_EQ(mount_tmpfs(at), "");
  auto probed = probe(at);
  ASSERT_TRUE(probed.has_value()) << probed.error().message;
  EXPECT_EQ(probed->support, Support::kUnsupported) << probed->detail;
  EXPECT_NE(probed->detail.find("tmpfs cannot encrypt"), std::string::npos) << probed->detail;

  auto added = add_key(at, random_bytes(kRawKeyBytes));
  ASSERT_FALSE(added.has_value());
  EXPECT_EQ(added.error().code, ErrorCode::kUnavailable);
  auto policy = get_policy(at);
  ASSERT_FALSE(policy.has_value()) << "not \"unencrypted\": it cannot be encrypted at all";
  EXPECT_EQ(policy.error().code, ErrorCode::kUnavailable);
}

// The agent's storage round over an encrypting filesystem: the tenant's tree is encrypted under
// the key its assignment carries before anything is created in it, a job's write holds no
// plaintext on disk, and once the tenant leaves the assignment (offboarded: the control plane
// no longer derives its key) the agent removes the key and even root cannot read the files or
// their names.
TEST_F(FscryptExt4, TheAgentEncryptsATenantTreeAndRemovesTheKeyOnceTheTenantIsGone) {
  const std::string key = random_bytes(kRawKeyBytes);
  Json assignment = {{"supernet", "10.64.0.0/10"},
                     {"segments", Json::array()},
                     {"policies", Json::array()},
                     {"storage_deletions", Json::array()},
                     {"volumes",
                      {{{"tenant", "acme"},
                        {"tenant_id", "ten_acme"},
                        {"held", true},
                        {"ids", {{"first", 1000000}, {"count", 65536}}},
                        {"projects",
                         {{{"project", "vision"},
                           {"project_id", "prj_vision"},
                           {"generation", "vgen_1"},
                           {"id", 1000001},
                           {"size_limits", Json::object()}}}},
                        {"encryption_key", base64url_encode(key)}}}}};
  std::vector<Json> reports;  // what the agent told the control plane of the tree
  HttpCall plane = [&](std::string_view method, const std::string& path,
                       const Json& body) -> Result<std::pair<int, Json>> {
    if (path == "/v1/agent/storage-report") reports.push_back(body);
    return std::pair<int, Json>{200, method == "GET" ? assignment : Json::object()};
  };
  AgentOptions options;
  options.storage_root = mnt_.string();
  ASSERT_TRUE(Enforcer(options).round(plane));
  ASSERT_EQ(reports.size(), 1u);
  const Json& tree = reports[0].at("tenants").at(0);
  EXPECT_EQ(tree.at("tenant_id"), "ten_acme");
  EXPECT_EQ(tree.at("encrypted"), true) << tree.dump();
  EXPECT_EQ(tree.at("finding_count"), 0) << tree.dump();

  auto id = add_key(mnt_, key);  // the same bytes: the identifier the agent's key got
  ASSERT_TRUE(id.has_value()) << id.error().message;
  EXPECT_NE(tree.at("encryption_detail").get<std::string>().find(id->hex()), std::string::npos);
  EXPECT_EQ(policy_of(mnt_ / "acme"), id->hex());
  EXPECT_EQ(policy_of(mnt_ / "acme" / "vision" / "datasets"), id->hex()) << "inherited";
  const fs::path file = mnt_ / "acme" / "vision" / "datasets" / kFileName;
  ASSERT_EQ(write_synced(file, contents_of(kMarker)), "");
  flush(mnt_);
  EXPECT_FALSE(contains(slurp(image_), kMarker));

  // Another round with the tenant still assigned changes nothing; a file others may read is
  // what its audit reports.
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  ASSERT_TRUE(Enforcer(options).round(plane));
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_GE(reports[1].at("tenants").at(0).at("finding_count"), 1) << reports[1].dump();
  EXPECT_EQ(status_of(mnt_, *id), "present");
  EXPECT_EQ(open_errno(file), 0);

  // Offboarded: gone from the assignment.
  assignment["volumes"] = Json::array();
  ASSERT_TRUE(Enforcer(options).round(plane));
  EXPECT_EQ(status_of(mnt_, *id), "absent");
  EXPECT_EQ(open_errno(file), ENOENT) << "the plaintext path no longer resolves";
  std::vector<std::string> names = names_in(mnt_ / "acme");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_NE(names[0], "vision") << "names are unreadable without the key";
  EXPECT_EQ(open_errno(mnt_ / "acme" / "new.txt", O_WRONLY | O_CREAT), ENOKEY);
  unmount(mnt_);
  const std::string raw = slurp(image_);
  EXPECT_FALSE(contains(raw, kMarker));
  EXPECT_FALSE(contains(raw, kFileName));
}

}  // namespace
}  // namespace gp::agent::fscrypt
