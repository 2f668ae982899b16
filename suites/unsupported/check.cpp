// Practices of the seeds with no C++ counterpart: one skipped cell per correct recipe and device,
// with the reason, never silently absent.
#include "harness/contract/registry.h"

TC_UNSUPPORTED_CHECK(torch_compile, "compiled training matches eager (Python only)",
                        "torch.compile has no C++ counterpart: LibTorch has no TorchDynamo/Inductor "
                        "front end");
TC_UNSUPPORTED_CHECK(fsdp, "sharded training matches DDP (Python only)",
                        "FSDP has no counterpart in LibTorch's C++ frontend (no "
                        "FullyShardedDataParallel)");
