// Where a recipe's process is, for the process that judges it: the cell (check, recipe) and the
// recipe method running, with the number of train_step calls since the last setup. The process
// writes it into a small file it maps shared (no system call per write); the judging process reads
// that file when the recipe's process ends without finishing its cells, and names the place:
// "during resume_equality, in train_step (call 3 since setup)". No torch here.
//
// In the recipe's process: open(path) once (the runner does, from `run --breadcrumb FILE`), then
// set_cell() per cell; the Python bridge calls enter()/leave() around each recipe method. Where no
// file is open every call does nothing.
#pragma once

#include <string>

namespace tc::breadcrumb {

void open(const std::string& path);  // throws std::runtime_error naming the path
void set_cell(const std::string& check, const std::string& recipe);
void enter(const char* method);  // "setup" resets the count of train_step calls
void leave();

// What the file says, in words ("" when nothing was recorded): "resume_equality, in train_step (call
// 3 since setup)", or "resume_equality, in the check's own code (after train_step, call 3 since setup)".
std::string describe(const std::string& path);

}  // namespace tc::breadcrumb
