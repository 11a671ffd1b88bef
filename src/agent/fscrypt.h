// Kernel filesystem encryption (fscrypt, v2 policies) for tenant volumes. The agent adds a key
// derived from the tenant's data key to the filesystem holding the volume trees, sets a policy
// naming that key on the tenant's empty volume directory (everything created below it inherits
// the policy), and removes the key to make the tenant's files and names unreadable
// (crypto-shredding, or the tenant leaving the node). Keys live only in kernel memory, per
// mounted filesystem: nothing here writes one to disk, and an unmount forgets them all.
//
// Every call is one ioctl on a descriptor opened for it; none keeps state, all are safe to call
// from any thread. The key calls (add, status, remove) act on the filesystem that holds the path
// given, so any directory on it (its mount point, a tenant's directory) will do.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace gp::agent::fscrypt {

// A raw key is exactly this long: FSCRYPT_MAX_KEY_SIZE, what AES-256-XTS contents encryption
// needs. The kernel derives the per-file keys from it (HKDF-SHA512).
inline constexpr size_t kRawKeyBytes = 64;

// The kernel's name for a v2 key: a hash of the raw key, so the same key bytes always get the
// same identifier, on any filesystem and after any remount.
struct KeyIdentifier {
  std::array<uint8_t, 16> bytes{};
  std::string hex() const;  // 32 lower-case hex digits
  bool operator==(const KeyIdentifier&) const = default;
};
// invalid_argument unless `hex` is exactly 32 hex digits (either case).
Result<KeyIdentifier> parse_key_identifier(std::string_view hex);

// What the filesystem holding a path can do.
enum class Support {
  kSupported,    // fscrypt works here
  kNotEnabled,   // ext4 or f2fs made without the `encrypt` feature: it can be turned on
  kUnsupported,  // the filesystem (tmpfs, xfs, overlayfs, ...) or the kernel cannot encrypt
};
struct Probe {
  Support support = Support::kUnsupported;
  std::string detail;  // "" when supported; otherwise why, and what to do about it
};
// Asks the kernel (FS_IOC_GET_ENCRYPTION_POLICY_EX on `dir`). not_found when `dir` cannot be
// opened; an answer the kernel should never give is internal.
Result<Probe> probe(const std::filesystem::path& dir);

// Adds `raw_key` (exactly kRawKeyBytes, else invalid_argument before any system call) to the
// filesystem holding `fs_dir` and returns the identifier the kernel computed for it. Adding a
// key that is already there succeeds and returns the same identifier, and re-adding a key that
// was incompletely removed makes it present again. The copy made for the kernel is
// wiped before returning. Errors: not_found (no such path), unavailable (the filesystem cannot
// encrypt: the message says what to do), permission_denied, resource_exhausted (the caller's
// key quota, for a non-root caller).
Result<KeyIdentifier> add_key(const std::filesystem::path& fs_dir, std::string_view raw_key);

// Encrypts the empty directory `dir` (not a symlink) under the key `id` with the v2 policy
// gpuplane uses: contents AES-256-XTS, names AES-256-CTS, names padded to 32 bytes. Setting it
// again on a directory that already has exactly this policy succeeds. Errors, each naming the
// path: invalid_argument (not a directory, or a symlink), conflict (the directory is not empty,
// or is already encrypted under another key or policy), not_found (no such directory, or the key
// was never added to this filesystem or has been removed), unavailable (the filesystem cannot
// encrypt), permission_denied (not the owner and not root).
Result<void> set_policy(const std::filesystem::path& dir, const KeyIdentifier& id);

// The key `dir` (not a symlink) is encrypted under; nullopt when it is not encrypted. A
// directory with any other kind of policy (v1) is a conflict; a filesystem that cannot encrypt is
// unavailable (rather than "not encrypted", so a caller counting on encryption hears of it).
// Works without the key: the policy is metadata.
Result<std::optional<KeyIdentifier>> get_policy(const std::filesystem::path& dir);

enum class KeyStatus {
  kAbsent,               // never added, or removed completely
  kPresent,              // added: files under it can be opened
  kIncompletelyRemoved,  // removed while files under it were open; see remove_key
};
// The key's status on the filesystem holding `fs_dir` (FS_IOC_GET_ENCRYPTION_KEY_STATUS).
Result<KeyStatus> key_status(const std::filesystem::path& fs_dir, const KeyIdentifier& id);

struct Removal {
  // Some files under the key were open (a job still running). The key is then only incompletely
  // removed: the kernel keeps it for those files, which stay readable (even reopened by path)
  // while every other file under the key refuses to open and nothing new can be created. The
  // removal does not finish by itself when they are closed: stop the tenant's workloads, then
  // call remove_key again. Open directories do not count.
  bool files_busy = false;
};
// Removes the key from the filesystem holding `fs_dir` for every user that added it
// (FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS: needs CAP_SYS_ADMIN, else permission_denied), wipes
// the key from kernel memory and evicts the files' cached plaintext. Idempotent: removing a key
// that is absent (never added, or removed already) succeeds with files_busy false.
Result<Removal> remove_key(const std::filesystem::path& fs_dir, const KeyIdentifier& id);

}  // namespace gp::agent::fscrypt
