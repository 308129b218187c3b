// The rewrite trace: a thread-local recorder that graph_rewrite and the stages write into.
#include "tempura/rewrite/trace.hpp"

namespace tempura::trace {

namespace {
thread_local Recorder* g_current = nullptr;
} // namespace

Recorder* current() { return g_current; }

Scope::Scope(Recorder* r) : saved_(g_current) { g_current = r; }
Scope::~Scope() { g_current = saved_; }

void Recorder::begin_stage(std::string name, const UOp& input) {
    open_ = true;
    dropping_ = stages_.size() >= kMaxStages;
    if (dropping_) {
        ++dropped_stages_;
        return;
    }
    stages_.push_back(Stage{std::move(name), input, {}, {}, 0});
}

void Recorder::end_stage(const UOp& output) {
    if (open_ && !dropping_) stages_.back().output = output;
    last_kept_ = open_ && !dropping_;
    open_ = false;
    dropping_ = false;
}

void Recorder::rename_last(std::string name) {
    if (last_kept_) stages_.back().name = std::move(name);
}

void Recorder::step(std::string rule, const char* file, unsigned line, const UOp& before,
                    const UOp& after) {
    if (!open_ || dropping_) return; // a rewrite outside any stage is not shown
    Stage& s = stages_.back();
    if (s.steps.size() >= kMaxSteps) {
        ++s.dropped;
        return;
    }
    s.steps.push_back(Step{std::move(rule), file == nullptr ? "" : file, line, before, after});
}

} // namespace tempura::trace
