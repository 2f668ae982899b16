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

}  // namespace tc::fmt
