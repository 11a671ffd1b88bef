// A line chart as SVG (render.h, "Charts"): axes from the caller's ranges, a polyline per
// series, a legend on the right. Deterministic: the same chart renders to the same bytes.
#include <fmt/format.h>

#include <algorithm>

#include "common/markup.h"
#include "render/render.h"

namespace gp::render {

std::string line_chart_svg(const LineChart& c) {
  const double w = 640, h = 400, left = 50, bottom = 40, top = 28, right = 150;
  const double x_span = c.x_max > c.x_min ? c.x_max - c.x_min : 1;
  const double y_max = c.y_max > 0 ? c.y_max : 1;
  auto x = [&](double v) { return left + (v - c.x_min) / x_span * (w - left - right); };
  auto y = [&](double v) {
    return h - bottom - std::clamp(v, 0.0, y_max) / y_max * (h - bottom - top);
  };
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\" role=\"img\" aria-label=\"{}\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"16\" font-size=\"13\">{}</text>\n",
      w, h, markup_escape(c.title), left, markup_escape(c.title));
  const int y_ticks = 5;
  for (int i = 0; i <= y_ticks; ++i) {
    const double v = y_max * i / y_ticks;
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
        left, y(v), w - right, y(v), left - 4, y(v) + 4, v);
  }
  const double x_step = c.x_step > 0 ? c.x_step : x_span / 5;
  for (double v = c.x_min; v <= c.x_max + x_step * 1e-9; v += x_step) {
    const std::string label = c.x_tick ? c.x_tick(v) : fmt::format("{:g}", v);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x(v),
                       h - bottom + 14, markup_escape(label));
  }
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n<text x=\"12\" y=\"{}\" "
      "transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>\n",
      (left + w - right) / 2, h - 6, markup_escape(c.x_label), h / 2, h / 2,
      markup_escape(c.y_label));
  // Okabe-Ito colours, told apart with the common colour-vision deficiencies; a dash pattern each
  // as well, so colour is not the only cue.
  static constexpr const char* kColours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                             "#e69f00", "#56b4e9", "#000000", "#8c8c8c"};
  static constexpr const char* kDashes[] = {"",    "7 3",  "2 3", "9 3 2 3",
                                            "4 4", "12 4", "1 2", "6 2"};
  for (size_t i = 0; i < c.lines.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    const char* dash = kDashes[i % std::size(kDashes)];
    std::string points;
    for (const auto& [px, py] : c.lines[i].points)
      points += fmt::format("{:.1f},{:.1f} ", x(px), y(py));
    out += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"{}\" "
        "points=\"{}\"/>\n<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
        "stroke-width=\"1.5\" stroke-dasharray=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        colour, dash, points, w - right + 6, top + 14 * double(i + 1) - 4, w - right + 24,
        top + 14 * double(i + 1) - 4, colour, dash, w - right + 28, top + 14 * double(i + 1),
        markup_escape(c.lines[i].label));
  }
  return out + "</svg>\n";
}

}  // namespace gp::render
