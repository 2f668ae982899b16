"""LibTorch's CUDA half is loaded only where a CUDA driver is (harness/contract/cuda_support.h).

torchconform links LibTorch's CPU half; libtorchconform_cuda.so, beside it, links the CUDA half and is
opened at start where libcuda.so.1 opens, or when TORCHCONFORM_CUDA=1 asks (never with =0). Each
case runs `run --check eval_mode --recipe reference` and reads the report's environment.gpu and the
loader's own account of the libraries it mapped (LD_DEBUG=files):

  - as this machine is: loaded exactly when libcuda.so.1 opens here (a machine without a GPU: not
    loaded, libtorch_cuda.so never mapped, the CUDA runtime's version unknown);
  - TORCHCONFORM_CUDA=0: not loaded, whatever the machine;
  - TORCHCONFORM_CUDA=1: loaded from the build, libtorch_cuda.so mapped, and LibTorch found its CUDA
    half as when linked: the CUDA runtime's, cuDNN's and NCCL's versions (cuDNN's comes through
    LibTorch's CUDA hooks, which it looks up once: the module came before that look);
  - a module that is not one (TORCHCONFORM_CUDA_MODULE names a text file): not loaded, the loader's
    reason in the report, the CPU cells judged as usual (exit 0);
  - a run of Python recipes: loaded whatever the machine (its torch loads the CUDA half anyway, and
    LibTorch must find it from the start); with TORCHCONFORM_CUDA=1 too: ok.

    python3 harness/tests/test_cuda_support.py BINARY PYTHON_REFERENCE
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import unittest

BINARY = None
PY_REFERENCE = None


def driver_here():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def run(env_extra, extra=("--check", "eval_mode", "--recipe", "reference")):
    with tempfile.TemporaryDirectory(prefix="tc-cuda-support-") as tmp:
        report = os.path.join(tmp, "r.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHCONFORM_CUDA")}
        env.update(env_extra, LD_DEBUG="files")
        p = subprocess.run([BINARY, "run", "--device", "cpu", *extra, "--quick", "--json", report, "--html", ""],
                           env=env, capture_output=True, text=True, errors="replace", timeout=600)
        gpu = None
        if os.path.exists(report):
            with open(report, encoding="utf-8") as f:
                gpu = json.load(f)["environment"]["gpu"]
    mapped = "file=libtorch_cuda.so" in p.stderr
    return p, gpu, mapped


class CudaHalf(unittest.TestCase):
    def check_not_loaded(self, p, gpu, mapped, why):
        self.assertEqual(p.returncode, 0, p.stdout[-2000:])
        self.assertTrue(gpu["cuda_support"].startswith("not loaded: " + why), gpu["cuda_support"])
        self.assertFalse(mapped, "libtorch_cuda.so was mapped")
        self.assertFalse(gpu["cuda_available"])
        self.assertIsNone(gpu["cuda_runtime"])
        self.assertIsNone(gpu["nccl"])

    def check_loaded(self, p, gpu, mapped):
        self.assertEqual(p.returncode, 0, p.stdout[-2000:])
        self.assertTrue(gpu["cuda_support"].startswith("loaded from "), gpu["cuda_support"])
        self.assertRegex(gpu["cuda_support"], r"/libtorchconform_cuda\.so \(.+\)$")
        self.assertTrue(mapped, "libtorch_cuda.so was not mapped")
        self.assertRegex(gpu["cuda_runtime"] or "", r"^\d+\.\d+$")
        self.assertRegex(gpu["nccl"] or "", r"^\d+\.\d+\.\d+$")
        self.assertRegex(gpu["cudnn"] or "", r"^\d+\.\d+\.\d+$")

    def test_as_this_machine_is(self):
        p, gpu, mapped = run({})
        if driver_here():
            self.check_loaded(p, gpu, mapped)
        else:
            self.check_not_loaded(p, gpu, mapped, "no CUDA driver here")

    def test_never_with_0(self):
        self.check_not_loaded(*run({"TORCHCONFORM_CUDA": "0"}), "TORCHCONFORM_CUDA=0")

    def test_always_with_1(self):
        self.check_loaded(*run({"TORCHCONFORM_CUDA": "1"}))

    def test_a_module_that_is_not_one(self):
        with tempfile.NamedTemporaryFile("w", suffix=".so") as f:
            f.write("not an ELF file\n")
            f.flush()
            p, gpu, mapped = run({"TORCHCONFORM_CUDA": "1", "TORCHCONFORM_CUDA_MODULE": f.name})
            self.check_not_loaded(p, gpu, mapped, f.name + ": ")

    def test_a_python_run_loads_it(self):
        # Its torch loads LibTorch's CUDA half anyway; LibTorch must find it there from the start: a
        # recipe's .cuda() on a machine without a driver then fails in the words of such a machine
        # (conformance.python.cpu.variants' py_hardcoded_cuda), not "Cannot initialize CUDA without
        # ATen_cuda library".
        p, gpu, mapped = run({}, ("--python", PY_REFERENCE, "--check", "eval_mode", "--recipe", "py_reference"))
        self.check_loaded(p, gpu, mapped)
        if not driver_here():
            self.assertIn("this process runs Python recipes", gpu["cuda_support"])

    def test_a_python_recipe_after_it(self):
        p, gpu, mapped = run({"TORCHCONFORM_CUDA": "1"},
                             ("--python", PY_REFERENCE, "--check", "eval_mode", "--recipe", "py_reference"))
        self.check_loaded(p, gpu, mapped)
        self.assertIn("ok=1 total=1", p.stdout)


if __name__ == "__main__":
    BINARY, PY_REFERENCE = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
