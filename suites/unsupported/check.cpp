// Practices of the seeds with no C++ counterpart: one skipped cell per correct recipe and device,
// with the reason, never silently absent. (torch_compile is a check of its own now,
// suites/torch_compile/, judging Python recipes.)
#include "harness/contract/registry.h"

TC_UNSUPPORTED_CHECK(fsdp, "sharded training matches DDP (Python only)",
                        "FSDP has no counterpart in LibTorch's C++ frontend (no "
                        "FullyShardedDataParallel)");
