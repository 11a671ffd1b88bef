#include "store/store.h"

namespace gp::store {
namespace {
thread_local DeferFlush* innermost = nullptr;
}  // namespace

DeferFlush::DeferFlush() : outer_(innermost) { innermost = this; }

DeferFlush::~DeferFlush() {
  innermost = outer_;
  if (outer_) outer_->note(ticket_);  // an enclosing scope waits for these writes too
}

DeferFlush* DeferFlush::current() { return innermost; }

}  // namespace gp::store
