// The symbolic simplifier at work: index expressions as the scheduler produces them, their
// simplified forms and their bounds.
#include <cstdio>

#include <tempura/tempura.hpp>

int main() {
    using tempura::UOp;
    const UOp gidx = UOp::variable("gidx", 0, 255); // a global thread index
    const UOp lidx = UOp::variable("lidx", 0, 15);  // a local index
    const UOp i = UOp::variable("i", 0, 1023);

    const UOp flat = gidx * 16 + lidx;
    const UOp exprs[] = {
        (flat / 16) * 16 + flat % 16,        // divmod recombination
        ((flat * 4 + 3) / 4) % 16,           // split off multiples, then mod
        (i % 64) / 8,                        // mod then div
        ((i * 8 + 5) / 8 < 100) & (i < 200), // comparisons decided by algebra
        where(flat < 4096, flat, 0),         // a gate the bounds prove true
        (i + 3) * 2 - i * 2,                 // like terms
        maximum(i % 8, 7),                   // bounds decide a max
    };
    for (const UOp& e : exprs) {
        const UOp s = tempura::simplify(e);
        std::printf("%-44s -> %-24s  bounds [%lld, %lld]  nodes %zu -> %zu\n", e.render().c_str(),
                    s.render().c_str(), static_cast<long long>(s.vmin()),
                    static_cast<long long>(s.vmax()), e.node_count(), s.node_count());
    }
    std::printf("\nThe graph of the second expression before simplification:\n%s",
                exprs[1].tree().c_str());
    return 0;
}
