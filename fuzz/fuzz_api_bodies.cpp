// The JSON bodies of the API that have their own readers: offerings and quotas (alloc), rate
// cards, budgets and usage records (billing), offering SLAs (sla). The first byte picks the
// reader (modulo 8), the rest is the body.
#include "alloc/alloc.h"
#include "billing/billing.h"
#include "fuzz_util.h"
#include "sla/sla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body = gp::fuzz::as_text(data + 1, size - 1);
  if (data[0] % 8 == 7) {
    (void)gp::billing::parse_rate_card_text(body);
    return 0;
  }
  auto j = gp::parse_json(body);
  if (!j) return 0;
  switch (data[0] % 8) {
    case 0:
      (void)gp::alloc::parse_offering(*j);
      break;
    case 1:
      (void)gp::alloc::parse_tenant_quota(*j);
      break;
    case 2:
      (void)gp::alloc::parse_project_quota(*j);
      break;
    case 3:
      (void)gp::billing::parse_rate_card(*j);
      break;
    case 4:
      (void)gp::billing::parse_budget(*j);
      break;
    case 5:
      (void)gp::billing::parse_usage_records(*j);
      break;
    case 6:
      (void)gp::sla::parse_offering_sla(*j);
      break;
  }
  return 0;
}
