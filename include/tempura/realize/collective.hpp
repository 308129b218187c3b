#pragma once
// The seam between a plan and a distributed runtime: realize runs a COLLECTIVE node (ops.hpp) as a
// step of its own, through the runner that tempura::dist::init() installs. The runner starts the
// exchange and returns at once; realize waits for it only before the first step that reads its
// result (and before the plan returns), so the kernels in between run while the bytes move.
#include <memory>

#include "tempura/ir/uop.hpp"

namespace tempura {

namespace runtime {
class Buffer;
}

class CollectiveRunner {
  public:
    virtual ~CollectiveRunner() = default;
    // Starts `node`'s exchange: reads `in` (its source's value) and writes `out` once done. Both
    // stay alive through the returned ticket. `first`: the first run of this step of its plan,
    // when the runner checks that every rank calls the same collective on the same shape.
    virtual std::shared_ptr<void> start(const UOp& node, std::shared_ptr<runtime::Buffer> in,
                                        std::shared_ptr<runtime::Buffer> out, bool first) = 0;
    // Returns once the exchange is done; throws tempura::Error when it failed (a rank stopped,
    // a mismatch, a timeout). May be called more than once, from any thread.
    virtual void wait(const std::shared_ptr<void>& ticket) = 0;
};

// Installs the runner collectives go through (null: none; realizing one then throws). A run of a
// plan reads it once, when it starts, and starts and waits for its collectives on that runner to
// the end (dist::finalize() on another thread uninstalls its runner mid-run): a runner outlives
// the runs that started on it.
void set_collective_runner(CollectiveRunner* runner);

} // namespace tempura
