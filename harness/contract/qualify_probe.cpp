#include "harness/contract/qualify_probe.h"

#include <stdexcept>

#include "harness/contract/one_slot.h"

namespace tc::qualify {

using nlohmann::json;

std::string Fingerprint::params_sha256() const {
  const json* params = record.is_object() && record.contains("params") ? &record.at("params") : nullptr;
  return params && params->is_object() && params->contains("sha256") && params->at("sha256").is_string()
             ? params->at("sha256").get<std::string>()
             : std::string();
}

std::string Fingerprint::digest() const {
  std::string s = params_sha256();
  if (record.is_object() && record.contains("loss_hex")) {
    for (const json& l : record.at("loss_hex")) s.append(":").append(l.is_string() ? l.get<std::string>() : l.dump());
  }
  return s;
}

json to_json(const RankResult& r) {
  json figures = json::array();
  for (const Figure& f : r.figures) {
    figures.push_back({{"name", f.name}, {"unit", f.unit}, {"samples", f.samples}, {"median", f.median},
                       {"detail", f.detail}});
  }
  return {{"rank", r.rank},
          {"host", r.host},
          {"device", r.device},
          {"device_id", r.device_id},
          {"figures", figures},
          {"fingerprint", r.fingerprint.record},
          {"notes", r.notes}};
}

namespace {

const json& field(const json& j, const char* name, json::value_t type) {
  if (!j.is_object() || !j.contains(name)) throw std::invalid_argument(std::string("rank result: no '") + name + "'");
  const json& v = j.at(name);
  const bool number = type == json::value_t::number_float;
  if (number ? !v.is_number() : v.type() != type) {
    throw std::invalid_argument(std::string("rank result: '") + name + "' has the wrong type");
  }
  return v;
}

}  // namespace

RankResult rank_result_from_json(const json& j) {
  RankResult r;
  const json& rank = field(j, "rank", json::value_t::number_float);
  r.rank = rank.get<int>();
  r.host = field(j, "host", json::value_t::string).get<std::string>();
  r.device = field(j, "device", json::value_t::string).get<std::string>();
  r.device_id = field(j, "device_id", json::value_t::string).get<std::string>();
  for (const json& f : field(j, "figures", json::value_t::array)) {
    Figure fig;
    fig.name = field(f, "name", json::value_t::string).get<std::string>();
    fig.unit = field(f, "unit", json::value_t::string).get<std::string>();
    fig.samples = field(f, "samples", json::value_t::array).get<std::vector<double>>();
    fig.median = field(f, "median", json::value_t::number_float).get<double>();
    fig.detail = field(f, "detail", json::value_t::string).get<std::string>();
    r.figures.push_back(std::move(fig));
  }
  const json& fp = field(j, "fingerprint", json::value_t::object);
  if (field(fp, "format", json::value_t::string) != "torchconform.fingerprint/1") {
    throw std::invalid_argument("rank result: 'fingerprint' is not torchconform.fingerprint/1");
  }
  for (const json& l : field(fp, "loss_hex", json::value_t::array)) {
    if (!l.is_string()) throw std::invalid_argument("rank result: 'fingerprint.loss_hex' holds a non-string");
  }
  field(field(fp, "params", json::value_t::object), "sha256", json::value_t::string);
  r.fingerprint.record = fp;
  r.notes = field(j, "notes", json::value_t::array).get<std::vector<std::string>>();
  return r;
}

using WorkerSlot = OneSlot<Worker, struct WorkerSlotTag>;

bool set_worker(Worker w) { return WorkerSlot::set(std::move(w), "a qualification worker"); }

const Worker* worker() { return WorkerSlot::get(); }

}  // namespace tc::qualify
