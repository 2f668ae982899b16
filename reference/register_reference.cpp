// Registers the reference recipe (an OBJECT library, so the linker keeps it).
#include "harness/registry.h"
#include "reference/reference_run.h"

TC_REGISTER_RECIPE(tc::ref::ReferenceRun, "reference",
                   "every practice of the seeds done right (reference/)", {});
