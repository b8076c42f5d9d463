/* tests/emu_prefix.h - what every emulated suite includes first, before its specialization:
   the header (its host code at -O0, tests/header_o0.h), the CPU references, the emulator
   and Criterion. tests/meson.build precompiles it once (GCC, emu_prefix.h.gch in the build
   folder, which the suites' `#include <emu_prefix.h>` finds first); where the suites' flags
   differ from the precompiled ones GCC reads this file itself, to the same effect. */
#ifndef BQ_TESTS_EMU_PREFIX_H
#define BQ_TESTS_EMU_PREFIX_H
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h"
#include "reference.h"
#include "reference_dynamic.h"
#include "reference_fused.h"
#include "reference_linear.h"
#include "reference_mxops.h"
#include "reference_rotate.h"
#include "reference_sr.h"
#include "emulator/cuda_emulator.h"

#include <criterion/criterion.h>
#include <time.h>

#include <vector>
#endif
