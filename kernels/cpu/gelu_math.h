// GELU's tanh approximation (GPT-2, llm.c) per element, written once for the
// fp32 loops of vmath.cpp (vectorized: `exp` is libmvec's expf there) and the
// double loops of activation.cpp (`exp` is std::exp):
//   gelu(x)  = 0.5 x (1 + tanh u),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 x^2)
// tanh u = 1 - 2 / (exp(2u) + 1): one exp instead of libm's tanh, which is
// ~3x slower; saturates correctly (exp -> inf gives 1, exp -> 0 gives -1);
// absolute error ~1e-7 in fp32.
#pragma once

namespace eng::cpu::gelu {

template <typename T, typename Exp>
inline T tanh_via_exp(T u, Exp exp) {
  return T(1) - T(2) / (exp(T(2) * u) + T(1));
}

template <typename T, typename Exp>
inline T forward(T x, Exp exp) {
  const T u = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + tanh_via_exp(u, exp));
}

// d gelu(x) / dx.
template <typename T, typename Exp>
inline T derivative(T x, Exp exp) {
  const T u = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
  const T th = tanh_via_exp(u, exp);
  const T du = T(0.7978845608028654) * (T(1) + T(3) * T(0.044715) * x * x);
  return T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * du;
}

}  // namespace eng::cpu::gelu
