// gp::fleet::import_kubectl_nodes: `kubectl get nodes -o json` output imported into the fleet;
// and the Kubernetes quantity readers (parse_k8s_quantity, parse_cpu_millis) on raw text.
// Input: JSON is a node list; anything else is a quantity.
#include "fleet/k8s_import.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = gp::fuzz::as_text(data, size);
  if (!text.empty() && (text.front() == '{' || text.front() == '[')) {
    auto j = gp::parse_json(text);
    if (!j) return 0;
    (void)gp::fleet::import_kubectl_nodes(*j);
    return 0;
  }
  (void)gp::fleet::parse_k8s_quantity(text);
  (void)gp::fleet::parse_cpu_millis(text);
  return 0;
}
