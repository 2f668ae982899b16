// The catalogue (`torchconform list`): every registered check and recipe with its attributes, and
// the devices. Formats only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/contract/registry.h"

namespace tc {

// `list --json`: what CTest's test generation, the teeth test, the README's check list and a
// user's tooling read (never a check's name). cuda_devices: 0 when none.
nlohmann::json catalogue_json(const Registry& registry, int cuda_devices);

// `list`: the same for a reader.
std::string render_catalogue_text(const Registry& registry, int cuda_devices);

}  // namespace tc
