// Written against torchconform 0.3: the reference's training, logging the seed it was set up with
// through ReferenceRun::seed_record(), which 0.4 deprecates (nothing in the suite reads it) and 0.5
// removes.
#include <cstdint>
#include <stdexcept>

#include "harness/contract/registry.h"
#include "reference/reference_run.h"

namespace team {

class SeedLoggedRun : public tc::ref::ReferenceRun {
 public:
  void setup(const tc::RunOptions& o) override {
    ReferenceRun::setup(o);
    if (!seed_record().seeded) throw std::runtime_error("the reference did not seed");
    seed_ = seed_record().seed;
  }

 private:
  int64_t seed_ = 0;
};

}  // namespace team

TC_RECIPE(team::SeedLoggedRun, "team_seed_logged",
          "the reference's training, logging its seed through seed_record() (written against 0.3)");
