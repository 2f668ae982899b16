// Deprecated in 0.5, removed in 0.6: the reference's loader tools moved to reference/loader_tools.h
// (one name per file: harness/contract/loader_probe.h is the probe interface itself).
#pragma once
#pragma message("reference/loader_probe.h is deprecated: include reference/loader_tools.h (it goes in 0.6)")
#include "reference/loader_tools.h"
