// The positive whole numbers users set through the environment (timeouts, rank counts) for the
// runner's child processes and the commands. No torch here.
#pragma once

namespace tc {

// The environment variable `name` as a positive whole number; `fallback` when unset or empty; a
// HarnessError naming the variable and its value otherwise.
int env_positive_int(const char* name, int fallback);

}  // namespace tc
