#include "tempura/tensor/dim.hpp"

#include "tempura/error.hpp"

namespace tempura {

Dim::Dim(int64_t size) : value_(size), bound_(true) {}

Dim Dim::variable(std::string name, int64_t min, int64_t max) {
    if (name.empty()) fail("Dim", "a variable needs a name");
    if (min < 1 || min > max)
        fail("Dim", "variable " + name + " needs 1 <= min <= max, got [" + std::to_string(min) +
                        ", " + std::to_string(max) + "]");
    Dim d;
    d.var_ = VarArg{std::move(name), min, max};
    return d;
}

Dim Dim::bind(int64_t value) const {
    if (!var_) fail("Dim", std::to_string(value_) + " is not a variable");
    if (value < var_->min || value > var_->max)
        fail("Dim", var_->name + " bound to " + std::to_string(value) + ", outside [" +
                        std::to_string(var_->min) + ", " + std::to_string(var_->max) + "]");
    Dim d = *this;
    d.value_ = value;
    d.bound_ = true;
    return d;
}

int64_t Dim::value() const {
    if (!bound_) fail("Dim", var_->name + " is not bound");
    return value_;
}

UOp Dim::variable_uop() const {
    if (!var_) fail("Dim", std::to_string(value_) + " is not a variable");
    return UOp::variable(var_->name, var_->min, var_->max);
}

UOp Dim::uop() const {
    if (!var_) return UOp::index(value_);
    return UOp::make(Op::Bind, DType::Index, {variable_uop()}, value());
}

std::string Dim::str() const {
    if (!var_) return std::to_string(value_);
    return bound_ ? var_->name + "=" + std::to_string(value_) : var_->name;
}

} // namespace tempura
