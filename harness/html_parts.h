// Pieces the HTML reporters share (report, compare, trend): escaping, the page frame with its
// inline CSS, and inline-SVG line charts. Self-contained output: no scripts, fonts or network.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/util/text_format.h"

namespace tc::html {

std::string escape(const std::string& s);
// For text between tags (<pre>, <td>): only &, < and > (quotes need no escape there).
std::string escape_text(const std::string& s);
// Number with up to 4 significant digits ("0.01234", "1.235e+06"): the reporters' one formatting.
using fmt::num;

// extra_css: rules of one reporter, after the shared ones.
std::string page_begin(const std::string& title, const std::string& extra_css = "");
std::string page_end();

struct Series {
  std::string label;
  std::vector<double> y;  // x is the index
  std::string css_class;  // s0, s1, ... for colours (see page CSS)
};

struct ChartOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  int width = 520;
  int height = 200;
  std::optional<double> marker_x;  // vertical marker (e.g. first divergence)
  std::string marker_label;
  std::vector<std::string> x_ticks;  // labels for x = 0..n-1 (trend: run names); empty: numbers
  bool dots = true;  // a dot with its value per point (up to 60 points); false: the lines only
};

// An <svg> line chart of the series overlaid, with axes' ranges written on it.
std::string line_chart(const std::vector<Series>& series, const ChartOptions& options);

// A small horizontal strip of the samples with the median marked (the spread of a benchmark).
std::string strip_plot(const std::vector<double>& samples, double lo, double hi, int width = 180);

}  // namespace tc::html
