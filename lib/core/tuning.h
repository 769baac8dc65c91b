// Tuning: the algorithm an op chose for a shape on this device (the convolutions' per-shape
// choice, ops/conv/conv2d_algo.h), kept for the run in the Context and, when a cache file is
// set, in a small tab-separated file so later runs on the same GPU skip the search:
//   <device> TAB <key> TAB <choice> TAB <milliseconds>
// one line per (device, key); lines of other devices are kept when the file is rewritten. The
// apps' device is "<GPU name> | pdnn <revision>" (run_flags.h): another build chooses anew. The
// file is read once when set and rewritten atomically after each new choice (before any CUDA
// graph is captured: choices are made in eager steps). A run that reads its choices from the
// file makes the same choices as the run that wrote it, so it computes the same numbers.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace pdnn {

class Tuning {
 public:
  struct Choice {
    std::string choice;
    double ms = 0;       // the measured time of the choice (0 when forced)
    bool from_file = false;
  };

  // The policy the ops apply when a layer asks for no algorithm ("auto", "own", or an
  // algorithm's name); "auto" by default.
  const std::string& policy() const { return policy_; }
  void set_policy(std::string p) { policy_ = std::move(p); }

  // Reads `path` (when it exists; a malformed line is an error naming the file and line) and
  // from then on saves every new choice there. device: the GPU's name, the file's first column.
  void set_cache_file(const std::string& path, const std::string& device);
  const std::string& cache_file() const { return path_; }

  // The choice for key, or nullptr; a choice found is listed in made() from then on.
  const Choice* lookup(const std::string& key);
  // The choice for key, or nullptr, without listing it in made() (a choice consulted for
  // another key's, not used).
  const Choice* find(const std::string& key) const;
  // Records a new choice (and rewrites the cache file, if any).
  void put(const std::string& key, const std::string& choice, double ms);
  // Records a detail of a choice under a key of its own (cuDNN's own algorithm beside the choice
  // of cuDNN: conv2d_algo.cpp), in the file as a choice, but not listed in made(): the run's
  // header lists what ran, not how. Read back with find().
  void keep(const std::string& key, const std::string& detail);

  // Every choice this run used, in the order first used: (key, choice).
  const std::vector<std::pair<std::string, Choice>>& made() const { return made_; }
  // One line per choice used in this run, for the run's header: "key -> choice (0.42 ms)".
  std::string summary() const;

 private:
  void save() const;

  std::string policy_ = "auto";
  std::string path_, device_;
  std::map<std::string, Choice> choices_;                  // this device's, file and new
  std::vector<std::string> other_lines_;                   // other devices' lines, kept
  std::vector<std::pair<std::string, Choice>> made_;       // used in this run, in order
  std::map<std::string, size_t> made_index_;
};

}  // namespace pdnn
