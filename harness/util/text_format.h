// Number formatting: the one vocabulary of the checks' evidence and the reporters (console, HTML,
// JSON notes of compare, ab, qualify), so that one figure reads the same in every output.
#pragma once

#include <string>
#include <vector>

namespace tc::fmt {

// `digits` significant digits (printf %.*g): sig(1.0/3, 3) -> "0.333"; the checks' evidence uses 6.
std::string sig(double v, int digits = 6);
// Up to 4 significant digits: "0.01234", "1.235e+06" (printf %.4g), the reporters' figures.
std::string num(double v);
// 9 significant digits: enough to tell any two float32 values apart (printf %.9g).
std::string num9(double v);
// A ratio with 3 decimals: "1.042" (printf %.3f).
std::string ratio(double v);
// A fraction as a percentage with 1 decimal: 0.0512 -> "5.1%"; signed: "+5.1%", "-3.0%".
std::string pct(double fraction);
std::string signed_pct(double fraction);
// The first line of an error's message, cut at 400 characters ("..." then): what evidence quotes.
std::string first_line(const std::string& text);
// The first `shown` of `items` joined by "; ", then "; and N more" for the rest.
std::string first_items(const std::vector<std::string>& items, size_t shown);

}  // namespace tc::fmt
