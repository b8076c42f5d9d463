/* tests/header_o0.h - baracuda_quant.h, its implementation compiled at -O0, for the test
   programs whose subject is the kernels (the emulated suites run kernel source on the CPU,
   the GPU suites run it on the GPU): the library's host code is their harness there, and
   optimizing it again in each of some two hundred such programs was a fifth of the build.
   The host suites, the tools and the examples take the header at the build's own level.
   Define BARACUDA_QUANT_IMPLEMENTATION (and BARACUDA_QUANT_STATIC) first, as for the header. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O0")
#include "../baracuda_quant.h"
#pragma GCC pop_options
#else
#include "../baracuda_quant.h"
#endif
