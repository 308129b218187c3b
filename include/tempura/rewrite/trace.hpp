#pragma once
// The rewrite trace behind TEMPURA_VIZ: what each stage made of a graph and which rule did what.
//
// Nothing is recorded unless a Recorder is installed on the thread (trace::Scope); graph_rewrite
// then adds one Step per rule that fires, to the stage begun last. With none installed the cost
// is one thread-local read per graph_rewrite call.
#include <cstddef>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura::trace {

struct Step {
    std::string rule; // the rule's text: "x + 0 -> x"
    std::string file; // where the rule was written, and its line
    unsigned line = 0;
    UOp before, after; // the node the rule matched, and what it made of it
};

struct Stage {
    std::string name;
    UOp input, output; // the graph before and after the stage
    std::vector<Step> steps;
    size_t dropped = 0; // steps past kMaxSteps, counted but not kept
};

// What one thread recorded: its stages in order. Bounded: kMaxSteps steps per stage, kMaxStages
// stages (later ones are counted in dropped_stages).
class Recorder {
  public:
    static constexpr size_t kMaxSteps = 2000;
    static constexpr size_t kMaxStages = 256;

    void begin_stage(std::string name, const UOp& input);
    void end_stage(const UOp& output);
    void step(std::string rule, const char* file, unsigned line, const UOp& before,
              const UOp& after);

    void rename_last(std::string name); // the stage ended last (a kernel's name known later)

    const std::vector<Stage>& stages() const { return stages_; }
    size_t dropped_stages() const { return dropped_stages_; }

  private:
    std::vector<Stage> stages_;
    size_t dropped_stages_ = 0;
    bool open_ = false;      // a stage is begun and not ended
    bool dropping_ = false;  // the open stage is past kMaxStages
    bool last_kept_ = false; // the stage ended last was kept
};

// The recorder of this thread, or null.
Recorder* current();

// Installs a recorder on this thread for its lifetime (null: none), restoring the previous one.
class Scope {
  public:
    explicit Scope(Recorder* r);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

  private:
    Recorder* saved_;
};

// A stage on this thread's recorder, if any: begun here, ended with the graph it returns.
// `auto out = trace::stage("name", in, [&] { return f(in); });`
template <class F>
UOp stage(const char* name, const UOp& input, F&& f) {
    Recorder* r = current();
    if (r == nullptr) return f();
    r->begin_stage(name, input);
    UOp out = f();
    r->end_stage(out);
    return out;
}

} // namespace tempura::trace
