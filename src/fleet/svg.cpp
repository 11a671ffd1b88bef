// SVG drawings of MIG layouts and of the fleet, for operators who would rather look than read.
// Pure functions of their inputs; colours carry meaning and every shape has a <title> tooltip.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <functional>

#include "common/markup.h"
#include "fleet/fleet.h"

namespace gp::fleet {
namespace {

// A stable colour per profile size (compute slices).
std::string_view profile_colour(int compute_slices) {
  switch (compute_slices) {
    case 1:
      return "#7fb3d5";
    case 2:
      return "#76d7c4";
    case 3:
      return "#f7dc6f";
    case 4:
      return "#f0b27a";
    default:
      return "#c39bd3";
  }
}

constexpr std::string_view kHeader =
    R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" )"
    R"(font-family="sans-serif" font-size="12" role="img" aria-label="{}">)"
    "\n<title>{}</title>\n";

// One colour per holder, in the order holders are first met; distinct for the first ten.
constexpr std::array<std::string_view, 10> kHolderColours = {
    "#3498db", "#e67e22", "#9b59b6", "#16a085", "#c0392b",
    "#2c3e50", "#d35400", "#27ae60", "#8e44ad", "#f1c40f"};

// What draw_slices says about one instance: its fill and who holds it ("" when free).
struct SliceStyle {
  std::string fill;
  std::string holder;
};

// Draws one GPU's MIG slices into a box at (x, y) of width w, height h; `style` colours each
// instance (by profile size when absent).
void draw_slices(std::string& out, const vocab::MigCatalog& cat, const vocab::Layout& layout, int x,
                 int y, int w, int h,
                 const std::function<SliceStyle(const vocab::PlacedInstance&,
                                                const vocab::MigProfile&)>& style = nullptr) {
  double slice_w = double(w) / cat.memory_slices;
  for (int s = 0; s < cat.memory_slices; ++s)
    out += fmt::format(
        R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="#eeeeee" stroke="#ffffff"/>)"
        "\n",
        x + s * slice_w, y, slice_w, h);
  for (const auto& inst : layout) {
    const vocab::MigProfile* p = cat.find(inst.profile);
    if (!p) continue;
    const SliceStyle st =
        style ? style(inst, *p) : SliceStyle{std::string(profile_colour(p->compute_slices)), ""};
    double ix = x + inst.start * slice_w;
    double iw = p->memory_slices * slice_w;
    out += fmt::format(
        R"(<g><title>{} at memory slice {} ({} compute slices){}</title><rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" rx="3" fill="{}" stroke="#333333"/>)"
        R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text></g>)"
        "\n",
        markup_escape(inst.profile), inst.start, p->compute_slices,
        st.holder.empty() ? std::string(style ? ", free" : "")
                          : ", held by " + markup_escape(st.holder),
        ix + 1, y + 1, iw - 2, h - 2, st.fill, ix + iw / 2, y + h / 2 + 4,
        iw >= 60   ? markup_escape(inst.profile)
        : iw >= 18 ? markup_escape(inst.profile.substr(0, inst.profile.find('.')))
                   : std::string());
  }
}

}  // namespace

std::string mig_layout_svg(const vocab::MigCatalog& cat, const vocab::Layout& layout,
                           std::string_view title) {
  const int w = 640, h = 110;
  std::string out =
      fmt::format(fmt::runtime(kHeader), w, h, w, h, markup_escape(title), markup_escape(title));
  out += fmt::format(R"(<text x="10" y="20" font-size="14" font-weight="bold">{}</text>)"
                     "\n",
                     markup_escape(title));
  draw_slices(out, cat, layout, 10, 32, w - 20, 44);
  for (int s = 0; s < cat.memory_slices; ++s)
    out += fmt::format(R"(<text x="{:.1f}" y="92" text-anchor="middle" fill="#666666">{}</text>)"
                       "\n",
                       10 + (s + 0.5) * (w - 20.0) / cat.memory_slices, s);
  auto free = vocab::free_capacity(cat, layout);
  std::string room;
  for (size_t i = 0; i < free.size() && i < cat.profiles.size(); ++i)
    if (free[i] > 0)
      room += fmt::format("{}{}x {}", room.empty() ? "" : ", ", free[i], cat.profiles[i].name);
  out += fmt::format(R"(<text x="10" y="106" fill="#333333">free: {}</text>)"
                     "\n",
                     markup_escape(room.empty() ? "none" : room));
  out += "</svg>\n";
  return out;
}

std::string fleet_map_svg(const std::vector<std::pair<Node, std::vector<Gpu>>>& nodes,
                          const std::map<std::string, std::vector<GpuHold>>& holds) {
  const int gpu_w = 90, gpu_h = 34, gap = 6, label_w = 220;
  size_t max_gpus = 1;
  for (const auto& [n, g] : nodes) max_gpus = std::max(max_gpus, g.size());
  // Holders in the order the map meets them, each with its colour.
  std::vector<std::string> holders;
  for (const auto& [n, gpus] : nodes)
    for (const auto& g : gpus)
      if (auto it = holds.find(g.info.uuid); it != holds.end())
        for (const auto& h : it->second)
          if (std::ranges::find(holders, h.holder) == holders.end()) holders.push_back(h.holder);
  auto colour_of = [&](const std::string& holder) {
    auto i = size_t(std::ranges::find(holders, holder) - holders.begin());
    return std::string(kHolderColours[i % kHolderColours.size()]);
  };
  const int legend_rows = 1 + int(holders.size() + 5) / 6;
  const int w = std::max(label_w + int(max_gpus) * (gpu_w + gap) + 20, 760);
  const int row_h = gpu_h + 14;
  const int h = 60 + int(nodes.size()) * row_h + 24 * legend_rows + 20;
  std::string out =
      fmt::format(fmt::runtime(kHeader), w, h, w, h, "gpuplane fleet map", "gpuplane fleet map");
  out += R"(<text x="10" y="22" font-size="16" font-weight="bold">Fleet map</text>)"
         "\n";
  int y = 44;
  for (const auto& [n, gpus] : nodes) {
    std::string_view state = node_state_name(n.state);
    std::string colour = n.state == NodeState::kReady    ? (n.cordoned ? "#b7950b" : "#1e8449")
                         : n.state == NodeState::kFailed ? "#c0392b"
                                                         : "#7f8c8d";
    out += fmt::format(
        R"(<g><title>{} ({}{}) rack {} pool {}</title><circle cx="16" cy="{}" r="6" fill="{}"/>)"
        R"(<text x="28" y="{}">{}</text><text x="28" y="{}" fill="#666666" font-size="10">{}{}</text></g>)"
        "\n",
        markup_escape(n.info.name), state, n.cordoned ? ", cordoned" : "",
        markup_escape(n.info.rack), markup_escape(n.pool_name.value_or("shared")), y + gpu_h / 2,
        colour, y + 14, markup_escape(n.info.name), y + 28, state, n.cordoned ? " cordoned" : "");
    int x = label_w;
    for (const auto& g : gpus) {
      static const std::vector<GpuHold> kNone;
      auto found = holds.find(g.info.uuid);
      const std::vector<GpuHold>& held = found == holds.end() ? kNone : found->second;
      std::vector<std::string> names;
      for (const auto& hd : held)
        if (std::ranges::find(names, hd.holder) == names.end()) names.push_back(hd.holder);
      const std::string who =
          names.empty() ? "" : fmt::format(", held by {}", fmt::join(names, ", "));
      std::string fill = g.health == "healthy"   ? "#d5f5e3"
                         : g.health == "missing" ? "#d7dbdd"
                                                 : "#f5b7b1";
      out += fmt::format(
          R"(<g><title>GPU {} {} {} {} {}{}</title><rect x="{}" y="{}" width="{}" height="{}" rx="4" fill="{}" stroke="#555555"/>)"
          "\n",
          g.info.index, markup_escape(g.info.model), markup_escape(g.info.uuid),
          gpu_mode_name(g.info.mode), markup_escape(g.health_reason), markup_escape(who), x, y,
          gpu_w, gpu_h, fill);
      const int bx = x + 3, by = y + 14, bw = gpu_w - 6, bh = gpu_h - 17;
      if (g.info.mode == GpuMode::kMig) {
        if (auto cat = vocab::mig_catalog(g.info.product.empty() ? g.info.model : g.info.product);
            cat)
          draw_slices(out, **cat, g.info.mig_instances, bx, by, bw, bh,
                      [&](const vocab::PlacedInstance& inst, const vocab::MigProfile&) {
                        for (const auto& hd : held)
                          if (hd.mig && *hd.mig == inst)
                            return SliceStyle{colour_of(hd.holder), hd.holder};
                        return SliceStyle{"#ffffff", ""};
                      });
      } else {
        // A whole GPU's holder as one band; shares side by side, in proportion. A MIG instance
        // on a GPU the agent has not turned to MIG yet is a band too, saying so.
        double sx = bx;
        for (const auto& hd : held) {
          const double sw = hd.milli > 0 ? bw * std::min(hd.milli, 1000) / 1000.0 : double(bw);
          out += fmt::format(
              R"(<g><title>{}{}</title><rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" rx="3" fill="{}" stroke="#333333"/>)"
              R"(<text x="{:.1f}" y="{}" text-anchor="middle" fill="#ffffff" font-size="10">{}</text></g>)"
              "\n",
              markup_escape(hd.holder),
              hd.milli > 0 ? fmt::format(" ({} milli-GPU)", hd.milli)
              : hd.mig     ? fmt::format(" ({} MIG instance at slice {}, not yet configured)",
                                         markup_escape(hd.mig->profile), hd.mig->start)
                           : std::string(),
              sx, by, sw, bh, colour_of(hd.holder), sx + sw / 2, by + bh / 2 + 4,
              sw >= 40 ? markup_escape(hd.holder.substr(0, size_t(sw / 7))) : std::string());
          sx += sw;
        }
      }
      out += fmt::format(R"(<text x="{}" y="{}" font-size="10">{} {}{}</text></g>)"
                         "\n",
                         x + 4, y + 11, g.info.index, markup_escape(g.info.model),
                         g.info.mode == GpuMode::kTimeSliced ? " TS" : "");
      x += gpu_w + gap;
    }
    y += row_h;
  }
  // Legend: health, then one swatch per holder.
  int lx = 10;
  out += fmt::format(
      R"(<text x="{}" y="{}" fill="#555555">TS = time-sliced; MIG GPUs show their instances on memory slices 0-7 (white: free)</text>)"
      "\n",
      340, y + 19);
  for (auto [label, fill] : {std::pair{"healthy", "#d5f5e3"}, std::pair{"unhealthy", "#f5b7b1"},
                             std::pair{"missing", "#d7dbdd"}}) {
    out += fmt::format(
        R"(<rect x="{}" y="{}" width="14" height="14" fill="{}" stroke="#555555"/><text x="{}" y="{}">{}</text>)"
        "\n",
        lx, y + 8, fill, lx + 20, y + 19, label);
    lx += 110;
  }
  for (size_t i = 0; i < holders.size(); ++i) {
    const int row = 1 + int(i) / 6, col = int(i) % 6;
    out += fmt::format(
        R"(<g><title>held by {}</title><rect x="{}" y="{}" width="14" height="14" fill="{}" stroke="#555555"/><text x="{}" y="{}">{}</text></g>)"
        "\n",
        markup_escape(holders[i]), 10 + col * 124, y + 8 + 24 * row, colour_of(holders[i]),
        30 + col * 124, y + 19 + 24 * row, markup_escape(holders[i].substr(0, 14)));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace gp::fleet
