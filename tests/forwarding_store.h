// A store that passes every call to another (`inner`), and relays what the inner store's writes
// announce to its own listener: the base of a test's wrapper, which overrides what it changes
// (a schema dropped on close, an injected fault).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/store.h"

namespace gp::testing {

class ForwardingStore : public store::Store {
 public:
  explicit ForwardingStore(std::unique_ptr<store::Store> inner) : inner_(std::move(inner)) {
    inner_->set_change_listener([this](const std::vector<std::string>& keys) { changed(keys); });
  }
  Result<void> write(const std::function<Result<void>(store::Tx&)>& fn) override {
    return inner_->write(fn);
  }
  Result<void> flush(uint64_t ticket) override { return inner_->flush(ticket); }
  bool defers_flush() const override { return inner_->defers_flush(); }
  Result<void> read(const std::function<Result<void>(store::Tx&)>& fn) override {
    return inner_->read(fn);
  }
  std::string_view engine() const override { return inner_->engine(); }
  Result<void> backup_to(const std::string& path) override { return inner_->backup_to(path); }
  // What the caches of a leader rely on, as the inner store answers it.
  void count_changes_to(const std::vector<std::string>& tables) override {
    inner_->count_changes_to(tables);
  }
  std::optional<uint64_t> generation() const override { return inner_->generation(); }
  void set_sole_writer(bool on) override { inner_->set_sole_writer(on); }

 protected:
  // Closes the inner store (before the wrapper's own clean-up needs it closed).
  void close_inner() { inner_.reset(); }

 private:
  std::unique_ptr<store::Store> inner_;
};

}  // namespace gp::testing
