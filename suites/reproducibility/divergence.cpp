#include "suites/reproducibility/divergence.h"

namespace tc::reproducibility {

bool same_run(const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* key : {"loss_bits", "eval_loss_bits", "eval_accuracy", "eval_logits"}) {
    if (a.value(key, nlohmann::json()) != b.value(key, nlohmann::json())) return false;
  }
  const nlohmann::json pa = a.value("params", nlohmann::json::array()), pb = b.value("params", nlohmann::json::array());
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (pa[i].value("name", "") != pb[i].value("name", "") || pa[i].value("hash", "") != pb[i].value("hash", "")) {
      return false;
    }
  }
  return true;
}

Divergence classify(const nlohmann::json& here, const nlohmann::json& first, const nlohmann::json& second) {
  if (same_run(second, here)) return Divergence::kSecondAgreesHere;
  if (same_run(second, first)) return Divergence::kFreshAgree;
  return Divergence::kEachDiffers;
}

const char* to_string(Divergence d) {
  switch (d) {
    case Divergence::kSecondAgreesHere: return "second fresh process agrees with this one";
    case Divergence::kFreshAgree: return "the two fresh processes agree, this one differs";
    case Divergence::kEachDiffers: return "each process differs";
  }
  return "?";
}

std::string explain(Divergence d, bool in_process_agreed) {
  switch (d) {
    case Divergence::kSecondAgreesHere:
      return "a second fresh process agreed bitwise with this one: the first fresh run was the odd one of four "
             "with the seed, so runs differ from one run to the next, not per process (something the seed does "
             "not fix, e.g. an order that threads or timing decide, reached training in that run)";
    case Divergence::kFreshAgree:
      return "a second fresh process agreed bitwise with the first: fresh processes agree with each other and "
             "this one differs from both (state this process holds and a fresh one does not, e.g. set by "
             "earlier work in it, reaches training)";
    case Divergence::kEachDiffers:
      return std::string("a second fresh process differed from both: each process trains differently") +
             (in_process_agreed ? " while two runs in this one agree: something fixed once per process (e.g. a "
                                  "value read from std::random_device or an address) reaches training"
                                : "");
  }
  return "";
}

int first_repeat(const nlohmann::json& here, const std::function<nlohmann::json()>& again, int runs) {
  for (int r = 1; r <= runs; ++r) {
    if (!same_run(again(), here)) return r;
  }
  return 0;
}

std::string not_repeated(int agreeing) {
  return "not judged: one fresh run of the seed differed, and a second fresh process and " + std::to_string(agreeing) +
         " more agreed bitwise with this one: a difference that does not repeat cannot be laid to the recipe (one "
         "from outside it, e.g. a BLAS library choosing its thread count by the machine's load, reads the same)";
}

std::string repeated(int which, int runs) {
  return "it repeats: fresh run " + std::to_string(which) + " of " + std::to_string(runs) +
         " more differed from this process's too, so runs with one seed differ from one run to the next (something "
         "the seed does not fix, e.g. an order that threads or timing decide, reaches training)";
}

}  // namespace tc::reproducibility
