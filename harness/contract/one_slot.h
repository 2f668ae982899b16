// A one-slot registration: a function that a layer above hands down to the core by static
// registration (qualify's device worker, the Python recipe loader), so that the core calls it
// without including its layer. Set at most once; read by whoever needs it. No torch here.
//
//   using WorkerSlot = tc::OneSlot<Worker, struct WorkerSlotTag>;
//   bool set_worker(Worker w) { return WorkerSlot::set(std::move(w), "a qualification worker"); }
//   const Worker* worker() { return WorkerSlot::get(); }
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace tc {

// F: a std::function (empty until set). Tag: a type naming the slot, so two slots of one F differ.
template <typename F, typename Tag>
class OneSlot {
 public:
  // Throws std::logic_error naming `what` when the slot is set already.
  static bool set(F f, const char* what) {
    if (slot()) throw std::logic_error(std::string(what) + " is registered twice");
    slot() = std::move(f);
    return true;
  }
  // The registered function; nullptr while none is.
  static const F* get() { return slot() ? &slot() : nullptr; }

 private:
  static F& slot() {
    static F f;
    return f;
  }
};

}  // namespace tc
