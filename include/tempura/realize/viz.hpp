#pragma once
// TEMPURA_VIZ=<dir>: realize() writes <dir>/tempura_viz.html, one self-contained page (no server,
// no network) showing each realize call, each kernel of the call and each stage of the pipeline:
// the graph after the stage (SVG laid out by Graphviz's dot), every rewrite step with its rule's
// text and source line and the node before and after highlighted, the linear program, the LLVM
// IR, and with TEMPURA_DEBUG>=2 each kernel's time.
//
// TEMPURA_VIZ is read once, when the first realize() starts (reread() reads it again). With it
// unset nothing is recorded: realize() pays one atomic load.
#include <memory>
#include <string>
#include <vector>

#include "tempura/rewrite/trace.hpp"

namespace tempura::viz {

// The directory TEMPURA_VIZ names, or empty when unset.
std::string directory();
// Reads TEMPURA_VIZ again (for a program, or a test, that sets it after its first realize).
void reread();
// The page's path for a directory: <dir>/tempura_viz.html.
std::string page_path(const std::string& dir);

struct KernelTrace {
    std::string name;
    trace::Recorder rec; // its codegen stages
    std::string opts;    // "[UPCAST(1, 4), ...]"
    std::string linear;  // the linear program
    std::string code;    // the LLVM IR
};

struct Timing {
    std::string name;
    double ms = -1, gflops = 0, gbs = 0;
};

struct CallTrace {
    std::string dir;
    trace::Recorder schedule; // the tensor-graph stages: early rewrites, rangeify per kernel
    std::vector<KernelTrace> kernels;
    bool cached = false; // the plan came from the cache: nothing was compiled
    std::vector<std::string> cached_kernels;
    std::vector<Timing> timings; // per plan step, TEMPURA_DEBUG >= 2
};

// Writes the page now if it has changes not yet written (repeats of a cached call are written
// at most every 2 seconds, and at exit).
void flush();

// The call being realized on this thread (null when TEMPURA_VIZ is unset).
CallTrace* current_call();

// Records a realize call on this thread while it lives, and adds it to the page at the end.
class CallScope {
  public:
    CallScope(); // does nothing when TEMPURA_VIZ is unset
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    // Adds the call to the page and writes it (call when the call succeeded; a failed call is
    // still written when the scope ends).
    void finish();

  private:
    std::unique_ptr<CallTrace> call_;
    CallTrace* saved_ = nullptr;
    std::unique_ptr<trace::Scope> scope_;
};

} // namespace tempura::viz
