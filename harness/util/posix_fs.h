// The few file-system operations torchconform needs, on POSIX calls.
//
// Why not std::filesystem: torch 2.11's libtorch.so exports its own copies of std::filesystem
// functions (remove_all, create_directories, temp_directory_path, ...). A program linked against it
// binds to those at run time, and remove_all crashed (SIGSEGV in a null call, seen with
// torch==2.11.0+cu130 from PyPI). Code that runs next to LibTorch uses these instead.
#pragma once

#include <string>

namespace tc::posix_fs {

bool exists(const std::string& path);
// mkdir -p; throws std::runtime_error naming the path and the reason.
void make_dirs(const std::string& path);
// rm -r; errors ignored (best effort, for scratch space).
void remove_tree(const std::string& path);
// $TMPDIR or /tmp.
std::string temp_dir();
// A new directory $TMPDIR/<prefix>XXXXXX; throws std::runtime_error if none can be made.
std::string make_temp_dir(const std::string& prefix);
// "a/b/c.json" -> "a/b" ("." when there is no slash); "c.json" for base_name.
std::string dir_name(const std::string& path);
std::string base_name(const std::string& path);
// The whole file as bytes; "" when it cannot be read (tests compare files that may be gone).
std::string read_bytes(const std::string& path);
// Replaces the file with `bytes` (not atomically: see atomic_file.h for that); throws
// std::runtime_error naming the path when the write fails.
void write_bytes(const std::string& path, const std::string& bytes);
// N of the first line "FIELD: N kB" of a /proc file such as /proc/self/status or
// /proc/self/smaps_rollup (the field's whole name: RssAnon is not RssAnonX), in KiB; -1 where the
// file or the field cannot be read.
long proc_kib(const std::string& file, const std::string& field);
// The path of this process's program (/proc/self/exe: a symlink followed, as the kernel resolved
// it when the program started); "" where it cannot be read.
std::string executable_path();

}  // namespace tc::posix_fs
