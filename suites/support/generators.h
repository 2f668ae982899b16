// The default generators' states (the CPU's, and the cell's accelerator's): a check that runs a
// recipe's code again from a snapshot gives it the random numbers it drew the first time, whatever
// the recipe itself saves.
#pragma once

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

namespace tc {

struct GeneratorStates {
  at::Tensor cpu, device;
  c10::DeviceType type = c10::DeviceType::CPU;
};

inline GeneratorStates save_generators(c10::DeviceType type) {
  GeneratorStates s;
  s.type = type;
  s.cpu = at::detail::getDefaultCPUGenerator().get_state();
  if (type != c10::DeviceType::CPU) s.device = at::globalContext().defaultGenerator(c10::Device(type)).get_state();
  return s;
}

inline void restore_generators(const GeneratorStates& s) {
  at::Generator cpu = at::detail::getDefaultCPUGenerator();  // a handle: the default generator itself
  cpu.set_state(s.cpu);
  if (s.device.defined()) {
    at::Generator device = at::globalContext().defaultGenerator(c10::Device(s.type));
    device.set_state(s.device);
  }
}

}  // namespace tc
