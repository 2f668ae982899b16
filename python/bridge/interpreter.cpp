#include "python/bridge/interpreter.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include <torch/version.h>

#include "harness/util/forking.h"
#include "harness/util/posix_fs.h"
#include "python/bridge/build_paths.h"
#include "python/bridge/torch_python.h"

namespace py = pybind11;

namespace tc::python {
namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return !p.empty() && stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return !p.empty() && stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The directory holding the `torchconform` package: an installed binary's, at
// TC_PYTHON_PACKAGE_RELATIVE_DIR from the executable's own directory (cmake/TorchConformInstall.cmake:
// bin/../share/torchconform/python), else the source tree's python/ (a binary in the build tree).
std::string find_package_dir() {
  if (const char* relative = build_paths::package_relative_dir(); relative != nullptr) {
    if (std::string dir = posix_fs::executable_path(); !dir.empty()) {
      dir = dir.substr(0, dir.rfind('/') + 1) + relative;
      if (is_file(dir + "/torchconform/__init__.py")) {
        char resolved[PATH_MAX];
        return realpath(dir.c_str(), resolved) != nullptr ? std::string(resolved) : dir;
      }
    }
  }
  if (const char* dir = build_paths::package_dir(); dir != nullptr && is_dir(dir)) return dir;
  return "";
}

// The venv's site-packages and the interpreter a DataLoader's spawned workers run: from
// $TORCHCONFORM_VENV, else what the build was configured with (TC_PYTHON).
struct Venv {
  std::string site_packages;
  std::string python;
};

// The interpreter spawned workers (a DataLoader's, a fork server) start: the one whose libpython
// this binary embeds (TC_EMBED_PYTHON, e.g. Debian's /usr/bin/python3.11) where it exists, so that a
// worker runs the same standard library as this process (the workers take this process's sys.path,
// the embedded interpreter's standard library included); the venv's interpreter may be another
// build of the same minor version whose standard library differs (measured: pyenv's 3.11.7 under
// Debian's 3.11.2 paths has no `unicodedata`, which Debian builds in, and a worker unpickling a
// module that imports torch.distributed.checkpoint died). The venv's when the embedded one is gone.
std::string worker_python(const std::string& venv_python) {
  if (const char* exe = build_paths::embed_python_executable(); exe != nullptr && is_file(exe)) return exe;
  return venv_python;
}

Venv find_venv() {
  const std::string version = std::to_string(PY_MAJOR_VERSION) + "." + std::to_string(PY_MINOR_VERSION);
  if (const char* env = std::getenv("TORCHCONFORM_VENV"); env != nullptr && *env != '\0') {
    const std::string venv = env;
    Venv v{venv + "/lib/python" + version + "/site-packages", venv + "/bin/python"};
    if (!is_dir(v.site_packages)) {
      throw std::runtime_error("TORCHCONFORM_VENV=" + venv + " has no lib/python" + version +
                               "/site-packages: the embedded interpreter is Python " + version +
                               " and needs a venv of that version with the pinned torch");
    }
    return v;
  }
  if (const char* site = build_paths::site_packages(); site != nullptr) {
    if (is_dir(site)) return {site, build_paths::python_executable()};
    throw std::runtime_error(std::string("the site-packages this build was configured with (") + site +
                             ") is gone: set TORCHCONFORM_VENV to the venv holding the pinned torch");
  }
  throw std::runtime_error("no venv for Python recipes: set TORCHCONFORM_VENV to the venv holding the pinned torch");
}

// Run in the fresh interpreter: the paths in front of sys.path (interpreter.h says which, in which
// order) and the interpreter spawned DataLoader workers start (this process is not a Python).
constexpr const char* kSetup = R"PY(
import faulthandler, multiprocessing, os, site, sys
def _tc_setup(package_dir, site_packages, python):
    # A recipe that crashes the process (a segfault in an extension, abort()) leaves its Python
    # stack in the output, which the judging process quotes (harness/recipe_process.h).
    faulthandler.enable()
    before = list(sys.path)
    site.addsitedir(site_packages)
    added = [p for p in sys.path if p not in before]
    front = ([package_dir] if package_dir else []) + added
    sys.path[:] = front + [p for p in before if p not in front]
    if os.path.isfile(python):
        multiprocessing.set_executable(python)
    if sys.version_info < (3, 12, 8) or (3, 13) <= sys.version_info < (3, 13, 1):
        _tc_forkserver_takes_sys_path()
def _tc_forkserver_takes_sys_path():
    # CPython before 3.12.8 and 3.13.1 (gh-117378) starts a fork server that imports its preload
    # modules (a recipe's set_forkserver_preload(["torch"])) on the bare interpreter's sys.path, not
    # on this process's: under the isolated worker interpreter above, torch is not on it, the import
    # fails silently, and every worker the server forks imports torch anew (measured: about 1 s of CPU
    # each, most of a Python cell's time). The fix CPython made, done from outside: the server's
    # command sets this process's sys.path before it runs.
    import multiprocessing.util as util
    spawnv = util.spawnv_passfds
    server = "from multiprocessing.forkserver import main"
    def spawnv_passfds(path, args, passfds):
        args = list(args)
        for i in range(1, len(args)):
            if args[i - 1] == "-c" and isinstance(args[i], str) and args[i].startswith(server):
                args[i] = "import sys; sys.path[:] = %r; " % (list(sys.path),) + args[i]
        return spawnv(path, args, passfds)
    util.spawnv_passfds = spawnv_passfds
)PY";

InterpreterInfo g_info;

// Imports torch, refuses a version other than this build's LibTorch (the message: `whose` `version`
// `versus` LibTorch `advice`), then the bridge's helpers; returns torch. The caller holds the GIL.
py::module_ import_torch_and_bridge(const std::string& whose, const std::string& versus, const std::string& advice) {
  py::module_ torch = py::module_::import("torch");
  torch_python::bind(torch);
  const std::string version = py::str(torch.attr("__version__"));
  const std::string libtorch = TORCH_VERSION;
  if (version.compare(0, libtorch.size(), libtorch) != 0) {
    throw std::runtime_error(whose + " is " + version + versus + libtorch + advice);
  }
  py::module_::import("torchconform._bridge");
  return torch;
}

// A recipe's process may be a fork of this one (harness/util/forking.h): what os.fork does around
// fork(), with the GIL taken for it by the forking thread (which holds it nowhere else).
PyGILState_STATE g_fork_gil;
void before_fork() {
  g_fork_gil = PyGILState_Ensure();
  PyOS_BeforeFork();
}
void after_fork_in_parent() {
  PyOS_AfterFork_Parent();
  PyGILState_Release(g_fork_gil);
}
void after_fork_in_child() {
  PyOS_AfterFork_Child();
  PyGILState_Release(g_fork_gil);
}

// In a process that runs recipes' code (forking::recipe_process_start, before its first cell, one
// thread): the template its DataLoaders' fork server will start from (python/torchconform/_forkserver.py;
// the template never returns here). Without one the server starts as a new interpreter.
void start_forkserver_template() {
  py::gil_scoped_acquire gil;
  try {
    py::module_::import("torchconform._forkserver").attr("start_template")();
  } catch (const std::exception&) {  // py::error_already_set too (it clears the Python error)
  }
}

// At the end of a process that may have run recipes' code, which skips the interpreter's exit
// handlers (forking::recipe_process_end): multiprocessing's temporary directory made in this process
// removed (python/torchconform/_forkserver.py, end_of_process).
void end_of_recipe_process() {
  if (Py_IsInitialized() == 0) return;
  py::gil_scoped_acquire gil;
  try {
    py::module_::import("torchconform._forkserver").attr("end_of_process")();
  } catch (const std::exception&) {  // py::error_already_set too (it clears the Python error)
  }
}

bool g_embedded = false;  // started by this process (start()), not a hosting Python's

// torch's imports without Python's cyclic collector running through them: importing torch (and
// torch._inductor.config, with torch._dynamo behind it) makes some 500,000 objects that live as long
// as the process, and the collector, triggered by their allocations, traversed them again and again
// (perf over `import torch`: 18% of its samples in gc_collect_main and its visits; 0.5 s of CPU
// of 3.0 for torch._inductor.config with it, measured). Collections resume where they were
// (enabled unless someone disabled them). In the interpreter this process started (not a hosting
// team's), what the imports made is then frozen (gc.freeze), as Python's documentation advises for
// a process that forks without exec: no later collection traverses these objects, in this process
// or in the recipes' processes forked from it, where each traversal would also write to (so copy)
// every page that holds one. The few cyclic garbage objects the imports left (about 10,000 of the
// 500,000) are frozen with them, never freed.
class ImportsUncollected {
 public:
  explicit ImportsUncollected(bool freeze)
      : gc_(py::module_::import("gc")), enabled_(gc_.attr("isenabled")().cast<bool>()), freeze_(freeze) {
    gc_.attr("disable")();
  }
  ~ImportsUncollected() {
    try {
      if (freeze_) gc_.attr("freeze")();
      if (enabled_) gc_.attr("enable")();
    } catch (const std::exception&) {  // py::error_already_set too (it clears the Python error)
    }
  }
  ImportsUncollected(const ImportsUncollected&) = delete;
  ImportsUncollected& operator=(const ImportsUncollected&) = delete;

 private:
  py::module_ gc_;
  bool enabled_;
  bool freeze_;
};

// What torch imports lazily on a recipe's first calls, which every recipe's process would import
// for itself: torch._inductor.config, with torch._dynamo behind it, imported by
// torch.use_deterministic_algorithms (torch 2.15 sets inductor_config.deterministic there) and by
// torch.compile. 1.08 s of CPU in a process that has torch (measured, a quiet 2-core machine), in
// the process of every recipe that seeds as the seeds ask (python/reference's setup does). Imported
// once in the process that forks the recipes' processes (forking::warm_up), each of which then has
// it. torch's own module, no user code; the process keeps one thread (measured: /proc/self/task).
// A failure is left to the recipe's own import, which names it in its cell.
void warm_up() {
  py::gil_scoped_acquire gil;
  try {
    const ImportsUncollected imports(g_embedded);
    py::module_::import("torch._inductor.config");
  } catch (const std::exception&) {  // py::error_already_set too (it clears the Python error)
  }
}

// A process forked from a template and given another process's environment (a torchrun rank forked
// by harness/rank_server.h, forking::environment_replaced): os.environ (and os.environb, the same
// mapping) as the C environment is now. CPython reads the environment into os.environ once, when
// it starts, so without this a rank's os.environ would hold the template's, not torchrun's RANK,
// WORLD_SIZE or MASTER_PORT (init_process_group's env:// reads them there).
void refresh_os_environ() {
  py::gil_scoped_acquire gil;
  try {
    py::dict data;
    for (char** e = environ; *e != nullptr; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq == nullptr || eq == *e) continue;
      data[py::bytes(*e, static_cast<size_t>(eq - *e))] = py::bytes(eq + 1);
    }
    py::object mapping = py::module_::import("os").attr("environ").attr("_data");
    mapping.attr("clear")();
    mapping.attr("update")(data);
  } catch (py::error_already_set& e) {
    std::fprintf(stderr, "torchconform: could not refresh os.environ: %s\n", describe_python_error(e).c_str());
  }
}

void start() {
  // UTF-8 whatever the locale (CI's is often C/POSIX, whose encoding is ASCII): a recipe printing
  // "✓", opening a UTF-8 file without an encoding, or living in a folder named in UTF-8 works as under
  // `python3` in a UTF-8 terminal (PEP 540's UTF-8 mode).
  PyPreConfig preconfig;
  PyPreConfig_InitIsolatedConfig(&preconfig);
  preconfig.utf8_mode = 1;
  if (PyStatus pre = Py_PreInitialize(&preconfig); PyStatus_Exception(pre)) {
    throw std::runtime_error(std::string("cannot start the embedded Python: ") +
                             (pre.err_msg != nullptr ? pre.err_msg : "unknown error"));
  }
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  // The standard library is the one of the interpreter whose libpython this binary embeds. Left to
  // itself, CPython finds its prefix from the first `python3` on PATH: under an activated venv or a
  // pyenv made from another build of the same minor version (pyenv's 3.11.7 beside Debian's 3.11.2,
  // measured), that build's threading.py ran on this libpython and every recipe's train_step raised
  // "'_thread.RLock' object has no attribute '_recursion_count'", read as the recipe's own failure.
  PyStatus status = PyStatus_Ok();
  if (const char* exe = build_paths::embed_python_executable(); exe != nullptr && is_file(exe)) {
    status = PyConfig_SetBytesString(&config, &config.program_name, exe);
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    throw std::runtime_error(std::string("cannot start the embedded Python: ") +
                             (status.err_msg != nullptr ? status.err_msg : "unknown error"));
  }
  // The thread holds the GIL now; it is released below whatever happens, for every later caller.
  std::string error;
  try {
    const ImportsUncollected imports(true);
    const Venv venv = find_venv();
    const std::string package_dir = find_package_dir();
    py::dict scope;
    scope["__builtins__"] = py::module_::import("builtins");
    py::exec(kSetup, scope);
    scope["_tc_setup"](package_dir, venv.site_packages, worker_python(venv.python));
    import_torch_and_bridge("the venv's torch", " (" + venv.site_packages + "), this binary's LibTorch ",
                            ": a Python recipe needs the one wheel both come from");
    g_info = {venv.site_packages, package_dir, py::str(py::module_::import("sys").attr("version"))};
  } catch (py::error_already_set& e) {
    error = "the embedded Python could not start: " + describe_python_error(e);
  } catch (const std::exception& e) {
    error = e.what();
  }
  PyEval_SaveThread();
  if (!error.empty()) throw std::runtime_error(error);
  forking::add_hooks(before_fork, after_fork_in_parent, after_fork_in_child);
  forking::add_warm_up(warm_up);
  forking::add_recipe_process_start(start_forkserver_template);
  forking::add_recipe_process_end(end_of_recipe_process);
  forking::add_environment_refresh(refresh_os_environ);
}

// Hosted: this process is a Python (the team's interpreter, which imported the extension module
// python/module/native.cpp). Nothing to start or to put on sys.path: the interpreter, its venv and
// the installed `torchconform` package are the team's. The same torch check and bridge import as
// start(); the module's main() has released the GIL, which each caller takes for its own duration.
void adopt_running_interpreter() {
  std::string error;
  {
    py::gil_scoped_acquire gil;
    try {
      py::module_ torch = import_torch_and_bridge("this interpreter's torch", ", the extension module's LibTorch ",
                                                  ": install the torch this torchconform was built against");
      py::module_ sys = py::module_::import("sys");
      py::module_ os = py::module_::import("os");
      const std::string package_init = py::str(py::module_::import("torchconform").attr("__file__"));
      const std::string torch_init = py::str(torch.attr("__file__"));
      g_info = {py::str(os.attr("path").attr("dirname")(os.attr("path").attr("dirname")(torch_init))),
                py::str(os.attr("path").attr("dirname")(os.attr("path").attr("dirname")(package_init))),
                py::str(sys.attr("version"))};
    } catch (py::error_already_set& e) {
      error = "the hosting Python cannot run recipes: " + describe_python_error(e);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!error.empty()) throw std::runtime_error(error);
  forking::add_hooks(before_fork, after_fork_in_parent, after_fork_in_child);
  forking::add_warm_up(warm_up);
  forking::add_recipe_process_start(start_forkserver_template);
  forking::add_recipe_process_end(end_of_recipe_process);
}

}  // namespace

void ensure_interpreter() {
  static std::mutex mutex;
  static bool started = false;
  static std::string failure;  // a failed start is not retried: CPython starts once per process
  std::lock_guard<std::mutex> lock(mutex);
  if (started) return;
  if (!failure.empty()) throw std::runtime_error(failure);
  try {
    if (Py_IsInitialized() != 0) {
      adopt_running_interpreter();
    } else {
      start();
      g_embedded = true;
    }
    started = true;
  } catch (const std::exception& e) {
    failure = e.what();
    throw;
  }
}

const InterpreterInfo& interpreter_info() { return g_info; }

int run_torchrun(const std::vector<std::string>& args) {
  if (!g_embedded) return -1;
  forking::environment_replaced();  // os.environ as the C environment is now
  py::gil_scoped_acquire gil;
  py::module_ sys = py::module_::import("sys");
  int rc = 1;
  try {
    py::list argv;
    argv.append("torchrun");
    for (const std::string& a : args) argv.append(a);
    sys.attr("argv") = argv;
    const py::object returned = py::module_::import("torch.distributed.run").attr("main")();
    rc = returned.is_none() ? 0 : 1;  // as sys.exit(main()) ends the script
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_SystemExit)) {  // sys.exit(n): n, None 0, anything else printed and 1
      const py::object code = e.value().attr("code");
      if (code.is_none()) {
        rc = 0;
      } else if (py::isinstance<py::int_>(code)) {
        rc = code.cast<int>();
      } else {
        py::print(code, py::arg("file") = sys.attr("stderr"));
        rc = 1;
      }
    } else {
      e.restore();
      PyErr_Print();  // the traceback, as Python reports an exception nothing caught
      rc = 1;
    }
  }
  try {
    sys.attr("stdout").attr("flush")();
    sys.attr("stderr").attr("flush")();
  } catch (py::error_already_set&) {
  }
  return rc;
}

bool embedded_interpreter() { return g_embedded; }

py::module_ bridge_module() { return py::module_::import("torchconform._bridge"); }

std::string describe_python_error(py::error_already_set& e) {
  try {
    return py::str(bridge_module().attr("describe")(e.value(), e.trace()));
  } catch (const std::exception&) {
    return e.what();  // the helper itself failed (e.g. torchconform is not importable)
  }
}

void rethrow_python_error(py::error_already_set& e, const std::string& where) {
  throw std::runtime_error(where + " raised " + describe_python_error(e));
}

}  // namespace tc::python
