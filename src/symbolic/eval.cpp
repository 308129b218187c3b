// evaluate(): an integer/bool expression at an assignment of its variables.
#include "tempura/symbolic/eval.hpp"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "tempura/error.hpp"
#include "tempura/ir/scalar.hpp"

namespace tempura {

int64_t evaluate(const UOp& root, const std::map<std::string, int64_t>& vars) {
    std::unordered_map<const UOpNode*, int64_t> val;
    for (const UOp& u : root.toposort()) {
        int64_t r = 0;
        if (u.op() == Op::Const) {
            r = u.const_value();
        } else if (u.op() == Op::DefineVar) {
            const auto& va = u.arg_as<VarArg>();
            auto it = vars.find(va.name);
            if (it == vars.end()) fail("evaluate", "no value for variable '" + va.name + "'");
            if (it->second < va.min || it->second > va.max)
                fail("evaluate", "value " + std::to_string(it->second) + " for variable '" +
                                     va.name + "' is outside its bounds [" +
                                     std::to_string(va.min) + ", " + std::to_string(va.max) + "]");
            r = it->second;
        } else if (is_alu(u.op()) && u.dtype().is_integral()) {
            int64_t ops[3] = {0, 0, 0};
            for (size_t i = 0; i < u.srcs().size(); ++i) ops[i] = val.at(u.src(i).get());
            if (u.op() == Op::Cast) {
                if (!u.src(0).dtype().is_integral())
                    fail("evaluate", "cannot evaluate a cast from " + u.src(0).dtype().name());
                r = wrap_to(u.dtype(), ops[0]);
            } else if (auto res = exec_int_alu(u.op(),
                                               u.dtype().is_bool() && is_comparison(u.op())
                                                   ? u.src(0).dtype()
                                                   : u.dtype(),
                                               ops, u.srcs().size())) {
                r = *res;
            } else if (u.op() == Op::Idiv || u.op() == Op::Mod) {
                fail("evaluate", "division by zero in " + u.render());
            } else {
                fail("evaluate", "undefined result of " + u.render());
            }
        } else {
            fail("evaluate", "cannot evaluate " + std::string(op_name(u.op())) + " of dtype " +
                                 u.dtype().name());
        }
        val.emplace(u.get(), r);
    }
    return val.at(root.get());
}

} // namespace tempura
