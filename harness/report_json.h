// Report JSON (`torchconform.report/1`): writer and reader. It formats what the runner recorded and
// reads a report back (checking its schema); the only files it reads besides are those it hashes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/contract/record.h"

namespace tc {

class ReportFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

nlohmann::json cell_to_json(const Cell& cell);
Cell cell_from_json(const nlohmann::json& j);
// The report as JSON, with its "sha256" field: the SHA-256 of the rest of the document's content.
nlohmann::json report_to_json(const Report& report);

// SHA-256 of a report document's content without its "sha256" field (compact dump, sorted keys).
std::string report_content_sha256(const nlohmann::json& j);

// Throws ReportFormatError with a plain sentence for another schema, an unknown top-level field,
// a "sha256" field that does not match the content (corrupt or edited file) or a malformed
// document. A document without "sha256" (written by hand, or by a build older than the field) is
// read without that check.
Report report_from_json(const nlohmann::json& j);
Report read_report_file(const std::string& path);

// Parses a JSON file; throws ReportFormatError naming the path when it cannot be read or parsed,
// or when it nests deeper than kMaxJsonDepth levels.
nlohmann::json read_json_file(const std::string& path);
// The same for text already in memory; `path` names it in errors.
nlohmann::json parse_json_text(const std::string& text, const std::string& path);
inline constexpr int kMaxJsonDepth = 64;

}  // namespace tc
