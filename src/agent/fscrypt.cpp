#include "agent/fscrypt.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fscrypt.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/crypto.h"
#include "common/files.h"

namespace gp::agent::fscrypt {
namespace {

namespace fs = std::filesystem;

static_assert(kRawKeyBytes == FSCRYPT_MAX_KEY_SIZE);
static_assert(sizeof(KeyIdentifier{}.bytes) == FSCRYPT_KEY_IDENTIFIER_SIZE);

// ioctl, retried when a signal interrupts it; errno is left as the kernel set it.
int ioctl_retrying(int fd, unsigned long request, void* arg) {
  int r;
  do r = ::ioctl(fd, request, arg);
  while (r != 0 && errno == EINTR);
  return r;
}

// The filesystem holding `fd`, by name, for messages.
std::string filesystem_name(int fd) {
  struct statfs st {};
  if (::fstatfs(fd, &st) != 0) return "this filesystem";
  switch (static_cast<unsigned long>(st.f_type)) {
    case EXT4_SUPER_MAGIC:
      return "ext4";
    case F2FS_SUPER_MAGIC:
      return "f2fs";
    case TMPFS_MAGIC:
      return "tmpfs";
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlayfs";
    case NFS_SUPER_MAGIC:
      return "nfs";
    case PROC_SUPER_MAGIC:
      return "procfs";
    default:
      return fmt::format("a filesystem of type {:#x}", static_cast<unsigned long>(st.f_type));
  }
}

// Why the filesystem holding `fd` refused an fscrypt ioctl with `err` (EOPNOTSUPP or ENOTTY),
// and what to do. ext4 and f2fs refuse with EOPNOTSUPP until their `encrypt` feature is on,
// provided the kernel has fscrypt (then /sys/fs/<fs>/features/encryption exists); filesystems
// without fscrypt at all answer ENOTTY.
Probe explain_refusal(int fd, int err) {
  const std::string name = filesystem_name(fd);
  if (err == EOPNOTSUPP && (name == "ext4" || name == "f2fs")) {
    std::error_code ec;
    if (!fs::exists(fs::path("/sys/fs") / name / "features" / "encryption", ec))
      return {Support::kUnsupported,
              fmt::format("this kernel's {} cannot encrypt (it was built without "
                          "CONFIG_FS_ENCRYPTION): use a kernel with fscrypt",
                          name)};
    if (name == "ext4")
      return {Support::kNotEnabled,
              "ext4 without the encrypt feature: turn it on with `tune2fs -O encrypt DEVICE`, or "
              "make the filesystem with `mkfs.ext4 -O encrypt`"};
    return {Support::kNotEnabled,
            "f2fs without the encrypt feature: make the filesystem with `mkfs.f2fs -O encrypt`"};
  }
  return {Support::kUnsupported,
          fmt::format("{} cannot encrypt files: put tenant volumes on ext4 made with "
                      "`mkfs.ext4 -O encrypt` (or f2fs made with `mkfs.f2fs -O encrypt`)",
                      name)};
}

// The error for a failed call: `what` is the attempted action ("cannot <what>: ..."), `fd` the
// descriptor it was made on (-1 when the open failed).
Error system_error(std::string_view what, int fd, int err) {
  switch (err) {
    case ENOENT:
      return Error::not_found(fmt::format("cannot {}: no such file or directory", what));
    case ENOTDIR:
      return Error::invalid(fmt::format("cannot {}: not a directory", what));
    case EACCES:
    case EPERM:
      return Error::denied(
          fmt::format("cannot {}: permission denied (the agent must run as root)", what));
    case EOPNOTSUPP:
    case ENOTTY:
      if (fd >= 0)
        return Error::unavailable(
            fmt::format("cannot {}: {}", what, explain_refusal(fd, err).detail));
      break;
    case EDQUOT:
      return Error{ErrorCode::kResourceExhausted,
                   fmt::format("cannot {}: the caller's fscrypt key quota is used up", what)};
    default:
      break;
  }
  return Error::unavailable(fmt::format("cannot {}: {}", what, std::strerror(err)));
}

// Opens `path` for an ioctl; `flags` adds to O_RDONLY | O_CLOEXEC.
Result<UniqueFd> open_for_ioctl(const fs::path& path, int flags, std::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd >= 0) return UniqueFd(fd);
  const int err = errno;
  // O_NOFOLLOW | O_DIRECTORY on a symlink says ENOTDIR: name the real reason.
  std::error_code ec;
  if ((flags & O_NOFOLLOW) && fs::is_symlink(fs::symlink_status(path, ec)))
    return fail(Error::invalid(fmt::format("cannot {}: it is a symlink (never followed)", what)));
  return fail(system_error(what, -1, err));
}

KeyIdentifier identifier_of(const __u8 (&raw)[FSCRYPT_KEY_IDENTIFIER_SIZE]) {
  KeyIdentifier id;
  std::memcpy(id.bytes.data(), raw, id.bytes.size());
  return id;
}

fscrypt_key_specifier specifier(const KeyIdentifier& id) {
  fscrypt_key_specifier spec{};
  spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
  std::memcpy(spec.u.identifier, id.bytes.data(), id.bytes.size());
  return spec;
}

// The policy gpuplane sets: the modes the kernel documents as the default for v2 policies,
// with names padded to 32 bytes so their lengths leak as little as possible.
fscrypt_policy_v2 gpuplane_policy(const KeyIdentifier& id) {
  fscrypt_policy_v2 policy{};
  policy.version = FSCRYPT_POLICY_V2;
  policy.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
  policy.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
  policy.flags = FSCRYPT_POLICY_FLAGS_PAD_32;
  std::memcpy(policy.master_key_identifier, id.bytes.data(), id.bytes.size());
  return policy;
}

// FS_IOC_ADD_ENCRYPTION_KEY's argument, which ends in the raw key (a flexible array member), with
// room for it; wiped when it goes out of scope, whatever the outcome.
struct AddKeyArg {
  alignas(fscrypt_add_key_arg) unsigned char bytes[sizeof(fscrypt_add_key_arg) + kRawKeyBytes] = {};
  ~AddKeyArg() { ::explicit_bzero(bytes, sizeof bytes); }
  fscrypt_add_key_arg* arg() { return reinterpret_cast<fscrypt_add_key_arg*>(bytes); }
};

// The policy of `dir` as the kernel reports it; ENODATA (not encrypted) is the caller's.
struct PolicyRead {
  int err = 0;  // 0: `policy` holds it
  fscrypt_get_policy_ex_arg policy{};
};
PolicyRead read_policy(int fd) {
  PolicyRead out;
  out.policy.policy_size = sizeof(out.policy.policy);
  if (ioctl_retrying(fd, FS_IOC_GET_ENCRYPTION_POLICY_EX, &out.policy) != 0) out.err = errno;
  return out;
}

Error key_not_added(std::string_view what) {
  return Error::not_found(
      fmt::format("cannot {}: the key is not added to this filesystem (add it first)", what));
}

}  // namespace

std::string KeyIdentifier::hex() const {
  return hex_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

Result<KeyIdentifier> parse_key_identifier(std::string_view hex) {
  std::optional<std::string> raw = hex_decode(hex);
  if (!raw || raw->size() != FSCRYPT_KEY_IDENTIFIER_SIZE)
    return fail(
        Error::invalid(fmt::format("'{}' is not an fscrypt key identifier (32 hex digits)", hex)));
  KeyIdentifier id;
  std::memcpy(id.bytes.data(), raw->data(), id.bytes.size());
  return id;
}

Result<Probe> probe(const fs::path& dir) {
  const std::string what = fmt::format("probe encryption on {}", dir.string());
  UniqueFd fd = GP_TRY(open_for_ioctl(dir, 0, what));
  PolicyRead read = read_policy(fd.get());
  switch (read.err) {
    case 0:        // encrypted already
    case ENODATA:  // not encrypted, and could be
      return Probe{Support::kSupported, ""};
    case EOPNOTSUPP:
    case ENOTTY:
      return explain_refusal(fd.get(), read.err);
    default:
      return fail(system_error(what, fd.get(), read.err));
  }
}

Result<KeyIdentifier> add_key(const fs::path& fs_dir, std::string_view raw_key) {
  if (raw_key.size() != kRawKeyBytes)
    return fail(Error::invalid(
        fmt::format("an fscrypt key must be {} bytes, not {}", kRawKeyBytes, raw_key.size())));
  const std::string what = fmt::format("add an encryption key to {}", fs_dir.string());
  UniqueFd fd = GP_TRY(open_for_ioctl(fs_dir, 0, what));

  AddKeyArg add;
  add.arg()->key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
  add.arg()->raw_size = kRawKeyBytes;
  std::memcpy(add.arg()->raw, raw_key.data(), kRawKeyBytes);
  if (ioctl_retrying(fd.get(), FS_IOC_ADD_ENCRYPTION_KEY, add.arg()) != 0)
    return fail(system_error(what, fd.get(), errno));
  return identifier_of(add.arg()->key_spec.u.identifier);
}

Result<void> set_policy(const fs::path& dir, const KeyIdentifier& id) {
  const std::string what = fmt::format("encrypt {} under key {}", dir.string(), id.hex());
  UniqueFd fd = GP_TRY(open_for_ioctl(dir, O_DIRECTORY | O_NOFOLLOW, what));
  // As root (CAP_FOWNER) the kernel sets a policy naming a key that was never added, leaving a
  // directory nobody can create anything in; the agent is root, so refuse that here. A directory
  // that has a policy already is the kernel's to judge (same policy: success).
  fscrypt_get_key_status_arg status{};
  status.key_spec = specifier(id);
  if (ioctl_retrying(fd.get(), FS_IOC_GET_ENCRYPTION_KEY_STATUS, &status) != 0)
    return fail(system_error(what, fd.get(), errno));
  if (status.status != FSCRYPT_KEY_STATUS_PRESENT && read_policy(fd.get()).err == ENODATA)
    return fail(key_not_added(what));

  fscrypt_policy_v2 policy = gpuplane_policy(id);
  if (ioctl_retrying(fd.get(), FS_IOC_SET_ENCRYPTION_POLICY, &policy) == 0) return ok();
  const int err = errno;
  switch (err) {
    case ENOTEMPTY:
      return fail(Error::conflict(fmt::format(
          "cannot {}: the directory is not empty (only an empty directory can be encrypted)",
          what)));
    case EEXIST: {
      PolicyRead read = read_policy(fd.get());
      std::string other = "another policy";
      if (read.err == 0 && read.policy.policy.version == FSCRYPT_POLICY_V2) {
        KeyIdentifier theirs = identifier_of(read.policy.policy.v2.master_key_identifier);
        other = theirs == id ? "this key with other modes or flags"
                             : fmt::format("key {}", theirs.hex());
      }
      return fail(
          Error::conflict(fmt::format("cannot {}: it is already encrypted under {}", what, other)));
    }
    case ENOKEY:
      return fail(key_not_added(what));
    default:
      return fail(system_error(what, fd.get(), err));
  }
}

Result<std::optional<KeyIdentifier>> get_policy(const fs::path& dir) {
  const std::string what = fmt::format("read the encryption policy of {}", dir.string());
  UniqueFd fd = GP_TRY(open_for_ioctl(dir, O_DIRECTORY | O_NOFOLLOW, what));
  PolicyRead read = read_policy(fd.get());
  if (read.err == ENODATA) return std::optional<KeyIdentifier>();
  if (read.err != 0) return fail(system_error(what, fd.get(), read.err));
  if (read.policy.policy.version != FSCRYPT_POLICY_V2)
    return fail(Error::conflict(fmt::format(
        "cannot {}: it has a v{} policy, and gpuplane uses only v2 policies", what,
        read.policy.policy.version == FSCRYPT_POLICY_V1 ? 1 : read.policy.policy.version)));
  return identifier_of(read.policy.policy.v2.master_key_identifier);
}

Result<KeyStatus> key_status(const fs::path& fs_dir, const KeyIdentifier& id) {
  const std::string what =
      fmt::format("read the status of key {} on {}", id.hex(), fs_dir.string());
  UniqueFd fd = GP_TRY(open_for_ioctl(fs_dir, 0, what));
  fscrypt_get_key_status_arg arg{};
  arg.key_spec = specifier(id);
  if (ioctl_retrying(fd.get(), FS_IOC_GET_ENCRYPTION_KEY_STATUS, &arg) != 0)
    return fail(system_error(what, fd.get(), errno));
  switch (arg.status) {
    case FSCRYPT_KEY_STATUS_ABSENT:
      return KeyStatus::kAbsent;
    case FSCRYPT_KEY_STATUS_PRESENT:
      return KeyStatus::kPresent;
    case FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED:
      return KeyStatus::kIncompletelyRemoved;
    default:
      return fail(Error::internal(
          fmt::format("cannot {}: the kernel answered status {}", what, arg.status)));
  }
}

Result<Removal> remove_key(const fs::path& fs_dir, const KeyIdentifier& id) {
  const std::string what = fmt::format("remove key {} from {}", id.hex(), fs_dir.string());
  UniqueFd fd = GP_TRY(open_for_ioctl(fs_dir, 0, what));
  fscrypt_remove_key_arg arg{};
  arg.key_spec = specifier(id);
  if (ioctl_retrying(fd.get(), FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS, &arg) != 0) {
    const int err = errno;
    if (err == ENOKEY) return Removal{};  // absent already
    return fail(system_error(what, fd.get(), err));
  }
  return Removal{.files_busy =
                     (arg.removal_status_flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY) != 0};
}

}  // namespace gp::agent::fscrypt
