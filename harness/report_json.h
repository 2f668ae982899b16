// Report JSON (`torchconform.report/1`): writer and reader. Formats only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/record.h"

namespace tc {

class ReportFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

nlohmann::json cell_to_json(const Cell& cell);
Cell cell_from_json(const nlohmann::json& j);
nlohmann::json report_to_json(const Report& report);

// Throws ReportFormatError with a plain sentence for another schema or a malformed document.
Report report_from_json(const nlohmann::json& j);
Report read_report_file(const std::string& path);

// Parses a JSON file; throws ReportFormatError naming the path when it cannot be read or parsed.
nlohmann::json read_json_file(const std::string& path);

}  // namespace tc
