#include "harness/util/text_format.h"

#include <cstdio>

namespace tc::fmt {
namespace {

std::string printf_double(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string sig(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}
std::string num(double v) { return sig(v, 4); }
std::string num9(double v) { return sig(v, 9); }
std::string ratio(double v) { return printf_double("%.3f", v); }
std::string pct(double fraction) { return printf_double("%.1f%%", fraction * 100.0); }
std::string signed_pct(double fraction) { return printf_double("%+.1f%%", fraction * 100.0); }

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 400 ? line.substr(0, 400) + "..." : line;
}

std::string first_items(const std::vector<std::string>& items, size_t shown) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < shown; ++i) out += (i ? "; " : "") + items[i];
  if (items.size() > shown) out += "; and " + std::to_string(items.size() - shown) + " more";
  return out;
}

}  // namespace tc::fmt
