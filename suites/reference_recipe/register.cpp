// Registers the reference recipe (an OBJECT library, so the linker keeps it): ReferenceRun for
// the single-process checks, with its distributed practices for the `distributed` check.
#include "harness/contract/registry.h"
#include "reference/distributed_run.h"

TC_RECIPE(tc::ref::ReferenceRecipe, "reference",
          "every practice of the seeds done right (reference/)")
    ->Control();  // the suite's own control: a failing cell is the suite's false alarm
