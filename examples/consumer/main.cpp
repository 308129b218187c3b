// A user's program: one include, the stable public API, nothing else.
#include <tempura/tempura.hpp>

#include <iostream>

int main() {
    auto x = tempura::UOp::variable("x", 0, 10);
    auto e = tempura::simplify(x + 0);
    std::cout << "simplify(x + 0) = " << e.render() << "\n";
    return (e.render() == "x") ? 0 : 1;
}
